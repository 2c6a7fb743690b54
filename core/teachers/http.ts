// The HTTP teacher: any server that speaks OpenAI chat-completions (a hosted model, vLLM,
// llama.cpp's server, Ollama's /v1) answers one ReAct step per request. The wire-format
// transcript becomes chat messages (docs/architecture.md, "HTTP teacher"); the reply is recorded in
// the one canonical step form (canonicalStep) with the raw reply kept beside it. The API
// key comes from AGENT_LAB_TEACHER_API_KEY and goes into the Authorization header only.
import { buildCorpus, makeTaskPool } from '../world';
import { ToolEnv } from '../env';
import { rollout } from '../distill';
import { makeStubTeacher } from '../stubTeacher';
import { AGENT_TOOLS, type McpTool } from '../tools/schemas';
import type { Task } from '../types';
import { ASST, END, SYS, TOOL_RESULT, USER } from '../wire';
import { AsyncTeacher, TeacherConfigError, TeacherError, TeacherReply, canonicalStep } from './teacher';
import { API_KEY_ENV, redactSecrets } from './redact';

export { TeacherConfigError } from './teacher';
export { redactSecrets } from './redact';

export { API_KEY_ENV };
export const BASE_URL_ENV = 'AGENT_LAB_TEACHER_BASE_URL';
export const MODEL_ENV = 'AGENT_LAB_TEACHER_MODEL';

export interface HttpTeacherOptions {
  /** e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1; `/chat/completions` is appended. */
  baseUrl: string;
  model: string;
  temperature?: number;
  maxTokens?: number;
  /** Per request (each retry gets its own). */
  timeoutMs?: number;
  /** Further attempts after a 429, a 5xx, a timeout or a network error. */
  retries?: number;
  /** First backoff between attempts (doubled each time, at most 8 s); a Retry-After header wins (at most 30 s). */
  backoffMs?: number;
  /** The Bearer key (the callers read AGENT_LAB_TEACHER_API_KEY); none: no Authorization header. Kept in memory only. */
  apiKey?: string;
  /** Two (or more) gold transcripts in the wire format; defaults to defaultExemplars(). */
  exemplars?: readonly string[];
  /** The world's MCP tool list (docs/worlds.md, "Tools"); defaults to the textbook's search and calc. */
  tools?: readonly McpTool[];
  /** For tests and proxies; defaults to the global fetch. */
  fetch?: typeof fetch;
}

export interface ResolvedHttpTeacherOptions {
  url: string;
  model: string;
  temperature: number;
  maxTokens: number;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
}

export const HTTP_TEACHER_DEFAULTS = { temperature: 0.7, maxTokens: 512, timeoutMs: 30000, retries: 2, backoffMs: 500 } as const;

