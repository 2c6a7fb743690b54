// The student in the real ReAct loop: it generates one assistant turn at a time (stopping
// at <|end|>), tool calls run for real, and the harness adds what the policy did not write
// (turn openers, observations, a forced answer). Tool calls are grammar-constrained from
// the moment the policy emits <|tool_call|>; the choice to call or answer stays free. The
// trace carries token ids with a generated/harness flag per token, never re-tokenized.
import { ToolEnv } from '../../core/env';
import { normalize, renderPrompt } from '../../core/distill';
import type { StateSet } from '../../core/grammar';
import { pyJsonDumps } from '../../core/pyjson';
import type { Task } from '../../core/types';
import { ASST, END, FORCED_ANSWER_TEXT, FORMAT_ERROR, REPEATED_CALL, TOOL_CALL, TOOL_RESULT, USER, parseAssistantStep, renderToolResult } from '../../core/wire';
import { tokenTexts, type Tokenizer } from '../../core/tokenizer';
import { CopyBias } from '../../core/copyBias';

/** How long batched decoding runs before it lets the event loop turn (a signal, a cancel message). */
const YIELD_EVERY_MS = 100;

/** An incremental decoder: append tokens, get the next-token logits. */
export interface DecodeSession {
  append(ids: readonly number[]): Float32Array;
  /** append() for backends that read back asynchronously only (webgpu); runAsync uses it when present. */
  appendAsync?(ids: readonly number[]): Promise<Float32Array>;
  dispose(): void;
}
export interface Policy {
  readonly vocab: number;
  /** The longest sequence the policy accepts (its context). */
  readonly maxContext: number;
  /**
   * Decoding only: logits of tokens that continue a word of the user's question are raised
   * by this much (core/copyBias.ts); 0 or absent: none. A model's config carries it.
   */
  readonly copyBias?: number;
  /** With copyBias: also lower the tokens that run on past a whole name of the question. */
  readonly copyStop?: boolean;
  /** The copy bias also copies numbers into calc expressions and answers (core/copyBias.ts numberDrifts). */
  readonly copyValues?: boolean;
  newSession(): DecodeSession;
  /**
   * One token appended to each of several distinct sessions in one batched forward pass
   * (optional): the logits after each, as `append([id])` would give them.
   */
  appendBatch?(sessions: readonly DecodeSession[], ids: readonly number[]): Float32Array[];
  /** appendBatch() read back asynchronously (webgpu); runBatchAsync uses it when present. */
  appendBatchAsync?(sessions: readonly DecodeSession[], ids: readonly number[]): Promise<Float32Array[]>;
}

/** What an episode asks of its decoder: append these ids, give back the next-token logits. */
type Append = readonly number[];

/** The episode no longer fits the policy's context; it ends where it is. */
class ContextFull extends Error {}
/** The grammar as a token mask (core/tokenMask's TokenMasker fits). */
export interface CallMask {
  start(): StateSet;
  /** Sets logits of tokens illegal in `states` to -Infinity (keeps <|end|> only when complete). */
  apply(logits: Float32Array, states: StateSet): void;
  advance(states: StateSet, id: number): StateSet;
}

export { FORCED_ANSWER_TEXT, FORMAT_ERROR, REPEATED_CALL } from '../../core/wire';

export interface EpisodeOptions {
  maxSteps: number;
  /** 0 = greedy. */
  temperature: number;
  constrained: boolean;
  /** A turn that reaches this many tokens without <|end|> is closed by the harness. */
  maxTurnTokens: number;
  /** Uniform random numbers in [0, 1) for sampling. */
  random?: () => number;
  systemPrompt?: string;
}
export const DEFAULT_EPISODE: EpisodeOptions = { maxSteps: 6, temperature: 0, constrained: true, maxTurnTokens: 160 };

export type EpisodeTask = Pick<Task, 'question'> & Partial<Pick<Task, 'gold' | 'kind'>>;

