// The order in which SFT sees its examples. It depends only on the run's seed: one
// generator (mulberry32, its state one uint32) draws the buckets and the per-epoch
// permutations, nothing else draws from it (checkpoints, evals and timers have their own),
// and its whole state — the generator and every bucket's permutation and position — is
// saved in each checkpoint, so `--resume` continues the same order exactly.

export interface DataOrderState {
  /** The mulberry32 state. */
  a: number;
  buckets: Record<string, { order: number[]; at: number }>;
}

/** Null when `x` is a well-formed saved order, else what is wrong with it (a checkpoint is user input). */
export function dataOrderStateProblem(x: unknown): string | null {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return 'must be an object';
  const s = x as Record<string, unknown>;
  if (!Number.isSafeInteger(s['a'])) return 'a must be an integer (the generator state)';
  const buckets = s['buckets'];
  if (typeof buckets !== 'object' || buckets === null || Array.isArray(buckets)) return 'buckets must be an object';
  for (const [k, b] of Object.entries(buckets as Record<string, unknown>)) {
    if (typeof b !== 'object' || b === null) return `buckets.${k} must be an object`;
    const { order, at } = b as Record<string, unknown>;
    if (!Array.isArray(order) || !order.every((i) => Number.isSafeInteger(i) && (i as number) >= 0)) return `buckets.${k}.order must be a list of indices`;
    if (!Number.isSafeInteger(at) || (at as number) < 0 || (at as number) > order.length) return `buckets.${k}.at must be a position in its order`;
  }
  return null;
}

export class DataOrder {
  private a: number;
  private readonly buckets = new Map<string, { order: number[]; at: number }>();

  constructor(seed: number) {
    this.a = seed >>> 0;
  }

  static fromState(s: DataOrderState): DataOrder {
    const d = new DataOrder(0);
    d.a = s.a >>> 0;
    for (const [k, b] of Object.entries(s.buckets)) d.buckets.set(k, { order: [...b.order], at: b.at });
    return d;
  }

  exportState(): DataOrderState {
    const buckets: DataOrderState['buckets'] = {};
    for (const [k, b] of this.buckets) buckets[k] = { order: [...b.order], at: b.at };
    return { a: this.a, buckets };
  }

  /** mulberry32 (core/mulberry32.ts), inlined so that its state can be saved. */
  uniform(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0;
    let t = this.a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** The next index of a pool of `size` examples: epochs of Fisher-Yates permutations. */
  next(key: string, size: number): number {
    let b = this.buckets.get(key);
    if (!b || b.at >= b.order.length || b.order.length !== size) {
      const order = Array.from({ length: size }, (_, i) => i);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(this.uniform() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      b = { order, at: 0 };
      this.buckets.set(key, b);
    }
    return b.order[b.at++]!;
  }

  /** One key drawn with probability proportional to its weight (weights > 0). */
  pick<K extends string>(weighted: readonly (readonly [K, number])[]): K {
    const total = weighted.reduce((s, [, w]) => s + w, 0);
    let u = this.uniform() * total;
    for (const [k, w] of weighted) {
      u -= w;
      if (u < 0) return k;
    }
    return weighted[weighted.length - 1]![0];
  }
}
