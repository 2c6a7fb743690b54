// The decoding cache of the Stack model (`prefill` / `step` / `stepBatch` in model.ts):
// keys after RoPE and values, kept in JS arrays rather than tensors.
// (Split out of trainer/model/model.ts, which re-exports it.)

/**
 * Keys (after RoPE) and values of the positions decoded so far, per layer, in JS arrays of
 * [position][kvHeads*headDim] grown by doubling. Decoding appends one row per token, so
 * keeping them out of tensors avoids a concat per token and lets one-token attention run as
 * plain loops (faster than ~15 small tensor ops per sequence on wasm/cpu).
 */
export class KvCache {
  length = 0;
  /** The ids fed so far, in order (previous-token embeddings read the last few). */
  ids: number[] = [];
  k: Float32Array[];
  v: Float32Array[];
  constructor(
    layers: number,
    readonly width = 0,
  ) {
    this.k = Array.from({ length: layers }, () => new Float32Array(0));
    this.v = Array.from({ length: layers }, () => new Float32Array(0));
  }
  /** Room for `rows` positions in every layer (keeps what is there). */
  reserve(rows: number): void {
    const need = rows * this.width;
    if (this.k[0] && this.k[0].length >= need) return;
    const cap = Math.max(need, 2 * (this.k[0]?.length ?? 0), 64 * this.width);
    const grow = (a: Float32Array) => {
      const b = new Float32Array(cap);
      b.set(a.subarray(0, this.length * this.width));
      return b;
    };
    this.k = this.k.map(grow);
    this.v = this.v.map(grow);
  }
  clone(): KvCache {
    const c = new KvCache(this.k.length, this.width);
    c.length = this.length;
    c.ids = this.ids.slice();
    c.k = this.k.map((a) => a.slice());
    c.v = this.v.map((a) => a.slice());
    return c;
  }
  dispose(): void {
    this.k = this.k.map(() => new Float32Array(0));
    this.v = this.v.map(() => new Float32Array(0));
    this.length = 0;
    this.ids = [];
  }
}
