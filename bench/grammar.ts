// Grammar-constrained decoding: the token mask per decoding step on a real published
// vocabulary (js-tiktoken's cl100k_base, V = 100277; o200k_base with --vocab), over every
// tool call of the distilled transcripts (both splits), fed token by token as a decoder
// would: the mask for the current state set, then advance by the actual token; the last
// step of a call is the one where `<|end|>` must be allowed.
//   compile_ms               compiling the vocabulary (grammar DFA + trie), on its own
//   cold_us_per_token        mean mask+advance time per step, mask cache emptied before the stream
//   warm_us_per_token        the same stream again, cache full
//   naive_cold_us_per_token  the seed's token_transitions (full-vocabulary scan, memoised per
//                            state set as the seed does) on the same stream, memo emptied first
//   agreement                share of (state set, token) pairs, over ALL tokens for every
//                            distinct state set of the stream, on which the trie mask and its
//                            next state set agree with feeding the token's characters to the
//                            acceptor; <|end|> agrees iff allowed exactly when accepts()
// Figures are medians over repetitions. Run: npx tsx bench/grammar.ts [--json] [--vocab NAME]
// or agent-lab bench grammar [--json]. The JSON object is the last line.
import { Tiktoken } from 'js-tiktoken/lite';
import { StateSet, accepts, checkCall, startStates } from '../core/grammar';
import { CompiledVocabulary, TokenMasker, compileVocabulary, naiveTransitions, stateSetKey } from '../core/tokenMask';
import { defaultWorldTexts } from '../core/tokenizer';

export const PUBLISHED_VOCABULARIES = ['cl100k_base', 'o200k_base'] as const;
export type PublishedVocabularyName = (typeof PUBLISHED_VOCABULARIES)[number];

interface TiktokenRanks {
  pat_str: string;
  special_tokens: Record<string, number>;
  bpe_ranks: string;
}

function loadRanks(name: PublishedVocabularyName): TiktokenRanks {
  // Subpath exports (js-tiktoken/ranks/*) have no typings under our module resolution.
  /* eslint-disable @typescript-eslint/no-require-imports */
  switch (name) {
    case 'cl100k_base':
      return require('js-tiktoken/ranks/cl100k_base') as TiktokenRanks;
    case 'o200k_base':
      return require('js-tiktoken/ranks/o200k_base') as TiktokenRanks;
  }
}

export interface PublishedVocabulary {
  name: PublishedVocabularyName;
  /** Decoded text per id; null for special tokens and unused ids. */
  strings: (string | null)[];
  /** The special token that stands in for `<|end|>` (`<|endoftext|>`). */
  endTokenId: number;
  encode(text: string): number[];
}

/**
 * A published BPE vocabulary from js-tiktoken (offline): each rank decoded on its own.
 * Ranks whose bytes are not valid UTF-8 decode with U+FFFD, which the grammar rejects.
 */
export function publishedVocabulary(name: PublishedVocabularyName = 'cl100k_base'): PublishedVocabulary {
  const ranks = loadRanks(name);
  const enc = new Tiktoken(ranks);
  const specials = Object.values(ranks.special_tokens);
  const special = new Set(specials);
  // bpe_ranks lines: "! <offset> <base64> <base64> ...", consecutive ranks from offset.
  const ranked: number[] = [];
  for (const line of ranks.bpe_ranks.split('\n')) {
    const parts = line.split(' ');
    if (parts.length < 3) continue;
    const offset = Number.parseInt(parts[1]!, 10);
    for (let i = 0; i < parts.length - 2; i++) ranked.push(offset + i);
  }
  const V = [...specials, ...ranked].reduce((a, b) => Math.max(a, b), 0) + 1;
  const strings: (string | null)[] = new Array<string | null>(V).fill(null); // specials and unused ids
  for (const id of ranked) if (!special.has(id)) strings[id] = enc.decode([id]);
  const end = ranks.special_tokens['<|endoftext|>'];
  if (end === undefined) throw new Error(`${name} has no <|endoftext|>`);
  return { name, strings, endTokenId: end, encode: (text) => enc.encode(text) };
}

/** The tool-call bodies (between `<|tool_call|>` and `<|end|>`) of wire-format transcripts. */
export function toolCallBodies(transcripts: readonly string[]): string[] {
  const out: string[] = [];
  const re = /<\|tool_call\|>([\s\S]*?)<\|end\|>/g;
  for (const t of transcripts) for (const m of t.matchAll(re)) out.push(m[1]!);
  return out;
}

export interface GrammarBenchResult {
  vocab: number;
  compile_ms: number;
  cold_us_per_token: number;
  warm_us_per_token: number;
  naive_cold_us_per_token: number;
  agreement: number;
  // Extra keys, after the contract's.
  vocab_name: string;
  steps: number;
  calls: number;
  state_sets: number;
  cold_step_max_us: number;
  miss_us_mean: number;
  naive_steps_timed: number;
  pairs_checked: number;
}

