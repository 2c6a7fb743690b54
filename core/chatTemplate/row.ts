// One dataset row in TRL's conversational formats (https://huggingface.co/docs/trl/dataset_formats):
// `{"messages": [...]}` (language modeling) or `{"prompt": [...], "completion": [...]}`
// (prompt-completion), each optionally with `tools` (JSON schemas, as `apply_chat_template`
// takes them) and `chat_template_kwargs`. Messages pass to the template as they are (tool
// calls in `tool_calls`, TRL's shape), after the checks a template cannot make itself.
import { isObj } from '../protocol/isObj';

export class RowError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RowError';
  }
}

export type Message = Record<string, unknown> & { role: string };

export interface ConversationRow {
  kind: 'messages' | 'prompt-completion';
  /** The whole conversation (prompt + completion for prompt-completion rows). */
  messages: Message[];
  /** For prompt-completion rows: how many of `messages` are the prompt. */
  promptLength: number;
  tools: unknown[] | undefined;
  templateKwargs: Record<string, unknown>;
}

function messagesOf(v: unknown, field: string): Message[] {
  if (!Array.isArray(v)) throw new RowError(`"${field}" is ${v === undefined ? 'missing' : `a ${typeName(v)}`}, not a list of messages`);
  return v.map((m, i) => {
    if (!isObj(m)) throw new RowError(`${field}[${i}] is a ${typeName(m)}, not a message object`);
    if (typeof m['role'] !== 'string' || m['role'] === '') throw new RowError(`${field}[${i}] has no "role" string`);
    const c = m['content'];
    if (c !== undefined && c !== null && typeof c !== 'string' && !Array.isArray(c)) {
      throw new RowError(`${field}[${i}].content is a ${typeName(c)}; a message's content is a string, a list of parts or null`);
    }
    if (m['tool_calls'] !== undefined && m['tool_calls'] !== null && !Array.isArray(m['tool_calls'])) {
      throw new RowError(`${field}[${i}].tool_calls is a ${typeName(m['tool_calls'])}, not a list`);
    }
    return m as Message;
  });
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'list';
  return typeof v === 'object' ? 'object' : typeof v;
}

/** A parsed JSONL row as a conversation, or a RowError saying why it is not one. */
export function parseConversationRow(row: unknown): ConversationRow {
  if (!isObj(row)) throw new RowError(`the row is a ${typeName(row)}, not an object with "messages" or "prompt"/"completion"`);
  const tools = row['tools'];
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw new RowError(`"tools" is a ${typeName(tools)}, not a list of tool schemas`);
  const kw = row['chat_template_kwargs'];
  if (kw !== undefined && kw !== null && !isObj(kw)) throw new RowError(`"chat_template_kwargs" is a ${typeName(kw)}, not an object`);
  const base = { tools: Array.isArray(tools) && tools.length > 0 ? tools : undefined, templateKwargs: isObj(kw) ? kw : {} };
  if ('messages' in row) {
    const messages = messagesOf(row['messages'], 'messages');
    if (messages.length === 0) throw new RowError('"messages" is empty');
    return { kind: 'messages', messages, promptLength: 0, ...base };
  }
  if ('prompt' in row || 'completion' in row) {
    if (typeof row['prompt'] === 'string' || typeof row['completion'] === 'string') {
      throw new RowError('a standard (text) prompt-completion row: no chat template applies; the conversational form has message lists');
    }
    const prompt = messagesOf(row['prompt'], 'prompt');
    const completion = messagesOf(row['completion'], 'completion');
    if (completion.length === 0) throw new RowError('"completion" is empty');
    return { kind: 'prompt-completion', messages: [...prompt, ...completion], promptLength: prompt.length, ...base };
  }
  if ('text' in row) throw new RowError('a standard (text) row: no chat template applies; conversational rows have "messages"');
  const keys = Object.keys(row);
  throw new RowError(`no "messages" nor "prompt"/"completion" in the row (keys: ${keys.length ? keys.join(', ') : 'none'})`);
}

/** Whether a parsed JSON value looks like a TRL conversational row (for recognising a dataset by content). */
export function looksConversational(row: unknown): boolean {
  if (!isObj(row)) return false;
  const isMsgList = (v: unknown): boolean => Array.isArray(v) && v.length > 0 && v.every((m) => isObj(m) && typeof m['role'] === 'string');
  return isMsgList(row['messages']) || (isMsgList(row['prompt']) && isMsgList(row['completion']));
}
