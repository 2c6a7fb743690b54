// Guards the training and evaluation jobs share (issue 11, "no data loss, no hangs, no
// stack traces"): run configs read and checked with one-line errors, the model built from
// the checkpoint's validated header (config.json must agree), resume state checked,
// divergence (consecutive non-finite steps) stopped with the last good checkpoint kept,
// and old checkpoints pruned. The decisions are in docs/decisions.md, "Hardening (issue 11)".
import * as path from 'node:path';
import { type Tokenizer, tokenizerHash } from '../../core/tokenizer';
import { LoadedCheckpoint, NonFiniteWeightsError, latestCheckpoint, pruneCheckpoints } from './checkpoint';
import { InputError, exists, readInputObject, readInputText } from '../../store/files';
import { DataOrderState, dataOrderStateProblem } from '../sft/dataOrder';
import { ModelConfig, StackModel, validateConfig } from '../model/model';
import { parseMetrics } from '../../store/runStore';
import { isObj } from '../../core/protocol/isObj';
import { grpoConfigProblem } from '../../core/protocol/grpoOptions';
import { sftConfigProblem } from '../../core/protocol/sftOptions';
import { CONFIG_FILE, METRICS_FILE, TOKENIZER_FILE } from '../../core/protocol/folders';

/** Consecutive steps with a non-finite loss or gradient after which a run stops. */
export const MAX_NONFINITE_STEPS = 10;
/** Complete checkpoints a training run keeps by default (0: keep all). */
export const DEFAULT_KEEP_CHECKPOINTS = 5;

/** A run stopped because its numbers stopped being numbers (exit 1). */
export class TrainingDiverged extends InputError {
  constructor(message: string) {
    super(message);
    this.name = 'TrainingDiverged';
  }
}


// ---- run configs ----------------------------------------------------------------------

/** config.json of a run folder, or null when there is none; a damaged one is an InputError. */
export function readRunConfig(runDir: string): { file: string; config: Record<string, unknown> } | null {
  const file = path.join(runDir, CONFIG_FILE);
  if (!exists(file)) return null;
  return { file, config: readInputObject(file, 'the run config') };
}

/**
 * The run's tokenizer.json must be the one it was trained with (config.json's `tokenizer.sha256`):
 * a vocabulary of the same size with other ids would load and answer in nonsense.
 */
export function checkRunTokenizer(config: Record<string, unknown>, file: string, tokenizer: Tokenizer): void {
  const recorded = (config['tokenizer'] as { sha256?: unknown } | undefined)?.sha256;
  if (typeof recorded !== 'string') return; // runs from before the record
  const actual = tokenizerHash(tokenizer);
  if (actual !== recorded) {
    throw new InputError(`${path.join(path.dirname(file), TOKENIZER_FILE)} is not the tokenizer this run was trained with (${path.basename(file)} records sha256 ${recorded.slice(0, 12)}..., the file has ${actual.slice(0, 12)}...): restore the run's own tokenizer.json`);
  }
}

/** The `model` of a config.json, validated; null when it has none. */
export function configModel(config: Record<string, unknown>, file: string): ModelConfig | null {
  const m = config['model'];
  if (m === undefined || m === null) return null;
  if (!isObj(m)) throw new InputError(`${file}: "model" must be an object (the model config)`);
  try {
    validateConfig(m as unknown as ModelConfig);
  } catch (err) {
    throw new InputError(`${file}: ${(err as Error).message}`);
  }
  return m as unknown as ModelConfig;
}

/** Checks the fields a resumed SFT run reads back from its config.json: the table's options by their rows, the composite records here. */
export function checkSftConfig(c: Record<string, unknown>, file: string): void {
  const fail = (what: string): never => {
    throw new InputError(`${file}: ${what}`);
  };
  const problem = sftConfigProblem(c);
  if (problem) fail(problem);
  const recipe = c['recipe'];
  if (!isObj(recipe) || typeof recipe['name'] !== 'string' || !Array.isArray(recipe['curriculum']) || recipe['curriculum'].length === 0) {
    fail('"recipe" must be a recipe object with a name and a curriculum');
  }
  const backend = c['backend'];
  if (backend !== undefined && (!isObj(backend) || typeof backend['asked'] !== 'string')) fail('"backend" must be {"asked": ..., "used": ...}');
}

