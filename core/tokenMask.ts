// The token-level mask over the call grammar's character acceptor (`grammar.ts`): which
// vocabulary ids may come next inside a tool call, and the acceptor's state set after each.
// A token is allowed iff feeding its decoded characters one at a time to the acceptor
// leaves at least one state alive (the seed's `token_transitions`); special and
// undecodable tokens never are, except `<|end|>`, allowed exactly when `accepts(states)`.
//
// The fast way, compiled once per tokenizer (`compileVocabulary`):
//  1. The acceptor is determinized: every state set reachable from `startStates()` gets a
//     small id and a transition row over the grammar's alphabet (the union of the
//     templates' literal and hole characters, ~80 ASCII characters); a character outside
//     it kills every state. The rows come from `grammar.step` itself, so they are exact.
//  2. The vocabulary's decoded strings whose characters all lie in that alphabet are put
//     in a trie, flattened in preorder (node: character class, depth, end of subtree,
//     tokens ending there). Every other token can never be allowed and is dropped.
//  3. Per node: the hole character sets ("families") its whole subtree is made of, and its
//     height; per DFA state: the longest length H such that EVERY string of a family up to
//     H characters survives (a hole with room for H more characters).
// A mask for a state set is then one linear walk over the preorder arrays: a node's state
// is one table lookup from its parent's, each shared prefix is visited once, a dead node
// skips its whole subtree, and a subtree that is pure in the state's family and no taller
// than H is taken whole (its tokens are a contiguous preorder range) without walking it,
// which is what makes a hole state (~85% of cl100k allowed) cheap. Masks are cached per
// state set (`TokenMasker`); `next` re-runs a token's pre-classified characters through
// the table, a few lookups, so a cache entry is just the sorted id array.
import { StateSet, TEMPLATES, Template, accepts, startStates, step } from './grammar';

const EMPTY: StateSet = Object.freeze([]) as StateSet;
const DEAD = -1;

/** Cache and lookup key of a state set: its numbers joined by commas. */
export function stateSetKey(states: StateSet): string {
  return states.length === 1 ? String(states[0]) : states.join(',');
}

/** The distinct character sets of the templates' holes (the bulk of any vocabulary lives in them). */
function holeCharSets(templates: readonly Template[]): string[][] {
  const seen = new Map<string, string[]>();
  for (const t of templates) {
    for (const item of t.items) {
      if (typeof item === 'string') continue;
      const chars = [...item.chars].sort();
      seen.set(chars.join(''), chars);
    }
  }
  return [...seen.values()];
}

/** The grammar's alphabet: every character some template item can consume, sorted. */
function grammarAlphabet(templates: readonly Template[]): string[] {
  const chars = new Set<string>();
  for (const t of templates) {
    for (const item of t.items) {
      if (typeof item === 'string') for (const ch of item) chars.add(ch);
      else for (const ch of item.chars) chars.add(ch);
    }
  }
  return [...chars].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
}

/**
 * The acceptor as a DFA over state sets (subset construction driven by `grammar.step`).
 * Rows are computed for every state set reachable from the start at construction, and
 * for any other state set the first time it is looked up.
 */
export class GrammarDfa {
  /** Alphabet, sorted by code point; a character's class is its index here. */
  readonly alphabet: readonly string[];
  /** Number of character classes (= alphabet size). */
  readonly width: number;
  /** ASCII code -> class, -1 when outside the alphabet. */
  private readonly asciiClass = new Int16Array(128).fill(-1);
  private readonly otherClass = new Map<number, number>();
  /** State set of each DFA id (frozen, sorted, shared: `next` returns these). */
  readonly sets: StateSet[] = [];
  /** accepts(sets[id]) */
  readonly accepting: boolean[] = [];
  private readonly ids = new Map<string, number>();
  /** trans[id * width + class] = next id, or DEAD. */
  trans: Int32Array;
  private rows = 0;
  readonly startId: number;
  /** Character-class families (at most 8): the holes' character sets, as class lists. */
  readonly families: readonly (readonly number[])[];
  private survivalSize = -1;
  private survivalFamily = new Int8Array(0);
  private survivalDepth = new Int32Array(0);

  /** The templates it determinizes: the textbook's, or a world's narrowed ones (core/worldTools.ts). */
  readonly templates: readonly Template[];

