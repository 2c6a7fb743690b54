// The job specs Train (GRPO) and Train SFT More… send the worker, from the command's arguments
// and the editor's settings: pure (the settings come as a reader), no vscode, so the unit tests
// follow a refused run's button to the job it starts.
import { grpoJobOptionsFromSettings, type RlPool } from '../core/protocol/grpoOptions';
import type { GrpoJobSpec, SftJobSpec } from '../core/protocol/worker';

/** Optional arguments when GRPO is started from code (tests, the refusal's buttons); the rest comes from settings. */
export interface GrpoArgs {
  fromRunDir?: string;
  runName?: string;
  steps?: number;
  groupSize?: number;
  tasksPerStep?: number;
  evalLimit?: number;
  evalEvery?: number;
  systemPrompt?: string;
  reward?: string;
  /** Run although the pre-screen's verdict refused (recorded in config.json as forced). */
  force?: boolean;
  /** The RL pool (default: the trainer's, by the SFT run's world); a refusal's button sets the one it suggests. */
  pool?: RlPool;
  /** The rollouts' temperature over agentLab.grpo.temperature (a confident refusal's button: hotter). */
  temperature?: number;
  /** All-wrong groups get the stub teacher's transcript (`--guide on`; a too-hard refusal's button). */
  guide?: boolean;
}

/** `agentLab.<setting>` as the workspace folder's configuration gives it. */
export type SettingReader = (setting: string) => unknown;

/** GRPO from the SFT run `from` into `runDir`: the arguments given, else the agentLab.grpo.* settings. */
export function grpoJobSpec(args: GrpoArgs, read: SettingReader, runDir: string, from: string): GrpoJobSpec {
  // The agentLab.grpo.* settings the option table names (core/protocol/grpoOptions.ts), under the arguments given.
  const fromSettings = grpoJobOptionsFromSettings(read, {
    steps: args.steps,
    groupSize: args.groupSize,
    tasksPerStep: args.tasksPerStep,
    reward: args.reward,
    temperature: args.temperature,
  });
  const backend = read('backend');
  return {
    kind: 'grpo',
    runDir,
    from,
    backend: typeof backend === 'string' ? backend : 'auto',
    ...fromSettings,
    ...(args.evalLimit !== undefined ? { evalLimit: args.evalLimit } : {}),
    ...(args.evalEvery !== undefined ? { evalEvery: args.evalEvery } : {}),
    ...(args.systemPrompt !== undefined ? { systemPrompt: args.systemPrompt } : {}),
    ...(args.force ? { force: true } : {}),
    ...(args.pool ? { pool: args.pool } : {}),
    ...(args.guide ? { guide: true } : {}),
  };
}

/** Continued SFT from the SFT run `from` into `runDir` for `budget` (its model, data and world are that run's). */
export function sftMoreJobSpec(from: string, runDir: string, budget: { steps: number } | { minutes: number }, read: SettingReader, evalLimit?: number): SftJobSpec {
  const backend = read('backend');
  const heldout = read('sft.heldoutTasks');
  return {
    kind: 'sft',
    runDir,
    from,
    backend: typeof backend === 'string' ? backend : 'auto',
    ...budget,
    evalLimit: evalLimit ?? (typeof heldout === 'number' ? heldout : 50),
  };
}
