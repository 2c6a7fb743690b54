// The causal attention of one block, forward and backward, on the BLAS (wasm backend with
// trainer/model/blasMatMul.ts installed): RoPE, the scores, the causal softmax's backward and
// the products with P in plain Float32Arrays and `cblas_sgemm` calls whose leading dimensions
// read each head where it lies, instead of tfjs's per-row, per-group transposes, slices and
// concats (a third of a step's kernels on wasm). The softmax itself stays XNNPACK's kernel
// (a vectorised exp; V8's Math.exp is far slower per element).
//
// The arithmetic is the tensor path's (trainer/model/modelCore.ts `block`, modelTrain.ts
// `blockBack`): the same RoPE tables (q rows scaled by 1/sqrt(hd), the rotate-half sign in the
// sin table), the same query blocks and additive masks, dS = P * (dP - rowsum(dP * P)). Only
// the order of float32 sums differs (parity in test/unit/blasAttention.test.ts).
//
// Layouts: qkv is [rows*T, W] with W = (H + 2K) * hd, columns q heads | k heads | v heads.
// Rotated q and k are kept head-major ([H][T][hd], [K][T][hd]) so that a head's rows are one
// matrix; the output o and the gradient dqkv are written in qkv's row-major layout directly
// (ldc = the row width), so nothing is transposed.
import * as tf from '@tensorflow/tfjs-core';
import type { Sgemm } from './blasMatMul';

/** The additive causal mask's value for a key a query does not see (both paths): exp underflows to 0. */
export const MASK_NEG = -1e9;
const ROW_MAJOR = 101;
const NO_TRANS = 111;
const TRANS = 112;

/** The RoPE tables in JS (the same values as the tensor path's, transposed) and the query blocks. */
export interface RopeArrays {
  /** [rows >= T, (H+K)*hd]: cos per (position, head column), q columns scaled by 1/sqrt(hd); rows 0..T-1 are read. */
  cos: Float32Array;
  /** The same for sin, with the rotate-half sign folded in. */
  sin: Float32Array;
  /** Columns of a table row, (H+K)*hd. */
  width: number;
  /** Query blocks [start, end). */
  blocks: [number, number][];
}

/** What the backward needs of one row's attention. */
interface RowSave {
  /** The row's q/k/v projection, [T, W] (values read from it in place). */
  qkv: Float32Array;
  /** Rotated (and, for q, scaled) queries and keys, head-major. */
  qr: Float32Array;
  kr: Float32Array;
  /** Per kv group and query block: the probabilities, [rep*n, end] (tensors: freed with the step's tidy). */
  probs: tf.Tensor2D[][];
}

export interface BlasAttentionSave {
  rows: number;
  T: number;
  rowSaves: RowSave[];
}

export interface AttentionShape {
  heads: number;
  kvHeads: number;
  headDim: number;
}

/** JS buffers by key (reused step to step: trainer/model/modelCore.ts ScratchBuffers). */
export interface Buffers {
  get(key: string, n: number): Float32Array;
  zeros(key: string, n: number): Float32Array;
}

/** A tensor's values in place on the wasm heap (valid until the next tensor is made or freed). */
export type HeapView = (t: tf.Tensor) => Float32Array;

/**
 * The attention of `rows` rows of T positions: o, [rows*T, H*hd], and (with `saveKey`) what
 * the backward needs, in buffers named after saveKey (one per layer: they live until its backward).
 */
