// Checkpoints: weights and optimizer state, written atomically, in safetensors.
//
// Layout (DESIGN.md, "The run folder"):
//   <run>/checkpoints/step-<N>/model.safetensors      the weights (F32, names and shapes of
//                                                      trainer/model.ts paramSpecs)
//   <run>/checkpoints/step-<N>/optimizer.safetensors  AdamW moments: "m.<name>", "v.<name>"
//   <run>/checkpoints/step-<N>/checkpoint.json        {"format", "step", "model" (ModelConfig),
//                                                      "optimizer" (t, lr, betas, ...), "extra"}
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
import { writeFileAtomic } from './files';
import { ModelConfig, StackModel, paramSpecs, validateConfig } from './model';
import type { AdamState, OptimConfig, ResolvedOptim, Trainer } from './optim';

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

/** Decode safetensors bytes (F32 and I32 tensors). The arrays are copies. */
export function decodeSafetensors(bytes: Uint8Array): { tensors: Record<string, SafeTensor>; metadata: Record<string, string> } {
  if (bytes.length < 8) throw new Error('safetensors: file too short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (!(n > 0) || 8 + n > bytes.length) throw new Error('safetensors: bad header length');
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + 8, n).toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`safetensors: header is not JSON: ${(err as Error).message}`);
  }
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  const tensors: Record<string, SafeTensor> = {};
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = value as Record<string, string>;
      continue;
    }
    const v = value as { dtype: string; shape: number[]; data_offsets: [number, number] };
    if (v.dtype !== 'F32' && v.dtype !== 'I32') throw new Error(`safetensors: ${name}: dtype ${v.dtype} is not supported (F32, I32)`);
    const [b, e] = v.data_offsets;
    const count = v.shape.reduce((a, c) => a * c, 1);
    if (!(b >= 0 && e <= dataLen && e - b === count * 4)) throw new Error(`safetensors: ${name}: data offsets [${b}, ${e}] do not fit shape [${v.shape}]`);
    const copy = new Uint8Array(bytes.subarray(dataStart + b, dataStart + e));
    const data = v.dtype === 'F32' ? new Float32Array(copy.buffer) : new Int32Array(copy.buffer);
    tensors[name] = { dtype: v.dtype, shape: v.shape, data };
  }
  return { tensors, metadata };
}

// ---- checkpoints ----------------------------------------------------------------------

export interface CheckpointInfo {
  format: string;
  step: number;
  model: ModelConfig;
  optimizer: (Omit<ResolvedOptim, 'totalSteps'> & { totalSteps: number | null; t: number }) | null;
  /** Whatever the caller passed (recipe, data position, metrics so far...). */
  extra: Record<string, unknown>;
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
}

export function checkpointsDir(runDir: string): string {
  return path.join(runDir, 'checkpoints');
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
  model: StackModel,
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
  const name = `step-${step}`;
  const tmp = path.join(root, `.tmp-${name}-${process.pid}-${Date.now()}`);
  await fs.promises.mkdir(tmp);
  const cfg = model.config;
  const weights = await model.exportWeightsAsync(); // (webgpu reads back asynchronously only)
  const wt: Record<string, SafeTensor> = {};
  for (const s of paramSpecs(cfg)) wt[s.name] = { dtype: 'F32', shape: s.shape, data: weights[s.name]! };
  const meta = { format: CHECKPOINT_FORMAT, step: String(step), model: JSON.stringify(cfg) };
  writeSynced(path.join(tmp, 'model.safetensors'), encodeSafetensors(wt, meta));
  checkpointHooks.afterFile?.(path.join(tmp, 'model.safetensors'));
  let optimizer: CheckpointInfo['optimizer'] = null;
  if (trainer) {
    const st = await trainer.exportStateAsync();
    const ot: Record<string, SafeTensor> = {};
    for (const s of paramSpecs(cfg)) {
      ot[`m.${s.name}`] = { dtype: 'F32', shape: s.shape, data: st.m[s.name]! };
      ot[`v.${s.name}`] = { dtype: 'F32', shape: s.shape, data: st.v[s.name]! };
    }
    writeSynced(path.join(tmp, 'optimizer.safetensors'), encodeSafetensors(ot, { format: CHECKPOINT_FORMAT, t: String(st.t) }));
    checkpointHooks.afterFile?.(path.join(tmp, 'optimizer.safetensors'));
    optimizer = { ...trainer.optim, t: st.t };
  }
  const info: CheckpointInfo = { format: CHECKPOINT_FORMAT, step, model: cfg, optimizer, extra, savedAt: new Date().toISOString() };
  writeSynced(path.join(tmp, 'checkpoint.json'), JSON.stringify(info, null, 2) + '\n');
  checkpointHooks.afterFile?.(path.join(tmp, 'checkpoint.json'));
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
  writeFileAtomic(path.join(root, 'latest'), `${name}\n`);
  return final;
}

