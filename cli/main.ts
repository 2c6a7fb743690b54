// `agent-lab`: the headless face of the lab. The forms (cli/commands.ts) are a contract other tools
// rely on (docs/architecture.md, "The CLI"). Exit codes: 0 for a verdict or an observation, 2 for
// bad usage, 130 (143) for a job Ctrl-C (SIGTERM) stopped before its first step, 1 for anything
// else. User errors never print a stack trace.
import { BadInputError, CliError, UsageError, parseArgs } from './args';
import { WorldFileError } from '../core/worldSource';
import { InputError } from '../trainer/files';
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
      console.error(`agent-lab ${name}: ${err.message}\nusage: ${err.usage ?? command.usage}`);
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