export function blasAttentionForward(
  sgemm: Sgemm,
  shape: AttentionShape,
  qkvT: tf.Tensor2D,
  rows: number,
  T: number,
  rope: RopeArrays,
  bufs: Buffers,
  view: HeapView,
  saveKey: string | null,
): { o: tf.Tensor2D; save: BlasAttentionSave | null } {
  const { heads: H, kvHeads: K, headDim: hd } = shape;
  const rep = H / K;
  const W = (H + 2 * K) * hd;
  const OW = H * hd;
  const key = saveKey ?? 'attn.tmp';
  // Copies first: every tensor made below may move the heap under a view.
  const qkvAll = bufs.get(`${key}.qkv`, rows * T * W);
  qkvAll.set(view(qkvT));
  const out = bufs.get('attn.o', rows * T * OW);
  const rowSaves: RowSave[] = [];
  for (let r = 0; r < rows; r++) {
    const qkv = qkvAll.subarray(r * T * W, (r + 1) * T * W);
    const qr = bufs.get(`${key}.qr${r}`, H * T * hd);
    const kr = bufs.get(`${key}.kr${r}`, K * T * hd);
    rotate(qkv, W, T, hd, 0, H, rope, qr);
    rotate(qkv, W, T, hd, H, K, rope, kr);
    const o = out.subarray(r * T * OW, (r + 1) * T * OW);
    const probs: tf.Tensor2D[][] = [];
    for (let g = 0; g < K; g++) {
      const gp: tf.Tensor2D[] = [];
      const kg = kr.subarray(g * T * hd, (g + 1) * T * hd);
      const vOff = (H + K) * hd + g * hd;
      rope.blocks.forEach(([b0, b1]) => {
        const n = b1 - b0;
        const s = bufs.get('attn.scores', rep * n * b1);
        causalMask(s, rep, n, b0, b1);
        for (let i = 0; i < rep; i++) {
          const h = g * rep + i;
          // s[i] += q_h[b0:b1] k_g[0:b1]^T (beta 1 adds onto the mask)
          sgemm(ROW_MAJOR, NO_TRANS, TRANS, n, b1, hd, 1, qr.subarray((h * T + b0) * hd), hd, kg, hd, 1, s.subarray(i * n * b1), b1);
        }
        const p = tf.softmax(tf.tensor2d(s, [rep * n, b1])) as tf.Tensor2D;
        const pv = view(p);
        for (let i = 0; i < rep; i++) {
          const h = g * rep + i;
          // o[b0:b1, h] = p_h v_g[0:b1], written into o's row-major layout (ldc = H*hd)
          sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, n, hd, b1, 1, pv.subarray(i * n * b1), b1, qkv.subarray(vOff), W, 0, o.subarray(b0 * OW + h * hd), OW);
        }
        gp.push(p);
      });
      probs.push(gp);
    }
    rowSaves.push({ qkv, qr, kr, probs });
  }
  const o = tf.tensor2d(out, [rows * T, OW]);
  if (!saveKey) {
    for (const rs of rowSaves) for (const g of rs.probs) for (const p of g) p.dispose();
    return { o, save: null };
  }
  return { o, save: { rows, T, rowSaves } };
}

/** The gradient of the attention's input qkv, [rows*T, W], from the gradient of its output. */
export function blasAttentionBackward(
  sgemm: Sgemm,
  shape: AttentionShape,
  dOT: tf.Tensor2D,
  save: BlasAttentionSave,
  rope: RopeArrays,
  bufs: Buffers,
  view: HeapView,
): tf.Tensor2D {
  const { heads: H, kvHeads: K, headDim: hd } = shape;
  const rep = H / K;
  const W = (H + 2 * K) * hd;
  const OW = H * hd;
  const { rows, T } = save;
  const dOAll = bufs.get('attn.dO', rows * T * OW);
  dOAll.set(view(dOT));
  const dqkvAll = bufs.zeros('attn.dqkv', rows * T * W);
  const dqr = bufs.get('attn.dqr', H * T * hd);
  const dkr = bufs.get('attn.dkr', K * T * hd);
  for (let r = 0; r < rows; r++) {
    const rs = save.rowSaves[r]!;
    const dO = dOAll.subarray(r * T * OW, (r + 1) * T * OW);
    const dqkv = dqkvAll.subarray(r * T * W, (r + 1) * T * W);
    dkr.fill(0);
    for (let g = 0; g < K; g++) {
      const kg = rs.kr.subarray(g * T * hd, (g + 1) * T * hd);
      const dkg = dkr.subarray(g * T * hd, (g + 1) * T * hd);
      const vOff = (H + K) * hd + g * hd;
      rope.blocks.forEach(([b0, b1], j) => {
        const n = b1 - b0;
        // No tensor is made in this loop, so the view of p stays valid.
        const pAll = view(rs.probs[g]![j]!);
        for (let i = 0; i < rep; i++) {
          const h = g * rep + i;
          const p = pAll.subarray(i * n * b1, (i + 1) * n * b1);
          const dOh = dO.subarray(b0 * OW + h * hd);
          const ds = bufs.get('attn.ds', n * b1);
          // dP = dO_h v_g^T
          sgemm(ROW_MAJOR, NO_TRANS, TRANS, n, b1, hd, 1, dOh, OW, rs.qkv.subarray(vOff), W, 0, ds, b1);
          softmaxBack(ds, p, n, b0, b1);
          // dq_h[b0:b1] = dS k_g[0:b1]
          sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, n, hd, b1, 1, ds, b1, kg, hd, 0, dqr.subarray((h * T + b0) * hd), hd);
          // dk_g[0:b1] += dS^T q_h[b0:b1]
          sgemm(ROW_MAJOR, TRANS, NO_TRANS, b1, hd, n, 1, ds, b1, rs.qr.subarray((h * T + b0) * hd), hd, 1, dkg, hd);
          // dv_g[0:b1] += p^T dO_h[b0:b1], straight into dqkv's v columns
          sgemm(ROW_MAJOR, TRANS, NO_TRANS, b1, hd, n, 1, p, b1, dOh, OW, 1, dqkv.subarray(vOff), W);
        }
      });
    }
    rotateBack(dqr, dqkv, W, T, hd, 0, H, rope);
    rotateBack(dkr, dqkv, W, T, hd, H, K, rope);
  }
  return tf.tensor2d(dqkvAll, [rows * T, W]);
}