export interface StepRecord {
  kind: 'tool' | 'malformed' | 'final' | 'forced';
  text: string;
  tool?: string;
  args?: unknown;
  observation?: string;
  guard?: 'RepeatedCall' | 'FormatError';
  /** The turn hit maxTurnTokens and the harness closed it. */
  truncated: boolean;
}

export interface Episode {
  question: string;
  gold: string;
  kind: string;
  answer: string | null;
  solved: boolean;
  steps: number;
  outOfSteps: boolean;
  /** The episode filled the policy's context and was stopped there. */
  contextFull: boolean;
  text: string;
  ids: number[];
  /** 1 where the policy sampled the token, 0 where the harness wrote it. */
  generated: number[];
  record: StepRecord[];
}

/** One assistant turn generated after a prompt (continueTurn); `contextFull` when the prompt left no room. */
type TurnResult = { text: string; truncated: boolean; contextFull: boolean };

/** An episode of a batch: its task, options (its own random stream) and world's tools (default the runtime's). */
type BatchItem = { task: EpisodeTask; options?: Partial<EpisodeOptions>; env?: ToolEnv };

export class AgentRuntime {
  private readonly endId: number;
  private readonly callId: number;
  /** Specials the policy may never emit in free text (roles are the harness's). */
  private readonly forbiddenInText: number[];
  /** Each token's text (specials null), for the copy bias; built on first use. */
  private tokenStrings: readonly (string | null)[] | null = null;

  constructor(
    readonly policy: Policy,
    readonly tokenizer: Tokenizer,
    readonly env: ToolEnv,
    readonly mask: CallMask | null,
  ) {
    const ids = tokenizer.specialIds;
    this.endId = ids['<|end|>'];
    this.callId = ids['<|tool_call|>'];
    this.forbiddenInText = Object.values(ids).filter((id) => id !== this.endId && id !== this.callId);
  }

  /** Runs one episode. A question without gold (agent-lab run) is never `solved`. */
  run(task: EpisodeTask, options: Partial<EpisodeOptions> = {}, env: ToolEnv = this.env): Episode {
    const session = this.policy.newSession();
    try {
      const episode = this.episode(task, { ...DEFAULT_EPISODE, ...options }, env);
      let r = episode.next();
      while (!r.done) r = episode.next(session.append(r.value));
      return r.value;
    } finally {
      session.dispose();
    }
  }

  /** run() with the policy's asynchronous decoding where it has one (the same episode). */
  async runAsync(task: EpisodeTask, options: Partial<EpisodeOptions> = {}, env: ToolEnv = this.env): Promise<Episode> {
    const session = this.policy.newSession();
    const append = async (ids: readonly number[]): Promise<Float32Array> => (session.appendAsync ? session.appendAsync(ids) : session.append(ids));
    try {
      const episode = this.episode(task, { ...DEFAULT_EPISODE, ...options }, env);
      let r = episode.next();
      while (!r.done) r = episode.next(await append(r.value));
      return r.value;
    } finally {
      session.dispose();
    }
  }

  /** runBatch() with the policy's asynchronous decoding where it has one (the same episodes, in the same lockstep). */
  async runBatchAsync(items: readonly BatchItem[]): Promise<Episode[]> {
    const sessions = items.map(() => this.policy.newSession());
    const policy = this.policy;
    const appendBatch = policy.appendBatchAsync
      ? (ss: readonly DecodeSession[], ids: readonly number[]) => policy.appendBatchAsync!(ss, ids)
      : policy.appendBatch
        ? async (ss: readonly DecodeSession[], ids: readonly number[]) => policy.appendBatch!(ss, ids)
        : null;
    // Decoding on wasm or cpu never waits on I/O: yield now and then, so that a signal
    // (Ctrl-C, SIGTERM) or a cancel message is heard during a long round, not after it.
    let yieldedAt = Date.now();
    try {
      const steps = this.lockstep(items, Boolean(appendBatch));
      let r = steps.next();
      while (!r.done) {
        if (Date.now() - yieldedAt > YIELD_EVERY_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          yieldedAt = Date.now();
        }
        const { at, ids } = r.value;
        if (at.length > 1) r = steps.next(await appendBatch!(at.map((i) => sessions[i]!), ids));
        else {
          const s = sessions[at[0]!]!;
          r = steps.next([await (s.appendAsync ? s.appendAsync(ids) : s.append(ids))]);
        }
      }
      return r.value;
    } finally {
      for (const s of sessions) s.dispose();
    }
  }

