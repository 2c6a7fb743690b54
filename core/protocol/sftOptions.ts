// SFT's options, spelled once. Each row names an option of an SFT run (the key the trainer
// reads, trainer/sft/sft.ts SftOptions) and says where else it appears: its `agent-lab train sft`
// flag and the flag's bounds (cli/train.ts derives SFT_OPTIONS, cli/commands.ts puts them
// in the train command's options, and the parsed flags are read through this table), whether
// a job spec from the editor may carry it (the worker's SftJobSpec and its validator,
// ./worker.ts), and the editor setting that gives it (`agentLab.<setting>`, read by
// extension/training.ts; declared in package.json). The flags `train grpo` takes too are
// this table's, bounds included (the GRPO table marks them `shared`), except --from and
// --seed, whose specs are the GRPO table's rows (`grpo`).
// Types, the table and pure helpers only: no Node, no DOM.

import { isObj } from './isObj';
import { type ParsedFlags, type UsageRow, jobFields, optionsFromFlags, rowDefaults, usageFromRows } from './optionRows';

/**
 * An option's value: text, an integer or a number, a flag, or a list of budget fractions
 * (code only: no flag, no job field, no setting).
 */
type OptionKind = 'string' | 'int' | 'number' | 'flag' | 'fractions';

/**
 * The lists a flag's value must be one of, which the trainer owns (trainer/model/model.ts,
 * trainer/sft/recipes.ts, trainer/model/backend.ts): the CLI hands them in, core/ imports no trainer/.
 */
export interface SftChoiceLists {
  presets: readonly string[];
  recipes: readonly string[];
  backends: readonly string[];
}

interface SftOptionRow extends UsageRow {
  kind: OptionKind;
  /** The CLI flag (`--flag`); absent: the CLI does not set it. */
  flag?: string;
  /** The flag is `train grpo`'s too and its spec is the GRPO table's row (./grpoOptions.ts). */
  grpo?: true;
  min?: number;
  max?: number;
  /** The list (SftChoiceLists) the flag's value must be one of. */
  choicesFrom?: keyof SftChoiceLists;
  /** A file or folder path (an empty one is bad usage). */
  path?: true;
  /** A job spec from the editor may carry it (the worker validates it by kind). */
  job?: true;
  /** The editor setting `agentLab.<setting>` that gives it when the command is not told. */
  setting?: string;
  /** The run's default when neither the options nor a resumed run's config.json give it; absent: none, or computed by the run. */
  default?: string | number | boolean | readonly number[];
  /**
   * Where a run's config.json records it, checked when the run is resumed (sftConfigProblem):
   * a top-level key always there or maybe there, or a field of its `budget` object.
   */
  config?: 'required' | 'optional' | 'budget';
  /** What a recorded value must be, as the resume's refusal says it (`"preset" must be ...`). */
  configMust?: string;
}

/**
 * The rows, in the order the validator checks the job's fields (strings, then numbers,
 * then flags, each in this order).
 */