/** Checks the options and fills the defaults; throws TeacherConfigError with a clear message. */
export function resolveHttpTeacherOptions(o: HttpTeacherOptions): ResolvedHttpTeacherOptions {
  if (typeof o.baseUrl !== 'string' || o.baseUrl.trim() === '') throw new TeacherConfigError('the HTTP teacher needs a base URL (e.g. http://127.0.0.1:8000/v1)');
  let url: URL;
  try {
    url = new URL(o.baseUrl.trim());
  } catch {
    throw new TeacherConfigError(`the teacher base URL '${o.baseUrl}' is not a URL (e.g. http://127.0.0.1:8000/v1)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TeacherConfigError(`the teacher base URL must be http or https (got '${url.protocol}')`);
  if (url.username || url.password) throw new TeacherConfigError(`put no credentials in the teacher base URL; the key comes from ${API_KEY_ENV}`);
  if (url.search || url.hash) throw new TeacherConfigError(`the teacher base URL takes no query or fragment (got '${o.baseUrl}')`);
  if (typeof o.model !== 'string' || o.model.trim() === '') throw new TeacherConfigError('the HTTP teacher needs a model name');
  const num = (name: string, v: number | undefined, dflt: number, min: number, max: number, integer: boolean): number => {
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
      throw new TeacherConfigError(`teacher ${name} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max} (got ${String(v)})`);
    }
    return v;
  };
  const d = HTTP_TEACHER_DEFAULTS;
  return {
    url: `${url.toString().replace(/\/+$/, '')}/chat/completions`,
    model: o.model.trim(),
    temperature: num('temperature', o.temperature, d.temperature, 0, 2, false),
    maxTokens: num('max tokens', o.maxTokens, d.maxTokens, 1, 1_000_000, true),
    timeoutMs: num('timeout (ms)', o.timeoutMs, d.timeoutMs, 1, 3_600_000, true),
    retries: num('retries', o.retries, d.retries, 0, 20, true),
    backoffMs: num('backoff (ms)', o.backoffMs, d.backoffMs, 0, 60_000, true),
  };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

let exemplarCache: string[] | null = null;
/**
 * Two gold transcripts: the stub teacher's solved trajectories for the first lookup and the
 * first sum task of the default world's training split (fixed, so every request shows the same).
 */
export function defaultExemplars(): string[] {
  if (exemplarCache) return [...exemplarCache];
  const pool = makeTaskPool(0);
  const env = new ToolEnv(buildCorpus(0));
  const teacher = makeStubTeacher(pool.train);
  const out: string[] = [];
  for (const kind of ['lookup', 'sum'] as const) {
    const task = pool.train.find((t: Task) => t.kind === kind && rollout(t, teacher, env).solved);
    if (task) out.push(rollout(task, teacher, env).transcript);
  }
  exemplarCache = out;
  return [...out];
}

/**
 * The system message: the run's system prompt, the tools' MCP schemas (a world's own list,
 * which may leave calc out), the step format for those tools, the exemplars. With the
 * default list it is the message as it always was.
 */
export function teacherSystemMessage(systemPrompt: string, exemplars: readonly string[] = defaultExemplars(), tools: readonly McpTool[] = AGENT_TOOLS): string {
  const has = (name: string) => tools.some((t) => t.name === name);
  const calls = [
    ...(has('search') ? ['<|tool_call|>{"tool": "search", "args": {"query": "<keywords>", "k": 2}}'] : []),
    ...(has('calc') ? ['<|tool_call|>{"tool": "calc", "args": {"expr": "<arithmetic, digits and + - * / ( ) only>"}}'] : []),
  ];
  return [
    systemPrompt,
    '',
    'The tools, as MCP tool schemas:',
    JSON.stringify(tools, null, 2),
    '',
    'Reply with exactly ONE step and nothing else: a line "Thought: <one sentence>", then on the next line either a tool call',
    ...calls.flatMap((c, i) => (i === 0 ? [c] : ['or', c])),
    'or the final answer',
    'Answer: <the answer only>',
    'then stop (the stop sequence is <|end|>). Tool results come back as user messages starting with "Observation:".',
    has('calc') ? 'Look facts up with search and compute with calc; never answer from memory.' : 'Look facts up with search; never answer from memory.',
    '',
    `Solved examples in the wire format (${SYS}, ${USER}, ${ASST} and ${TOOL_RESULT} open a turn, ${END} closes it):`,
    ...exemplars.flatMap((t, i) => ['', `Example ${i + 1}:`, t]),
  ].join('\n');
}

/**
 * The wire-format prompt (ending in `<|assistant|>`) as chat messages: the system message,
 * the question as the user message, earlier assistant turns as assistant messages (their
 * wire text), tool results as user messages "Observation: ...".
 */
export function chatMessages(prompt: string, exemplars?: readonly string[], tools?: readonly McpTool[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let i = 0;
  for (;;) {
    const marker = [SYS, USER, ASST, TOOL_RESULT].find((m) => prompt.startsWith(m, i));
    if (!marker) throw new Error(`not a wire-format prompt: unexpected text at offset ${i}`);
    i += marker.length;
    const end = prompt.indexOf(END, i);
    if (end < 0) {
      if (marker === ASST && i === prompt.length) break; // the open turn the teacher writes
      throw new Error('not a wire-format prompt: a turn without <|end|>');
    }
    const content = prompt.slice(i, end);
    i = end + END.length;
    if (marker === SYS) messages.push({ role: 'system', content: teacherSystemMessage(content, exemplars, tools) });
    else if (marker === USER) messages.push({ role: 'user', content });
    else if (marker === ASST) messages.push({ role: 'assistant', content });
    else messages.push({ role: 'user', content: `Observation: ${content}` });
    if (i === prompt.length) throw new Error('not a wire-format prompt: it must end with <|assistant|>');
  }
  return messages;
}

interface ChatCompletion {
  choices?: { message?: { content?: unknown; refusal?: unknown }; finish_reason?: unknown }[];
}

/**
 * One chat-completions reply as a step; throws TeacherError refusal / malformed / off-grammar.
 * `redact` runs on every text before it is cut to a length: a key that straddled the cut
 * would otherwise survive minus its tail.
 */
export function interpretCompletion(rawBody: string, redact: (text: string) => string = (t) => t): TeacherReply {
  const body = redact(rawBody);
  let data: ChatCompletion;
  try {
    data = JSON.parse(body) as ChatCompletion;
  } catch {
    throw new TeacherError('malformed', `the server's reply is not JSON: ${JSON.stringify(body.slice(0, 120))}`);
  }
  const choice = Array.isArray(data?.choices) ? data.choices[0] : undefined;
  if (!choice || typeof choice !== 'object') throw new TeacherError('malformed', 'the reply has no choices[0]');
  const message = choice.message ?? {};
  if (choice.finish_reason === 'content_filter') throw new TeacherError('refusal', 'finish_reason content_filter');
  // Parsed strings are redacted again: JSON escapes (\u0073k-...) hide a key from the raw pass.
  if (typeof message.refusal === 'string' && message.refusal.trim() !== '') throw new TeacherError('refusal', redact(message.refusal).slice(0, 200));
  const content = redact(contentText(message.content));
  if (content.trim() === '') throw new TeacherError('refusal', 'an empty reply');
  return { text: canonicalStep(content), raw: content };
}

