// The tfjs backend: pick the best one that loads here, and say which one ran.
//
// Order for 'auto': @tensorflow/tfjs-node-gpu (CUDA), WebGPU on a hardware adapter (Dawn's
// node binding, the optional `webgpu` package, with @tensorflow/tfjs-backend-webgpu: any
// current GPU without CUDA), @tensorflow/tfjs-node (native libtensorflow, multi-threaded),
// wasm (XNNPACK, SIMD, one thread per JS thread), cpu (pure JS, ~100x slower than PyTorch:
// a last resort). A software WebGPU adapter (SwiftShader, lavapipe, WARP: a fallback
// adapter) is slower than wasm, so 'auto' passes it by; `webgpu` asked for by name takes
// it, and where Dawn finds no adapter at all it retries with the SwiftShader Vulkan driver
// that Chromium ships (how the tests run WebGPU on machines without a GPU).
// The native and GPU packages are optional dependencies; where they are absent (as on the
// lab's own machines for tfjs-node*) `require` fails fast. They are loaded with a run-time
// `require` that the bundler leaves alone, so a bundle never depends on them.
//
// WebGPU reads back asynchronously only (tfjs's `dataSync` there needs OffscreenCanvas,
// absent in Node): `canReadSync()` says so, and the trainer takes its async paths.
//
// The wasm binaries are read from `@tensorflow/tfjs-backend-wasm/dist/` next to the
// installed package (a bundle's own `__dirname` does not hold them); AGENT_LAB_WASM_DIR
// overrides the folder.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
// A named import: the package declares itself side-effect free, so a bare import would be
// dropped by the bundler and the cpu backend never registered.
import { version_cpu } from '@tensorflow/tfjs-backend-cpu';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { describeBlas, useBlasMatMul } from './blasMatMul';

export type BackendName = 'tfjs-node-gpu' | 'webgpu' | 'tfjs-node' | 'wasm' | 'cpu';
export type BackendAsk = 'auto' | BackendName;
export const BACKEND_CHOICES: readonly BackendAsk[] = ['auto', 'tfjs-node-gpu', 'webgpu', 'tfjs-node', 'wasm', 'cpu'];
/** The order 'auto' tries (webgpu there: hardware adapters only). */
export const AUTO_ORDER: readonly BackendName[] = ['tfjs-node-gpu', 'webgpu', 'tfjs-node', 'wasm', 'cpu'];

/** The WebGPU adapter a run used (from GPUAdapterInfo). */
export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** A software adapter (SwiftShader, lavapipe, WARP): correct but slower than wasm. */
  software: boolean;
}

export interface BackendInfo {
  /** The backend that runs: one of BackendName. */
  used: BackendName;
  /** What was asked for. */
  asked: BackendAsk;
  /** Why a better backend was not used (each failed attempt, in order), when one was not. */
  note?: string;
  /** With webgpu: the adapter. */
  adapter?: AdapterInfo;
  /**
   * With wasm: what runs its matrix products, e.g. "OpenBLAS 0.3.21 ... (libopenblas.so.0)"
   * (trainer/model/blasMatMul.ts), or "XNNPACK" with why no BLAS was used.
   */
  matmul?: string;
}

// A `require` the bundler does not see (esbuild would otherwise try to bundle the optional
// native packages). It resolves from this file (a bundle: from dist/, then up).
const runtimeRequire: NodeRequire = createRequire(__filename);

let current: BackendInfo | null = null;
export const CPU_BACKEND_VERSION = version_cpu;

/** The folder holding tfjs-backend-wasm's .wasm binaries (with a trailing separator). */
export function wasmDir(): string {
  const env = process.env['AGENT_LAB_WASM_DIR'];
  if (env) return env.endsWith(path.sep) || env.endsWith('/') ? env : env + path.sep;
  const candidates: string[] = [];
  try {
    candidates.push(path.join(path.dirname(runtimeRequire.resolve('@tensorflow/tfjs-backend-wasm')), path.sep));
  } catch {
    /* not resolvable from here */
  }
  candidates.push(path.join(__dirname, 'wasm', path.sep), path.join(__dirname, path.sep));
  candidates.push(path.join(process.cwd(), 'node_modules', '@tensorflow', 'tfjs-backend-wasm', 'dist', path.sep));
  for (const c of candidates) if (fs.existsSync(path.join(c, 'tfjs-backend-wasm-simd.wasm'))) return c;
  return '';
}

let wasmPathsSet = false;

/** Where Debian's and Chromium's packages put the SwiftShader Vulkan driver's manifest. */
const SWIFTSHADER_ICDS = ['/usr/lib/chromium/vk_swiftshader_icd.json', '/usr/lib/chromium-browser/vk_swiftshader_icd.json', '/opt/google/chrome/vk_swiftshader_icd.json'];

interface DawnGpu {
  requestAdapter(options?: { powerPreference?: string }): Promise<DawnAdapter | null>;
}
interface DawnAdapter {
  info?: { vendor?: string; architecture?: string; device?: string; description?: string; isFallbackAdapter?: boolean };
  isFallbackAdapter?: boolean;
}

