// The language server's custom messages (`agentLab/<name>`), typed once: a method name, the
// params and result types, and a validator for each side to check what it received. The
// server (language-server/) and the clients (extension/languageClient.ts, the loss-mask
// panel, test clients) import this file; it holds no Node or DOM imports.
import { isObj } from './isObj';

/** LSP position (zero-based line, UTF-16 character), structurally the protocol's. */
export interface LspPosition {
  line: number;
  character: number;
}

/** Where a token sits: UTF-16 offsets [start, end) into the transcript `text`. */
export type TokenOffsets = [start: number, end: number];

/** The role of the turn a span belongs to; `outside` = between turns (masked text). */
export type SpanRole = 'system' | 'user' | 'assistant' | 'tool_result' | 'outside';

export interface LossMaskSpan {
  /** UTF-16 offsets into `text`. */
  start: number;
  end: number;
  /** `_segment`'s flag: the loss supervises this span. */
  supervised: boolean;
  role: SpanRole;
}

export interface TokenizerInfo {
  /**
   * `default`: the lab's tokenizer; `run`: the run folder's tokenizer.json; `setting`:
   * agentLab.tokenizerPath; `template`: a Hugging Face tokenizer folder's (a TRL chat row, `chat`).
   */
  source: 'default' | 'run' | 'setting' | 'template';
  /** The tokenizer.json file (for `template`: the tokenizer folder), null for the built-in default. */
  path: string | null;
  vocabSize: number;
}

// ---- agentLab/lossMask: client -> server request ------------------------------------------
// The token-level loss mask of one transcript: the `.transcript` document itself, or one
// row of a dataset (`row` = the row's zero-based line; or the row under `position`).

export const LossMaskRequest = { method: 'agentLab/lossMask' } as const;

export interface LossMaskParams {
  textDocument: { uri: string };
  /** Dataset documents: the row's zero-based line. */
  row?: number;
  /** Dataset documents: the row under this position (used when `row` is absent). */
  position?: LspPosition;
}

export interface LossMaskResult {
  uri: string;
  /** The dataset row's line, or null for a `.transcript`. */
  row: number | null;
  /** The transcript the offsets index (for a dataset row: the decoded `text` field). */
  text: string;
  tokenizer: TokenizerInfo;
  /** Token ids, in order, as SFT encodes them (segment by segment). */
  ids: number[];
  /** Per token: [start, end) UTF-16 offsets into `text`. */
  offsets: TokenOffsets[];
  /** Per token: the loss target flag (the token itself, not the shifted label). */
  supervised: boolean[];
  /** Per token: a wire-format special token. */
  special: boolean[];
  /** `_segment`'s spans, with their roles. */
  spans: LossMaskSpan[];
  maxLen: number;
  /** More than `maxLen` tokens: SFT drops this example. */
  overLength: boolean;
  /**
   * A row of a TRL conversational dataset under a chat template (issue 30): `text` is the row
   * rendered by the template, `supervised` is true where either rule supervises the token,
   * and this says which rule does. Absent for the lab's own transcripts.
   */
  chat?: ChatMaskPart;
}

/** A finding of core/chatTemplate on the row (its code, severity and words). */
export interface ChatMaskFinding {
  code: string;
  severity: 'error' | 'warning';
  message: string;
  /** The message it concerns, when one. */
  message_index?: number;
}

/** Supervised-token counts over a chat dataset's rows (those the server has masked so far). */
export interface ChatFileCounts {
  /** Rows counted (masked without an error). */
  rows: number;
  /** Rows that are not conversations or that the template fails on. */
  failed: number;
  /** Non-blank lines of the file. */
  lines: number;
  tokens: number;
  generation: number;
  prefix: number;
  /** Every non-blank line is counted (false while the server's pass is still on its way). */
  complete: boolean;
}

export interface ChatMaskPart {
  /** The tokenizer folder whose chat template rendered the row. */
  template: string;
  hasGenerationTags: boolean;
  /** Per token: inside a `{% generation %}` block (transformers' return_assistant_tokens_mask, TRL's assistant_only_loss). */
  generation: boolean[];
  /** Per token: the prefix-difference mask (what each assistant turn adds; completion_only_loss on prompt-completion rows). */
  prefix: boolean[];
  /** Per token: the role of the message whose rendering holds it, or `template` (generation prompt, tails). */
  roles: string[];
  /** Per token: the index of that message in the conversation, or -1. */
  messages: number[];
  /** Per message: [start, end) columns of the message object on the row's line (null when not found). */
  messageColumns: (TokenOffsets | null)[];
  findings: ChatMaskFinding[];
  file: ChatFileCounts;
}

// ---- agentLab/datasetRecognized: server -> client notification -----------------------------
// A JSONL document the server treats as a dataset (by glob, run folder or content), so a
// client may switch its language to `agent-dataset`.

export const DatasetRecognizedNotification = { method: 'agentLab/datasetRecognized' } as const;