  constructor(templates: readonly Template[] = TEMPLATES) {
    this.templates = templates;
    this.alphabet = grammarAlphabet(templates);
    this.width = this.alphabet.length;
    this.alphabet.forEach((ch, i) => {
      const cp = ch.codePointAt(0)!;
      if (cp < 128) this.asciiClass[cp] = i;
      else this.otherClass.set(cp, i);
    });
    this.trans = new Int32Array(256 * this.width);
    this.families = holeCharSets(templates)
      .slice(0, 8)
      .map((chars) => chars.map((ch) => this.classOf(ch.codePointAt(0)!)));
    this.startId = this.idOf(startStates(templates));
  }

  /**
   * Per DFA id: the family f whose strings survive longest from it, and that length H:
   * EVERY string over f's characters of length <= H leaves a state alive (-1 / 0 when no
   * family survives one character). H is the greatest fixpoint of
   * H(s) = min over c in f of (dead(s, c) ? 0 : 1 + H(trans(s, c))), capped at 65535,
   * so a cycle that stays alive counts as unbounded. Recomputed when the DFA grows.
   */
  survival(): { family: Int8Array; depth: Int32Array } {
    const n = this.sets.length;
    if (this.survivalSize !== n) {
      const family = new Int8Array(n).fill(-1);
      const depth = new Int32Array(n);
      const CAP = 65535;
      const h = new Int32Array(n);
      this.families.forEach((classes, f) => {
        h.fill(CAP);
        for (let changed = true; changed; ) {
          changed = false;
          for (let s = 0; s < n; s++) {
            let best = CAP;
            for (const c of classes) {
              const t = this.trans[s * this.width + c]!;
              const v = t < 0 ? 0 : Math.min(CAP, 1 + h[t]!);
              if (v < best) best = v;
            }
            if (best !== h[s]) {
              h[s] = best;
              changed = true;
            }
          }
        }
        for (let s = 0; s < n; s++) {
          const better = h[s]! > depth[s]! || (h[s]! === depth[s]! && h[s]! > 0 && classes.length > this.families[family[s]!]!.length);
          if (h[s]! > 0 && better) {
            family[s] = f;
            depth[s] = h[s]!;
          }
        }
      });
      this.survivalFamily = family;
      this.survivalDepth = depth;
      this.survivalSize = n;
    }
    return { family: this.survivalFamily, depth: this.survivalDepth };
  }

  /** Class of a code point, or -1 when no state can ever consume it. */
  classOf(cp: number): number {
    return cp < 128 ? this.asciiClass[cp]! : (this.otherClass.get(cp) ?? -1);
  }

  /** The DFA id of a state set (DEAD for the empty set), adding it and what it reaches. */
  idOf(states: StateSet): number {
    if (states.length === 0) return DEAD;
    const found = this.ids.get(stateSetKey(states));
    if (found !== undefined) return found;
    const id = this.add(states);
    // Fill rows breadth-first until every id added so far has its row.
    while (this.rows < this.sets.length) {
      const r = this.rows++;
      this.ensureCapacity(this.sets.length);
      const src = this.sets[r]!;
      for (let c = 0; c < this.width; c++) {
        const next = step(src, this.alphabet[c]!, this.templates);
        let nid = DEAD;
        if (next.length > 0) nid = this.ids.get(stateSetKey(next)) ?? this.add(next);
        this.trans[r * this.width + c] = nid;
      }
    }
    return id;
  }

  private add(states: StateSet): number {
    const copy = Object.freeze([...states]) as StateSet;
    const id = this.sets.length;
    this.sets.push(copy);
    this.accepting.push(accepts(copy, this.templates));
    this.ids.set(stateSetKey(copy), id);
    return id;
  }

  private ensureCapacity(n: number): void {
    if (n * this.width <= this.trans.length) return;
    const grown = new Int32Array(Math.max(n, (this.trans.length / this.width) * 2) * this.width);
    grown.set(this.trans);
    this.trans = grown;
  }

  /** Number of state sets with a row (all reachable from the start, plus any looked up). */
  get size(): number {
    return this.sets.length;
  }
}

