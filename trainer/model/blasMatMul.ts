// The wasm backend's matrix products through the machine's BLAS (OpenBLAS, or Apple's
// Accelerate), called in place on the wasm heap.
//
// Why: most of a training step's time was XNNPACK's BatchMatMul, which runs 128-bit
// wasm SIMD without FMA; a native sgemm runs the CPU's own widest kernels (AVX2/AVX-512 with
// FMA), several times faster on the model's shapes (docs/results.md, "Training at the hardware's
// speed"). Everything else stays tfjs-wasm: the same tensors, the same kernels, the same
// checkpoints; only BatchMatMul is re-registered, and it falls back to XNNPACK's kernel for
// any case it does not take (another dtype, a broadcast it does not cover).
//
// How: `koffi` (an optional dependency with prebuilt binaries: an FFI, nothing compiled here)
// loads the BLAS library and calls `cblas_sgemm` with Float32Array views of the wasm heap, so
// the operands are read and the product written where tfjs keeps them: no copy. The heap
// cannot grow during the call (nothing allocates), so the views stay valid.
//
// Threads: the lab runs its own data-parallel threads, one model replica each; the BLAS is
// set to one thread so that it never fights them for the cores (what PyTorch's best setting
// on these machines does too: OPENBLAS_NUM_THREADS=1). Each worker thread loads its own.
//
// AGENT_LAB_BLAS=off keeps XNNPACK's kernel; AGENT_LAB_BLAS=/path/to/libblas.so names the
// library (any CBLAS with `cblas_sgemm`). Where koffi or a BLAS is missing (the universal
// .vsix, a machine without libopenblas0) the products stay XNNPACK's and the run says why.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';

const runtimeRequire: NodeRequire = createRequire(__filename);

/** The BLAS the wasm backend's matrix products run on, or why they do not. */
export interface BlasInfo {
  /** The library file loaded, e.g. libopenblas.so.0. */
  library: string;
  /** Its own description where it has one (OpenBLAS's `openblas_get_config`). */
  config: string | null;
}

export type Sgemm = (
  order: number,
  transA: number,
  transB: number,
  m: number,
  n: number,
  k: number,
  alpha: number,
  a: Float32Array,
  lda: number,
  b: Float32Array,
  ldb: number,
  beta: number,
  c: Float32Array,
  ldc: number,
) => void;

const ROW_MAJOR = 101;
const NO_TRANS = 111;
const TRANS = 112;

const CANDIDATES: Record<string, string[]> = {
  linux: ['libopenblas.so.0', 'libopenblas.so', 'libopenblasp-r0.so', 'libblis.so.4', 'libmkl_rt.so.2'],
  darwin: ['/System/Library/Frameworks/Accelerate.framework/Accelerate', 'libopenblas.dylib', '/opt/homebrew/opt/openblas/lib/libopenblas.dylib'],
  win32: ['libopenblas.dll', 'openblas.dll'],
};

let installed: BlasInfo | null = null;
let installedSgemm: Sgemm | null = null;
let refusal: string | null = null;
/** Off: the re-registered kernel hands every product to XNNPACK's (tests and benches compare the two). */
let enabled = true;

/** Route the wasm backend's products to the BLAS (true, the default once installed) or back to XNNPACK. */
export function setBlasMatMul(on: boolean): void {
  enabled = on;
}

/** Products the BLAS computed in this thread (tests check that it, not XNNPACK, ran). */
let products = 0;

/** What an earlier `useBlasMatMul` did: the library, or why none (null before any call), and the products it ran. */
export function blasMatMulState(): { blas: BlasInfo | null; note: string | null; products: number } {
  return { blas: installed, note: refusal, products };
}

/**
 * The BLAS's sgemm when the wasm backend runs and its products go to the BLAS (the model then
 * also takes its BLAS-shaped paths: trainer/model/blasAttention.ts, transposed operands), else null.
 */
export function activeSgemm(): Sgemm | null {
  return installedSgemm && enabled && tf.getBackend() === 'wasm' ? installedSgemm : null;
}

/** One line for logs and config.json: the BLAS that runs the wasm backend's products, or XNNPACK and why. */
export function describeBlas(): string {
  if (installed) return `${installed.config ?? 'BLAS'} (${installed.library})`;
  return `XNNPACK${refusal ? ` (${refusal})` : ''}`;
}

interface WasmBackendLike {
  wasm: { HEAPU8: Uint8Array };
  dataIdMap: { get(id: unknown): { memoryOffset: number } | undefined };
  makeOutput(shape: number[], dtype: 'float32'): tf.TensorInfo;
}

/**
 * Re-register the wasm backend's BatchMatMul over the machine's BLAS. Call after the wasm
 * backend is set. Returns the library, or null with the reason in `blasMatMulState().note`.
 */
