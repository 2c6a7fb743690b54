// Checkpoints: weights and optimizer state, written atomically, in safetensors.
//
// Layout (docs/architecture.md, "The run folder"):
//   <run>/checkpoints/step-<N>/model.safetensors      the weights (F32, names and shapes of
//                                                      trainer/model/model.ts paramSpecs)
//   <run>/checkpoints/step-<N>/optimizer.safetensors  AdamW moments: "m.<name>", "v.<name>"
//   <run>/checkpoints/step-<N>/checkpoint.json        {"format", "step", "model" (ModelConfig),
//                                                      "optimizer" (t, lr, betas, ...), "extra"}
//   A LoRA run's checkpoint (trainer/model/lora.ts) holds the adapters only (layers.N.<target>.lora_A
//   [r, in], .lora_B [out, r]), the trained rows where the base's tokenizer gained tokens
//   (tok_embeddings.rows [n, d], an untied head's lm_head.rows) and their moments;
//   checkpoint.json adds "lora" {r, alpha, targets, trainedRows?: [ids], base: {dir, files:
//   [{name, bytes, mtimeMs}]}}: loading it reads the base folder (refused when its files
//   changed), appends the added rows, and returns the merged weights, so eval, run, export
//   and GRPO read it as any checkpoint.
//   <run>/checkpoints/latest                           a text file: the name of the newest
//                                                      complete checkpoint ("step-<N>\n")
// A checkpoint is written into a hidden temporary folder (".tmp-step-<N>-<pid>-<time>"),
// every file fsynced, then the folder is renamed to step-<N>, then `latest` is replaced
// (write + rename). A crash at any moment leaves `latest` naming a complete checkpoint;
// leftovers are hidden temporary folders that readers ignore and the next save removes.
//
// safetensors (https://github.com/huggingface/safetensors): 8 bytes little-endian u64 N,
// N bytes of JSON header {"__metadata__": {string: string}, name: {"dtype": "F32", "shape":
// [...], "data_offsets": [begin, end]}} (offsets into the data area, header padded with
// spaces to a multiple of 8), then the raw little-endian data. Readable by Python's
// `safetensors.numpy.load_file` / `safetensors.torch.load_file`; the weights are [in, out]
// (y = x @ W), i.e. the transpose of torch.nn.Linear's weight.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { INPUT_LIMITS, InputError, exists, readInputBytes, readInputObject, writeFileAtomic } from '../../store/files';
import { ModelConfig, StackModel, paramSpecs, validateConfig } from '../model/model';
import type { AdamState, OptimConfig, ResolvedOptim, Trainer } from '../model/optim';
import { LoraBase, LoraModel, LoraSpec, baseChanged, checkLoraRecord, loraParamSpecs, mergeLora, trainedRowRange } from '../model/lora';
import { loadHfFolder, withAddedRows } from '../hf/hfModel';
import { isObj } from '../../core/protocol/isObj';
import { CHECKPOINT_INFO_FILE, CHECKPOINTS_DIR, LATEST_POINTER, OPTIMIZER_FILE, WEIGHTS_FILE } from '../../core/protocol/folders';

export const CHECKPOINT_FORMAT = 'agent-lab-stack/1';

// ---- safetensors ----------------------------------------------------------------------

export interface SafeTensor {
  dtype: 'F32' | 'I32';
  shape: number[];
  data: Float32Array | Int32Array;
}

/** Encode tensors (in the given order) and string metadata as safetensors bytes. */
export function encodeSafetensors(tensors: Record<string, SafeTensor>, metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header['__metadata__'] = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`safetensors: ${name} has ${t.data.length} values for shape [${t.shape}]`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const pad = (8 - (Buffer.byteLength(json) % 8)) % 8;
  json += ' '.repeat(pad);
  const headerBytes = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + headerBytes.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let pos = 8 + headerBytes.length;
  const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  for (const t of Object.values(tensors)) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    out.set(bytes, pos);
    if (!littleEndian) for (let i = pos; i < pos + bytes.length; i += 4) out.subarray(i, i + 4).reverse();
    pos += bytes.length;
  }
  return out;
}