/** Complete checkpoints of a run, oldest first: [{name, step}]. */
export function listCheckpoints(runDir: string): { name: string; step: number }[] {
  const root = checkpointsDir(runDir);
  let names: string[];
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  return names
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null && fs.existsSync(path.join(root, m[0], 'checkpoint.json')))
    .map((m) => ({ name: m[0], step: Number(m[1]) }))
    .sort((a, b) => a.step - b.step);
}

/** The checkpoint `latest` names (falling back to the newest complete one); null when there is none. */
export function latestCheckpoint(runDir: string): string | null {
  const root = checkpointsDir(runDir);
  try {
    const name = fs.readFileSync(path.join(root, 'latest'), 'utf8').trim();
    if (/^step-\d+$/.test(name) && fs.existsSync(path.join(root, name, 'checkpoint.json'))) return name;
  } catch {
    /* no pointer yet */
  }
  const all = listCheckpoints(runDir);
  return all.length ? all[all.length - 1]!.name : null;
}

/** Load a checkpoint: 'latest' or 'step-<N>'. Throws when there is none or it is damaged. */
export function loadCheckpoint(runDir: string, which: 'latest' | `step-${number}` | string = 'latest'): LoadedCheckpoint {
  const name = which === 'latest' ? latestCheckpoint(runDir) : which;
  if (!name) throw new Error(`no checkpoint in ${checkpointsDir(runDir)}`);
  if (!/^step-\d+$/.test(name)) throw new Error(`checkpoint name must be 'latest' or 'step-N' (got '${name}')`);
  const dir = path.join(checkpointsDir(runDir), name);
  let info: CheckpointInfo;
  try {
    info = JSON.parse(fs.readFileSync(path.join(dir, 'checkpoint.json'), 'utf8')) as CheckpointInfo;
  } catch (err) {
    throw new Error(`checkpoint ${dir}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable'} checkpoint.json`);
  }
  if (info.format !== CHECKPOINT_FORMAT) throw new Error(`checkpoint ${dir}: format '${info.format}' (expected '${CHECKPOINT_FORMAT}')`);
  validateConfig(info.model);
  const specs = paramSpecs(info.model);
  const w = decodeSafetensors(fs.readFileSync(path.join(dir, 'model.safetensors')));
  const weights: Record<string, Float32Array> = {};
  for (const s of specs) {
    const t = w.tensors[s.name];
    if (!t || t.dtype !== 'F32' || t.shape.join() !== s.shape.join()) throw new Error(`checkpoint ${dir}: weight ${s.name} missing or of the wrong shape`);
    weights[s.name] = t.data as Float32Array;
  }
  let optimizer: AdamState | null = null;
  if (info.optimizer) {
    const o = decodeSafetensors(fs.readFileSync(path.join(dir, 'optimizer.safetensors')));
    const m: Record<string, Float32Array> = {};
    const v: Record<string, Float32Array> = {};
    for (const s of specs) {
      const mt = o.tensors[`m.${s.name}`];
      const vt = o.tensors[`v.${s.name}`];
      if (!mt || !vt) throw new Error(`checkpoint ${dir}: optimizer state for ${s.name} missing`);
      m[s.name] = mt.data as Float32Array;
      v[s.name] = vt.data as Float32Array;
    }
    optimizer = { t: Number(o.metadata['t'] ?? info.optimizer.t), m, v };
  }
  return { dir, name, step: info.step, config: info.model, weights, optimizer, info, extra: info.extra ?? {} };
}

/** Delete all but the newest `keep` complete checkpoints (never the one `latest` names). */
export function pruneCheckpoints(runDir: string, keep: number): string[] {
  const all = listCheckpoints(runDir);
  const latest = latestCheckpoint(runDir);
  const removed: string[] = [];
  for (const c of all.slice(0, Math.max(0, all.length - keep))) {
    if (c.name === latest) continue;
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