/** What a WebGPU adapter says of itself; software when it says it is a fallback or names a software rasteriser. */
export function describeAdapter(a: DawnAdapter): AdapterInfo {
  const i = a.info ?? {};
  const info = { vendor: i.vendor ?? '', architecture: i.architecture ?? '', device: i.device ?? '', description: i.description ?? '' };
  const named = /swiftshader|llvmpipe|lavapipe|softpipe|software|microsoft basic render|\bwarp\b/i.test(Object.values(info).join(' '));
  return { ...info, software: i.isFallbackAdapter === true || a.isFallbackAdapter === true || named };
}

/**
 * The folder of a per-platform .vsix's WebGPU files (scripts/package-vsix.sh): dawn.node of
 * that platform and tfjs-backend-webgpu bundled against this bundle's tfjs-core.
 * AGENT_LAB_WEBGPU_DIR overrides it.
 */
function packagedWebgpuDir(): string | null {
  const dir = process.env['AGENT_LAB_WEBGPU_DIR'] ?? path.join(__dirname, 'webgpu');
  return fs.existsSync(path.join(dir, 'dawn.node')) ? dir : null;
}

/** The dawn.node binding: packaged, or from the optional `webgpu` package (its ESM index only picks this file). */
function loadDawn(): { create(flags: string[]): DawnGpu; globals: Record<string, unknown> } {
  const packaged = packagedWebgpuDir();
  if (packaged) return runtimeRequire(path.join(packaged, 'dawn.node'));
  const dir = path.dirname(runtimeRequire.resolve('webgpu/package.json'));
  const arch = process.platform === 'darwin' ? 'universal' : process.arch;
  return runtimeRequire(path.join(dir, 'dist', `${process.platform}-${arch}`, 'dawn.node'));
}

/** tfjs-backend-webgpu: packaged (it reads this bundle's tfjs-core from a global), or the optional package. */
function loadTfjsWebgpu(): void {
  const packaged = packagedWebgpuDir();
  const file = packaged ? path.join(packaged, 'tfjs-backend-webgpu.js') : null;
  if (file && fs.existsSync(file)) {
    (globalThis as Record<string, unknown>)['__agentLabTfjsCore'] = tf;
    runtimeRequire(file);
    return;
  }
  runtimeRequire('@tensorflow/tfjs-backend-webgpu');
}

/** Whether Linux shows a GPU device node (DRM render node or NVIDIA's). */
function linuxGpuDevice(): boolean {
  try {
    if (fs.readdirSync('/dev/dri').some((n) => n.startsWith('renderD'))) return true;
  } catch {
    /* no /dev/dri */
  }
  try {
    return fs.readdirSync('/dev').some((n) => /^nvidia\d+$/.test(n));
  } catch {
    return false;
  }
}

let webgpuAdapter: AdapterInfo | null = null;
const dawnInstances: DawnGpu[] = [];

/**
 * Find a WebGPU adapter and register tfjs's webgpu backend on it. `allowSoftware`: take a
 * software adapter (and, where none is found, retry with SwiftShader's Vulkan driver).
 */