/** Checks the fields a resumed GRPO run reads back from its config.json. */
export function checkGrpoConfig(c: Record<string, unknown>, file: string): void {
  const fail = (what: string): never => {
    throw new InputError(`${file}: ${what}`);
  };
  const from = c['from'];
  if (!isObj(from) || typeof from['run'] !== 'string' || !Number.isSafeInteger(from['step'])) fail('"from" must be {"run": SFT_RUN, "checkpoint": ..., "step": N}');
  const g = c['grpo'];
  if (!isObj(g)) fail('"grpo" must be the object of GRPO settings');
  // Each setting by its row of the GRPO option table.
  const problem = grpoConfigProblem(g as Record<string, unknown>);
  if (problem) fail(problem);
  const budget = c['budget'];
  if (!isObj(budget) || (budget['steps'] === undefined && budget['minutes'] === undefined)) fail('"budget" must be {"steps": N} or {"minutes": M}');
  if (c['seed'] !== undefined && !Number.isSafeInteger(c['seed'])) fail('"seed" must be an integer');
}

/** Settings a resume keeps from the run's config.json whatever the command line says: the ones given are named (warn or refuse). */
export function ignoredOnResume(given: Record<string, unknown>, names: readonly string[]): string[] {
  return names.filter((n) => given[n] !== undefined);
}

// ---- checkpoints ------------------------------------------------------------------------

const dims = (m: ModelConfig): string =>
  `vocab ${m.vocab}, dModel ${m.dModel}, layers ${m.layers}, heads ${m.heads}/${m.kvHeads}, mlp ${m.mlp}, maxSeq ${m.maxSeq}`;
const sameModel = (a: ModelConfig, b: ModelConfig): boolean =>
  (['vocab', 'dModel', 'layers', 'heads', 'kvHeads', 'mlp', 'maxSeq', 'ropeBase'] as const).every((k) => a[k] === b[k]);

/**
 * The model of a checkpoint, built from its validated header (checkpoint.json, whose
 * shapes the weights were checked against). A `config.json` model that differs, or a
 * tokenizer with more tokens than the checkpoint has embedding rows, is refused: the
 * folder mixes two runs.
 */
export function checkpointModelConfig(ck: LoadedCheckpoint, expected: { model: ModelConfig | null; what: string } | null, tokenizer: Tokenizer | null): ModelConfig {
  if (expected?.model && !sameModel(expected.model, ck.config)) {
    throw new InputError(
      `${expected.what} describes a model (${dims(expected.model)}) that differs from checkpoint ${ck.dir}'s (${dims(ck.config)}): ` +
        'the folder mixes two runs; use the checkpoint with the config.json it was trained with',
    );
  }
  if (tokenizer && ck.config.vocab < tokenizer.vocabSize) {
    throw new InputError(`checkpoint ${ck.dir} has ${ck.config.vocab} embedding rows but the tokenizer has ${tokenizer.vocabSize} tokens: the tokenizer.json is not the one it was trained with`);
  }
  return ck.config;
}

/** The model of a checkpoint (see checkpointModelConfig), weights set. */
export function modelFromCheckpoint(ck: LoadedCheckpoint, expected: { model: ModelConfig | null; what: string } | null, tokenizer: Tokenizer | null): StackModel {
  return StackModel.fromWeights(checkpointModelConfig(ck, expected, tokenizer), ck.weights);
}

/** The resume state a training loop stored in a checkpoint's extra, checked (absent fields: null). */
export function resumeStateOf(ck: LoadedCheckpoint, key: string): { step: number; elapsed: number; rng: number | null; order: DataOrderState | null } {
  const st = ck.extra[key];
  if (st === undefined) return { step: ck.step, elapsed: 0, rng: null, order: null };
  const fail = (what: string): never => {
    throw new InputError(`checkpoint ${ck.dir}: checkpoint.json: extra.${key}.${what}`);
  };
  if (!isObj(st)) return fail(' must be an object');
  if (!Number.isSafeInteger(st['step']) || (st['step'] as number) < 0) fail(`step must be a non-negative integer (got ${JSON.stringify(st['step'])})`);
  if (st['elapsed'] !== undefined && (typeof st['elapsed'] !== 'number' || !Number.isFinite(st['elapsed']) || st['elapsed'] < 0)) fail('elapsed must be a number of seconds');
  if (st['rng'] !== undefined && !Number.isSafeInteger(st['rng'])) fail('rng must be an integer');
  const orderProblem = st['order'] === undefined ? null : dataOrderStateProblem(st['order']);
  if (orderProblem) fail(`order (the saved data order): ${orderProblem}`);
  return {
    step: st['step'] as number,
    elapsed: (st['elapsed'] as number | undefined) ?? 0,
    rng: (st['rng'] as number | undefined) ?? null,
    order: (st['order'] as DataOrderState | undefined) ?? null,
  };
}

