// `agent-lab`: the headless face of the lab. The forms (cli/commands.ts) are a contract other tools
// rely on (docs/architecture.md, "The CLI"). Exit codes: 0 for a verdict or an observation, 2 for
// bad usage, 130 (143) for a job Ctrl-C (SIGTERM) stopped before its first step, 1 for anything
// else. User errors never print a stack trace.
import { BadInputError, CliError, UsageError, parseArgs } from './args';
import { WorldFileError } from '../core/worldSource';
import { InputError } from '../store/files';
import { COMMANDS, usageAll } from './commands';
import { SignalStop } from './train';

export { CliError };
export { readTranscriptFile } from './tools';

export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    (name === undefined ? console.error : console.log)(usageAll());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    console.log(VERSION);
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    console.error(`agent-lab: unknown command '${name}'\n\n${usageAll()}`);
    return 2;
  }
  if (rest[0] === '--help' || rest[0] === '-h') {
    console.log(`usage: ${command.usage}`);
    return 0;
  }
  // `train grpo`'s mistakes are told with train grpo's usage, not train sft's.
  const sub = command.subcommands?.includes(rest[0] ?? '') ? rest[0] : undefined;
  const usage = sub ? subcommandUsage(command.usage, name, sub) : command.usage;
  if (sub && (rest[1] === '--help' || rest[1] === '-h')) {
    console.log(`usage: ${usage}`);
    return 0;
  }
  const who = sub ? `${name} ${sub}` : name;
  try {
    if (command.subcommands) {
      // `train sft [options]`: the subcommand comes first, its options after it.
      const [sub, ...tail] = rest;
      if (sub === undefined || !command.subcommands.includes(sub)) {
        throw new UsageError(`'${name}' needs one of: ${command.subcommands.join(', ')}${sub ? ` (got '${sub}')` : ''}`, command.usage);
      }
      await command.run({ ...parseArgs(tail, { ...command, positionals: 'none' }), positional: sub });
    } else {
      await command.run(parseArgs(rest, command));
    }
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`agent-lab ${who}: ${err.message}\nusage: ${err.usage === command.usage || err.usage === undefined ? usage : err.usage}`);
      return 2;
    }
    if (err instanceof BadInputError || err instanceof WorldFileError) {
      console.error(`agent-lab ${name}: ${err.message}`);
      return 2;
    }
    if (err instanceof SignalStop) {
      console.error(`agent-lab ${name}: ${err.message}`);
      return err.code;
    }
    if (err instanceof CliError || err instanceof InputError) {
      console.error(`agent-lab ${name}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

declare const __AGENT_LAB_VERSION__: string | undefined;
const VERSION = typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';

/** The process entry: bin/agent-lab calls this. */
export function runCli(argv: readonly string[] = process.argv.slice(2)): void {
  main(argv).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      // A bug, not the user's input: one line (the stack with AGENT_LAB_DEBUG=1).
      const debug = Boolean(process.env['AGENT_LAB_DEBUG']);
      const text = err instanceof Error ? (debug ? (err.stack ?? err.message) : `${err.name}: ${err.message.split('\n')[0]}`) : String(err);
      console.error(`agent-lab: internal error: ${text}${debug ? '' : ' (AGENT_LAB_DEBUG=1 shows where)'}`);
      process.exitCode = 1;
    },
  );
}

/** The lines of a command's usage that belong to one subcommand ("agent-lab train grpo ..." and its continuation lines). */
export function subcommandUsage(usage: string, name: string, sub: string): string {
  const lines = usage.split('\n');
  const start = lines.findIndex((l) => l.trim().startsWith(`agent-lab ${name} ${sub} `) || l.trim() === `agent-lab ${name} ${sub}`);
  if (start < 0) return usage;
  let end = start + 1;
  while (end < lines.length && !/^\s*agent-lab /.test(lines[end]!)) end++;
  return lines.slice(start, end).map((l, i) => (i === 0 ? l.trim() : l)).join('\n');
}