/** The vocabulary compiled against the grammar: build once per tokenizer. */
export interface CompiledVocabulary {
  readonly vocabSize: number;
  readonly endTokenId: number;
  readonly dfa: GrammarDfa;
  /** Tokens in the trie (decodable, non-special, every character in the alphabet). */
  readonly trieTokens: number;
  readonly nodeCount: number;
  readonly maxDepth: number;
  /** Preorder trie: node 0 is the root (empty prefix). */
  readonly nodeClass: Uint8Array;
  readonly nodeDepth: Uint16Array;
  /** Index just past the node's subtree in preorder. */
  readonly nodeEnd: Int32Array;
  /** Bit f set: every character in node i's subtree (its own included) is in family f. */
  readonly nodePure: Uint8Array;
  /** Characters from node i's parent down to the deepest token of its subtree. */
  readonly nodeHeight: Uint16Array;
  /** Tokens ending at node i: nodeTokens[nodeTokStart[i] .. nodeTokStart[i+1]). */
  readonly nodeTokStart: Int32Array;
  readonly nodeTokens: Int32Array;
  /** Character classes of token id t: tokenClasses[tokenSeqStart[t] .. tokenSeqStart[t+1]); empty when not in the trie. */
  readonly tokenSeqStart: Int32Array;
  readonly tokenClasses: Uint8Array;
}

/**
 * Compiles a vocabulary: `tokenStrings[id]` is token id's decoded text, null for special
 * or undecodable tokens. `endTokenId` is `<|end|>` (its string, if any, is ignored).
 */
export function compileVocabulary(tokenStrings: readonly (string | null)[], endTokenId: number, templates: readonly Template[] = TEMPLATES): CompiledVocabulary {
  const V = tokenStrings.length;
  if (!Number.isInteger(endTokenId) || endTokenId < 0 || endTokenId >= V) {
    throw new RangeError(`endTokenId ${endTokenId} is not in the vocabulary (0..${V - 1})`);
  }
  const dfa = new GrammarDfa(templates);
  if (dfa.width > 255) throw new RangeError(`grammar alphabet too large for the trie (${dfa.width})`);

  // Classify every token; keep those that could ever be allowed. A token's key is its
  // class sequence as a string (classes < 256 are single UTF-16 units), so comparing keys
  // orders the class sequences lexicographically.
  const tokenSeqStart = new Int32Array(V + 1);
  const seqBuf: number[] = [];
  const kept: { id: number; key: string }[] = [];
  const buf: number[] = [];
  for (let id = 0; id < V; id++) {
    tokenSeqStart[id] = seqBuf.length;
    const s = tokenStrings[id];
    if (id === endTokenId || s === null || s === undefined || s.length === 0) continue;
    buf.length = 0;
    let ok = true;
    for (const ch of s) {
      const c = dfa.classOf(ch.codePointAt(0)!);
      if (c < 0) {
        ok = false;
        break;
      }
      buf.push(c);
    }
    if (!ok) continue;
    for (const c of buf) seqBuf.push(c);
    kept.push({ id, key: String.fromCharCode(...buf) });
  }
  tokenSeqStart[V] = seqBuf.length;
  const tokenClasses = Uint8Array.from(seqBuf);

  // Preorder trie from the keys in sorted order: each token adds the nodes below its
  // longest common prefix with the previous one. Tokens land in preorder of their nodes
  // (equal strings, e.g. duplicate decodings, are adjacent and share a node).
  kept.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.id - y.id));
  const cls: number[] = [0];
  const depth: number[] = [0];
  const end: number[] = [0];
  const tokStartList: number[] = [0];
  const nodeTokens = new Int32Array(kept.length);
  const path: number[] = [0]; // path[d] = node index at depth d on the current branch
  let prev = '';
  let maxDepth = 0;
  kept.forEach(({ id, key }, k) => {
    let lcp = 0;
    const n = Math.min(prev.length, key.length);
    while (lcp < n && prev.charCodeAt(lcp) === key.charCodeAt(lcp)) lcp++;
    // Close the nodes of the previous branch below the common prefix.
    for (let d = prev.length; d > lcp; d--) end[path[d]!] = cls.length;
    for (let d = lcp + 1; d <= key.length; d++) {
      path[d] = cls.length;
      cls.push(key.charCodeAt(d - 1));
      depth.push(d);
      end.push(0);
      tokStartList.push(k);
    }
    nodeTokens[k] = id;
    if (key.length > maxDepth) maxDepth = key.length;
    prev = key;
  });
  for (let d = prev.length; d >= 0; d--) end[path[d]!] = cls.length;
  end[0] = cls.length;
  tokStartList.push(kept.length);
  const nodeTokStart = Int32Array.from(tokStartList);

  const N = cls.length;
  // Per node: parent, then (bottom-up: children follow their parent in preorder) the
  // families its subtree is pure in, and its height.
  const famOfClass = new Uint8Array(dfa.width);
  dfa.families.forEach((classes, f) => {
    for (const c of classes) famOfClass[c]! |= 1 << f;
  });
  const parent = new Int32Array(N).fill(-1);
  {
    const stack: number[] = [0];
    for (let i = 1; i < N; i++) {
      stack.length = depth[i]!;
      parent[i] = stack[depth[i]! - 1]!;
      stack.push(i);
    }
  }
  const nodePure = new Uint8Array(N);
  const nodeHeight = new Uint16Array(N);
  for (let i = 1; i < N; i++) nodePure[i] = famOfClass[cls[i]!]!;
  for (let i = N - 1; i >= 1; i--) {
    if (nodeHeight[i] === 0) nodeHeight[i] = 1; // a leaf (every leaf ends a token)
    const p = parent[i]!;
    if (p > 0) {
      nodePure[p]! &= nodePure[i]!;
      if (nodeHeight[i]! + 1 > nodeHeight[p]!) nodeHeight[p] = nodeHeight[i]! + 1;
    }
  }
  return {
    vocabSize: V,
    endTokenId,
    dfa,
    trieTokens: kept.length,
    nodeCount: N,
    maxDepth,
    nodeClass: Uint8Array.from(cls),
    nodeDepth: Uint16Array.from(depth),
    nodeEnd: Int32Array.from(end),
    nodePure,
    nodeHeight,
    nodeTokStart,
    nodeTokens,
    tokenSeqStart,
    tokenClasses,
  };
}

