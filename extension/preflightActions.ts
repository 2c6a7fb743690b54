// A refused GRPO run's next steps as commands (issue 33): the Training Curves card's buttons
// and the refusal's notification both come here, so that a button runs what its label says.
// A retry is the refused run again from its SFT run, with its pool, temperature and guide
// unless the step changes them; "SFT more" is Train (SFT) continuing that SFT run (`--from`).
// Pure over the refused run's parsed config.json; no vscode, so the unit tests read it.
import * as path from 'node:path';
import { RL_POOLS, type RlPool } from '../core/protocol/grpoOptions';
import { isObj } from '../core/protocol/isObj';
import type { FromWebview, PreflightAction } from '../core/protocol/panels';

/** What the refused run was: the SFT run it started from, and the flags a retry keeps. */
export interface RefusedRun {
  from: string;
  pool?: RlPool;
  temperature?: number;
  guide?: boolean;
}

/** A step a button asks for: one of the verdict's actions, or the refused run as it was (--force). */
export type RetryStep = PreflightAction | { kind: 'force' };

/** The command a step runs, with its arguments (agentLab.trainGrpo's GrpoArgs, agentLab.trainSft's TrainArgs). */
export type RetryCommand =
  | { command: 'agentLab.trainGrpo'; args: { fromRunDir: string; pool?: RlPool; temperature?: number; guide?: true; force?: true } }
  | { command: 'agentLab.trainSft'; args: { from: string } };

const isPool = (v: unknown): v is RlPool => (RL_POOLS as readonly unknown[]).includes(v);

/** The refused run from its config.json; null for a run that is not GRPO or names no SFT run. */
export function refusedRunOf(config: Record<string, unknown> | null): RefusedRun | null {
  if (!config || config['kind'] !== 'grpo') return null;
  const from = config['from'];
  if (!isObj(from) || typeof from['run'] !== 'string' || from['run'] === '') return null;
  const g = isObj(config['grpo']) ? config['grpo'] : {};
  const data = isObj(config['data']) ? config['data'] : {};
  const pool = isPool(g['pool']) ? g['pool'] : isPool(data['pool']) ? data['pool'] : undefined;
  const t = g['temperature'];
  return {
    from: from['run'],
    ...(pool !== undefined ? { pool } : {}),
    ...(typeof t === 'number' && Number.isFinite(t) ? { temperature: t } : {}),
    ...(g['guide'] === true ? { guide: true } : {}),
  };
}

/** The command a step runs for the refused run: its flags over the run's own. */
export function retryCommand(step: RetryStep, run: RefusedRun): RetryCommand {
  if (step.kind === 'sft-more') return { command: 'agentLab.trainSft', args: { from: run.from } };
  const f = step.kind === 'grpo' ? step.flags : {};
  const pool = f.pool ?? run.pool;
  const temperature = f.temperature ?? run.temperature;
  const guide = f.guide === 'on' || run.guide === true;
  return {
    command: 'agentLab.trainGrpo',
    args: {
      fromRunDir: run.from,
      ...(pool !== undefined ? { pool } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(guide ? { guide: true as const } : {}),
      ...(step.kind === 'force' ? { force: true as const } : {}),
    },
  };
}

type CardMessage = Extract<FromWebview, { type: 'curves/retryGrpo' | 'curves/sftMore' }>;

/**
 * A card's (validated) message for the run whose config.json is `config`, as a command; a
 * string says why it is ignored (not a refused GRPO run, a pool the trainer does not know).
 */
export function commandOfMessage(msg: CardMessage, config: Record<string, unknown> | null): RetryCommand | string {
  const run = refusedRunOf(config);
  if (!run) return `${msg.id} is not a GRPO run started from an SFT run`;
  if (msg.type === 'curves/sftMore') return retryCommand({ kind: 'sft-more' }, run);
  if (msg.pool !== null && !isPool(msg.pool)) return `unknown pool ${JSON.stringify(msg.pool)} (known: ${RL_POOLS.join(', ')})`;
  const flags = {
    ...(msg.pool !== null ? { pool: msg.pool } : {}),
    ...(msg.temperature !== undefined ? { temperature: msg.temperature } : {}),
    ...(msg.guide !== undefined ? { guide: msg.guide } : {}),
  };
  if (!msg.force) return retryCommand({ kind: 'grpo', flags }, run);
  // Train Anyway: the refused run as it was (with any flag the message names), forced.
  const { guide, ...rest } = flags;
  return retryCommand({ kind: 'force' }, { ...run, ...rest, ...(guide === 'on' ? { guide: true } : {}) });
}

/** What a continued SFT run's finish message adds: GRPO is the user's to start again, from the new run. */
export function sftMoreNext(from: string): string {
  return `Continued SFT from ${path.basename(from)}: start GRPO from this run (Train (GRPO)) to try the pre-screen again.`;
}
