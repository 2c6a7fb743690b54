// `agent-lab`: the headless face of the lab. The forms below are a contract other tools
// rely on (docs/architecture.md, "The CLI"). Exit codes: 0 for a verdict or an observation, 2 for
// bad usage, 1 for anything else. User errors never print a stack trace.
import * as path from 'node:path';
import { BadInputError, CliError, CommandSpec, OptionSpec, ParsedArgs, UsageError, parseArgs } from './args';
import { DEFAULT_REWARD_TEXT, RewardSpecError, auditReward, formatAudit, parseRewardSpec } from '../core/reward';
import { checkCall } from '../core/grammar';
import { findOverlaps } from '../core/overlap';
import { segment } from '../core/lossMask';
import { calc } from '../core/tools/calc';
import { Bm25Retriever } from '../core/tools/retrieval';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { WorldFileError } from '../core/worldSource';
import { templatesFor } from '../core/worldTools';
import { readWorldFolder } from '../trainer/worldFolder';
import { INPUT_LIMITS, InputError, readInputText, writeJsonlAtomic } from '../trainer/files';
import { runDemoWithTraining } from './demo';
import { EXPORT_USAGE, runExportCommand } from './export';
import { WORLD_USAGE, isSourceWorld, runSourceWorldCommand } from './world';
import { DISTILL_USAGE, DistillFailure, runDistillCommand } from './distill';
import { runAskCommand, runGrpoCommand, runTrainCommand, runEvalCommand } from './train';
import { checkBenchTarget, runBenchFromSource } from './bench';
import { PRESET_NAMES } from '../trainer/model';
import { RECIPE_NAMES } from '../trainer/recipes';
import { BACKEND_CHOICES, BackendAsk } from '../trainer/backend';
import { EVAL_SPLITS } from '../core/protocol/worker';
import { RL_POOLS, SCALE_REWARDS } from '../trainer/grpo';

export { CliError };

/** Options of `train grpo` only (docs/architecture.md, "GRPO defaults" for their defaults). */
/** Seeds: the world derives seed + 1 and seed + 2, which must stay exact integers. */
const SEED_OPTION: OptionSpec = { kind: 'int', min: -(Number.MAX_SAFE_INTEGER - 2), max: Number.MAX_SAFE_INTEGER - 2 };

const GRPO_OPTIONS: Record<string, OptionSpec> = {
  from: { kind: 'string', path: true },
  'from-checkpoint': { kind: 'string' },
  group: { kind: 'int', min: 1, max: 1024 },
  tasks: { kind: 'int', min: 1, max: 1024 },
  temperature: { kind: 'number', min: 0, max: 10 },
  'max-steps': { kind: 'int', min: 1, max: 100 },
  reward: { kind: 'string' },
  clip: { kind: 'number', min: 0, max: 1 },
  'kl-beta': { kind: 'number', min: 0, max: 100 },
  'epochs-per-batch': { kind: 'int', min: 1, max: 100 },
  lr: { kind: 'number', min: 0, max: 1 },
  seed: { kind: 'int' },
  'eval-every': { kind: 'int', min: 0, max: 1000000 },
  'system-prompt': { kind: 'string' },
  pool: { kind: 'string', choices: [...RL_POOLS] },
  'scale-rewards': { kind: 'string', choices: [...SCALE_REWARDS] },
  'dynamic-sampling': { kind: 'string', choices: ['on', 'off'] },
  'max-draws': { kind: 'int', min: 1, max: 100000 },
};

const COMMANDS: Record<
  string,
  CommandSpec & { run: (a: ParsedArgs) => void | Promise<void>; summary: string; subcommands?: readonly string[] }