/** The mask for one state set. */
export interface TokenMask {
  /** Allowed token ids, ascending; includes `<|end|>` when `endAllowed`. */
  readonly ids: Int32Array;
  /** The acceptor's state set after token `id`; [] when `id` is not allowed, and for `<|end|>` (the call is over). */
  readonly next: (id: number) => StateSet;
  /** accepts(states): the call is complete and `<|end|>` may come. */
  readonly endAllowed: boolean;
}

const EMPTY_MASK: TokenMask = Object.freeze({ ids: new Int32Array(0), next: () => EMPTY, endAllowed: false });

/** Token masks over a compiled vocabulary, cached per state set. */
export class TokenMasker {
  private cache: (TokenMask | undefined)[] = [];
  private readonly bits: Uint32Array;
  private readonly stack: Int32Array;
  private misses = 0;

  constructor(readonly compiled: CompiledVocabulary) {
    this.bits = new Uint32Array((compiled.vocabSize + 31) >>> 5);
    this.stack = new Int32Array(compiled.maxDepth + 1);
  }

  /** The allowed tokens in `states` (a state set of `grammar.ts`), and where each leads. */
  allowed(states: StateSet): TokenMask {
    const id = this.compiled.dfa.idOf(states);
    if (id === DEAD) return EMPTY_MASK;
    let m = this.cache[id];
    if (m === undefined) {
      m = this.compute(id);
      this.cache[id] = m;
      this.misses++;
    }
    return m;
  }

  /** Empties the per-state-set cache; the compiled vocabulary stays. */
  clearCache(): void {
    this.cache = [];
    this.misses = 0;
  }

  /** State sets computed since the last `clearCache()`. */
  get cacheMisses(): number {
    return this.misses;
  }

  /** Sets every disallowed id of `logits` (a model's output row) to -Infinity; returns the mask. */
  maskLogits(logits: Float32Array, states: StateSet): TokenMask {
    const m = this.allowed(states);
    let from = 0;
    for (const id of m.ids) {
      if (id > from) logits.fill(-Infinity, from, id);
      from = id + 1;
    }
    logits.fill(-Infinity, from);
    return m;
  }