// Some servers send content as parts ([{type: "text", text}]).
function contentText(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join('');
  return '';
}

/** An error reply's message, redacted whole before it is cut to 300 characters. */
function serverMessage(rawBody: string, redact: (text: string) => string): string {
  const body = redact(rawBody);
  try {
    const j = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown };
    const m = typeof j.error === 'string' ? j.error : (j.error?.message ?? j.message ?? j.detail);
    if (typeof m === 'string' && m.trim() !== '') return redact(m).slice(0, 300);
  } catch {
    /* not JSON: the text itself */
  }
  return body.trim().slice(0, 300) || '(no message)';
}

// A bad key, a forbidden model, an unknown model or path: every later request fails the same way.
const FATAL_STATUS = new Set([401, 403, 404]);

/** Bytes of reply a request may read: 64 KiB of envelope plus 64 bytes per max token (JSON-escaped text, generously). */
export function replyCapBytes(maxTokens: number): number {
  return 64 * 1024 + 64 * maxTokens;
}
/** An error reply (4xx/5xx) is read up to this many bytes; the rest is dropped. */
const ERROR_BODY_CAP = 64 * 1024;
/** Longest wait a Retry-After header may ask for. */
export const RETRY_AFTER_CAP_MS = 30_000;
/** Longest backoff between attempts without a Retry-After. */
export const BACKOFF_CAP_MS = 8_000;

/**
 * The wait before the next attempt: a Retry-After header (seconds or an HTTP date, at most
 * 30 s) wins; otherwise `backoffMs * 2^attempt`, at most 8 s. A missing or unreadable header
 * is not a wait of 0.
 */
export function retryDelayMs(retryAfter: string | null, attempt: number, backoffMs: number, now: number = Date.now()): number {
  const fromHeader = parseRetryAfter(retryAfter, now);
  if (fromHeader !== null) return Math.min(fromHeader, RETRY_AFTER_CAP_MS);
  return Math.min(backoffMs * 2 ** attempt, BACKOFF_CAP_MS);
}

