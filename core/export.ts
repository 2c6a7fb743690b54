// Export to Hugging Face TRL (`agent-lab export --format trl-sft|trl-grpo`): the lab's data
// in the dataset formats TRL's SFTTrainer and GRPOTrainer document, with a tokenizer whose
// chat template renders messages back to the lab's wire text byte for byte, so the
// supervision TRL applies is the lab's mask. Pure: text in, file texts out (cli/export.ts
// reads and writes). The Python files and the README written beside the data are in
// exportScripts.ts.
import { DEFAULT_MAX_STEPS } from './distill';
import { SYSTEM_PROMPT } from './env';
import { segment } from './lossMask';
import { sha256Hex, tokenizerFromJsonText } from './tokenizer';
import { utf8Encode } from './tokenizer/bytelevel';
import { parseJsonl as parseJsonlLines } from './jsonl';
import { SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from './protocol/folders';
import { ASST, BOS, END, EOS, PAD, SPECIAL_TOKENS, SYS, TOOL_RESULT, USER } from './wire';
import { README_MD, REWARD_PY, TRAIN_GRPO_PY, TRAIN_SFT_PY } from './exportScripts';
import { isObj } from './protocol/isObj';

export const EXPORT_FORMATS = ['trl-sft', 'trl-grpo'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Bad input: the message names the file, the line and what is wrong. */
export class ExportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExportError';
  }
}

export type Role = 'system' | 'user' | 'assistant' | 'tool';
export interface ChatMessage {
  role: Role;
  content: string;
}

/** TRL's standard prompt-completion row: completion-only loss supervises `completion`. */
export interface PromptCompletionRow {
  prompt: string;
  completion: string;
}

/** TRL's conversational prompt-only row; `gold` and `kind` reach the reward function as kwargs. */
export interface GrpoPromptRow {
  prompt: ChatMessage[];
  gold: string;
  kind: string;
}

const OPENER: Record<Role, string> = { system: SYS, user: USER, assistant: ASST, tool: TOOL_RESULT };
const ROLE_OF = new Map<string, Role>(Object.entries(OPENER).map(([role, opener]) => [opener, role as Role]));
/** Markers `segment` treats as boundaries: content holding one would change the mask. */
const BOUNDARIES = [SYS, USER, ASST, TOOL_RESULT, END] as const;

/**
 * The chat template shipped in tokenizer_config.json. It renders a message list to the
 * wire text exactly (system/user/tool turns as `<|role|>content<|end|>`, an assistant turn
 * as `<|assistant|>content<|end|>`), with `{% generation %}` around the assistant content and
 * its closing `<|end|>` — the spans the lab supervises — so `return_assistant_tokens_mask`
 * (TRL's `assistant_only_loss=True`) masks exactly as `segment` does. Every tag trims the
 * whitespace around it, so HF's `trim_blocks`/`lstrip_blocks` settings change nothing.
 */
export const CHAT_TEMPLATE = [
  '{%- for message in messages -%}',
  "{%- if message['role'] == 'system' -%}{{- '<|system|>' + message['content'] + '<|end|>' -}}",
  "{%- elif message['role'] == 'user' -%}{{- '<|user|>' + message['content'] + '<|end|>' -}}",
  "{%- elif message['role'] == 'assistant' -%}{{- '<|assistant|>' -}}{%- generation -%}{{- message['content'] + '<|end|>' -}}{%- endgeneration -%}",
  "{%- elif message['role'] == 'tool' -%}{{- '<|tool_result|>' + message['content'] + '<|end|>' -}}",
  "{%- else -%}{{- raise_exception('Agent Lab chat template: unknown role ' + message['role']) -}}",
  '{%- endif -%}',
  '{%- endfor -%}',
  "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}",
].join('\n');

/** What CHAT_TEMPLATE renders, and where its `{% generation %}` blocks lie (UTF-16 offsets). */
export function renderMessages(
  messages: readonly ChatMessage[],
  addGenerationPrompt = false,
): { text: string; generation: [number, number][] } {
  let text = '';
  const generation: [number, number][] = [];
  for (const m of messages) {
    text += OPENER[m.role];
    const start = text.length;
    text += m.content + END;
    if (m.role === 'assistant') generation.push([start, text.length]);
  }
  if (addGenerationPrompt) text += ASST;
  return { text, generation };
}

