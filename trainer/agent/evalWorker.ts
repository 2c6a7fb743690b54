// Evaluation on both cores: a worker thread evaluates a share of the tasks with its own
// tfjs backend and a copy of the model's weights while the calling thread evaluates the
// rest (greedy decoding gives the same rows either way). The messages of this boundary
// live here, beside both ends; the worker is the `eval-worker` esbuild entry, or this
// source under tsx in a development checkout.
import * as path from 'node:path';
import { Worker, isMainThread, workerData, parentPort } from 'node:worker_threads';
import { anyTokenizerFromJsonText } from '../../core/tokenizer';
import { type LoadedWorldId, loadedWorlds, parseWorldName, worldEnv, worldName, worldTemplates, type WorldTask } from '../../core/worlds';
import { TEMPLATES } from '../../core/grammar';
import type { Task } from '../../core/types';
import { AgentRuntime } from './agentRuntime';
import { initBackend } from '../model/backend';
import { EvalRow, evaluateTasks } from './eval';
import { ModelConfig, StackModel } from '../model/model';
import { flattenWeights, unflatten } from '../model/parallel';
import { modelPolicy, tokenizerCallMask } from './policy';
import { findWorkerScript } from '../model/workerScript';
import type { TeacherKnobs } from '../sft/recipes';

/** What the calling thread sends (once, as workerData). */
interface EvalShardRequest {
  agentLabEvalWorker: true;
  backend: 'wasm' | 'cpu';
  cfg: ModelConfig;
  flat: Float32Array;
  tokenizerJson: string;
  split: string;
  trainingKeys: string[];
  items: { task: Task; world: string }[];
  /** The user's worlds among the items (docs/worlds.md), each once: the items name them. */
  loadedWorlds: LoadedWorldId[];
  teacher: TeacherKnobs;
}

/** What the worker answers: tasks done so far (progress), then its rows or an error. */
type EvalShardReply = { type: 'progress'; done: number } | { type: 'rows'; rows: EvalRow[]; contaminated: number } | { type: 'error'; message: string };

/** Evaluates items of possibly several worlds, consecutive tasks of one world sharing its tools. */
export async function evaluateItems(
  runtimeFor: (items: readonly WorldTask[]) => AgentRuntime,
  items: readonly WorldTask[],
  split: string,
  trainingKeys: ReadonlySet<string>,
  onProgress: (done: number) => void,
  isCancelled: () => boolean,
  teacher: TeacherKnobs = {},
): Promise<{ rows: EvalRow[]; contaminated: number }> {
  const rows: EvalRow[] = [];
  let contaminated = 0;
  for (let i = 0; i < items.length && !isCancelled(); ) {
    const world = items[i]!.world;
    let j = i;
    while (j < items.length && worldName(items[j]!.world) === worldName(world)) j++;
    const env = worldEnv(world);
    const done = rows.length;
    const part = await evaluateTasks(
      runtimeFor(items.slice(i, j)),
      items.slice(i, j).map((x) => x.task),
      env,
      { split, world, trainingKeys, onProgress: (n) => onProgress(done + n), isCancelled, teacher },
    );
    rows.push(...part.rows);
    contaminated += part.summary.contaminated;
    i = j;
  }
  return { rows, contaminated };
}

/**
 * Starts a worker that evaluates `items` with a copy of `model`; null when no worker script
 * can be found (the caller then evaluates everything itself).
 */
export function startEvalShard(
  model: StackModel,
  tokenizerJson: string,
  backend: string,
  items: readonly WorldTask[],
  split: string,
  trainingKeys: ReadonlySet<string>,
  teacher: TeacherKnobs = {},
  onProgress: (done: number) => void = () => {},
): { result: Promise<{ rows: EvalRow[]; contaminated: number }>; stop: () => void } | null {
  const script = findWorkerScript('eval-worker', path.join('trainer', 'agent', 'evalWorker.ts'), __filename, __dirname);
  if (!script || (backend !== 'wasm' && backend !== 'cpu')) return null;
  const data: EvalShardRequest = {
    agentLabEvalWorker: true,
    backend,
    cfg: model.config,
    flat: flattenWeights(model),
    tokenizerJson,
    split,
    trainingKeys: [...trainingKeys],
    items: items.map((x) => ({ task: x.task, world: worldName(x.world) })),
    loadedWorlds: [...loadedWorlds(items.map((x) => x.world)).values()],
    teacher,
  };
  const worker = script.evalCode ? new Worker(script.evalCode, { eval: true, workerData: data }) : new Worker(script.file, { workerData: data });
  let stopped = false;
  const result = new Promise<{ rows: EvalRow[]; contaminated: number }>((resolve, reject) => {
    worker.on('message', (m: EvalShardReply) => {
      if (m.type === 'progress') return onProgress(m.done);
      void worker.terminate();
      if (m.type === 'rows') resolve({ rows: m.rows, contaminated: m.contaminated });
      else reject(new Error(`evaluation worker: ${m.message}`));
    });
    worker.once('error', (err) => reject(new Error(`evaluation worker: ${err.message}`)));
    worker.once('exit', (code) => {
      if (stopped) resolve({ rows: [], contaminated: 0 });
      else if (code !== 0) reject(new Error(`evaluation worker exited with code ${code}`));
    });
  });
  const stop = () => {
    stopped = true;
    void worker.terminate();
  };
  return { result, stop };
}

async function workerMain(req: EvalShardRequest): Promise<void> {
  try {
    await initBackend(req.backend);
    const loaded = loadedWorlds(req.loadedWorlds);
    const model = StackModel.fromWeights(req.cfg, unflatten(req.cfg, req.flat));
    const tokenizer = anyTokenizerFromJsonText(req.tokenizerJson);
    const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, worldEnv({ kind: 'seed', seed: 0 }), tokenizerCallMask(tokenizer));
    const items: WorldTask[] = req.items.map((x) => ({ task: x.task, world: parseWorldName(x.world, loaded) }));
    const out = await evaluateItems(
      (part) => {
        // A user's world may narrow the grammar (its tool list); the textbook's mask otherwise.
        const templates = worldTemplates(part[0]!.world);
        return new AgentRuntime(runtime.policy, tokenizer, worldEnv(part[0]!.world), templates === TEMPLATES ? runtime.mask : tokenizerCallMask(tokenizer, templates));
      },
      items,
      req.split,
      new Set(req.trainingKeys),
      (done) => parentPort!.postMessage({ type: 'progress', done } satisfies EvalShardReply),
      () => false,
      req.teacher,
    );
    model.dispose();
    parentPort!.postMessage({ type: 'rows', rows: out.rows, contaminated: out.contaminated } satisfies EvalShardReply);
  } catch (err) {
    parentPort!.postMessage({ type: 'error', message: (err as Error).message ?? String(err) } satisfies EvalShardReply);
  }
}

if (!isMainThread && (workerData as Partial<EvalShardRequest> | null)?.agentLabEvalWorker === true) {
  void workerMain(workerData as EvalShardRequest);
}