/** Retry-After in ms: delta-seconds or an HTTP date (RFC 9110 10.2.3); null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (v === '') return null;
  if (/^[0-9]+(\.[0-9]+)?$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isFinite(at) && /[a-z]/i.test(v)) return Math.max(0, at - now);
  return null;
}

/** The chunks of a body as one byte array (Buffer.concat without Node: core/ is pure). */
function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Reads a reply body up to `cap` bytes; past it, reading stops (the connection is dropped). */
async function readCapped(res: Response, cap: number, abort: () => void): Promise<{ text: string; over: boolean; bytes: number }> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > cap) {
    abort();
    return { text: '', over: true, bytes: declared };
  }
  if (!res.body) return { text: '', over: false, bytes: 0 };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > cap) {
      abort();
      await reader.cancel().catch(() => undefined);
      return { text: new TextDecoder().decode(concatBytes(chunks)), over: true, bytes };
    }
    chunks.push(value);
  }
  return { text: new TextDecoder().decode(concatBytes(chunks)), over: false, bytes };
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/** The HTTP teacher as an AsyncTeacher (options checked here: TeacherConfigError). */
export function makeHttpTeacher(options: HttpTeacherOptions): AsyncTeacher {
  const o = resolveHttpTeacherOptions(options);
  const fetchFn = options.fetch ?? globalThis.fetch;
  if (typeof fetchFn !== 'function') throw new TeacherConfigError('this runtime has no fetch (Node 20 or later is needed)');
  const apiKey = options.apiKey;
  // A world without calc is not shown an example that calls it.
  const withoutCalc = options.tools !== undefined && !options.tools.some((t) => t.name === 'calc');
  const exemplars = options.exemplars ?? defaultExemplars().filter((t) => !(withoutCalc && t.includes('{"tool": "calc"')));
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers['authorization'] = `Bearer ${apiKey}`;
  const redact = (t: string): string => redactSecrets(t, apiKey);
  const cap = replyCapBytes(o.maxTokens);

  return async (prompt: string, signal?: AbortSignal): Promise<TeacherReply> => {
    const body = JSON.stringify({
      model: o.model,
      messages: chatMessages(prompt, exemplars, options.tools),
      temperature: o.temperature,
      max_tokens: o.maxTokens,
      stop: [END],
    });
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw new TeacherError('cancelled', 'stopped before the request was sent');
      let failure: TeacherError;
      let retryAfter: string | null = null;
      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, o.timeoutMs);
      // Ctrl-C (the caller's signal) ends the request in flight at once.
      const onAbort = (): void => controller.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      let reading = false;
      try {
        const res = await fetchFn(o.url, { method: 'POST', headers, body, signal: controller.signal });
        reading = true;
        if (res.ok) {
          const reply = await readCapped(res, cap, () => controller.abort());
          if (reply.over) {
            throw new TeacherError('over-long', `the reply is over ${cap} bytes (the cap for max_tokens ${o.maxTokens}); it was not read further`);
          }
          const r = interpretCompletion(reply.text, redact);
          return { text: r.text, raw: r.raw };
        }
        const reason = `http ${res.status}`;
        const text = (await readCapped(res, ERROR_BODY_CAP, () => controller.abort())).text;
        if (res.status !== 429 && res.status < 500) throw new TeacherError(reason, serverMessage(text, redact), FATAL_STATUS.has(res.status));
        failure = new TeacherError(reason, serverMessage(text, redact));
        retryAfter = res.headers.get('retry-after');
      } catch (err) {
        // Every detail was built from redacted text; redacting again costs nothing and guards new paths.
        if (err instanceof TeacherError) throw new TeacherError(err.reason, redact(err.detail), err.fatal);
        if (signal?.aborted && !timedOut) throw new TeacherError('cancelled', 'stopped (the request in flight was aborted)');
        failure = timedOut
          ? new TeacherError('timeout', `no complete reply within ${o.timeoutMs} ms`)
          : reading
            ? new TeacherError('truncated', redact(`the reply was cut off before its end (${networkMessage(err)})`))
            : new TeacherError('network', redact(networkMessage(err)));
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
      if (attempt >= o.retries) throw failure;
      await sleep(retryDelayMs(retryAfter, attempt, o.backoffMs), signal);
    }
  };
}

// undici puts the useful part (ECONNREFUSED ...) in the cause.
function networkMessage(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`;
}