/**
 * A transcript as messages. Only the wire format is accepted: a sequence of
 * `<|system|>`/`<|user|>`/`<|assistant|>`/`<|tool_result|>` turns each closed by `<|end|>`,
 * nothing between turns, and at least one assistant turn. (Text between turns is masked by
 * `segment` but has no message to live in, so it could not round-trip.)
 */
export function transcriptToMessages(text: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  let i = 0;
  while (i < text.length) {
    const opener = [...ROLE_OF.keys()].find((o) => text.startsWith(o, i));
    if (opener === undefined) {
      throw new ExportError(
        `character ${i}: expected a turn (${[...ROLE_OF.keys()].join(', ')}), found ${JSON.stringify(text.slice(i, i + 24))}`,
      );
    }
    const role = ROLE_OF.get(opener)!;
    const start = i + opener.length;
    const end = text.indexOf(END, start);
    if (end < 0) throw new ExportError(`character ${i}: the ${opener} turn is not closed by ${END}`);
    const content = text.slice(start, end);
    const inner = BOUNDARIES.find((m) => content.includes(m));
    if (inner !== undefined) throw new ExportError(`character ${i}: the ${opener} turn holds ${inner} before its ${END}`);
    out.push({ role, content });
    i = end + END.length;
  }
  if (!out.some((m) => m.role === 'assistant')) throw new ExportError('no assistant turn (nothing to supervise)');
  return out;
}

/**
 * One row per assistant turn: `prompt` is the transcript up to and including that turn's
 * `<|assistant|>`, `completion` its content plus the closing `<|end|>`. TRL tokenizes prompt
 * and prompt+completion and supervises the difference; `<|assistant|>` is a single added
 * token, so the split is a token boundary and the union of the completions is the lab's mask.
 */
export function promptCompletionRows(messages: readonly ChatMessage[]): PromptCompletionRow[] {
  const rows: PromptCompletionRow[] = [];
  let prefix = '';
  for (const m of messages) {
    if (m.role === 'assistant') rows.push({ prompt: prefix + ASST, completion: m.content + END });
    prefix += OPENER[m.role] + m.content + END;
  }
  return rows;
}

/** The supervised character spans of `segment`, adjacent pieces merged. */
export function supervisedSpans(transcript: string): [number, number][] {
  const spans: [number, number][] = [];
  let at = 0;
  for (const [piece, sup] of segment(transcript)) {
    if (sup) {
      const last = spans[spans.length - 1];
      if (last && last[1] === at) last[1] = at + piece.length;
      else spans.push([at, at + piece.length]);
    }
    at += piece.length;
  }
  return spans;
}

// ---- input ----------------------------------------------------------------------------

/** A parsed JSONL line and where it came from ("file:line"). */
export interface SourceRow {
  where: string;
  value: unknown;
}

/** JSONL text to rows; blank lines are skipped, anything else must be JSON (core/jsonl.ts). */
export function parseJsonl(text: string, source: string): SourceRow[] {
  return parseJsonlLines(text, source, (message) => new ExportError(message)).map(({ where, value }) => ({ where, value }));
}

function stringField(row: SourceRow, key: string, what: string): string {
  if (!isObj(row.value)) throw new ExportError(`${row.where}: expected a JSON object (${what})`);
  const v = row.value[key];
  if (typeof v !== 'string') throw new ExportError(`${row.where}: "${key}" must be a string (${what})`);
  return v;
}

/** A trace row's transcript as messages; errors name the row. */
function traceMessages(row: SourceRow): ChatMessage[] {
  const text = stringField(row, 'text', 'a trace row {"task", "text", "kind"} with the transcript in "text"');
  let messages: ChatMessage[];
  try {
    messages = transcriptToMessages(text);
  } catch (err) {
    if (err instanceof ExportError) throw new ExportError(`${row.where}: "text" is not a wire-format transcript: ${err.message}`);
    throw err;
  }
  // The template's semantics must give the transcript back; a mismatch is a bug here.
  if (renderMessages(messages).text !== text) throw new Error(`${row.where}: internal: the messages do not render back to the transcript`);
  return messages;
}

/**
 * The system prompt the SFT data was trained with: GRPO prompts must render the same
 * prefix byte for byte (prompt drift leaves the SFT policy out of distribution).
 */