> = {
  world: {
    name: 'world',
    summary: "build a world's corpus and task splits and write them as JSONL: the textbook's, or yours from a fact table or documents and questions",
    usage: WORLD_USAGE,
    options: {
      seed: SEED_OPTION,
      distractors: { kind: 'int', min: 0, max: 100000 },
      train: { kind: 'int', min: 0 },
      heldout: { kind: 'int', min: 0 },
      facts: { kind: 'string', path: true },
      docs: { kind: 'string', path: true },
      tasks: { kind: 'string', path: true },
      shapes: { kind: 'string' },
      split: { kind: 'string' },
      tools: { kind: 'string', path: true },
      out: { kind: 'string', required: true, path: true },
    },
    positionals: 'none',
    run: cmdWorld,
  },
  distill: {
    name: 'distill',
    summary: 'run the teacher through the ReAct loop and keep solved trajectories',
    usage: DISTILL_USAGE,
    options: {
      split: { kind: 'string', choices: ['train', 'heldout', 'dev'], required: true },
      seed: SEED_OPTION,
      distractors: { kind: 'int', min: 0, max: 100000 },
      world: { kind: 'string', path: true },
      teacher: { kind: 'string', choices: ['stub', 'http', 'student'] },
      samples: { kind: 'int', min: 1, max: 1000 },
      roles: { kind: 'flag' },
      out: { kind: 'string', required: true, path: true },
      // --teacher http (the key comes from AGENT_LAB_TEACHER_API_KEY only)
      'teacher-url': { kind: 'string' },
      'teacher-model': { kind: 'string' },
      temperature: { kind: 'string' },
      'max-tokens': { kind: 'int', min: 1, max: 1000000 },
      'timeout-ms': { kind: 'int', min: 1, max: 3600000 },
      retries: { kind: 'int', min: 0, max: 20 },
      concurrency: { kind: 'int', min: 1, max: 64 },
      // --teacher student
      run: { kind: 'string', path: true },
      checkpoint: { kind: 'string' },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
    },
    positionals: 'none',
    run: cmdDistill,
  },
  mask: {
    name: 'mask',
    summary: "show the loss mask (the seed's _segment) of a transcript file",
    usage: 'agent-lab mask [--json] FILE',
    options: { json: { kind: 'flag' } },
    positionals: 'one',
    positionalName: 'FILE',
    run: cmdMask,
  },
  grammar: {
    name: 'grammar',
    summary: 'check a tool-call JSON body against the call grammar',
    usage: "agent-lab grammar [--json] [--world DIR] [--] TEXT      (--world: that world's tool list narrows the grammar)",
    options: { json: { kind: 'flag' }, world: { kind: 'string', path: true } },
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
    summary: 'the main job on the embedded default: world, distillation, tokenizer, SFT data, a short training',
    usage: 'agent-lab demo [--minutes M] [--world DIR] [--run DIR]',
    options: { run: { kind: 'string', path: true }, minutes: { kind: 'int', min: 0, max: 10000 }, world: { kind: 'string', path: true } },
    positionals: 'none',
    run: (a) =>
      runDemoWithTraining({
        runDir: a.options['run'] as string | undefined,
        world: a.options['world'] as string | undefined,
        ...(typeof a.options['minutes'] === 'number' ? { minutes: a.options['minutes'] } : {}),
      }),
  },
  // ---- the student: training and evaluation (issue 3) -------------------------------------
  train: {
    name: 'train',
    summary: "train the student: sft (from the run folder's data, built with the stub teacher when missing); grpo (RL from an SFT run)",
    usage:
      'agent-lab train sft [--preset P] [--recipe R] [--backend B] [--minutes M | --steps N] [--seed N] [--threads N] [--from SFT_RUN] [--resume] [--eval-limit N]\n' +
      '      [--world DIR [--traces FILE]]      (--world: a world folder, docs/worlds.md; --traces: trajectories distilled from it elsewhere)\n' +
      '      [--checkpoint-every SECONDS] [--keep-checkpoints K] --run DIR       (--from: continued SFT from that run\'s latest checkpoint)\n' +
      '  agent-lab train grpo --from SFT_RUN [--from-checkpoint latest|step-N] [--steps N | --minutes M] [--group G] [--tasks N] [--temperature T]\n' +
      '      [--max-steps N] [--reward R] [--clip E] [--kl-beta B] [--epochs-per-batch N] [--lr LR] [--seed N] [--eval-every N] [--eval-limit N]\n' +
      '      [--pool train|fresh-values|fresh-entities] [--scale-rewards group|batch|none] [--dynamic-sampling on|off] [--max-draws N]\n' +
      '      [--system-prompt TEXT] [--backend B] [--threads N] [--resume] [--checkpoint-every SECONDS] [--keep-checkpoints K] --run DIR',
    options: {
      ...GRPO_OPTIONS,
      preset: { kind: 'string', choices: PRESET_NAMES },
      recipe: { kind: 'string', choices: RECIPE_NAMES },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
      minutes: { kind: 'number', min: 0.05, max: 100000 },
      steps: { kind: 'int', min: 1, max: 100000000 },
      resume: { kind: 'flag' },
      'eval-limit': { kind: 'int', min: 0, max: 100000 },
      'checkpoint-every': { kind: 'int', min: 0, max: 100000 },
      threads: { kind: 'int', min: 1, max: 64 },
      'keep-checkpoints': { kind: 'int', min: 0, max: 100000 },
      world: { kind: 'string', path: true },
      traces: { kind: 'string', path: true },
      run: { kind: 'string', required: true, path: true },
    },
    positionals: 'none',
    subcommands: ['sft', 'grpo'],
    run: cmdTrain,
  },
  'audit-reward': {
    name: 'audit-reward',
    summary: 'score a fixed synthetic group (correct, wasteful, wrong, malformed, no answer, empty, spam) with a reward; exit 1 when it cannot rank them',
    usage: 'agent-lab audit-reward [--reward R] [--max-steps N] [--json]   (R e.g. exact,step=0.05 | exact,step=0.05,format=0.1,cap=0 | ...,gate=answer-tag)',
    options: { reward: { kind: 'string' }, 'max-steps': { kind: 'int', min: 1, max: 100 }, json: { kind: 'flag' } },
    positionals: 'none',
    run: cmdAuditReward,
  },
  eval: {
    name: 'eval',
    summary: 'evaluate a trained student through the real loop (greedy, grammar-constrained)',
    usage: 'agent-lab eval --run DIR [--world DIR] [--checkpoint latest|step-N] [--split heldout|train|dev|fresh-values|fresh-entities] [--limit N] [--backend B] [--json]',
    options: {
      run: { kind: 'string', required: true, path: true },
      checkpoint: { kind: 'string' },
      split: { kind: 'string', choices: [...EVAL_SPLITS] },
      limit: { kind: 'int', min: 1, max: 100000 },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
      world: { kind: 'string', path: true },
      json: { kind: 'flag' },
    },
    positionals: 'none',
    run: cmdEval,
  },
  run: {
    name: 'run',
    summary: 'the student answers one question through the real loop and prints its trajectory',
    usage: 'agent-lab run --run DIR [--world DIR] [--checkpoint latest|step-N] [--backend B] [--json] [--] QUESTION',
    options: {
      run: { kind: 'string', required: true, path: true },
      world: { kind: 'string', path: true },
      checkpoint: { kind: 'string' },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
      json: { kind: 'flag' },
    },
    positionals: 'one-or-more',
    positionalName: 'QUESTION',
    run: (a) => runAskCommand(a.options, a.positional!),
  },
  // ---- export to Hugging Face TRL (issue 4) ---------------------------------------------
  export: {
    name: 'export',
    summary: "write a run's data for Hugging Face TRL: SFTTrainer datasets (trl-sft) or GRPOTrainer prompts and reward (trl-grpo)",
    usage: EXPORT_USAGE,
    options: {
      format: { kind: 'string', choices: ['trl-sft', 'trl-grpo'], required: true },
      run: { kind: 'string', path: true },
      split: { kind: 'string', choices: ['train', 'heldout', 'dev'] },
      data: { kind: 'string', path: true },
      world: { kind: 'string', path: true },
      out: { kind: 'string', required: true, path: true },
    },
    positionals: 'none',
    run: (a) => void runExportCommand(a.options),
  },
  // ---- end of the export block ------------------------------------------------------------
  // ---- the language server and its bench (issue 5) ----------------------------------------
  lsp: {
    name: 'lsp',
    summary: 'the language server for transcripts and datasets, over stdin/stdout',
    usage: 'agent-lab lsp --stdio',
    options: { stdio: { kind: 'flag' } },
    positionals: 'none',
    run: async (a) => {
      if (!a.options['stdio']) throw new UsageError('the language server speaks over stdio only: pass --stdio');
      const { runStdioServer } = await import('../language-server/stdio'); // loads the server only here
      await runStdioServer();
    },
  },
  bench: {
    name: 'bench',
    summary: 'benchmarks that print figures (JSON is the last line)',
    usage: 'agent-lab bench lsp|grammar|train [--json] [--large] [--iterations N] [--backend B] [--rounds N] [--warmup N]',
    options: { json: { kind: 'flag' }, large: { kind: 'flag' }, iterations: { kind: 'int', min: 1, max: 1000 }, backend: { kind: 'string', choices: BACKEND_CHOICES }, rounds: { kind: 'int', min: 1, max: 100 }, warmup: { kind: 'int', min: 0, max: 100 } },
    positionals: 'one-or-more',
    positionalName: 'TARGET',
    run: cmdBench,
  },
  // ---- end of the language server block -----------------------------------------------------
};

