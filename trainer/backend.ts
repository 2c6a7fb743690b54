// The tfjs backend: pick the best one that loads here, and say which one ran.
//
// Order for 'auto': @tensorflow/tfjs-node-gpu (CUDA), @tensorflow/tfjs-node (native
// libtensorflow, multi-threaded), wasm (XNNPACK, SIMD, one thread per JS thread), cpu (pure
// JS, ~100x slower than PyTorch: a last resort). The two native packages are optional
// dependencies whose install script downloads libtensorflow; where that failed (as on the
// lab's own machines) they are simply absent, and `require` fails fast. They are loaded
// with a run-time `require` that the bundler leaves alone, so a bundle never depends on
// them.
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

export type BackendName = 'tfjs-node-gpu' | 'tfjs-node' | 'wasm' | 'cpu';
export type BackendAsk = 'auto' | BackendName;
export const BACKEND_CHOICES: readonly BackendAsk[] = ['auto', 'tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu'];

export interface BackendInfo {
  /** The backend that runs: one of BackendName. */
  used: BackendName;
  /** What was asked for. */
  asked: BackendAsk;
  /** Why a better backend was not used (each failed attempt, in order), when one was not. */
  note?: string;
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

async function tryBackend(name: BackendName): Promise<string | null> {
  try {
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
 * Initialise a backend. 'auto' tries tfjs-node-gpu, tfjs-node, wasm, cpu in that order;
 * a named backend is used or this throws. Idempotent per process: asking again for the
 * backend that runs returns the same info.
 */
export async function initBackend(asked: BackendAsk = 'auto'): Promise<BackendInfo> {
  if (current && (asked === current.asked || asked === current.used) && tf.getBackend() === tfName(current.used)) return current;
  const order: BackendName[] = asked === 'auto' ? ['tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu'] : [asked];
  const notes: string[] = [];
  for (const name of order) {
    const why = await tryBackend(name);
    if (why === null) {
      await tf.ready();
      current = { used: name, asked, ...(notes.length ? { note: notes.join('; ') } : {}) };
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