export interface DatasetRecognizedParams {
  uri: string;
  reason: 'language' | 'glob' | 'run-folder' | 'content';
}

// ---- validators -----------------------------------------------------------------------------

const isNat = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;
const isPosition = (x: unknown): x is LspPosition => isObj(x) && isNat(x['line']) && isNat(x['character']);
const everyIs = <T>(xs: unknown, f: (x: unknown) => x is T): xs is T[] => Array.isArray(xs) && xs.every(f);
const isBool = (x: unknown): x is boolean => typeof x === 'boolean';

export function isLossMaskParams(x: unknown): x is LossMaskParams {
  if (!isObj(x) || !isObj(x['textDocument']) || typeof x['textDocument']['uri'] !== 'string') return false;
  if (x['row'] !== undefined && !isNat(x['row'])) return false;
  if (x['position'] !== undefined && !isPosition(x['position'])) return false;
  return true;
}

const ROLES: readonly SpanRole[] = ['system', 'user', 'assistant', 'tool_result', 'outside'];

function isSpan(x: unknown): x is LossMaskSpan {
  return (
    isObj(x) &&
    isNat(x['start']) &&
    isNat(x['end']) &&
    (x['end'] as number) >= (x['start'] as number) &&
    isBool(x['supervised']) &&
    ROLES.includes(x['role'] as SpanRole)
  );
}

function isOffsets(x: unknown): x is TokenOffsets {
  return Array.isArray(x) && x.length === 2 && isNat(x[0]) && isNat(x[1]) && x[1] >= x[0];
}

export function isTokenizerInfo(x: unknown): x is TokenizerInfo {
  return (
    isObj(x) &&
    (x['source'] === 'default' || x['source'] === 'run' || x['source'] === 'setting' || x['source'] === 'template') &&
    (x['path'] === null || typeof x['path'] === 'string') &&
    isNat(x['vocabSize'])
  );
}

/** Shape and internal consistency (parallel arrays of one length, offsets inside `text`). */
export function isLossMaskResult(x: unknown): x is LossMaskResult {
  if (!isObj(x)) return false;
  if (typeof x['uri'] !== 'string' || typeof x['text'] !== 'string') return false;
  if (x['row'] !== null && !isNat(x['row'])) return false;
  if (!isTokenizerInfo(x['tokenizer']) || !isNat(x['maxLen']) || !isBool(x['overLength'])) return false;
  const { ids, offsets, supervised, special, spans } = x;
  if (!everyIs(ids, isNat) || !everyIs(offsets, isOffsets) || !everyIs(supervised, isBool) || !everyIs(special, isBool)) {
    return false;
  }
  if (!everyIs(spans, isSpan)) return false;
  const n = ids.length;
  if (offsets.length !== n || supervised.length !== n || special.length !== n) return false;
  const len = x['text'].length;
  if (!offsets.every(([, e]) => e <= len) || !spans.every((s) => s.end <= len)) return false;
  return x['chat'] === undefined || isChatMaskPart(x['chat'], n);
}

const isStr = (x: unknown): x is string => typeof x === 'string';

function isChatFinding(x: unknown): x is ChatMaskFinding {
  return (
    isObj(x) &&
    isStr(x['code']) &&
    (x['severity'] === 'error' || x['severity'] === 'warning') &&
    isStr(x['message']) &&
    (x['message_index'] === undefined || isNat(x['message_index']))
  );
}

function isChatFileCounts(x: unknown): x is ChatFileCounts {
  return isObj(x) && ['rows', 'failed', 'lines', 'tokens', 'generation', 'prefix'].every((k) => isNat(x[k])) && isBool(x['complete']);
}

/** The chat part of a loss mask: per-token arrays of the mask's length `n`. */
export function isChatMaskPart(x: unknown, n: number): x is ChatMaskPart {
  if (!isObj(x) || !isStr(x['template']) || !isBool(x['hasGenerationTags'])) return false;
  const { generation, prefix, roles, messages, messageColumns } = x;
  if (!everyIs(generation, isBool) || !everyIs(prefix, isBool) || !everyIs(roles, isStr)) return false;
  if (!everyIs(messages, (m): m is number => Number.isInteger(m) && (m as number) >= -1)) return false;
  if (generation.length !== n || prefix.length !== n || roles.length !== n || messages.length !== n) return false;
  if (!everyIs(messageColumns, (c): c is TokenOffsets | null => c === null || isOffsets(c))) return false;
  return everyIs(x['findings'], isChatFinding) && isChatFileCounts(x['file']);
}

export function isDatasetRecognizedParams(x: unknown): x is DatasetRecognizedParams {
  return (
    isObj(x) &&
    typeof x['uri'] === 'string' &&
    (x['reason'] === 'language' || x['reason'] === 'glob' || x['reason'] === 'run-folder' || x['reason'] === 'content')
  );
}