const BENCH_SPEC: CommandSpec = {
  name: 'bench',
  usage: 'agent-lab bench lsp|grammar|train [--json] [--large] [--iterations N] [--backend B] [--rounds N] [--warmup N]',
  options: { json: { kind: 'flag' }, large: { kind: 'flag' }, iterations: { kind: 'int', min: 1, max: 1000 }, backend: { kind: 'string', choices: BACKEND_CHOICES }, rounds: { kind: 'int', min: 1, max: 100 }, warmup: { kind: 'int', min: 0, max: 100 } },
  positionals: 'none',
};

/** `bench TARGET [options]`: options may also follow the target (`bench lsp --json`). */
async function cmdBench(a: ParsedArgs): Promise<void> {
  const [target, ...rest] = (a.positional ?? '').split(' ');
  const more = parseArgs(rest, BENCH_SPEC).options;
  const opt = (k: string): string | number | boolean | undefined => more[k] ?? a.options[k];
  const num = (k: string): number | undefined => (typeof opt(k) === 'number' ? (opt(k) as number) : undefined);
  const backend = opt('backend');
  // The benchmarks run from the source tree (cli/bench.ts): none of bench/ or test/ is bundled here.
  await runBenchFromSource({
    target: checkBenchTarget(target ?? ''),
    json: opt('json') === true,
    large: opt('large') === true,
    ...(num('iterations') !== undefined ? { iterations: num('iterations') } : {}),
    ...(typeof backend === 'string' ? { backend: backend as BackendAsk } : {}),
    ...(num('rounds') !== undefined ? { rounds: num('rounds') } : {}),
    ...(num('warmup') !== undefined ? { warmup: num('warmup') } : {}),
  });
}