export function systemPromptOf(rows: readonly SourceRow[]): string | null {
  let found: { prompt: string; where: string } | null = null;
  for (const row of rows) {
    const first = traceMessages(row)[0]!;
    if (first.role !== 'system') continue;
    if (found === null) found = { prompt: first.content, where: row.where };
    else if (found.prompt !== first.content) {
      throw new ExportError(
        `${row.where}: the system prompt differs from the one at ${found.where}; GRPO prompts need the one the policy was trained with ` +
          `(${JSON.stringify(first.content.slice(0, 60))} vs ${JSON.stringify(found.prompt.slice(0, 60))})`,
      );
    }
  }
  return found?.prompt ?? null;
}

// ---- output ---------------------------------------------------------------------------

/** Tokens TRL may drop when decoding (`skip_special_tokens=True`): never the wire markers. */
const HF_SPECIAL = new Set<string>([BOS, EOS, PAD, END]);

/**
 * tokenizer.json, tokenizer_config.json and special_tokens_map.json for
 * `AutoTokenizer.from_pretrained(OUTDIR)`. Changed from the run's files, and why:
 * - eos is `<|end|>`: generation stops at the end of a turn (GRPO completions are one
 *   turn, as in the lab's loop), and SFTTrainer's "append eos unless the completion already
 *   ends with it" adds nothing, since every completion ends with `<|end|>`;
 * - `<|system|> <|user|> <|assistant|> <|tool_call|> <|tool_result|>` stay single-id added
 *   tokens but are not `special`: GRPOTrainer decodes completions with
 *   `skip_special_tokens=True`, and the reward must still see `<|tool_call|>`.
 */
export function tokenizerFiles(tokenizerJsonText: string, source: string): Record<string, string> {
  try {
    tokenizerFromJsonText(tokenizerJsonText); // a tokenizer the lab trains with, specials as ids 0..8
  } catch (err) {
    throw new ExportError(`${source}: ${(err as Error).message}`);
  }
  const tok = JSON.parse(tokenizerJsonText) as { added_tokens: Record<string, unknown>[] };
  for (const special of SPECIAL_TOKENS) {
    const entry = tok.added_tokens.find((t) => isObj(t) && t['content'] === special);
    if (!entry) throw new ExportError(`${source}: ${special} is not an added token; the wire format needs it as one id`);
    // Only this flag changes; ids and matching stay (the lab's own loader wants it true).
    entry['special'] = HF_SPECIAL.has(special);
  }
  const specials = { bos_token: BOS, eos_token: END, pad_token: PAD };
  const config = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    ...specials,
    // HF defaults this to true, which rewrites " ." to "." on decode.
    clean_up_tokenization_spaces: false,
    add_bos_token: false,
    add_eos_token: false,
    chat_template: CHAT_TEMPLATE,
  };
  return {
    [TOKENIZER_FILE]: JSON.stringify(tok),
    [TOKENIZER_CONFIG_FILE]: JSON.stringify(config, null, 2) + '\n',
    [SPECIAL_TOKENS_MAP_FILE]: JSON.stringify(specials, null, 2) + '\n',
  };
}

export interface ExportSource {
  /** How the manifest names the input: the run folder or the data file. */
  source: { run?: string; data?: string; split?: string };
  /** The tokenizer.json text to ship, and where it came from (for messages). */
  tokenizerJson: string;
  tokenizerSource: string;
}

export interface SftInput extends ExportSource {
  traces: SourceRow[];
  /** The lab drops longer transcripts (never truncates); the manifest counts them. */
  maxLen: number;
}

export interface GrpoInput extends ExportSource {
  tasks: SourceRow[];
  /** The SFT data's system prompt (systemPromptOf), or null for the lab's default. */
  systemPrompt: string | null;
  /** Where a non-null systemPrompt came from, for the manifest (default: the SFT data). */
  systemPromptFrom?: string;
}

/** A JSONL file given as its rows, written as a stream (never one string of the whole file). */
export interface JsonlRows {
  jsonl: Iterable<unknown>;
}

export interface ExportResult {
  /** Relative path in OUTDIR -> file text, or a JSONL file's rows (written as a stream). */
  files: Record<string, string | JsonlRows>;
  /** One line per what was written, for the CLI. */
  summary: string[];
}

const jsonl = (rows: readonly unknown[]): string => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

function common(input: ExportSource): Record<string, string> {
  return { ...tokenizerFiles(input.tokenizerJson, input.tokenizerSource), 'README.md': README_MD };
}

function tokenizerSha(text: string): string {
  return `sha256:${sha256Hex(utf8Encode(text))}`;
}