export const SFT_OPTION_TABLE = {
  /** The model preset (trainer/model/model.ts PRESETS); a resumed or continued run keeps its own. */
  preset: { kind: 'string', flag: 'preset', choicesFrom: 'presets', job: true, setting: 'preset', default: 'tiny', config: 'required', configMust: 'a preset name', usageLine: 1, usageOrder: 1, metavar: 'P' },
  /** The recipe (trainer/sft/recipes.ts); default: the textbook's, or the one for a user's world. */
  recipe: { kind: 'string', flag: 'recipe', choicesFrom: 'recipes', job: true, usageLine: 1, usageOrder: 2, metavar: 'R' },
  backend: { kind: 'string', flag: 'backend', choicesFrom: 'backends', job: true, setting: 'backend', default: 'auto', usageLine: 1, usageOrder: 3, metavar: 'B' },
  /** The budget in optimiser steps (default: the preset's; the setting's 0 means "use the minutes"). */
  steps: { kind: 'int', flag: 'steps', min: 1, max: 100000000, job: true, setting: 'sft.steps', config: 'budget', usageLine: 1, usageOrder: 4, usageText: '' },
  /** The budget in optimiser minutes (evaluations are not counted). */
  minutes: { kind: 'number', flag: 'minutes', min: 0.05, max: 100000, job: true, setting: 'sft.minutes', config: 'budget', usageLine: 1, usageOrder: 4, usageText: '[--minutes M | --steps N]' },
  resume: { kind: 'flag', flag: 'resume', job: true, usageLine: 1, usageOrder: 8 },
  /** Held-out tasks per accuracy point (default all; 0: no accuracy points). */
  evalLimit: { kind: 'int', flag: 'eval-limit', min: 0, max: 100000, job: true, setting: 'sft.heldoutTasks', config: 'optional', configMust: 'a non-negative integer', usageLine: 1, usageOrder: 9, metavar: 'N' },
  /** A user's world folder (docs/worlds.md) to build the run from; the run keeps a copy. */
  world: {
    kind: 'string',
    flag: 'world',
    path: true,
    job: true,
    usageLine: 4,
    usageText: '[--world DIR [--traces FILE]]',
    usageNote: '(--world: a world folder, docs/worlds.md; --traces: trajectories distilled from it elsewhere)',
  },
  /**
   * With `world`: trajectories distilled elsewhere (e.g. an HTTP teacher) to train on. A job
   * spec may give it alone: the worker prepares a new run folder from it first
   * (trainer/sft/tracesRun.ts; the editor's Train (SFT) on a distilled file).
   */
  traces: { kind: 'string', flag: 'traces', path: true, job: true, usageLine: 4, usageText: '' },
  /**
   * Start from a Hugging Face model folder's weights and config (trainer/hf/hfModel.ts); its own
   * tokenizer becomes the run's, a lab tokenizer must be the run's. The optimiser settings
   * stay the preset's.
   */
  base: {
    kind: 'string',
    flag: 'base',
    path: true,
    job: true,
    usageLine: 1,
    usageOrder: 7,
    usageText: '',
    usageNoteLine: 2,
    usageNote: "(--base: start from a Hugging Face model folder; its own tokenizer.json becomes the run's, the wire-format specials it lacks added as tokens; a lab tokenizer must be the run's)",
  },
  /**
   * With `base`: LoRA adapters ("r,alpha[,targets]", trainer/model/lora.ts) on a frozen base
   * instead of full fine-tuning. A resumed or continued LoRA run keeps its own.
   */
  lora: {
    kind: 'string',
    flag: 'lora',
    job: true,
    usageLine: 3,
    metavar: 'r,alpha[,targets]',
    usageNote:
      "(with --base: LoRA adapters on a frozen base, PEFT's y = Wx + (alpha/r) BAx; targets of q,k,v,o,gate,up,down, default all;\n" +
      "                                       embedding rows added for wire specials the base's tokenizer lacks train too)",
  },
  /** Continued SFT: start from this SFT run's latest checkpoint, data, tokenizer and world. */
  from: {
    kind: 'string',
    flag: 'from',
    grpo: true,
    job: true,
    usageLine: 1,
    usageOrder: 7,
    usageText: '[--from SFT_RUN | --base HF_DIR]',
    usageNoteLine: 5,
    usageNote: "(--from: continued SFT from that run's latest checkpoint)",
  },
  /** Model initialisation and data order. */
  seed: { kind: 'int', flag: 'seed', grpo: true, default: 0, config: 'optional', configMust: 'an integer', usageLine: 1, usageOrder: 5, usageText: '[--seed N] [--threads N]' },
  /** Seconds between checkpoints (default 120; 0: after every step). */
  checkpointEverySeconds: { kind: 'int', flag: 'checkpoint-every', min: 0, max: 100000, usageLine: 5, metavar: 'SECONDS' },
  /** Complete checkpoints kept (default 5; 0: all); latest and those an eval used are never pruned. */
  keepCheckpoints: { kind: 'int', flag: 'keep-checkpoints', min: 0, max: 100000, usageLine: 5, metavar: 'K' },
  /** Optimiser steps between held-out loss measurements (default: 10 per run, at least every 25). */
  heldoutEvery: { kind: 'int' },
  /** Budget fractions at which held-out accuracy is measured. */
  evalPoints: { kind: 'fractions', default: [0.5, 1] },
} as const satisfies Record<string, SftOptionRow>;

type Table = typeof SFT_OPTION_TABLE;
export type SftOptionKey = keyof Table;

/** The value type a row gives the trainer. */
type ValueOf<R> = R extends { kind: 'string' } ? string : R extends { kind: 'flag' } ? boolean : R extends { kind: 'fractions' } ? readonly number[] : number;

/** Every SFT option the table names, as the trainer reads it (all optional: the defaults fill in). */
export type SftTableOptions = { [K in SftOptionKey]?: ValueOf<Table[K]> };

type JobKey = { [K in SftOptionKey]: Table[K] extends { job: true } ? K : never }[SftOptionKey];
/** The options an SFT job spec (editor → worker) may carry. */
export type SftJobOptions = { [K in JobKey]?: ValueOf<Table[K]> };

const ROWS = Object.entries(SFT_OPTION_TABLE) as [SftOptionKey, SftOptionRow][];