async function cmdTrain(a: ParsedArgs): Promise<void> {
  if (a.positional !== 'sft' && a.positional !== 'grpo') throw new UsageError(`unknown training '${a.positional}': this build has 'sft' and 'grpo'`);
  if (a.options['minutes'] !== undefined && a.options['steps'] !== undefined) throw new UsageError('give --minutes or --steps, not both');
  const misplaced = (names: readonly string[]) => names.filter((n) => a.options[n] !== undefined).map((n) => `--${n}`);
  // A resumed run keeps what it learns with (its config.json); silently ignoring a new value would mislead.
  const notOnResume = (names: readonly string[]): void => {
    const given = a.options['resume'] ? misplaced(names) : [];
    if (given.length) {
      throw new UsageError(
        `--resume continues the run with the settings in its config.json; ${given.join(', ')} cannot change them ` +
          '(drop them to continue the run as it was, or start a new run with another --run)',
      );
    }
  };
  if (a.positional === 'sft') {
    // --seed (model init and data order) and --from (continued SFT) mean something for SFT too.
    const wrong = misplaced(Object.keys(GRPO_OPTIONS).filter((n) => n !== 'seed' && n !== 'from'));
    if (wrong.length) throw new UsageError(`${wrong.join(', ')}: GRPO option(s), not for 'train sft'`);
    notOnResume(['preset', 'recipe', 'steps', 'minutes', 'seed', 'from', 'traces']);
    if (a.options['from'] !== undefined && a.options['world'] !== undefined) throw new UsageError("--from continues on that run's data and world: drop --world");
    await runTrainCommand(a.options);
    return;
  }
  notOnResume([...Object.keys(GRPO_OPTIONS), 'steps', 'minutes']);
  if (a.options['world'] !== undefined || a.options['traces'] !== undefined) {
    throw new UsageError("'train grpo' takes the world of its --from run (recorded in its config.json): drop --world/--traces");
  }
  const wrong = misplaced(['preset', 'recipe']);
  if (wrong.length) throw new UsageError(`${wrong.join(', ')}: the GRPO run takes the model and data of its --from run`);
  if (!a.options['resume'] && a.options['from'] === undefined) throw new UsageError("'train grpo' needs --from SFT_RUN (or --resume)");
  await runGrpoCommand(a.options);
}

