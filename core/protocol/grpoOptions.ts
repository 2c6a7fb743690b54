// GRPO's options, spelled once. Each row names an option of a GRPO run (the key the trainer
// reads, trainer/grpo.ts GrpoOptions) and says where else it appears: its `agent-lab train
// grpo` flag and the flag's bounds (cli/train.ts derives GRPO_OPTIONS and reads the parsed
// flags through this table), whether a job spec from the editor may carry it (the worker's
// GrpoJobSpec and its validator, ./worker.ts), and the editor setting that gives it
// (`agentLab.<setting>`, read by extension/training.ts; declared in package.json). Flags
// that `train sft` shares (`shared`) keep their bounds in the train command's own options.
// The defaults are the Contract's (docs/architecture.md, "GRPO defaults"; trainer/grpo.ts).
// Types, the table and pure helpers only: no Node, no DOM.

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
  /** The flag is `train sft`'s too: its bounds live in the train command's options. */
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
}

/**
 * The rows, in the order the CLI lists its GRPO flags and the validator checks the job's
 * fields (strings, then numbers, each in this order).
 */
export const GRPO_OPTION_TABLE = {
  /** The SFT run whose checkpoint is the starting policy and the frozen reference (not needed with resume). */
  from: { kind: 'string', flag: 'from', path: true, job: true },
  backend: { kind: 'string', flag: 'backend', shared: true, job: true },
  fromCheckpoint: { kind: 'string', flag: 'from-checkpoint' },
  steps: { kind: 'int', flag: 'steps', shared: true, job: true, setting: 'grpo.steps' },
  minutes: { kind: 'number', flag: 'minutes', shared: true, job: true },
  groupSize: { kind: 'int', flag: 'group', min: 1, max: 1024, job: true, setting: 'grpo.groupSize' },
  tasksPerStep: { kind: 'int', flag: 'tasks', min: 1, max: 1024, job: true, setting: 'grpo.tasksPerStep' },
  temperature: { kind: 'number', flag: 'temperature', min: 0, max: 10, job: true, setting: 'grpo.temperature' },
  maxSteps: { kind: 'int', flag: 'max-steps', min: 1, max: 100, job: true },
  reward: { kind: 'string', flag: 'reward', job: true, setting: 'grpo.reward' },
  clip: { kind: 'number', flag: 'clip', min: 0, max: 1 },
  klBeta: { kind: 'number', flag: 'kl-beta', min: 0, max: 100, job: true },
  epochsPerBatch: { kind: 'int', flag: 'epochs-per-batch', min: 1, max: 100 },
  lr: { kind: 'number', flag: 'lr', min: 0, max: 1, job: true },
  seed: { kind: 'int', flag: 'seed' },
  /** GRPO steps between held-out accuracy points (0: only before and after). */
  evalEvery: { kind: 'int', flag: 'eval-every', min: 0, max: 1000000, job: true },
  /** Held-out tasks per accuracy point (default all 50; 0: none). */
  evalLimit: { kind: 'int', flag: 'eval-limit', shared: true, job: true },
  /** Overrides the system prompt of the rollouts (the drift check compares it with the SFT data). */
  systemPrompt: { kind: 'string', flag: 'system-prompt', job: true },
  /** Seconds between checkpoints (default 120; 0: after every step). */
  checkpointEverySeconds: { kind: 'int', flag: 'checkpoint-every', shared: true, job: true },
  /** The RL task pool (default fresh-entities; train for a documents world's run, which has no fresh pools). */
  pool: { kind: 'string', flag: 'pool', choices: RL_POOLS, job: true },
  /** grpo (default) or rft: the verified-correct rollouts of each step as SFT targets (no advantages, no KL). */
  objective: { kind: 'string', flag: 'objective', choices: RL_OBJECTIVES },
  scaleRewards: { kind: 'string', flag: 'scale-rewards', choices: SCALE_REWARDS },
  /** Keep drawing tasks until the step holds tasksPerStep groups with reward spread (DAPO). */
  dynamicSampling: { kind: 'onOff', flag: 'dynamic-sampling' },
  /** Tasks drawn per step at most under dynamic sampling. */
  maxDraws: { kind: 'int', flag: 'max-draws', min: 1, max: 100000 },
  /** The fresh-values pool's compares: the seed world's winner as often as the other (core/worlds.ts). */
  balanceCompares: { kind: 'onOff', flag: 'balance-compares' },
  /** Draw tasks whose last group had a spread in correctness again before new ones (trainer/revisit.ts). */
  revisit: { kind: 'onOff', flag: 'revisit' },
  /** A group whose rollouts are all wrong gets the stub teacher's transcript in place of its last (trainer/guide.ts). */
  guide: { kind: 'onOff', flag: 'guide', job: true },
  /** The pass-rate pre-screen: tasks of the pool sampled before step 1 to predict the informative share (default: 10% of the run's draws; 0: none). */
  prescreen: { kind: 'int', flag: 'prescreen', min: 0, max: 100000, job: true },
  /** Rollouts per pre-screened task (default: the group size; at least it). */
  prescreenSamples: { kind: 'int', flag: 'prescreen-samples', min: 1, max: 1024, job: true },
  /** Run although the pre-screen's verdict says the groups will be flat (recorded in config.json as forced). */
  force: { kind: 'flag', flag: 'force', job: true },
  /** Fully flat steps in a row after which the run stops itself, checkpoint kept (default 10; 0: never). */
  stopFlat: { kind: 'int', flag: 'stop-flat', min: 0, max: 100000, job: true },
  /** Complete checkpoints kept (default 5; 0: all); latest and those an eval used are never pruned. */
  keepCheckpoints: { kind: 'int', flag: 'keep-checkpoints', shared: true },
  resume: { kind: 'flag', flag: 'resume', shared: true, job: true },
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

/** The job spec's fields of each value kind, in table order (what checkJobSpec checks). */
export const GRPO_JOB_FIELDS = {
  strings: ROWS.filter(([, r]) => r.job && r.kind === 'string').map(([k]) => k),
  numbers: ROWS.filter(([, r]) => r.job && (r.kind === 'int' || r.kind === 'number')).map(([k]) => k),
  /** Booleans: flags, and `on|off` options (true for on). */
  flags: ROWS.filter(([, r]) => r.job && (r.kind === 'flag' || r.kind === 'onOff')).map(([k]) => k),
};

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
export function grpoOptionsFromFlags(flags: Readonly<Record<string, string | number | boolean | undefined>>): GrpoTableOptions {
  const out: Record<string, string | number | boolean> = {};
  for (const [key, r] of ROWS) {
    const v = r.flag === undefined ? undefined : flags[r.flag];
    if (v === undefined) continue;
    if (r.kind === 'flag') {
      if (v) out[key] = true; // a flag given is true; absent is the default
    } else out[key] = r.kind === 'onOff' ? v === 'on' : v;
  }
  return out as GrpoTableOptions;
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