export interface GrammarBenchOptions {
  vocab?: PublishedVocabularyName;
  repetitions?: number;
  /** Time the naive scan on at most this many steps of the stream (its prefix); 0 = all. */
  naiveMaxSteps?: number;
  log?: (line: string) => void;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (x: number, d: number): number => Number(x.toFixed(d));

interface Call {
  body: string;
  tokens: number[];
}

/** Feeds the stream through the masker; returns elapsed ms. Throws if the stream breaks. */
function runStream(masker: TokenMasker, calls: readonly Call[], perStep?: { ms: number; miss: boolean }[]): number {
  let sink = 0;
  const t0 = performance.now();
  for (const call of calls) {
    let states: StateSet = startStates();
    const toks = call.tokens;
    for (let k = 0; k <= toks.length; k++) {
      const misses0 = perStep ? masker.cacheMisses : 0;
      const s0 = perStep ? performance.now() : 0;
      const m = masker.allowed(states);
      const s1 = perStep ? performance.now() : 0;
      if (k < toks.length) {
        states = m.next(toks[k]!);
        if (states.length === 0) throw new Error(`token ${toks[k]} rejected in ${JSON.stringify(call.body)}`);
      } else if (!m.endAllowed) throw new Error(`<|end|> not allowed after ${JSON.stringify(call.body)}`);
      sink += m.ids.length;
      if (perStep) perStep.push({ ms: s1 - s0, miss: masker.cacheMisses > misses0 });
    }
  }
  const ms = performance.now() - t0;
  if (sink < 0) throw new Error('unreachable');
  return ms;
}

export function runGrammarBench(opts: GrammarBenchOptions = {}): GrammarBenchResult {
  const log = opts.log ?? ((line: string) => console.log(line));
  const reps = opts.repetitions ?? 5;
  const name = opts.vocab ?? 'cl100k_base';

  let t = performance.now();
  const vocab = publishedVocabulary(name);
  const V = vocab.strings.length;
  log(`vocabulary: js-tiktoken ${name}, V = ${V} (decoded in ${Math.round(performance.now() - t)} ms); <|end|> stands in as <|endoftext|> = ${vocab.endTokenId}`);

  const compileTimes: number[] = [];
  let compiled!: CompiledVocabulary;
  for (let r = 0; r < 3; r++) {
    t = performance.now();
    compiled = compileVocabulary(vocab.strings, vocab.endTokenId);
    compileTimes.push(performance.now() - t);
  }
  const compileMs = median(compileTimes);
  log(
    `compile: ${compileMs.toFixed(1)} ms (median of 3): grammar DFA ${compiled.dfa.size} state sets x ${compiled.dfa.width} character classes; ` +
      `trie ${compiled.nodeCount} nodes, ${compiled.trieTokens} tokens inside the grammar's alphabet, depth ${compiled.maxDepth}`,
  );

  t = performance.now();
  const world = defaultWorldTexts();
  const bodies = toolCallBodies([...world.train, ...world.heldout]);
  const calls: Call[] = [];
  let skipped = 0;
  for (const body of bodies) {
    if (!checkCall(body).complete) {
      skipped++;
      continue;
    }
    calls.push({ body, tokens: vocab.encode(body) });
  }
  const steps = calls.reduce((a, c) => a + c.tokens.length + 1, 0);
  log(
    `stream: ${calls.length} tool calls of ${world.train.length} + ${world.heldout.length} distilled transcripts (${skipped} rejected by the grammar, skipped), ` +
      `${steps} decoding steps (${steps - calls.length} tokens + one <|end|> step per call), built in ${Math.round(performance.now() - t)} ms`,
  );

  const masker = new TokenMasker(compiled);
  const cold: number[] = [];
  let misses = 0;
  for (let r = 0; r < reps; r++) {
    masker.clearCache();
    cold.push(runStream(masker, calls));
    misses = masker.cacheMisses;
  }
  const warm: number[] = [];
  for (let r = 0; r < reps; r++) warm.push(runStream(masker, calls));
  // One more cold pass timed per step: the latency of a cache miss.
  masker.clearCache();
  const perStep: { ms: number; miss: boolean }[] = [];
  runStream(masker, calls, perStep);
  const coldUs = (median(cold) * 1000) / steps;
  const warmUs = (median(warm) * 1000) / steps;
  const missTimes = perStep.filter((p) => p.miss).map((p) => p.ms * 1000);
  const stepMaxUs = Math.max(...perStep.map((p) => p.ms * 1000));
  const missUs = missTimes.reduce((a, b) => a + b, 0) / Math.max(1, missTimes.length);
  log(
    `trie mask: cold ${coldUs.toFixed(2)} us/step, warm ${warmUs.toFixed(3)} us/step (medians of ${reps}); ` +
      `${misses} distinct state sets (cache misses); a miss (one trie walk) costs ${missUs.toFixed(0)} us mean, ` +
      `${median(missTimes).toFixed(0)} us median; slowest step ${stepMaxUs.toFixed(0)} us (GC pauses included)`,
  );

  // The seed's algorithm: full-vocabulary scan per distinct state set, memoised like
  // its _MASK_CACHE, memo emptied before the stream.
  const naiveVocab = vocab.strings.map((s, id) => (id === vocab.endTokenId ? null : s));
  const maxSteps = opts.naiveMaxSteps ?? 0;
  const naiveCalls: Call[] = [];
  let naiveSteps = 0;
  for (const c of calls) {
    if (maxSteps > 0 && naiveSteps + c.tokens.length + 1 > maxSteps) break;
    naiveCalls.push(c);
    naiveSteps += c.tokens.length + 1;
  }
  const naiveResults = new Map<string, { ids: number[]; next: Map<number, StateSet>; states: StateSet }>();
  const naiveTimes: number[] = [];
  const naiveReps = maxSteps > 0 || reps < 3 ? 1 : Math.min(reps, 3);
  for (let r = 0; r < naiveReps; r++) {
    naiveResults.clear();
    const t0 = performance.now();
    for (const call of naiveCalls) {
      let states: StateSet = startStates();
      for (let k = 0; k <= call.tokens.length; k++) {
        const key = stateSetKey(states);
        let hit = naiveResults.get(key);
        if (hit === undefined) {
          hit = { ...naiveTransitions(states, naiveVocab), states };
          naiveResults.set(key, hit);
        }
        if (k < call.tokens.length) {
          const nx = hit.next.get(call.tokens[k]!);
          if (nx === undefined) throw new Error(`naive: token rejected in ${JSON.stringify(call.body)}`);
          states = nx;
        } else if (!accepts(states)) throw new Error('naive: <|end|> not allowed at the end of a call');
      }
    }
    naiveTimes.push(performance.now() - t0);
  }
  const naiveUs = (median(naiveTimes) * 1000) / naiveSteps;
  log(
    `naive (seed's token_transitions, memoised per state set): cold ${naiveUs.toFixed(1)} us/step over ` +
      (naiveSteps === steps ? `the whole stream` : `a sample: the first ${naiveSteps} of ${steps} steps`) +
      ` (median of ${naiveReps}); ${naiveResults.size} full-vocabulary scans, ${(median(naiveTimes) / naiveResults.size).toFixed(1)} ms each; ` +
      `trie cold is ${(naiveUs / coldUs).toFixed(0)}x faster`,
  );

  // Agreement: every token, every distinct state set the naive run visited.
  masker.clearCache();
  let pairs = 0;
  let agree = 0;
  for (const { ids, next, states } of naiveResults.values()) {
    const m = masker.allowed(states);
    const allowed = new Uint8Array(V);
    for (const id of m.ids) allowed[id] = 1;
    const naiveAllowed = new Uint8Array(V);
    for (const id of ids) naiveAllowed[id] = 1;
    if (accepts(states)) naiveAllowed[vocab.endTokenId] = 1;
    for (let id = 0; id < V; id++) {
      pairs++;
      if (allowed[id] !== naiveAllowed[id]) continue;
      if (allowed[id] && id !== vocab.endTokenId && stateSetKey(m.next(id)) !== stateSetKey(next.get(id)!)) continue;
      agree++;
    }
  }
  const agreement = agree / pairs;
  log(`agreement: ${agree} of ${pairs} (state set, token) pairs = ${agreement} (${naiveResults.size} state sets x ${V} tokens; allowed and next state set)`);

  return {
    vocab: V,
    compile_ms: round(compileMs, 1),
    cold_us_per_token: round(coldUs, 3),
    warm_us_per_token: round(warmUs, 3),
    naive_cold_us_per_token: round(naiveUs, 1),
    agreement,
    vocab_name: name,
    steps,
    calls: calls.length,
    state_sets: misses,
    cold_step_max_us: Math.round(stepMaxUs),
    miss_us_mean: Math.round(missUs),
    naive_steps_timed: naiveSteps,
    pairs_checked: pairs,
  };
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const vi = args.indexOf('--vocab');
  const vocab = (vi >= 0 ? args[vi + 1] : 'cl100k_base') as PublishedVocabularyName;
  if (!PUBLISHED_VOCABULARIES.includes(vocab)) throw new Error(`--vocab: one of ${PUBLISHED_VOCABULARIES.join(', ')}`);
  const result = runGrammarBench({ vocab });
  if (args.includes('--json')) console.log(JSON.stringify(result));
}
