// `agent-lab`: the headless face of the lab. The forms below are a contract other tools
// rely on (DESIGN.md, "The CLI"). Exit codes: 0 for a verdict or an observation, 2 for
// bad usage, 1 for anything else. User errors never print a stack trace.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CommandSpec, ParsedArgs, UsageError, parseArgs } from './args';
import { checkCall } from '../core/grammar';
import { segment } from '../core/lossMask';
import { calc } from '../core/tools/calc';
import { Bm25Retriever } from '../core/tools/retrieval';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { DistillStats, ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { writeJsonlAtomic } from '../trainer/files';
import { runDemo } from './demo';

export class CliError extends Error {}

const COMMANDS: Record<string, CommandSpec & { run: (a: ParsedArgs) => void | Promise<void>; summary: string }> = {
  world: {
    name: 'world',
    summary: 'build the corpus and the task pool and write them as JSONL',
    usage: 'agent-lab world [--seed N] [--distractors N] [--train N] [--heldout N] --out DIR',
    options: {
      seed: { kind: 'int' },
      distractors: { kind: 'int', min: 0, max: 100000 },
      train: { kind: 'int', min: 0 },
      heldout: { kind: 'int', min: 0 },
      out: { kind: 'string', required: true },
    },
    positionals: 'none',
    run: cmdWorld,
  },
  distill: {
    name: 'distill',
    summary: 'run the teacher through the ReAct loop and keep solved trajectories',
    usage: 'agent-lab distill --split train|heldout [--seed N] [--distractors N] [--teacher stub] [--samples N] --out FILE',
    options: {
      split: { kind: 'string', choices: ['train', 'heldout'], required: true },
      seed: { kind: 'int' },
      distractors: { kind: 'int', min: 0, max: 100000 },
      teacher: { kind: 'string', choices: ['stub', 'http', 'student'] },
      samples: { kind: 'int', min: 1, max: 1000 },
      out: { kind: 'string', required: true },
    },
    positionals: 'none',
    run: cmdDistill,
  },
  mask: {
    name: 'mask',
    summary: "show the loss mask (the seed's _segment) of a transcript file",
    usage: 'agent-lab mask [--json] FILE',
    options: { json: { kind: 'flag' } },
    positionals: 'one-or-more',
    positionalName: 'FILE',
    run: cmdMask,
  },
  grammar: {
    name: 'grammar',
    summary: 'check a tool-call JSON body against the call grammar',
    usage: 'agent-lab grammar [--json] [--] TEXT',
    options: { json: { kind: 'flag' } },
    positionals: 'one-or-more',
    positionalName: 'TEXT',
    run: cmdGrammar,
  },
  calc: {
    name: 'calc',
    summary: 'evaluate an arithmetic expression with the safe calculator',
    usage: 'agent-lab calc [--] EXPR',
    options: {},
    positionals: 'one-or-more',
    positionalName: 'EXPR',
    run: cmdCalc,
  },
  search: {
    name: 'search',
    summary: 'BM25 search over the default corpus',
    usage: 'agent-lab search [--k K] [--] QUERY',
    options: { k: { kind: 'int', min: -1000000, max: 1000000 } },
    positionals: 'optional',
    positionalName: 'QUERY',
    run: cmdSearch,
  },
  demo: {
    name: 'demo',
    summary: 'the main job on the embedded default: world, distillation, tokenizer, SFT data',
    usage: 'agent-lab demo [--run DIR]',
    options: { run: { kind: 'string' } },
    positionals: 'none',
    run: (a) => {
      runDemo({ runDir: a.options['run'] as string | undefined });
    },
  },
};

function usageAll(): string {
  const lines = ['usage: agent-lab <command> [options] [arguments]', '', 'commands:'];
  for (const c of Object.values(COMMANDS)) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  lines.push('', "Options come before arguments; '--' ends options.");
  return lines.join('\n');
}

function intOpt(a: ParsedArgs, name: string, fallback: number): number {
  const v = a.options[name];
  return typeof v === 'number' ? v : fallback;
}

function cmdWorld(a: ParsedArgs): void {
  const seed = intOpt(a, 'seed', 0);
  const out = a.options['out'] as string;
  const corpus = buildCorpus(seed, intOpt(a, 'distractors', 120));
  let pool;
  try {
    pool = makeTaskPool(seed, intOpt(a, 'train', 200), intOpt(a, 'heldout', 50));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  writeJsonlAtomic(path.join(out, 'corpus.jsonl'), corpus.map(passageToRow));
  writeJsonlAtomic(path.join(out, 'train.jsonl'), pool.train.map(taskToRow));
  writeJsonlAtomic(path.join(out, 'heldout.jsonl'), pool.heldout.map(taskToRow));
  console.log(`wrote ${out}: ${corpus.length} passages, ${pool.train.length} train and ${pool.heldout.length} held-out tasks`);
}

function cmdDistill(a: ParsedArgs): void {
  const teacherName = (a.options['teacher'] as string | undefined) ?? 'stub';
  if (teacherName !== 'stub') {
    throw new CliError(`teacher '${teacherName}' is not available yet: this build has the stub teacher only`);
  }
  const seed = intOpt(a, 'seed', 0);
  const corpus = buildCorpus(seed, intOpt(a, 'distractors', 120));
  const pool = makeTaskPool(seed);
  const tasks = a.options['split'] === 'train' ? pool.train : pool.heldout;
  const stats: DistillStats = { perKind: {} };
  const rows = distill(tasks, makeStubTeacher(tasks), new ToolEnv(corpus), intOpt(a, 'samples', 4), stats);
  const out = a.options['out'] as string;
  writeJsonlAtomic(out, rows);
  const parts = Object.entries(stats.perKind).map(([k, s]) => `${k} ${s.kept}/${s.tasks}`);
  console.log(`wrote ${out}: ${rows.length} trajectories kept from ${tasks.length} tasks (${parts.join(', ')})`);
}

/** A `.transcript` holds one transcript; one trailing newline (editors add it) is ignored. */
export function readTranscriptFile(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (text.endsWith('\r\n')) return text.slice(0, -2);
  if (text.endsWith('\n')) return text.slice(0, -1);
  return text;
}

function cmdMask(a: ParsedArgs): void {
  const segments = segment(readTranscriptFile(a.positional!));
  if (a.options['json']) {
    console.log(JSON.stringify(segments));
    return;
  }
  let sup = 0;
  let total = 0;
  for (const [text, s] of segments) {
    total += text.length;
    if (s) sup += text.length;
    console.log(`${s ? 'SUPERVISED' : 'masked    '} ${JSON.stringify(text)}`);
  }
  console.log(`${segments.length} segments; ${sup}/${total} characters supervised`);
}

function cmdGrammar(a: ParsedArgs): void {
  const verdict = checkCall(a.positional!);
  if (a.options['json']) {
    console.log(JSON.stringify(verdict));
    return;
  }
  if (verdict.complete) console.log('accepted: a complete call');
  else if (verdict.accepted) console.log(`accepted so far, incomplete; next legal: ${verdict.expected.join(' ')}`);
  else console.log(`rejected at character ${verdict.rejectedAt}; legal there: ${verdict.expected.map((c) => JSON.stringify(c)).join(' ')}`);
}

function cmdCalc(a: ParsedArgs): void {
  console.log(calc(a.positional!));
}

function cmdSearch(a: ParsedArgs): void {
  const retriever = new Bm25Retriever(buildCorpus());
  const hits = retriever.search(a.positional ?? '', intOpt(a, 'k', 2));
  console.log(JSON.stringify(hits.map((h) => ({ doc_id: h.passage.docId, score: h.score }))));
}

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
    await command.run(parseArgs(rest, command));
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`agent-lab ${name}: ${err.message}\nusage: ${err.usage ?? command.usage}`);
      return 2;
    }
    if (err instanceof CliError) {
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
      console.error(`agent-lab: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exitCode = 1;
    },
  );
}