async function tryWebgpu(allowSoftware: boolean): Promise<string | null> {
  // Linux without a GPU device node has no hardware adapter: skip loading Dawn (21 MB, and
  // the Vulkan loader's warnings on stderr) unless a software adapter may do or Vulkan is
  // pointed at a driver of the user's choosing (VK_ICD_FILENAMES).
  if (!allowSoftware && process.platform === 'linux' && !process.env['VK_ICD_FILENAMES'] && !linuxGpuDevice()) {
    return 'webgpu: no GPU device (/dev/dri/renderD*, /dev/nvidia*)';
  }
  let dawn: ReturnType<typeof loadDawn>;
  try {
    dawn = loadDawn();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code === 'MODULE_NOT_FOUND' ? 'webgpu: the optional package `webgpu` is not installed' : `webgpu: dawn.node failed to load: ${e.message.split('\n')[0]}`;
  }
  process.env['XDG_RUNTIME_DIR'] ??= '/tmp'; // the Vulkan loader warns without one
  // The GPU object (Dawn's instance) is held for the life of the process: collected while
  // its device lives, Dawn aborts the process.
  dawnInstances.push(dawn.create([]));
  let adapter = await dawnInstances.at(-1)!.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter && allowSoftware && !process.env['VK_ICD_FILENAMES']) {
    const icd = SWIFTSHADER_ICDS.find((p) => fs.existsSync(p));
    if (icd) {
      // The Vulkan loader reads this when Dawn creates its next instance.
      process.env['VK_ICD_FILENAMES'] = icd;
      dawnInstances.push(dawn.create([]));
      adapter = await dawnInstances.at(-1)!.requestAdapter({ powerPreference: 'high-performance' });
    }
  }
  if (!adapter) return 'webgpu: no WebGPU adapter (no Vulkan/Metal/D3D12 GPU driver Dawn can use)';
  const info = describeAdapter(adapter);
  const named = `${info.vendor} ${info.architecture} (${info.description || info.device})`.trim();
  if (info.software && !allowSoftware) return `webgpu: only a software adapter (${named}), slower than wasm; ask for --backend webgpu to use it`;
  // tfjs-backend-webgpu registers itself at import when navigator.gpu exists, and asks it for
  // an adapter: hand it the one just checked.
  for (const [k, v] of Object.entries(dawn.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  const chosen = adapter;
  Object.defineProperty(globalThis, 'navigator', { value: { gpu: { requestAdapter: async () => chosen, getPreferredCanvasFormat: () => 'bgra8unorm' } }, configurable: true, writable: true });
  try {
    loadTfjsWebgpu();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code === 'MODULE_NOT_FOUND' ? 'webgpu: @tensorflow/tfjs-backend-webgpu is not installed' : `webgpu: tfjs-backend-webgpu failed to load: ${e.message.split('\n')[0]}`;
  }
  if (!(await tf.setBackend('webgpu'))) return `webgpu: the backend did not initialise on ${named}`;
  webgpuAdapter = info;
  return null;
}

async function tryBackend(name: BackendName, explicit: boolean): Promise<string | null> {
  try {
    if (name === 'webgpu') return await tryWebgpu(explicit);
    if (name === 'tfjs-node-gpu' || name === 'tfjs-node') {
      const pkg = name === 'tfjs-node-gpu' ? '@tensorflow/tfjs-node-gpu' : '@tensorflow/tfjs-node';
      try {
        runtimeRequire(pkg);
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        return e.code === 'MODULE_NOT_FOUND' ? `${pkg} is not installed` : `${pkg} failed to load: ${e.message.split('\n')[0]}`;
      }
      // Both packages register their backend under the name 'tensorflow'.
      if (!(await tf.setBackend('tensorflow'))) return `${pkg} loaded but its backend did not initialise`;
      if (name === 'tfjs-node-gpu') {
        // tfjs-node-gpu silently runs on the CPU when CUDA is missing; say so.
        const note = gpuNote();
        if (note) return note;
      }
      return null;
    }
    if (name === 'wasm') {
      if (!wasmPathsSet) {
        const dir = wasmDir();
        if (!dir) return 'the wasm binaries (tfjs-backend-wasm-simd.wasm) were not found: set AGENT_LAB_WASM_DIR';
        setWasmPaths(dir);
        wasmPathsSet = true;
      }
      if (!(await tf.setBackend('wasm'))) return 'the wasm backend did not initialise';
      useBlasMatMul();
      return null;
    }
    if (!(await tf.setBackend('cpu'))) return 'the cpu backend did not initialise';
    return null;
  } catch (err) {
    return `${name}: ${(err as Error).message ?? String(err)}`;
  }
}

function gpuNote(): string | null {
  // The native binding exposes no device query through tfjs-core; the environment is what
  // we can check. Without a visible CUDA device the GPU package runs on the CPU.
  const visible = process.env['CUDA_VISIBLE_DEVICES'];
  if (visible !== undefined && (visible === '' || visible === '-1')) return 'tfjs-node-gpu: CUDA_VISIBLE_DEVICES hides every GPU';
  return null;
}

/**
 * Initialise a backend. 'auto' tries AUTO_ORDER (webgpu on hardware adapters only);
 * a named backend is used or this throws. Idempotent per process: asking again for the
 * backend that runs returns the same info.
 */
export async function initBackend(asked: BackendAsk = 'auto'): Promise<BackendInfo> {
  if (current && (asked === current.asked || asked === current.used) && tf.getBackend() === tfName(current.used)) return current;
  const order: readonly BackendName[] = asked === 'auto' ? AUTO_ORDER : [asked];
  const notes: string[] = [];
  for (const name of order) {
    const why = await tryBackend(name, asked !== 'auto');
    if (why === null) {
      await tf.ready();
      current = {
        used: name,
        asked,
        ...(notes.length ? { note: notes.join('; ') } : {}),
        ...(name === 'webgpu' && webgpuAdapter ? { adapter: webgpuAdapter } : {}),
        ...(name === 'wasm' ? { matmul: describeBlas() } : {}),
      };
      return current;
    }
    notes.push(why);
  }
  throw new Error(`backend '${asked}' is not available: ${notes.join('; ')}`);
}

/** tfjs's registry name of a backend (both native packages register 'tensorflow'). */
function tfName(b: BackendName): string {
  return b === 'tfjs-node-gpu' || b === 'tfjs-node' ? 'tensorflow' : b;
}

/** The backend that runs now (null before initBackend). */
export function currentBackend(): BackendInfo | null {
  return current;
}

/**
 * Whether the running tfjs backend is one of the in-process JS/wasm ones (wasm, cpu), where
 * reading a tensor back is a cheap copy; the model then does small gathers and the loss in
 * JS. On native/GPU backends it keeps them as tensor ops.
 */
export function isLocalBackend(): boolean {
  const b = tf.getBackend();
  return b === 'wasm' || b === 'cpu';
}

/**
 * Whether tensors can be read synchronously (`dataSync`) on the running backend. Not on
 * webgpu: there the trainer reads back with `await t.data()` (the *Async methods).
 */
export function canReadSync(): boolean {
  return tf.getBackend() !== 'webgpu';
}
