// GRPO's options, spelled once. Each row names an option of a GRPO run (the key the trainer
// reads, trainer/grpo/grpo.ts GrpoOptions) and says where else it appears: its `agent-lab train
// grpo` flag and the flag's bounds (cli/train.ts derives GRPO_OPTIONS and reads the parsed
// flags through this table), whether a job spec from the editor may carry it (the worker's
// GrpoJobSpec and its validator, ./worker.ts), and the editor setting that gives it
// (`agentLab.<setting>`, read by extension/training.ts; declared in package.json). Flags
// that `train sft` shares (`shared`) keep their bounds in the SFT option table (./sftOptions.ts).
// A row also holds the option's default (the Contract's, docs/architecture.md "GRPO defaults":
// trainer/grpo/grpo.ts GRPO_DEFAULTS spreads them), whether the run's config.json keeps it and how a
// resume checks it (grpoConfigSettings, grpoConfigProblem), and its place in `train grpo`'s
// usage (grpoUsage). Adding an option is a row here and its use in the trainer.
// Types, the table and pure helpers only: no Node, no DOM.

import { type ParsedFlags, jobFields, optionsFromFlags, rowDefaults, usageFromRows } from './optionRows';

/**
 * The RL task pool: the SFT run's training tasks, or fresh training worlds (never distilled);
 * fresh-differences: the RL value worlds asked a family no teacher demonstrates.
 */
export const RL_POOLS = ['train', 'fresh-values', 'fresh-entities', 'fresh-differences'] as const;
export type RlPool = (typeof RL_POOLS)[number];
/**
 * What the update does with a step's scored rollouts: GRPO's clipped policy gradient with
 * group-relative advantages, or rejection-sampling fine-tuning (RFT: the verified-correct
 * rollouts as SFT targets, the no-teacher baseline RL must beat).
 */
export const RL_OBJECTIVES = ['grpo', 'rft'] as const;
export type RlObjective = (typeof RL_OBJECTIVES)[number];
/** How advantages are scaled: by the group's reward std, the batch's, or not at all. */
export const SCALE_REWARDS = ['group', 'batch', 'none'] as const;
export type ScaleRewards = (typeof SCALE_REWARDS)[number];

/** An option's value: text, an integer or a number, a flag, or `on|off` on the CLI (a boolean to the trainer). */
type OptionKind = 'string' | 'int' | 'number' | 'flag' | 'onOff';

interface GrpoOptionRow {
  kind: OptionKind;
  /** The CLI flag (`--flag`); absent: the CLI does not set it. */
  flag?: string;
  /** The flag is `train sft`'s too: its bounds live in the SFT option table (./sftOptions.ts). */
  shared?: true;
  min?: number;
  max?: number;
  choices?: readonly string[];
  /** A file or folder path (an empty one is bad usage). */
  path?: true;
  /** A job spec from the editor may carry it (the worker validates it by kind). */
  job?: true;
  /** The editor setting `agentLab.<setting>` that gives it when the command is not told. */
  setting?: string;
  /** The Contract's default (docs/architecture.md, "GRPO defaults"); absent: none, or computed by the run. */
  default?: string | number | boolean;
  /**
   * Kept in config.json's `grpo` settings, which a resume reads back and checks: 'required'
   * since the first GRPO runs; 'optional' where older runs lack it.
   */
  config?: 'required' | 'optional';
  /** What a config.json value must be, in words, where the kind alone does not say it. */
  configMeaning?: string;
  /** The line of `train grpo`'s usage it is listed on (1-6, in table order). */
  usageLine: number;
  /** Its value's name in the usage (`[--group G]`); choices and `on|off` spell themselves. */
  metavar?: string;
  /** Its whole text in the usage where that is not `[--flag VALUE]` ('' where another row's text names it). */
  usageText?: string;
  /** A note in parentheses after the last option of its usage line. */
  usageNote?: string;
}

/**
 * The rows, in the order the CLI lists its GRPO flags and the validator checks the job's
 * fields (strings, then numbers, each in this order).
 */