export function useBlasMatMul(): BlasInfo | null {
  if (installed) return installed;
  const asked = process.env['AGENT_LAB_BLAS'];
  if (asked === 'off' || asked === '0') {
    refusal = 'AGENT_LAB_BLAS=off';
    return null;
  }
  let koffi: {
    load(path: string): { func(sig: string): (...args: unknown[]) => unknown };
  };
  try {
    // The per-platform .vsix stages koffi beside the bundles (scripts/package-vsix.sh); a
    // checkout has the optional package.
    const packaged = process.env['AGENT_LAB_KOFFI_DIR'] ?? path.join(__dirname, 'koffi');
    koffi = runtimeRequire(fs.existsSync(path.join(packaged, 'index.js')) ? path.join(packaged, 'index.js') : 'koffi') as typeof koffi;
  } catch (err) {
    refusal = `koffi is not installed (${(err as Error).message.split('\n')[0]})`;
    return null;
  }
  const names = asked ? [asked] : (CANDIDATES[process.platform] ?? []);
  const tried: string[] = [];
  for (const name of names) {
    let lib: ReturnType<typeof koffi.load>;
    try {
      lib = koffi.load(name);
    } catch (err) {
      tried.push(`${name}: ${(err as Error).message.split('\n')[0]}`);
      continue;
    }
    let sgemm: Sgemm;
    try {
      sgemm = lib.func(
        'void cblas_sgemm(int, int, int, int, int, int, float, float *, int, float *, int, float, float *, int)',
      ) as unknown as Sgemm;
    } catch (err) {
      tried.push(`${name}: no cblas_sgemm (${(err as Error).message.split('\n')[0]})`);
      continue;
    }
    let config: string | null = null;
    try {
      (lib.func('void openblas_set_num_threads(int)') as (n: number) => void)(1);
      config = (lib.func('const char *openblas_get_config()') as () => string)();
    } catch {
      // Not OpenBLAS (Accelerate, BLIS, MKL): their own threading defaults stand.
    }
    installed = { library: name, config };
    installedSgemm = sgemm;
    refusal = null;
    register(sgemm);
    return installed;
  }
  refusal = `no BLAS library loaded (${tried.join('; ')}); on Debian: apt-get install libopenblas0-pthread`;
  return null;
}

function register(sgemm: Sgemm): void {
  const original = tf.getKernel('BatchMatMul', 'wasm');
  if (!original) throw new Error('the wasm backend has no BatchMatMul kernel to replace');
  const fallback = original.kernelFunc;
  tf.unregisterKernel('BatchMatMul', 'wasm');
  tf.registerKernel({
    kernelName: 'BatchMatMul',
    backendName: 'wasm',
    kernelFunc: (args) => {
      if (!enabled) return fallback(args);
      const out = blasBatchMatMul(args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo }, args.attrs as { transposeA: boolean; transposeB: boolean }, args.backend as unknown as WasmBackendLike, sgemm);
      return out ?? fallback(args);
    },
  });
}

function blasBatchMatMul(
  inputs: { a: tf.TensorInfo; b: tf.TensorInfo },
  attrs: { transposeA: boolean; transposeB: boolean },
  backend: WasmBackendLike,
  sgemm: Sgemm,
): tf.TensorInfo | null {
  const { a, b } = inputs;
  if (a.dtype !== 'float32' || b.dtype !== 'float32') return null;
  const ra = a.shape.length;
  const rb = b.shape.length;
  if (ra < 2 || rb < 2) return null;
  const tA = !!attrs.transposeA;
  const tB = !!attrs.transposeB;
  const m = tA ? a.shape[ra - 1]! : a.shape[ra - 2]!;
  const k = tA ? a.shape[ra - 2]! : a.shape[ra - 1]!;
  const kb = tB ? b.shape[rb - 1]! : b.shape[rb - 2]!;
  const n = tB ? b.shape[rb - 2]! : b.shape[rb - 1]!;
  if (k !== kb) return null; // tfjs's own kernel words the error
  const outerA = a.shape.slice(0, -2);
  const outerB = b.shape.slice(0, -2);
  const batchA = outerA.reduce((p, d) => p * d, 1);
  const batchB = outerB.reduce((p, d) => p * d, 1);
  // Equal batch dims, or one side unbatched (every batch shares it); other broadcasts fall back.
  let outer: number[];
  if (batchA === batchB && sameDims(outerA, outerB)) outer = outerA;
  else if (batchB === 1) outer = outerA.length >= outerB.length ? outerA : null!;
  else if (batchA === 1) outer = outerB.length >= outerA.length ? outerB : null!;
  else return null;
  if (!outer) return null;
  const batch = Math.max(batchA, batchB);
  products++;
  const out = backend.makeOutput([...outer, m, n], 'float32');
  if (m === 0 || n === 0) return out;
  // Views after makeOutput: it may have grown the heap (which replaces the buffer).
  const heap = backend.wasm.HEAPU8.buffer;
  const aOff = backend.dataIdMap.get(a.dataId)!.memoryOffset;
  const bOff = backend.dataIdMap.get(b.dataId)!.memoryOffset;
  const cOff = backend.dataIdMap.get(out.dataId)!.memoryOffset;
  const aSize = m * k;
  const bSize = k * n;
  const cSize = m * n;
  const lda = tA ? m : k;
  const ldb = tB ? k : n;
  for (let i = 0; i < batch; i++) {
    const av = new Float32Array(heap, aOff + (batchA === 1 ? 0 : i * aSize * 4), aSize);
    const bv = new Float32Array(heap, bOff + (batchB === 1 ? 0 : i * bSize * 4), bSize);
    const cv = new Float32Array(heap, cOff + i * cSize * 4, cSize);
    if (k === 0) cv.fill(0);
    else sgemm(ROW_MAJOR, tA ? TRANS : NO_TRANS, tB ? TRANS : NO_TRANS, m, n, k, 1, av, lda, bv, ldb, 0, cv, n);
  }
  return out;
}

function sameDims(x: number[], y: number[]): boolean {
  return x.length === y.length && x.every((d, i) => d === y[i]);
}