type DefaultKey = { [K in SftOptionKey]: Table[K] extends { default: unknown } ? K : never }[SftOptionKey];
/** The default of every option that has one. */
export const SFT_OPTION_DEFAULTS = rowDefaults(ROWS) as {
  readonly [K in DefaultKey]: ValueOf<Table[K]>;
};

/** The job spec's fields of each value kind, in table order (what checkJobSpec checks). */
export const SFT_JOB_FIELDS = jobFields(ROWS);

/**
 * `train sft`'s usage (the train command's first lines): each row's text on its usage line
 * (`usageLine`, in `usageOrder`), the lines' notes after them.
 */
export function sftUsage(): string {
  return usageFromRows('agent-lab train sft', ROWS, '--run DIR');
}

/** A CLI option spec as cli/args.ts reads it (structurally its OptionSpec). */
export interface SftFlagSpec {
  kind: 'string' | 'int' | 'number' | 'flag';
  min?: number;
  max?: number;
  choices?: readonly string[];
  path?: boolean;
}

/** Every flag `train sft` takes from the table (--from and --seed included, whose specs the GRPO table gives). */
export const SFT_FLAG_NAMES: readonly string[] = ROWS.flatMap(([, r]) => (r.flag === undefined ? [] : [r.flag]));

/**
 * The flags whose specs this table gives, with their bounds and choices: `train sft`'s, and
 * those `train grpo` shares (all but the GRPO table's --from and --seed).
 */
export function sftFlags(lists: SftChoiceLists): Record<string, SftFlagSpec> {
  const out: Record<string, SftFlagSpec> = {};
  for (const [, r] of ROWS) {
    if (r.flag === undefined || r.grpo || r.kind === 'fractions') continue; // a list of fractions has no flag
    const spec: SftFlagSpec = { kind: r.kind };
    if (r.choicesFrom) spec.choices = lists[r.choicesFrom];
    if (r.min !== undefined) spec.min = r.min;
    if (r.max !== undefined) spec.max = r.max;
    if (r.path) spec.path = true;
    out[r.flag] = spec;
  }
  return out;
}

/**
 * The trainer's options from parsed CLI flags (`--eval-limit 0` → evalLimit: 0); a flag not
 * given is left out, so the run's defaults apply. The parser has checked each value against
 * its spec.
 */
export function sftOptionsFromFlags(flags: ParsedFlags): SftTableOptions {
  return optionsFromFlags(ROWS, flags) as SftTableOptions;
}

/** Whether a recorded value is of its row's kind (an int within its lower bound). */
function recordedValueOk(r: SftOptionRow, v: unknown): boolean {
  if (r.kind === 'string') return typeof v === 'string';
  if (r.kind === 'int') return Number.isSafeInteger(v) && (r.min === undefined || (v as number) >= r.min);
  if (r.kind === 'number') return typeof v === 'number' && Number.isFinite(v);
  return typeof v === 'boolean';
}

/**
 * What is wrong with the options a resumed SFT run's config.json records, by the rows that
 * say where they are kept (`config`), or null. The budget is one object: steps, minutes or
 * both, each positive (a job may have asked for fewer minutes than the CLI's lower bound).
 * The composite records (the recipe, the backend) have no row: trainer/run/runGuards.ts
 * checks their shapes.
 */
export function sftConfigProblem(c: Readonly<Record<string, unknown>>): string | null {
  for (const [key, r] of ROWS) {
    if (r.config !== 'required' && r.config !== 'optional') continue;
    const v = c[key];
    if (v === undefined && r.config === 'optional') continue;
    if (!recordedValueOk(r, v)) return `"${key}" must be ${r.configMust ?? `a ${r.kind}`}`;
  }
  const budget = c['budget'];
  if (budget === undefined) return null;
  const shape = '"budget" must be {"steps": N} or {"minutes": M}';
  if (!isObj(budget)) return shape;
  const inBudget = ROWS.filter(([, r]) => r.config === 'budget');
  const positive = inBudget.every(([key, r]) => budget[key] === undefined || (recordedValueOk(r, budget[key]) && (budget[key] as number) > 0));
  const some = inBudget.some(([key]) => budget[key] !== undefined);
  return positive && some ? null : `${shape} with N, M > 0`;
}

/** The trainer's options a job spec gives: its table fields that are set, in table order. */
export function sftOptionsFromJob(spec: Readonly<SftJobOptions>): SftJobOptions {
  const out: Record<string, unknown> = {};
  for (const [key, r] of ROWS) {
    const v = r.job ? (spec as Record<string, unknown>)[key] : undefined;
    if (v !== undefined) out[key] = v;
  }
  return out as SftJobOptions;
}