export const GRPO_OPTION_TABLE = {
  /** The SFT run whose checkpoint is the starting policy and the frozen reference (not needed with resume). */
  from: { kind: 'string', flag: 'from', path: true, job: true, usageLine: 1, usageText: '--from SFT_RUN' },
  fromCheckpoint: { kind: 'string', flag: 'from-checkpoint', usageLine: 1, metavar: 'latest|step-N' },
  /** The run length in GRPO steps (rollout batches), when no --minutes. */
  steps: { kind: 'int', flag: 'steps', shared: true, job: true, setting: 'grpo.steps', default: 60, usageLine: 1, usageText: '[--steps N | --minutes M]' },
  minutes: { kind: 'number', flag: 'minutes', shared: true, job: true, usageLine: 1, usageText: '' },
  groupSize: { kind: 'int', flag: 'group', min: 1, max: 1024, job: true, setting: 'grpo.groupSize', default: 8, config: 'required', usageLine: 1, metavar: 'G' },
  tasksPerStep: { kind: 'int', flag: 'tasks', min: 1, max: 1024, job: true, setting: 'grpo.tasksPerStep', default: 4, config: 'required', usageLine: 1, metavar: 'N' },
  temperature: { kind: 'number', flag: 'temperature', min: 0, max: 10, job: true, setting: 'grpo.temperature', default: 0.8, config: 'required', usageLine: 1, metavar: 'T' },
  maxSteps: { kind: 'int', flag: 'max-steps', min: 1, max: 100, job: true, default: 6, config: 'required', usageLine: 2, metavar: 'N' },
  /** The reward spec (core/reward.ts): exact match minus a step penalty by default. */
  reward: { kind: 'string', flag: 'reward', job: true, setting: 'grpo.reward', default: 'exact,step=0.05', config: 'required', configMeaning: 'a reward spec', usageLine: 2, metavar: 'R' },
  clip: { kind: 'number', flag: 'clip', min: 0, max: 1, default: 0.2, config: 'required', usageLine: 2, metavar: 'E' },
  klBeta: { kind: 'number', flag: 'kl-beta', min: 0, max: 100, job: true, default: 0.02, config: 'required', usageLine: 2, metavar: 'B' },
  epochsPerBatch: { kind: 'int', flag: 'epochs-per-batch', min: 1, max: 100, default: 1, config: 'required', usageLine: 2, metavar: 'N' },
  lr: { kind: 'number', flag: 'lr', min: 0, max: 1, job: true, default: 1e-4, config: 'required', usageLine: 2, metavar: 'LR' },
  /** Optimiser steps over which the learning rate rises linearly to --lr (TRL's warmup_steps; 0: none). */
  warmupSteps: { kind: 'int', flag: 'warmup-steps', min: 0, max: 100000, default: 5, config: 'optional', usageLine: 2, metavar: 'N' },
  seed: { kind: 'int', flag: 'seed', usageLine: 2, metavar: 'N' },
  /** GRPO steps between held-out accuracy points (0: only before and after). */
  evalEvery: { kind: 'int', flag: 'eval-every', min: 0, max: 1000000, job: true, default: 20, config: 'required', usageLine: 2, metavar: 'N' },
  /** Held-out tasks per accuracy point (default all 50; 0: none). */
  evalLimit: { kind: 'int', flag: 'eval-limit', shared: true, job: true, config: 'optional', usageLine: 2, metavar: 'N' },
  /**
   * The RL task pool. Default fresh-entities, new-name worlds where no teacher's transcript
   * exists: RL on the SFT run's own tasks gives a sampled copy of the gradient SFT already
   * gave, on fresh-values worlds it adds little beside SFT, and on fresh-entities it lifts
   * what the student copies more than rejection sampling does at equal steps
   * (docs/decisions.md, "GRPO's default pool"). A documents world's run, which has no fresh
   * pools, defaults to train.
   */
  pool: { kind: 'string', flag: 'pool', choices: RL_POOLS, job: true, default: 'fresh-entities', config: 'optional', usageLine: 3 },
  /** grpo (default) or rft: the verified-correct rollouts of each step as SFT targets (no advantages, no KL). */
  objective: { kind: 'string', flag: 'objective', choices: RL_OBJECTIVES, default: 'grpo', config: 'optional', usageLine: 3 },
  scaleRewards: { kind: 'string', flag: 'scale-rewards', choices: SCALE_REWARDS, default: 'group', config: 'optional', usageLine: 3 },
  /** Keep drawing tasks until the step holds tasksPerStep groups with reward spread (DAPO). */
  dynamicSampling: { kind: 'onOff', flag: 'dynamic-sampling', default: true, config: 'optional', usageLine: 3 },
  /** Tasks drawn per step at most under dynamic sampling (default: 3 per task of the step, trainer/grpo/grpo.ts). */
  maxDraws: { kind: 'int', flag: 'max-draws', min: 1, max: 100000, config: 'optional', usageLine: 3, metavar: 'N' },
  /**
   * Draw tasks whose last group had a spread in correctness again before new ones
   * (trainer/grpo/revisit.ts). Off: it multiplies the groups with spread but not the lift, the
   * errors left being confident ones (docs/results.md, "Why RL finds little to fix").
   */
  revisit: { kind: 'onOff', flag: 'revisit', default: false, config: 'optional', usageLine: 3 },
  /** The fresh-values pool's compares: the seed world's winner as often as the other (core/worlds.ts). */
  balanceCompares: { kind: 'onOff', flag: 'balance-compares', default: false, config: 'optional', usageLine: 3 },
  /**
   * A group whose rollouts are all wrong gets the stub teacher's transcript in place of its
   * last (trainer/grpo/guide.ts). Off: guided groups alone leave the lift where plain GRPO does
   * (docs/results.md, "Guided groups and a deeper student").
   */
  guide: { kind: 'onOff', flag: 'guide', job: true, default: false, config: 'optional', usageLine: 3 },
  /** The pass-rate pre-screen: tasks of the pool sampled before step 1 to predict the informative share (default: 10% of the run's draws; 0: none). */
  prescreen: { kind: 'int', flag: 'prescreen', min: 0, max: 100000, job: true, usageLine: 4, usageText: '[--prescreen N [--prescreen-samples S]]' },
  /** Rollouts per pre-screened task (default: the group size; at least it). */
  prescreenSamples: { kind: 'int', flag: 'prescreen-samples', min: 1, max: 1024, job: true, usageLine: 4, usageText: '' },
  /** Run although the pre-screen's verdict says the groups will be flat (recorded in config.json as forced). */
  force: {
    kind: 'flag',
    flag: 'force',
    job: true,
    usageLine: 4,
    usageNote:
      '(--prescreen: N pool tasks sampled first to predict the share of groups that will carry a gradient;\n' +
      "        default 10% of the run's rollouts, 0: none; a prediction below 5% refuses the run with its cause, --force runs it anyway)",
  },
  /**
   * Fully flat steps in a row after which the run stops itself, checkpoint kept (0: never).
   * 10: the default run has about 39% of its steps fully flat (7.5% informative groups over
   * 12 draws: 0.925^12), so 10 in a row come by chance in about 0.3% of 60-step runs
   * (docs/decisions.md, "The pre-screen's verdict").
   */
  stopFlat: { kind: 'int', flag: 'stop-flat', min: 0, max: 100000, job: true, default: 10, config: 'optional', usageLine: 5, metavar: 'N', usageNote: '(stop, checkpoint kept, after N steps in a row with every group flat; default 10, 0: never)' },
  /** Overrides the system prompt of the rollouts (the drift check compares it with the SFT data). */
  systemPrompt: { kind: 'string', flag: 'system-prompt', job: true, config: 'optional', usageLine: 6, metavar: 'TEXT' },
  backend: { kind: 'string', flag: 'backend', shared: true, job: true, usageLine: 6, usageText: '[--backend B] [--threads N]' },
  resume: { kind: 'flag', flag: 'resume', shared: true, job: true, usageLine: 6 },
  /** Seconds between checkpoints (default 120; 0: after every step). */
  checkpointEverySeconds: { kind: 'int', flag: 'checkpoint-every', shared: true, job: true, usageLine: 6, metavar: 'SECONDS' },
  /** Complete checkpoints kept (default 5; 0: all); latest and those an eval used are never pruned. */
  keepCheckpoints: { kind: 'int', flag: 'keep-checkpoints', shared: true, usageLine: 6, metavar: 'K' },
} as const satisfies Record<string, GrpoOptionRow>;