/**
 * trl-sft: conversational rows, prompt/completion rows, the tokenizer files, train_sft.py.
 * Transcripts longer than `maxLen` tokens are left out first (the lab drops them from SFT,
 * never truncates; the summary and the manifest count them): a prompt/completion row holds
 * the whole transcript before its turn, so long transcripts would grow the file with the
 * square of their length. The two JSONL files are row streams.
 */
export function exportSft(input: SftInput): ExportResult {
  if (input.traces.length === 0) throw new ExportError('no transcripts to export');
  const shared = common(input); // validates the tokenizer first
  const tokenizer = tokenizerFromJsonText(input.tokenizerJson);
  const conversations: { messages: ChatMessage[] }[] = [];
  let turns = 0;
  let overLength = 0;
  for (const row of input.traces) {
    const messages = traceMessages(row);
    if (tokenizer.encode(renderMessages(messages).text).length > input.maxLen) {
      overLength++;
      continue;
    }
    conversations.push({ messages });
    turns += messages.filter((m) => m.role === 'assistant').length;
  }
  if (conversations.length === 0) {
    throw new ExportError(`all ${input.traces.length} transcripts are longer than max_len ${input.maxLen} tokens (the lab drops them): nothing to export`);
  }
  function* pairs(): Generator<PromptCompletionRow> {
    for (const c of conversations) yield* promptCompletionRows(c.messages);
  }
  const manifest = {
    format: 'trl-sft',
    ...input.source,
    conversations: conversations.length,
    assistant_turns: turns,
    max_len: input.maxLen,
    /** Transcripts left out: longer than max_len tokens. */
    over_max_len: overLength,
    source_tokenizer_sha256: tokenizerSha(input.tokenizerJson), // as config.json records it
    files: { messages: 'sft/messages.jsonl', prompt_completion: 'sft/prompt_completion.jsonl' },
  };
  return {
    files: {
      ...shared,
      'sft/messages.jsonl': { jsonl: conversations },
      'sft/prompt_completion.jsonl': { jsonl: { [Symbol.iterator]: pairs } },
      'sft/manifest.json': JSON.stringify(manifest, null, 2) + '\n',
      'train_sft.py': TRAIN_SFT_PY,
    },
    summary: [
      `${conversations.length} conversations -> sft/messages.jsonl (assistant_only_loss)`,
      `${turns} assistant turns -> sft/prompt_completion.jsonl (completion_only_loss)`,
      `${overLength} of ${input.traces.length} transcripts are longer than max_len ${input.maxLen} tokens: left out (the lab drops them from SFT too)`,
    ],
  };
}

/** trl-grpo: conversational prompts with gold answers, reward.py, the tokenizer files, train_grpo.py. */
export function exportGrpo(input: GrpoInput): ExportResult {
  if (input.tasks.length === 0) throw new ExportError('no tasks to export');
  const shared = common(input);
  const systemPrompt = input.systemPrompt ?? SYSTEM_PROMPT;
  const what = 'a task row {"question", "gold", "kind"}';
  const rows: GrpoPromptRow[] = input.tasks.map((row) => {
    const question = stringField(row, 'question', what);
    const gold = stringField(row, 'gold', what);
    const kind = stringField(row, 'kind', what);
    const marker = BOUNDARIES.find((m) => question.includes(m));
    if (marker !== undefined) throw new ExportError(`${row.where}: "question" holds ${marker}, which would end the user turn`);
    return { prompt: [{ role: 'system', content: systemPrompt }, { role: 'user', content: question }], gold, kind };
  });
  const manifest = {
    format: 'trl-grpo',
    ...input.source,
    prompts: rows.length,
    system_prompt: systemPrompt,
    system_prompt_from: input.systemPrompt === null ? 'the lab default (no SFT data to take it from)' : (input.systemPromptFrom ?? 'the SFT data'),
    max_steps: DEFAULT_MAX_STEPS,
    source_tokenizer_sha256: tokenizerSha(input.tokenizerJson), // as config.json records it
    files: { prompts: 'grpo/prompts.jsonl', reward: 'grpo/reward.py' },
  };
  return {
    files: {
      ...shared,
      'grpo/prompts.jsonl': jsonl(rows),
      'grpo/reward.py': REWARD_PY,
      'grpo/manifest.json': JSON.stringify(manifest, null, 2) + '\n',
      'train_grpo.py': TRAIN_GRPO_PY,
    },
    summary: [
      `${rows.length} prompts with gold answers -> grpo/prompts.jsonl`,
      `the lab's reward (exact match - 0.05*steps/${DEFAULT_MAX_STEPS}) -> grpo/reward.py`,
    ],
  };
}