  /**
   * Runs several episodes in lockstep: whenever every unfinished episode waits for one
   * sampled token, their decoding steps share one batched forward pass (Policy.appendBatch);
   * prompts and observations are prefilled per episode. Each episode keeps its own options
   * (its own random stream), so it samples from the same distributions as `run`, and may
   * live in its own world (`env`: its corpus and tools; default the runtime's).
   */
  runBatch(items: readonly BatchItem[]): Episode[] {
    const sessions = items.map(() => this.policy.newSession());
    const policy = this.policy;
    try {
      const steps = this.lockstep(items, Boolean(policy.appendBatch));
      let r = steps.next();
      while (!r.done) {
        const { at, ids } = r.value;
        r = steps.next(at.length > 1 ? policy.appendBatch!(at.map((i) => sessions[i]!), ids) : [sessions[at[0]!]!.append(ids)]);
      }
      return r.value;
    } finally {
      for (const s of sessions) s.dispose();
    }
  }

  /**
   * The lockstep schedule of runBatch and runBatchAsync, one for both: it yields each decoding
   * request (episodes `at`; several: one sampled token each, to batch; one: its ids to append)
   * and is sent the logits, one array per episode.
   */
  private *lockstep(items: readonly BatchItem[], canBatch: boolean): Generator<{ at: number[]; ids: readonly number[] }, Episode[], Float32Array[]> {
    const episodes = items.map((it) => this.episode(it.task, { ...DEFAULT_EPISODE, ...it.options }, it.env ?? this.env));
    const state = episodes.map((e) => e.next());
    const results: (Episode | null)[] = items.map(() => null);
    for (;;) {
      const waiting: number[] = [];
      state.forEach((r, i) => {
        if (r.done) results[i] = r.value;
        else waiting.push(i);
      });
      if (waiting.length === 0) return results as Episode[];
      const singles = waiting.filter((i) => (state[i]!.value as Append).length === 1);
      const batched = canBatch && singles.length > 1 ? new Set(singles) : new Set<number>();
      if (batched.size > 0) {
        const at = [...batched];
        const logits = yield { at, ids: at.map((i) => (state[i]!.value as Append)[0]!) };
        at.forEach((i, k) => (state[i] = episodes[i]!.next(logits[k]!)));
      }
      for (const i of waiting) {
        if (!batched.has(i)) state[i] = episodes[i]!.next((yield { at: [i], ids: state[i]!.value as Append })[0]!);
      }
    }
  }

