// The `agent-lab` command table: each command's name, usage line, options and positionals
// (what cli/args.ts parses and checks) and the handler that runs it. The forms are a
// contract other tools rely on (docs/architecture.md, "The CLI"); the handlers live per
// area (world.ts, distill.ts, tools.ts, train.ts, export.ts, bench.ts, demo.ts).
import { CommandSpec, OptionSpec, ParsedArgs, UsageError } from './args';
import { EVAL_SPLITS } from '../core/protocol/worker';
import { grpoUsage } from '../core/protocol/grpoOptions';
import { BACKEND_CHOICES } from '../trainer/model/backend';
import { BENCH_SPEC, cmdBench } from './bench';
import { cmdChatMask, cmdPatchTemplate } from './chatMask';
import { runDemoWithTraining } from './demo';
import { DISTILL_USAGE, cmdDistill } from './distill';
import { EXPORT_USAGE, runExportCommand } from './export';
import { MODEL_USAGE, cmdModel } from './model';
import { cmdAuditReward, cmdCalc, cmdGrammar, cmdMask, cmdSearch } from './tools';
import { GRPO_OPTIONS, SFT_OPTIONS, cmdEval, cmdTrain, runAskCommand } from './train';
import { sftUsage } from '../core/protocol/sftOptions';
import { WORLD_USAGE, cmdWorld } from './world';

/** Seeds: the world derives seed + 1 and seed + 2, which must stay exact integers. */
const SEED_OPTION: OptionSpec = { kind: 'int', min: -(Number.MAX_SAFE_INTEGER - 2), max: Number.MAX_SAFE_INTEGER - 2 };

export const COMMANDS: Record<
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
    summary: "show the loss mask (the seed's _segment) of a transcript file, or of a TRL dataset under a chat template",
    usage:
      'agent-lab mask [--json] FILE      the loss-mask segments of a .transcript\n' +
      '  agent-lab mask --template DIR [--json] [--max-length N] [--template-kwargs JSON] FILE.jsonl\n' +
      '      (a TRL conversational dataset under a Hugging Face tokenizer folder\'s chat template: each token\'s\n' +
      '       generation-block and prefix-difference mask, and findings; exit 1 when a row has an error finding)\n' +
      '  agent-lab mask --template DIR --patch-out NEWDIR\n' +
      '      (writes DIR\'s chat template with {% generation %} blocks, and copies of its tokenizer files, to the new\n' +
      '       folder NEWDIR; refuses an existing NEWDIR and a template it cannot patch safely)',
    options: {
      json: { kind: 'flag' },
      template: { kind: 'string', path: true },
      'patch-out': { kind: 'string', path: true },
      'max-length': { kind: 'int', min: 1, max: 100000000 },
      'template-kwargs': { kind: 'string' },
    },
    // --patch-out takes no FILE; every other form needs one (checked below).
    positionals: 'at-most-one',
    positionalName: 'FILE',
    run: (a) => {
      if (a.options['patch-out'] !== undefined) {
        if (a.options['template'] === undefined) throw new UsageError('--patch-out NEWDIR goes with --template DIR');
        if (a.positional !== undefined) throw new UsageError(`--patch-out writes a template folder and reads no dataset: unexpected argument '${a.positional}'`);
        return cmdPatchTemplate(a.options['template'] as string, a.options['patch-out'] as string);
      }
      if (a.positional === undefined || a.positional === '') throw new UsageError('missing FILE');
      if (a.options['template'] !== undefined) return cmdChatMask(a);
      if (a.options['max-length'] !== undefined || a.options['template-kwargs'] !== undefined) {
        throw new UsageError('--max-length and --template-kwargs go with --template DIR');
      }
      return cmdMask(a);
    },
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
      `${sftUsage()}\n` +
      grpoUsage(),
    // The two option tables' flags (--from and --seed are the GRPO table's), and what both trainings take beside them.
    options: {
      ...GRPO_OPTIONS,
      ...SFT_OPTIONS,
      threads: { kind: 'int', min: 1, max: 64 },
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
    usage:
      'agent-lab eval --run DIR [--world DIR] [--checkpoint latest|step-N] [--split heldout|train|dev|dev-entities|fresh-values|fresh-entities|fresh-differences] [--limit N] [--copy-bias B] [--copy-stop on|off] [--copy-values on|off] [--backend B] [--json]',
    options: {
      run: { kind: 'string', required: true, path: true },
      checkpoint: { kind: 'string' },
      split: { kind: 'string', choices: [...EVAL_SPLITS] },
      limit: { kind: 'int', min: 1, max: 100000 },
      'copy-bias': { kind: 'number', min: 0, max: 50 },
      'copy-stop': { kind: 'string', choices: ['on', 'off'] },
      'copy-values': { kind: 'string', choices: ['on', 'off'] },
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
    summary: "write a run's data for Hugging Face TRL: SFTTrainer datasets (trl-sft) or GRPOTrainer prompts and reward (trl-grpo); or its model as a Hugging Face folder (hf)",
    usage: EXPORT_USAGE,
    options: {
      format: { kind: 'string', choices: ['trl-sft', 'trl-grpo', 'hf'], required: true },
      checkpoint: { kind: 'string' },
      peft: { kind: 'flag' },
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
  // ---- a Hugging Face model folder as the lab reads it (issue 29) --------------------------
  model: {
    name: 'model',
    summary: 'a Hugging Face Llama/Qwen2 model folder: inspect it (architecture, parameters, dtypes, tokenizer) or print its logits for given ids',
    usage: MODEL_USAGE,
    options: {
      base: { kind: 'string', required: true, path: true },
      ids: { kind: 'string' },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
      json: { kind: 'flag' },
    },
    positionals: 'none',
    subcommands: ['inspect', 'logits'],
    run: cmdModel,
  },
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
    usage: BENCH_SPEC.usage,
    options: BENCH_SPEC.options,
    positionals: 'one-or-more',
    positionalName: 'TARGET',
    run: cmdBench,
  },
  // ---- end of the language server block -----------------------------------------------------
};

/** The usage of every command (`agent-lab help`). */
export function usageAll(): string {
  const lines = ['usage: agent-lab <command> [options] [arguments]', '', 'commands:'];
  for (const c of Object.values(COMMANDS)) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  lines.push('', "Options come before arguments; '--' ends options.");
  return lines.join('\n');
}