/** `audit-reward [--reward R] [--max-steps N] [--json]`: the synthetic group, scored; fails on a reward that cannot rank it. */
function cmdAuditReward(a: ParsedArgs): void {
  let spec;
  try {
    spec = parseRewardSpec((a.options['reward'] as string | undefined) ?? DEFAULT_REWARD_TEXT);
  } catch (err) {
    if (err instanceof RewardSpecError) throw new UsageError(err.message);
    throw err;
  }
  const audit = auditReward(spec, { maxSteps: intOpt(a, 'max-steps', 6) });
  if (a.options['json']) {
    console.log(JSON.stringify({ ...audit, rows: audit.rows.map(({ transcript: _t, ...r }) => r) }));
  } else console.log(formatAudit(audit));
  if (!audit.ok) throw new CliError(`the reward '${audit.reward}' fails the audit: ${audit.checks.filter((c) => !c.ok).map((c) => c.name).join('; ')}`);
}

async function cmdEval(a: ParsedArgs): Promise<void> {
  await runEvalCommand(a.options);
}

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
  if (isSourceWorld(a.options) || a.options['shapes'] !== undefined || a.options['split'] !== undefined || a.options['tools'] !== undefined) {
    if (!isSourceWorld(a.options)) throw new UsageError('--shapes, --split and --tools describe a world from --facts FILE or --docs DIR --tasks FILE');
    runSourceWorldCommand(a.options);
    return;
  }
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
  const overlap = findOverlaps(pool.train, pool.heldout);
  console.log(
    `wrote ${out}: ${corpus.length} passages, ${pool.train.length} train and ${pool.heldout.length} held-out tasks; ` +
      `${overlap.exact.length} held-out questions also in train, ${overlap.swapped.length} more with operands swapped (training excludes both)`,
  );
}

async function cmdDistill(a: ParsedArgs): Promise<void> {
  try {
    await runDistillCommand(a.options);
  } catch (err) {
    if (err instanceof DistillFailure) throw new CliError(err.message);
    throw err;
  }
}

/** A `.transcript` holds one transcript; one trailing newline (editors add it) is ignored. */
export function readTranscriptFile(file: string): string {
  // A regular file under the size cap (a FIFO or /dev/zero would hang); invalid UTF-8 is said.
  const text = readInputText(file, 'the transcript', INPUT_LIMITS.transcript);
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
  const world = a.options['world'] !== undefined ? readWorldFolder(a.options['world'] as string) : null;
  const verdict = checkCall(a.positional!, world?.tools ? templatesFor(world.tools) : undefined);
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