  /** One episode as a coroutine: it yields the ids to append and receives the logits after them. */
  private *episode(task: EpisodeTask, o: EpisodeOptions, env: ToolEnv): Generator<Append, Episode, Float32Array> {
    const ids: number[] = [];
    const generated: number[] = [];
    let logits: Float32Array | null = null;
    const { tokenizer, policy } = this; // the generator below is a plain function: no `this`
    function* harness(text: string): Generator<Append, void, Float32Array> {
      const piece = tokenizer.encode(text);
      if (piece.length === 0) return;
      if (ids.length + piece.length > policy.maxContext) throw new ContextFull();
      ids.push(...piece);
      for (let i = 0; i < piece.length; i++) generated.push(0);
      logits = yield piece;
    }
    const copy = this.copyBiasFor(task.question);
    const record: StepRecord[] = [];
    const calls = new Set<string>();
    let answer: string | null = null;
    let steps = 0;
    let outOfSteps = false;
    let contextFull = false;
    try {
      yield* harness(renderPrompt(task.question, o.systemPrompt ?? env.systemPrompt));
      for (let s = 0; s < o.maxSteps && answer === null; s++) {
        steps++;
        yield* harness(ASST);
        const turn = yield* this.generateTurn(() => logits!, (l) => (logits = l), ids, generated, o, true, copy);
        const action = parseAssistantStep(turn.text);
        if (action.kind === 'final') {
          answer = action.answer;
          record.push({ kind: 'final', text: turn.text, truncated: turn.truncated });
          break;
        }
        let observation: string;
        let guard: StepRecord['guard'];
        if (action.kind === 'malformed') {
          observation = FORMAT_ERROR;
          guard = 'FormatError';
        } else {
          const key = pyJsonDumps({ tool: action.tool, args: action.args });
          if (calls.has(key)) {
            observation = REPEATED_CALL;
            guard = 'RepeatedCall';
          } else {
            calls.add(key);
            observation = env.runTool(action);
          }
        }
        record.push({
          kind: action.kind,
          text: turn.text,
          ...(action.kind === 'tool' ? { tool: action.tool, args: action.args } : {}),
          observation,
          ...(guard ? { guard } : {}),
          truncated: turn.truncated,
        });
        copy?.observe(observation);
        yield* harness(renderToolResult(observation));
      }
      if (answer === null) {
        // Out of steps: the harness forces one answer attempt; its text is not the policy's.
        outOfSteps = true;
        yield* harness(ASST + FORCED_ANSWER_TEXT);
        const turn = yield* this.generateTurn(() => logits!, (l) => (logits = l), ids, generated, o, false, copy);
        answer = finalAnswerOf(FORCED_ANSWER_TEXT + turn.text);
        record.push({ kind: 'forced', text: FORCED_ANSWER_TEXT + turn.text, truncated: turn.truncated });
      }
    } catch (err) {
      if (!(err instanceof ContextFull)) throw err;
      contextFull = true;
      outOfSteps = answer === null;
    }
    return {
      question: task.question,
      gold: task.gold ?? '',
      kind: task.kind ?? '',
      answer,
      solved: answer !== null && task.gold !== undefined && normalize(answer) === normalize(task.gold),
      steps,
      outOfSteps,
      contextFull,
      text: this.tokenizer.decode(ids),
      ids,
      generated,
      record,
    };
  }

  /**
   * One assistant turn after `prompt` (a wire-format transcript ending in <|assistant|>),
   * generated as `run` generates its turns: the student as a teacher. The text excludes
   * <|end|>; `contextFull` when the prompt leaves no room to generate.
   */
  continueTurn(prompt: string, options: Partial<EpisodeOptions> = {}): TurnResult {
    const session = this.policy.newSession();
    try {
      const turn = this.turnAfter(prompt, options);
      let r = turn.next();
      while (!r.done) r = turn.next(session.append(r.value));
      return r.value;
    } finally {
      session.dispose();
    }
  }

  /** continueTurn() with the policy's asynchronous decoding where it has one (webgpu). */
  async continueTurnAsync(prompt: string, options: Partial<EpisodeOptions> = {}): Promise<TurnResult> {
    const session = this.policy.newSession();
    try {
      const turn = this.turnAfter(prompt, options);
      let r = turn.next();
      while (!r.done) r = turn.next(await (session.appendAsync ? session.appendAsync(r.value) : session.append(r.value)));
      return r.value;
    } finally {
      session.dispose();
    }
  }

  /** continueTurn's one body for both: it yields the ids to append and receives the logits after them. */
  private *turnAfter(prompt: string, options: Partial<EpisodeOptions>): Generator<Append, TurnResult, Float32Array> {
    const o = { ...DEFAULT_EPISODE, ...options };
    const ids = this.tokenizer.encode(prompt);
    if (ids.length + 2 > this.policy.maxContext) return { text: '', truncated: false, contextFull: true };
    try {
      let logits = yield ids;
      const gen = this.generateTurn(() => logits, (l) => (logits = l), [...ids], [], o, true, this.copyBiasFor(userTextOf(prompt)));
      let r = gen.next();
      while (!r.done) r = gen.next(yield r.value);
      return { ...r.value, contextFull: false };
    } catch (err) {
      if (!(err instanceof ContextFull)) throw err;
      return { text: '', truncated: false, contextFull: true };
    }
  }

