// The seed's two retrievers over an in-memory corpus: Okapi BM25 (k1 1.5, b 0.75, idf
// with +1 inside the log, hits with score <= 0 dropped) and the hashing-trick
// "embedding-lite" retriever. Scores follow the seed's arithmetic in the same order, so
// they agree with the reference to the last few ulps (log implementations may differ).
import { md5Hex } from '../md5';
import type { Passage } from '../types';

const TOKEN_RE = /[a-z0-9]+/g;

/** `re.findall(r"[a-z0-9]+", text.lower())` */
export function tokenizeForRetrieval(text: string): string[] {
  return text.toLowerCase().match(TOKEN_RE) ?? [];
}

export interface Hit {
  passage: Passage;
  score: number;
}

/** Python's `scored[:k]` for an int k (negative k counts from the end). */
function pySliceHead<T>(xs: T[], k: number): T[] {
  return k >= 0 ? xs.slice(0, k) : xs.slice(0, Math.max(0, xs.length + k));
}

export class Bm25Retriever {
  private readonly docLen: number[];
  private readonly avgdl: number;
  private readonly idf = new Map<string, number>();
  private readonly tf: Map<string, number>[];

  constructor(
    readonly passages: readonly Passage[],
    readonly k1 = 1.5,
    readonly b = 0.75,
  ) {
    const docs = passages.map((p) => tokenizeForRetrieval(p.text));
    this.docLen = docs.map((d) => d.length);
    this.avgdl = this.docLen.reduce((a, x) => a + x, 0) / Math.max(1, docs.length);
    const df = new Map<string, number>();
    for (const d of docs) for (const t of new Set(d)) df.set(t, (df.get(t) ?? 0) + 1);
    const n = docs.length;
    for (const [t, c] of df) this.idf.set(t, Math.log((n - c + 0.5) / (c + 0.5) + 1.0));
    this.tf = docs.map((d) => {
      const m = new Map<string, number>();
      for (const t of d) m.set(t, (m.get(t) ?? 0) + 1);
      return m;
    });
  }

  score(queryTerms: readonly string[], i: number): number {
    let s = 0.0;
    const dl = this.docLen[i]!;
    for (const t of queryTerms) {
      const idf = this.idf.get(t);
      if (idf === undefined) continue;
      const f = this.tf[i]!.get(t) ?? 0;
      if (f === 0) continue;
      const denom = f + this.k1 * (1 - this.b + (this.b * dl) / this.avgdl);
      s += (idf * (f * (this.k1 + 1))) / denom;
    }
    return s;
  }

  /** Top-k by score, ties in corpus order (a stable sort, as Python's); may return fewer than k. */
  search(query: string, k = 3): Hit[] {
    const q = tokenizeForRetrieval(query);
    const scored = this.passages.map((passage, i) => ({ passage, score: this.score(q, i) }));
    scored.sort((x, y) => y.score - x.score);
    return pySliceHead(scored, k).filter((h) => h.score > 0.0);
  }
}

export class HashEmbedRetriever {
  private readonly vecs: number[][];

  constructor(
    readonly passages: readonly Passage[],
    readonly dim = 512,
  ) {
    this.vecs = passages.map((p) => this.embed(p.text));
  }

  embed(text: string): number[] {
    const v = new Array<number>(this.dim).fill(0.0);
    const dim = BigInt(this.dim);
    for (const t of tokenizeForRetrieval(text)) {
      const h = BigInt('0x' + md5Hex(t));
      // Sign from the quotient, bucket from the remainder: independent even when dim is
      // a power of two (a sign from the low bits would equal the bucket's bits).
      const idx = Number(h % dim);
      const rest = h / dim;
      v[idx]! += (rest & 1n) === 1n ? 1.0 : -1.0;
    }
    let sq = 0;
    for (const x of v) sq += x * x;
    const norm = Math.sqrt(sq) || 1.0;
    return v.map((x) => x / norm);
  }

  search(query: string, k = 3): Hit[] {
    const qv = this.embed(query);
    const scored = this.passages.map((passage, i) => {
      let s = 0;
      const dv = this.vecs[i]!;
      for (let d = 0; d < this.dim; d++) s += qv[d]! * dv[d]!;
      return { passage, score: s };
    });
    scored.sort((x, y) => y.score - x.score);
    return pySliceHead(scored, k).filter((h) => h.score > 0.0);
  }
}