/** Decode safetensors bytes (F32 and I32 tensors). The arrays are copies. Every header field is checked. */
export function decodeSafetensors(bytes: Uint8Array): { tensors: Record<string, SafeTensor>; metadata: Record<string, string> } {
  if (bytes.length < 8) throw new Error('safetensors: file too short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (!(n > 0) || 8 + n > bytes.length) throw new Error('safetensors: bad header length');
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + 8, n).toString('utf8')) as unknown;
  } catch (err) {
    throw new Error(`safetensors: header is not JSON: ${(err as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new Error('safetensors: the header is not a JSON object');
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  const tensors: Record<string, SafeTensor> = {};
  let metadata: Record<string, string> = {};
  const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
  for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('safetensors: __metadata__ is not an object');
      metadata = Object.fromEntries(Object.entries(value as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string'));
      continue;
    }
    if (typeof value !== 'object' || value === null) throw new Error(`safetensors: ${name}: the entry is not an object`);
    const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (v.dtype !== 'F32' && v.dtype !== 'I32') throw new Error(`safetensors: ${name}: dtype ${JSON.stringify(v.dtype)} is not supported (F32, I32)`);
    if (!Array.isArray(v.shape) || !v.shape.every(isCount)) throw new Error(`safetensors: ${name}: shape ${JSON.stringify(v.shape)} is not a list of sizes`);
    if (!Array.isArray(v.data_offsets) || v.data_offsets.length !== 2 || !v.data_offsets.every(isCount)) {
      throw new Error(`safetensors: ${name}: data_offsets ${JSON.stringify(v.data_offsets)} is not [begin, end]`);
    }
    const shape = v.shape as number[];
    const [b, e] = v.data_offsets as [number, number];
    const count = shape.reduce((a, c) => a * c, 1);
    if (!(b <= e && e <= dataLen && e - b === count * 4)) throw new Error(`safetensors: ${name}: data offsets [${b}, ${e}] do not fit shape [${shape}] in ${dataLen} bytes of data`);
    const copy = new Uint8Array(bytes.subarray(dataStart + b, dataStart + e));
    const data = v.dtype === 'F32' ? new Float32Array(copy.buffer) : new Int32Array(copy.buffer);
    tensors[name] = { dtype: v.dtype, shape, data };
  }
  return { tensors, metadata };
}

/** How many values of `a` are NaN or infinite (0: all finite). */
export function countNonFinite(a: Float32Array): number {
  let bad = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    if (x !== x || x === Infinity || x === -Infinity) bad++;
  }
  return bad;
}

/** The first weight holding NaN or Inf, or null when every value is finite. */
export function firstNonFinite(weights: Record<string, Float32Array>): { name: string; count: number } | null {
  for (const [name, a] of Object.entries(weights)) {
    const count = countNonFinite(a);
    if (count > 0) return { name, count };
  }
  return null;
}

/** A checkpoint would hold NaN or Inf weights: it is not written (the last good one stays `latest`). */
export class NonFiniteWeightsError extends Error {
  constructor(
    readonly step: number,
    readonly weight: string,
    readonly count: number,
  ) {
    super(`not writing checkpoint step-${step}: weight ${weight} holds ${count} NaN/Inf values (the last good checkpoint stays latest)`);
    this.name = 'NonFiniteWeightsError';
  }
}

// ---- checkpoints ----------------------------------------------------------------------

export interface CheckpointInfo {
  format: string;
  step: number;
  model: ModelConfig;
  optimizer: (Omit<ResolvedOptim, 'totalSteps'> & { totalSteps: number | null; t: number }) | null;
  /** Whatever the caller passed (recipe, data position, metrics so far...). */
  extra: Record<string, unknown>;
  /** A LoRA run's: the adapters' spec (with the trained rows' ids) and the frozen base they adapt. */
  lora?: LoraSpec & { base: LoraBase };
  savedAt: string;
}

export interface LoadedCheckpoint {
  dir: string;
  name: string;
  step: number;
  config: ModelConfig;
  weights: Record<string, Float32Array>;
  /** Null when the checkpoint holds no optimizer state. */
  optimizer: AdamState | null;
  info: CheckpointInfo;
  extra: Record<string, unknown>;
  /**
   * A LoRA checkpoint: `weights` are the merged ones; here the spec, the base, the adapters
   * and trained rows (what `optimizer` holds moments of) and the base's own weights, with
   * the added rows at withAddedRows' mean (to train on from them).
   */
  lora?: { spec: LoraSpec; base: LoraBase; adapters: Record<string, Float32Array>; baseWeights: Record<string, Float32Array> };
}

export function checkpointsDir(runDir: string): string {
  return path.join(runDir, CHECKPOINTS_DIR);
}

function fsyncPath(p: string): void {
  let fd: number | null = null;
  try {
    fd = fs.openSync(p, 'r');
    fs.fsyncSync(fd);
  } catch {
    /* directories cannot be fsynced on every platform; best effort */
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

function writeSynced(file: string, data: Uint8Array | string): void {
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeFileSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Test hook: called after each file of a checkpoint is written (e.g. to simulate a kill). */
export const checkpointHooks: { afterFile?: (file: string) => void } = {};

/**
 * Save model weights, the trainer's optimizer state (when a trainer is given) and `extra`
 * as checkpoints/step-<step>, then point `latest` at it. Returns the checkpoint folder.
 */
export async function saveCheckpoint(
  runDir: string,
  step: number,
  model: StackModel | LoraModel,
  trainer: Trainer | null,
  extra: Record<string, unknown> = {},
): Promise<string> {
  if (!Number.isInteger(step) || step < 0) throw new Error(`checkpoint step must be a non-negative integer (got ${step})`);
  const root = checkpointsDir(runDir);
  await fs.promises.mkdir(root, { recursive: true });
  // Remove leftovers of interrupted saves.
  for (const name of await fs.promises.readdir(root)) {
    if (name.startsWith('.tmp-')) await fs.promises.rm(path.join(root, name), { recursive: true, force: true });
  }
  const cfg = model.config;
  const weights = await model.exportWeightsAsync(); // (webgpu reads back asynchronously only)
  const bad = firstNonFinite(weights);
  if (bad) throw new NonFiniteWeightsError(step, bad.name, bad.count);
  const name = `step-${step}`;
  const tmp = path.join(root, `.tmp-${name}-${process.pid}-${Date.now()}`);
  await fs.promises.mkdir(tmp);
  const specs = model.paramSpecs();
  const lora = model instanceof LoraModel ? { ...model.spec, base: model.base } : undefined;
  const wt: Record<string, SafeTensor> = {};
  for (const s of specs) wt[s.name] = { dtype: 'F32', shape: s.shape, data: weights[s.name]! };
  const meta = { format: CHECKPOINT_FORMAT, step: String(step), model: JSON.stringify(cfg) };
  writeSynced(path.join(tmp, WEIGHTS_FILE), encodeSafetensors(wt, meta));
  checkpointHooks.afterFile?.(path.join(tmp, WEIGHTS_FILE));
  let optimizer: CheckpointInfo['optimizer'] = null;
  if (trainer) {
    const st = await trainer.exportStateAsync();
    const ot: Record<string, SafeTensor> = {};
    for (const s of specs) {
      ot[`m.${s.name}`] = { dtype: 'F32', shape: s.shape, data: st.m[s.name]! };
      ot[`v.${s.name}`] = { dtype: 'F32', shape: s.shape, data: st.v[s.name]! };
    }
    writeSynced(path.join(tmp, OPTIMIZER_FILE), encodeSafetensors(ot, { format: CHECKPOINT_FORMAT, t: String(st.t) }));
    checkpointHooks.afterFile?.(path.join(tmp, OPTIMIZER_FILE));
    optimizer = { ...trainer.optim, t: st.t };
  }
  const info: CheckpointInfo = { format: CHECKPOINT_FORMAT, step, model: cfg, optimizer, extra, ...(lora ? { lora } : {}), savedAt: new Date().toISOString() };
  writeSynced(path.join(tmp, CHECKPOINT_INFO_FILE), JSON.stringify(info, null, 2) + '\n');
  checkpointHooks.afterFile?.(path.join(tmp, CHECKPOINT_INFO_FILE));
  fsyncPath(tmp);
  const final = path.join(root, name);
  if (fs.existsSync(final)) {
    // Re-saving a step (e.g. after a resume): move the old one aside first.
    const old = path.join(root, `.tmp-old-${name}-${process.pid}-${Date.now()}`);
    await fs.promises.rename(final, old);
    await fs.promises.rename(tmp, final);
    await fs.promises.rm(old, { recursive: true, force: true });
  } else {
    await fs.promises.rename(tmp, final);
  }
  fsyncPath(root);
  checkpointHooks.afterFile?.(final);
  writeFileAtomic(path.join(root, LATEST_POINTER), `${name}\n`);
  return final;
}

/** Every complete checkpoint folder (checkpoint.json present), oldest first, committed or not. */
function completeCheckpoints(runDir: string): { name: string; step: number }[] {
  const root = checkpointsDir(runDir);
  let names: string[];
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  return names
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null && exists(path.join(root, m[0], CHECKPOINT_INFO_FILE)))
    .map((m) => ({ name: m[0], step: Number(m[1]) }))
    .sort((a, b) => a.step - b.step);
}

/** The checkpoint the `latest` file names when it names a complete one; null otherwise. */
function committedLatest(runDir: string): { name: string; step: number } | null {
  const root = checkpointsDir(runDir);
  let name: string;
  try {
    name = readInputBytes(path.join(root, LATEST_POINTER), 'the latest pointer', 4096).toString('utf8').trim();
  } catch {
    return null; // no pointer yet, or not a readable file
  }
  if (/^step-\d+$/.test(name) && exists(path.join(root, name, CHECKPOINT_INFO_FILE))) return { name, step: Number(name.slice(5)) };
  return null;
}

/**
 * Complete checkpoints of a run, oldest first: [{name, step}]. `latest` is the commit
 * point: a checkpoint folder of a later step than the one it names was renamed into place
 * by a save that was killed before it updated `latest`, and is not listed.
 */
export function listCheckpoints(runDir: string): { name: string; step: number }[] {
  const all = completeCheckpoints(runDir);
  const latest = committedLatest(runDir);
  return latest ? all.filter((c) => c.step <= latest.step) : all;
}

/** The checkpoint `latest` names (falling back to the newest complete one); null when there is none. */
export function latestCheckpoint(runDir: string): string | null {
  const latest = committedLatest(runDir);
  if (latest) return latest.name;
  const all = completeCheckpoints(runDir);
  return all.length ? all[all.length - 1]!.name : null;
}


/** Load a checkpoint: 'latest' or 'step-<N>'. Throws an InputError (one line, the file and the problem) when there is none or it is damaged. */
export function loadCheckpoint(runDir: string, which: 'latest' | `step-${number}` | string = 'latest'): LoadedCheckpoint {
  const name = which === 'latest' ? latestCheckpoint(runDir) : which;
  if (!name) throw new InputError(`no checkpoint in ${checkpointsDir(runDir)}`);
  if (!/^step-\d+$/.test(name)) throw new InputError(`checkpoint name must be 'latest' or 'step-N' (got '${name}')`);
  const dir = path.join(checkpointsDir(runDir), name);
  const infoFile = path.join(dir, CHECKPOINT_INFO_FILE);
  if (!exists(infoFile)) {
    const have = listCheckpoints(runDir).map((c) => c.name);
    throw new InputError(`checkpoint ${dir}: missing checkpoint.json${have.length ? ` (this run has ${have.join(', ')})` : ''}`);
  }
  const latest = committedLatest(runDir);
  const step = Number(name.slice(5));
  if (latest && step > latest.step) {
    throw new InputError(`checkpoint ${dir} was written after the last committed checkpoint (${latest.name}): its save was interrupted, so it is not used`);
  }
  const fail = (what: string): never => {
    throw new InputError(`checkpoint ${dir}: ${what}`);
  };
  const raw = readInputObject(infoFile, 'the checkpoint info');
  if (raw['format'] !== CHECKPOINT_FORMAT) fail(`checkpoint.json: format ${JSON.stringify(raw['format'])} (expected '${CHECKPOINT_FORMAT}')`);
  if (!Number.isSafeInteger(raw['step']) || (raw['step'] as number) < 0) fail(`checkpoint.json: "step" must be a non-negative integer (got ${JSON.stringify(raw['step'])})`);
  if (raw['step'] !== step) fail(`checkpoint.json: "step" is ${String(raw['step'])} in the folder ${name}`);
  if (!isObj(raw['model'])) fail('checkpoint.json: "model" must be an object (the model config)');
  if (raw['extra'] !== undefined && !isObj(raw['extra'])) fail('checkpoint.json: "extra" must be an object');
  if (raw['optimizer'] !== null && raw['optimizer'] !== undefined && !isObj(raw['optimizer'])) fail('checkpoint.json: "optimizer" must be an object or null');
  const info = raw as unknown as CheckpointInfo;
  try {
    validateConfig(info.model);
  } catch (err) {
    fail(`checkpoint.json: ${(err as Error).message}`);
  }
  let lora: { spec: LoraSpec; base: LoraBase } | null = null;
  if (raw['lora'] !== undefined) {
    try {
      const spec = checkLoraRecord(raw['lora'], CHECKPOINT_INFO_FILE);
      const b = (raw['lora'] as Record<string, unknown>)['base'];
      const files = isObj(b) ? b['files'] : undefined;
      if (!isObj(b) || typeof b['dir'] !== 'string' || !Array.isArray(files) || !files.every((f) => isObj(f) && typeof f['name'] === 'string' && Number.isSafeInteger(f['bytes']) && typeof f['mtimeMs'] === 'number')) {
        throw new Error('checkpoint.json: "lora.base" must be {"dir", "files": [{"name", "bytes", "mtimeMs"}]}');
      }
      lora = { spec, base: { dir: b['dir'] as string, files: files as LoraBase['files'] } };
      trainedRowRange(info.model, spec); // the trained rows must be the model's last ones
    } catch (err) {
      fail((err as Error).message);
    }
  }
  const specs = lora ? loraParamSpecs(info.model, lora.spec) : paramSpecs(info.model);
  const tensorsOf = (file: string): ReturnType<typeof decodeSafetensors> => {
    const bytes = readInputBytes(path.join(dir, file), `the ${file === WEIGHTS_FILE ? 'weights' : 'optimizer state'}`, INPUT_LIMITS.tensors);
    try {
      return decodeSafetensors(bytes);
    } catch (err) {
      return fail(`${file}: ${(err as Error).message}`);
    }
  };
  const w = tensorsOf(WEIGHTS_FILE);
  let weights: Record<string, Float32Array> = {};
  for (const s of specs) {
    const t = w.tensors[s.name];
    if (!t || t.dtype !== 'F32' || t.shape.join() !== s.shape.join()) fail(`model.safetensors: weight ${s.name} missing or of the wrong shape (the ${lora ? 'LoRA spec' : 'model config'} in checkpoint.json wants [${s.shape}])`);
    weights[s.name] = t!.data as Float32Array;
  }
  const bad = firstNonFinite(weights);
  if (bad) {
    const earlier = listCheckpoints(runDir).filter((c) => c.step < step).map((c) => c.name);
    fail(
      `model.safetensors: weight ${bad.name} holds ${bad.count} NaN/Inf values: the run diverged before this checkpoint was written` +
        (earlier.length ? `; an earlier checkpoint may be good (--checkpoint ${earlier[earlier.length - 1]})` : ''),
    );
  }
  let optimizer: AdamState | null = null;
  if (info.optimizer) {
    const t = info.optimizer.t;
    if (!Number.isSafeInteger(t) || t < 0) fail(`checkpoint.json: optimizer.t must be a non-negative integer (got ${JSON.stringify(t)})`);
    for (const k of ['lr', 'eps', 'weightDecay', 'clip', 'warmupSteps', 'minLrRatio'] as const) {
      const v = (info.optimizer as unknown as Record<string, unknown>)[k];
      if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v))) fail(`checkpoint.json: optimizer.${k} must be a finite number (got ${JSON.stringify(v)})`);
    }
    const betas = info.optimizer.betas as unknown;
    if (betas !== undefined && !(Array.isArray(betas) && betas.length === 2 && betas.every((b) => typeof b === 'number' && Number.isFinite(b)))) {
      fail(`checkpoint.json: optimizer.betas must be two numbers (got ${JSON.stringify(betas)})`);
    }
    const o = tensorsOf(OPTIMIZER_FILE);
    const m: Record<string, Float32Array> = {};
    const v: Record<string, Float32Array> = {};
    for (const s of specs) {
      const mt = o.tensors[`m.${s.name}`];
      const vt = o.tensors[`v.${s.name}`];
      if (!mt || !vt || mt.dtype !== 'F32' || vt.dtype !== 'F32' || mt.shape.join() !== s.shape.join() || vt.shape.join() !== s.shape.join()) {
        fail(`optimizer.safetensors: optimizer state for ${s.name} missing or of the wrong shape`);
      }
      m[s.name] = mt!.data as Float32Array;
      v[s.name] = vt!.data as Float32Array;
    }
    const badM = firstNonFinite(m) ?? firstNonFinite(v);
    if (badM) fail(`optimizer.safetensors: the AdamW state of ${badM.name} holds ${badM.count} NaN/Inf values`);
    for (const [k, a] of Object.entries(v)) if (a.some((x) => x < 0)) fail(`optimizer.safetensors: the second moment of ${k} holds negative values`);
    const tMeta = Number(o.metadata['t'] ?? t);
    optimizer = { t: Number.isSafeInteger(tMeta) && tMeta >= 0 ? tMeta : t, m, v };
  }
  let loraOut: LoadedCheckpoint['lora'];
  if (lora) {
    // The adapters mean something only on the weights they were trained on.
    const changed = baseChanged(lora.base);
    if (changed) fail(`its LoRA base changed since the run trained on it (${changed}): the adapters were trained on the old weights; put that folder back as it was`);
    const folder = loadHfFolder(lora.base.dir);
    // Trained rows were added after the base's vocabulary: the base has exactly the rows before them.
    const rows = trainedRowRange(info.model, lora.spec);
    const want = paramSpecs(info.model);
    const rowsWithAdded = rows && folder.model.vocab === rows.first ? info.model.vocab : folder.model.vocab;
    const got = paramSpecs({ ...folder.model, vocab: rowsWithAdded });
    if (JSON.stringify(want) !== JSON.stringify(got)) fail(`its LoRA base ${lora.base.dir} is not the model checkpoint.json describes`);
    const baseWeights = rows ? withAddedRows(folder.model, folder.weights, info.model.vocab) : folder.weights;
    loraOut = { spec: lora.spec, base: lora.base, adapters: weights, baseWeights };
    weights = mergeLora(info.model, baseWeights, lora.spec, weights);
  }
  return { dir, name, step, config: info.model, weights, optimizer, info, extra: info.extra ?? {}, ...(loraOut ? { lora: loraOut } : {}) };
}

/**
 * Delete all but the newest `keep` complete checkpoints, never the one `latest` names nor
 * any in `protect` (e.g. the checkpoints an evaluation used). Returns the removed names.
 */
export function pruneCheckpoints(runDir: string, keep: number, protect: ReadonlySet<string> = new Set()): string[] {
  if (!(keep >= 1)) return [];
  const all = listCheckpoints(runDir);
  const latest = latestCheckpoint(runDir);
  const removed: string[] = [];
  for (const c of all.slice(0, Math.max(0, all.length - keep))) {
    if (c.name === latest || protect.has(c.name)) continue;
    fs.rmSync(path.join(checkpointsDir(runDir), c.name), { recursive: true, force: true });
    removed.push(c.name);
  }
  return removed;
}

/**
 * Resume: a model with the checkpoint's weights. Restore the optimizer with
 * `new Trainer(model, optimConfigOf(ck) ?? yours)` then `trainer.importState(ck.optimizer)`.
 */
export function restoreModel(ck: LoadedCheckpoint): StackModel {
  return StackModel.fromWeights(ck.config, ck.weights);
}

/** The optimiser settings a checkpoint was trained with (null when it holds none). */
export function optimConfigOf(ck: LoadedCheckpoint): OptimConfig | null {
  const o = ck.info.optimizer;
  if (!o) return null;
  return {
    lr: o.lr,
    betas: o.betas,
    eps: o.eps,
    weightDecay: o.weightDecay,
    clip: o.clip,
    warmupSteps: o.warmupSteps,
    ...(o.totalSteps !== null ? { totalSteps: o.totalSteps } : {}),
    schedule: o.schedule,
    minLrRatio: o.minLrRatio,
  };
}