  /** The copy bias of an episode whose user asked `question` (null when the policy has none). */
  private copyBiasFor(question: string): CopyBias | null {
    const strength = this.policy.copyBias ?? 0;
    if (strength === 0) return null;
    const tok = this.tokenizer;
    this.tokenStrings ??= tokenTexts(tok);
    return new CopyBias(this.tokenStrings, question, strength, this.policy.copyStop ?? false, this.policy.copyValues ?? false);
  }

  /** Generates one assistant turn up to and including <|end|> (added by the harness if cut). */
  private *generateTurn(
    getLogits: () => Float32Array,
    setLogits: (l: Float32Array) => void,
    ids: number[],
    generated: number[],
    o: EpisodeOptions,
    callsAllowed: boolean,
    copy: CopyBias | null,
  ): Generator<Append, { text: string; truncated: boolean }, Float32Array> {
    const turnIds: number[] = [];
    let turnText = '';
    let states: StateSet | null = null; // non-null inside a tool call
    for (let n = 0; n < o.maxTurnTokens; n++) {
      // Room for this token and, if needed, the <|end|> that closes the turn.
      if (ids.length + 2 > this.policy.maxContext) throw new ContextFull();
      const logits = Float32Array.from(getLogits());
      if (states !== null && this.mask && o.constrained) this.mask.apply(logits, states);
      else {
        for (const id of this.forbiddenInText) logits[id] = -Infinity;
        if (!callsAllowed || states !== null) logits[this.callId] = -Infinity;
      }
      copy?.apply(logits, turnText);
      const id = pick(logits, o.temperature, o.random ?? Math.random);
      ids.push(id);
      generated.push(1);
      if (id === this.endId) {
        // The logits after <|end|> are needed for the next harness text only through append.
        setLogits(yield [id]);
        return { text: this.tokenizer.decode(turnIds), truncated: false };
      }
      turnIds.push(id);
      if (copy) turnText += this.tokenStrings![id] ?? '';
      if (id === this.callId) states = this.mask ? this.mask.start() : [];
      else if (states !== null && this.mask) states = this.mask.advance(states, id);
      setLogits(yield [id]);
    }
    // Cut: the harness closes the turn; this <|end|> is not the policy's.
    ids.push(this.endId);
    generated.push(0);
    setLogits(yield [this.endId]);
    return { text: this.tokenizer.decode(turnIds), truncated: true };
  }
}

/** The user's text of a wire-format prompt (the first user turn; '' when there is none). */
function userTextOf(prompt: string): string {
  const start = prompt.indexOf(USER);
  if (start < 0) return '';
  const end = prompt.indexOf(END, start + USER.length);
  return prompt.slice(start + USER.length, end < 0 ? undefined : end);
}

function finalAnswerOf(text: string): string | null {
  const a = parseAssistantStep(text);
  return a.kind === 'final' ? a.answer : null;
}

/** Greedy (temperature 0) or softmax sampling at `temperature`. */
export function pick(logits: Float32Array, temperature: number, random: () => number): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  if (temperature <= 0) return best;
  const max = logits[best]!;
  let sum = 0;
  const p = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    p[i] = v === -Infinity ? 0 : Math.exp((v - max) / temperature);
    sum += p[i]!;
  }
  let r = random() * sum;
  for (let i = 0; i < p.length; i++) {
    r -= p[i]!;
    if (r < 0) return i;
  }
  return best;
}

/** Marker strings, re-exported for callers that split traces. */
export const MARKERS = { ASST, END, TOOL_CALL, TOOL_RESULT };