  /** The state set after `tokenId` in `states`: [] if the token is not allowed there or is `<|end|>`. */
  advance(states: StateSet, tokenId: number): StateSet {
    const id = this.compiled.dfa.idOf(states);
    return id === DEAD ? EMPTY : this.nextOf(id, tokenId);
  }

  private nextOf(dfaId: number, tokenId: number): StateSet {
    const c = this.compiled;
    if (!Number.isInteger(tokenId) || tokenId < 0 || tokenId >= c.vocabSize) return EMPTY;
    const dfa = c.dfa;
    const trans = dfa.trans;
    const w = dfa.width;
    const stop = c.tokenSeqStart[tokenId + 1]!;
    let j = c.tokenSeqStart[tokenId]!;
    if (j === stop) return EMPTY; // special, undecodable, empty or outside the alphabet
    let s = dfaId;
    for (; j < stop; j++) {
      s = trans[s * w + c.tokenClasses[j]!]!;
      if (s < 0) return EMPTY;
    }
    return dfa.sets[s]!;
  }

  /** One walk of the preorder trie from DFA state `rootId`. */
  private compute(rootId: number): TokenMask {
    const c = this.compiled;
    const trans = c.dfa.trans; // complete for every id reachable from rootId
    const w = c.dfa.width;
    const cls = c.nodeClass;
    const depth = c.nodeDepth;
    const end = c.nodeEnd;
    const tokStart = c.nodeTokStart;
    const toks = c.nodeTokens;
    const pure = c.nodePure;
    const height = c.nodeHeight;
    const { family, depth: survive } = c.dfa.survival();
    const st = this.stack;
    const bits = this.bits;
    bits.fill(0);
    st[0] = rootId;
    let count = 0;
    const N = c.nodeCount;
    let i = 1;
    while (i < N) {
      const ps = st[depth[i]! - 1]!;
      const f = family[ps]!;
      if (f >= 0 && (pure[i]! >> f) & 1 && height[i]! <= survive[ps]!) {
        // Every token below is a string over family f no longer than what survives: all alive.
        const stop = end[i]!;
        for (let t = tokStart[i]!, e = tokStart[stop]!; t < e; t++) {
          const id = toks[t]!;
          bits[id >>> 5]! |= 1 << (id & 31);
        }
        count += tokStart[stop]! - tokStart[i]!;
        i = stop;
        continue;
      }
      const s = trans[ps * w + cls[i]!]!;
      if (s < 0) {
        i = end[i]!;
        continue;
      }
      st[depth[i]!] = s;
      for (let t = tokStart[i]!, e = tokStart[i + 1]!; t < e; t++) {
        const id = toks[t]!;
        bits[id >>> 5]! |= 1 << (id & 31);
        count++;
      }
      i++;
    }
    const endAllowed = c.dfa.accepting[rootId]!;
    if (endAllowed) {
      const e = c.endTokenId;
      bits[e >>> 5]! |= 1 << (e & 31);
      count++;
    }
    const ids = new Int32Array(count);
    let k = 0;
    for (let wi = 0; wi < bits.length; wi++) {
      let word = bits[wi]!;
      while (word !== 0) {
        const low = word & -word;
        ids[k++] = (wi << 5) | (31 - Math.clz32(low));
        word ^= low;
      }
    }
    const endId = c.endTokenId;
    const next = (tokenId: number): StateSet => (tokenId === endId ? EMPTY : this.nextOf(rootId, tokenId));
    return Object.freeze({ ids, next, endAllowed });
  }
}

/**
 * The seed's algorithm (`token_transitions` without its memo): feed every token's decoded
 * characters to the acceptor. O(V * token length) per state set. Null strings (special,
 * undecodable) and empty ones are never allowed; `<|end|>` is not handled here.
 */
export function naiveTransitions(
  states: StateSet,
  vocabStrings: readonly (string | null)[],
): { ids: number[]; next: Map<number, StateSet> } {
  const ids: number[] = [];
  const next = new Map<number, StateSet>();
  for (let tid = 0; tid < vocabStrings.length; tid++) {
    const s = vocabStrings[tid];
    if (!s) continue;
    let cur = states;
    for (const ch of s) {
      cur = step(cur, ch);
      if (cur.length === 0) break;
    }
    if (cur.length > 0) {
      ids.push(tid);
      next.set(tid, cur);
    }
  }
  return { ids, next };
}