type Table = typeof GRPO_OPTION_TABLE;
export type GrpoOptionKey = keyof Table;

/** The value type a row gives the trainer. */
type ValueOf<R> = R extends { choices: readonly (infer C)[] }
  ? C
  : R extends { kind: 'string' }
    ? string
    : R extends { kind: 'flag' | 'onOff' }
      ? boolean
      : number;

/** Every GRPO option the table names, as the trainer reads it (all optional: the defaults fill in). */
export type GrpoTableOptions = { [K in GrpoOptionKey]?: ValueOf<Table[K]> };

type JobKey = { [K in GrpoOptionKey]: Table[K] extends { job: true } ? K : never }[GrpoOptionKey];
/** The options a GRPO job spec (editor → worker) may carry. */
export type GrpoJobOptions = { [K in JobKey]?: ValueOf<Table[K]> };

const ROWS = Object.entries(GRPO_OPTION_TABLE) as [GrpoOptionKey, GrpoOptionRow][];

type DefaultKey = { [K in GrpoOptionKey]: Table[K] extends { default: unknown } ? K : never }[GrpoOptionKey];
/** The Contract's default of every option that has one (docs/architecture.md, "GRPO defaults"). */
export const GRPO_OPTION_DEFAULTS = rowDefaults(ROWS) as {
  readonly [K in DefaultKey]: ValueOf<Table[K]>;
};

type ConfigKey = { [K in GrpoOptionKey]: Table[K] extends { config: string } ? K : never }[GrpoOptionKey];
type RequiredConfigKey = { [K in GrpoOptionKey]: Table[K] extends { config: 'required' } ? K : never }[GrpoOptionKey];
/** The settings a GRPO run keeps in its config.json (`grpo`), as given or defaulted at its start (older runs lack the optional ones). */
export type GrpoConfigSettings = { [K in RequiredConfigKey]: ValueOf<Table[K]> } & { [K in Exclude<ConfigKey, RequiredConfigKey>]?: ValueOf<Table[K]> };