/** Names of the checkpoints an evaluation recorded in metrics.jsonl used (pruning keeps them). */
export function checkpointsUsedByEvals(runDir: string): Set<string> {
  const file = path.join(runDir, METRICS_FILE);
  const out = new Set<string>();
  if (!exists(file)) return out;
  let text: string;
  try {
    text = readInputText(file, 'the metrics', 512 * 1024 * 1024, () => undefined);
  } catch {
    return out;
  }
  for (const line of parseMetrics(text).lines) {
    const l = line as Record<string, unknown>;
    if (l['phase'] !== 'eval') continue;
    if (typeof l['checkpoint'] === 'string' && /^step-\d+$/.test(l['checkpoint'])) out.add(l['checkpoint']);
    if (Number.isSafeInteger(l['step'])) out.add(`step-${l['step'] as number}`);
  }
  return out;
}

interface GuardHooks {
  log(level: 'info' | 'warn' | 'error', message: string): void;
}

/**
 * Saves a checkpoint through `save` unless the weights are not finite (then says so and
 * keeps the last good one as `latest`), then prunes to the newest `keep` (0: all), never the
 * one `latest` names nor one an evaluation used. Returns the folder, or null when not written.
 */
const warnedNonFinite = new Map<string, number>();

export async function saveGuarded(runDir: string, save: () => Promise<string>, hooks: GuardHooks, keep: number = DEFAULT_KEEP_CHECKPOINTS): Promise<string | null> {
  let dir: string;
  try {
    dir = await save();
  } catch (err) {
    if (err instanceof NonFiniteWeightsError) {
      // Once per step: a run saving every step would say it on every skipped step.
      if (warnedNonFinite.get(runDir) !== err.step) hooks.log('warn', `${err.message}${latestCheckpoint(runDir) ? ` (${latestCheckpoint(runDir)})` : ''}`);
      warnedNonFinite.set(runDir, err.step);
      return null;
    }
    throw err;
  }
  if (keep > 0) {
    const removed = pruneCheckpoints(runDir, keep, checkpointsUsedByEvals(runDir));
    if (removed.length) hooks.log('info', `pruned ${removed.length} old checkpoint(s) (keeping the newest ${keep}, latest and those an eval used): ${removed.join(', ')}`);
  }
  return dir;
}

/**
 * Stops a run whose updates keep failing: after `limit` consecutive steps with a non-finite
 * loss or gradient (the optimiser skips those updates, so the step count would never
 * advance) it throws TrainingDiverged naming the last good checkpoint.
 */
export class DivergenceGuard {
  private bad = 0;

  constructor(
    private readonly runDir: string,
    private readonly limit: number = MAX_NONFINITE_STEPS,
  ) {}

  /** The count of consecutive non-finite steps so far. */
  get consecutive(): number {
    return this.bad;
  }

  /** Call after each optimiser step. */
  observe(r: { loss: number; gradNorm: number; skipped?: boolean }, step: number): void {
    const finite = !r.skipped && Number.isFinite(r.loss) && Number.isFinite(r.gradNorm);
    this.bad = finite ? 0 : this.bad + 1;
    if (this.bad < this.limit) return;
    const last = latestCheckpoint(this.runDir);
    throw new TrainingDiverged(
      `training diverged: ${this.bad} consecutive steps had a non-finite loss or gradient (NaN/Inf) at step ${step}, so no update was applied; ` +
        `stopped without writing a checkpoint — ${last ? `the last good checkpoint is ${last} (latest)` : 'no checkpoint was written'}. ` +
        'Lower the learning rate, or evaluate or resume from an earlier checkpoint',
    );
  }
}