/** The additive causal mask of `rep` stacked heads' queries b0..b1-1 over keys 0..b1-1: 0 where a query sees the key, MASK_NEG beyond. */
function causalMask(s: Float32Array, rep: number, n: number, b0: number, b1: number): void {
  for (let i = 0; i < rep * n; i++) {
    const row = i * b1;
    const end = row + b0 + (i % n) + 1;
    s.fill(0, row, end);
    s.fill(MASK_NEG, end, row + b1);
  }
}

/** dS = p * (dP - rowsum(dP * p)) in place of dP, over the keys each query sees (p is 0 beyond them). */
function softmaxBack(ds: Float32Array, p: Float32Array, n: number, b0: number, b1: number): void {
  for (let t = 0; t < n; t++) {
    const row = t * b1;
    const end = row + b0 + t + 1; // query b0+t sees keys 0..b0+t
    let dot = 0;
    for (let c = row; c < end; c++) dot += ds[c]! * p[c]!;
    for (let c = row; c < end; c++) ds[c] = p[c]! * (ds[c]! - dot);
    ds.fill(0, end, row + b1);
  }
}

/**
 * RoPE of `count` heads starting at head `first` of qkv's columns into head-major `out`:
 * out[h][t][d] = x[t][c] cos[t][c] + x[t][c'] sin[t][c], c = (first+h)*hd + d, c' its other half.
 */
function rotate(qkv: Float32Array, W: number, T: number, hd: number, first: number, count: number, rope: RopeArrays, out: Float32Array): void {
  const half = hd / 2;
  const { cos, sin } = rope;
  const W1 = rope.width;
  for (let t = 0; t < T; t++) {
    const x = t * W;
    const tab = t * W1;
    for (let h = 0; h < count; h++) {
      const col = (first + h) * hd;
      const o = (h * T + t) * hd;
      for (let d = 0; d < half; d++) {
        const c = col + d;
        out[o + d] = qkv[x + c]! * cos[tab + c]! + qkv[x + c + half]! * sin[tab + c]!;
        out[o + d + half] = qkv[x + c + half]! * cos[tab + c + half]! + qkv[x + c]! * sin[tab + c + half]!;
      }
    }
  }
}

/** The transpose of `rotate`: dx[t][c] = dy[c][t] cos[t][c] + dy[c'][t] sin[t][c'] (the swap is its own transpose). */
function rotateBack(dy: Float32Array, dqkv: Float32Array, W: number, T: number, hd: number, first: number, count: number, rope: RopeArrays): void {
  const half = hd / 2;
  const { cos, sin } = rope;
  const W1 = rope.width;
  for (let t = 0; t < T; t++) {
    const x = t * W;
    const tab = t * W1;
    for (let h = 0; h < count; h++) {
      const col = (first + h) * hd;
      const y = (h * T + t) * hd;
      for (let d = 0; d < half; d++) {
        const c = col + d;
        dqkv[x + c] = dy[y + d]! * cos[tab + c]! + dy[y + d + half]! * sin[tab + c + half]!;
        dqkv[x + c + half] = dy[y + d + half]! * cos[tab + c + half]! + dy[y + d]! * sin[tab + c]!;
      }
    }
  }
}