/**
 * A new run's config.json settings: each option kept there as given, else its default (the
 * ones the run computes, `computed`, fill in where the table has none); an option with
 * neither stays out. In table order.
 */
export function grpoConfigSettings(given: GrpoTableOptions, computed: Partial<Record<ConfigKey, string | number | boolean>>): GrpoConfigSettings {
  const out: Record<string, unknown> = {};
  for (const [key, r] of ROWS) {
    if (r.config === undefined) continue;
    const value = (given as Record<string, unknown>)[key] ?? (computed as Record<string, unknown>)[key] ?? r.default;
    if (value !== undefined) out[key] = value;
  }
  return out as GrpoConfigSettings;
}

/**
 * What is wrong with a config.json's `grpo` settings (a resume reads them back), or null:
 * every 'required' row present with its kind, every 'optional' one absent or of its kind.
 */
export function grpoConfigProblem(g: Readonly<Record<string, unknown>>): string | null {
  for (const [key, r] of ROWS) {
    if (r.config === undefined) continue;
    const v = g[key];
    if (v === undefined && r.config === 'optional') continue;
    const name = `"grpo.${key}"`;
    if (r.kind === 'int') {
      // The options added later (stop-flat, eval-limit, max-draws) are checked for their sign here; the first ones in grpoSettings.
      const nonNegative = r.config === 'optional';
      if (!Number.isSafeInteger(v) || (nonNegative && (v as number) < 0)) return `${name} must be ${nonNegative ? 'a non-negative integer' : 'an integer'}`;
    } else if (r.kind === 'number') {
      if (typeof v !== 'number' || !Number.isFinite(v)) return `${name} must be a number`;
    } else if (r.kind === 'onOff' || r.kind === 'flag') {
      if (typeof v !== 'boolean') return `${name} must be true or false`;
    } else if (typeof v !== 'string' || (r.choices && !r.choices.includes(v))) {
      return `${name} must be ${r.configMeaning ?? (r.choices ? `one of ${r.choices.join(', ')}` : 'a string')}`;
    }
  }
  return null;
}

/** The job spec's fields of each value kind, in table order (what checkJobSpec checks). */
export const GRPO_JOB_FIELDS = jobFields(ROWS);

/**
 * `train grpo`'s usage (the train command's usage lines from "agent-lab train grpo" on): each
 * row's text on its line, in table order, the lines' notes after them.
 */
export function grpoUsage(): string {
  return `  ${usageFromRows('agent-lab train grpo', ROWS, '--run DIR')}`;
}

/** A CLI option spec as cli/args.ts reads it (structurally its OptionSpec). */
export interface GrpoFlagSpec {
  kind: 'string' | 'int' | 'number' | 'flag';
  min?: number;
  max?: number;
  choices?: readonly string[];
  path?: boolean;
}

/** The flags only `train grpo` takes, with their bounds (`on|off` flags are strings with those two choices). */
export function grpoOnlyFlags(): Record<string, GrpoFlagSpec> {
  const out: Record<string, GrpoFlagSpec> = {};
  for (const [, r] of ROWS) {
    if (r.flag === undefined || r.shared) continue;
    const spec: GrpoFlagSpec = r.kind === 'onOff' ? { kind: 'string', choices: ['on', 'off'] } : { kind: r.kind };
    if (r.path) spec.path = true;
    if (r.min !== undefined) spec.min = r.min;
    if (r.max !== undefined) spec.max = r.max;
    if (r.choices) spec.choices = [...r.choices];
    out[r.flag] = spec;
  }
  return out;
}

/**
 * The trainer's options from parsed CLI flags (`--group 4` → groupSize: 4, `--dynamic-sampling
 * on` → dynamicSampling: true); a flag not given is left out, so the run's defaults apply.
 * The parser has checked each value against its row's kind and bounds.
 */
export function grpoOptionsFromFlags(flags: ParsedFlags): GrpoTableOptions {
  return optionsFromFlags(ROWS, flags) as GrpoTableOptions;
}

/**
 * The job options the editor's settings give (`agentLab.grpo.*`) under what the command was
 * told: a given value wins, else the setting when it has the row's type; an empty reward is
 * no reward (the run's default).
 */
export function grpoJobOptionsFromSettings(read: (setting: string) => unknown, given: GrpoJobOptions): GrpoJobOptions {
  const out: Record<string, unknown> = {};
  for (const [key, r] of ROWS) {
    if (r.setting === undefined || !r.job) continue;
    const value = (given as Record<string, unknown>)[key] ?? read(r.setting);
    const wanted = r.kind === 'string' ? 'string' : 'number';
    if (typeof value === wanted && value !== '') out[key] = value;
  }
  return out as GrpoJobOptions;
}
