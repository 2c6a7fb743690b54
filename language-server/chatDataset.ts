// TRL conversational datasets (JSONL rows with `messages`, or `prompt`/`completion` message
// lists) in the language server (issue 30): each row rendered with a Hugging Face chat
// template and tokenized (core/chatTemplate); its findings are diagnostics on the row, and a
// hover on a message's text names the token under the cursor, its id, its role and whether
// each mask supervises it. The template folder is the setting `agentLab.chatTemplate`, else
// the nearest folder at or above the dataset that holds a tokenizer.json. Bad input (a row
// that is not a conversation, a template that fails, a folder that does not load) is one
// diagnostic; the pass is time-sliced and stops when an edit supersedes it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Diagnostic, DiagnosticSeverity, Hover, MarkupKind, Range } from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { type Node, type ParseError, parseTree } from 'jsonc-parser';
import { ChatModel, ChatTemplateError, RowError, RowMask, computeRowMask, parseConversationRow } from '../core/chatTemplate';
import { readTemplateFolder, templateFolderStamp } from './chatTemplateFolder';
import { yieldNow } from './datasetPass';
import { lineText } from './textDocument';
import { TOKENIZER_FILE } from '../core/protocol/folders';
import type { ChatFileCounts, LossMaskResult } from '../core/protocol/lsp';

export interface ResolvedTemplate {
  /** The folder, or null when none is set or found. */
  dir: string | null;
  model: ChatModel | null;
  /** Why there is no model (none found, or the folder does not load). */
  problem: string | null;
  /** Identity for caches. */
  key: string;
}

const RECHECK_MS = 2000;

/** Finds and loads template folders, each kept until its files change. */
export class ChatTemplateStore {
  private readonly loaded = new Map<string, { stamp: string; at: number; model: ChatModel | null; problem: string | null; key: string }>();
  private readonly beside = new Map<string, { at: number; dir: string | null }>();
  private serial = 0;

  resolve(docPath: string | null, setting: string | null, roots: readonly string[]): ResolvedTemplate {
    let dir: string | null = null;
    if (setting) dir = path.isAbsolute(setting) ? setting : path.resolve(roots[0] ?? process.cwd(), setting);
    else if (docPath) dir = this.findBeside(path.dirname(docPath), roots);
    if (!dir) {
      return {
        dir: null,
        model: null,
        problem: 'no chat template: set agentLab.chatTemplate to a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json or chat_template.jinja), or put one beside the dataset',
        key: 'none',
      };
    }
    const now = Date.now();
    let hit = this.loaded.get(dir);
    if (!hit || now - hit.at > RECHECK_MS) {
      const stamp = templateFolderStamp(dir);
      if (!hit || hit.stamp !== stamp) {
        let model: ChatModel | null = null;
        let problem: string | null = null;
        try {
          model = readTemplateFolder(dir);
        } catch (err) {
          problem = err instanceof ChatTemplateError ? err.message : `template folder ${dir}: ${err instanceof Error ? err.message : String(err)}`;
        }
        hit = { stamp, at: now, model, problem, key: `${dir}#${++this.serial}` };
      } else hit = { ...hit, at: now };
      this.loaded.set(dir, hit);
    }
    return { dir, model: hit.model, problem: hit.problem, key: hit.key };
  }

  /** The nearest folder at or above `dir` (not above a workspace root holding it) with a tokenizer.json. */
  private findBeside(dir: string, roots: readonly string[]): string | null {
    const now = Date.now();
    const hit = this.beside.get(dir);
    if (hit && now - hit.at <= RECHECK_MS) return hit.dir;
    const stopAt = roots.find((r) => dir === r || dir.startsWith(r + path.sep));
    let found: string | null = null;
    for (let d = dir; ; d = path.dirname(d)) {
      if (fs.existsSync(path.join(d, TOKENIZER_FILE))) {
        found = d;
        break;
      }
      if (d === stopAt || path.dirname(d) === d) break;
    }
    this.beside.set(dir, { at: now, dir: found });
    return found;
  }
}

// ---- where things are in a row's JSON text --------------------------------------------------

export interface JsonSpan {
  path: (string | number)[];
  start: number;
  end: number;
  /** For strings: true. */
  string: boolean;
}

/**
 * Every value of a JSON line with its path and [start, end) columns, containers before their
 * members (jsonc-parser's tree, strict JSON). Null on text that is not JSON (the diagnostics
 * say so; hovers show nothing) or nested deeper than 64.
 */
export function jsonSpans(text: string): JsonSpan[] | null {
  const errors: ParseError[] = [];
  let root: Node | undefined;
  try {
    root = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false });
  } catch {
    return null; // a line nested past the parser's stack
  }
  if (!root || errors.length > 0) return null;
  const out: JsonSpan[] = [];
  const walk = (n: Node, path: (string | number)[]): boolean => {
    if (path.length > 64) return false;
    out.push({ path, start: n.offset, end: n.offset + n.length, string: n.type === 'string' });
    if (n.type === 'object') {
      for (const prop of n.children ?? []) {
        const [key, value] = prop.children ?? [];
        if (key && value && !walk(value, [...path, key.value as string])) return false;
      }
    } else if (n.type === 'array') {
      for (const [k, child] of (n.children ?? []).entries()) if (!walk(child, [...path, k])) return false;
    }
    return true;
  };
  return walk(root, []) ? out : null;
}

/** The decoded length of a JSON string literal's raw text from its opening quote to `col` (mid-escape: before it). */
function decodedOffset(line: string, span: JsonSpan, col: number): number {
  let raw = line.slice(span.start + 1, Math.max(span.start + 1, Math.min(col, span.end - 1)));
  for (let cut = 0; cut < 6; cut++) {
    try {
      return (JSON.parse(`"${raw}"`) as string).length;
    } catch {
      raw = raw.slice(0, -1);
    }
  }
  return 0;
}

// ---- rows ---------------------------------------------------------------------------------

export interface ChatRowResult {
  /** Diagnostics relative to the row (line 0); the pass moves them to the row's line. */
  diagnostics: Diagnostic[];
  /** The row's token and supervised-token counts (the mask panel's file totals); absent when the row has no mask. */
  counts?: { tokens: number; generation: number; prefix: number };
}

export interface ChatOptions {
  maxLength?: number;
  templateKwargs?: Record<string, unknown>;
}

const SEVERITY = { error: DiagnosticSeverity.Error, warning: DiagnosticSeverity.Warning } as const;

/** Where message `k` of a row lies on its line (the whole line when not found). */
function messageRange(spans: JsonSpan[] | null, row: unknown, k: number | undefined, lineLength: number): Range {
  const whole: Range = { start: { line: 0, character: 0 }, end: { line: 0, character: lineLength } };
  if (!spans || k === undefined || typeof row !== 'object' || row === null) return whole;
  const r = row as Record<string, unknown>;
  let p: (string | number)[];
  if (Array.isArray(r['messages'])) p = ['messages', k];
  else {
    const np = Array.isArray(r['prompt']) ? r['prompt'].length : 0;
    p = k < np ? ['prompt', k] : ['completion', k - np];
  }
  const s = spans.find((x) => x.path.length === 2 && x.path[0] === p[0] && x.path[1] === p[1]);
  return s ? { start: { line: 0, character: s.start }, end: { line: 0, character: s.end } } : whole;
}

function oneDiagnostic(message: string, code: string, length: number, severity: DiagnosticSeverity = DiagnosticSeverity.Error): Diagnostic {
  return { range: { start: { line: 0, character: 0 }, end: { line: 0, character: length } }, severity, code, source: 'agent-lab', message };
}

/** A row's mask, or the reason it has none (not JSON, not a conversation, the template fails). */
export function maskOfLine(line: string, model: ChatModel, opts: ChatOptions): { row: unknown; mask: RowMask | null; error: Diagnostic | null } {
  let row: unknown;
  try {
    row = JSON.parse(line);
  } catch (err) {
    return { row: undefined, mask: null, error: oneDiagnostic(`not JSON: ${err instanceof Error ? err.message : String(err)}`, 'chat-row', line.length) };
  }
  try {
    const mask = computeRowMask(model, parseConversationRow(row), { ...(opts.maxLength !== undefined ? { maxLength: opts.maxLength } : {}), ...(opts.templateKwargs ? { templateKwargs: opts.templateKwargs } : {}) });
    return { row, mask, error: null };
  } catch (err) {
    if (err instanceof RowError) return { row, mask: null, error: oneDiagnostic(`not a conversation: ${err.message}`, 'chat-row', line.length) };
    if (err instanceof ChatTemplateError) return { row, mask: null, error: oneDiagnostic(err.message, 'chat-template', line.length) };
    // A bug in the template engine on this row: the row says so, the server goes on.
    return { row, mask: null, error: oneDiagnostic(`the chat template could not be applied: ${err instanceof Error ? err.message : String(err)}`, 'chat-template', line.length) };
  }
}

export function analyseChatLine(line: string, model: ChatModel, opts: ChatOptions): ChatRowResult {
  const { row, mask, error } = maskOfLine(line, model, opts);
  if (error) return { diagnostics: [error] };
  const spans = mask!.findings.some((f) => f.message_index !== undefined) ? jsonSpans(line) : null;
  return {
    counts: rowCounts(mask!),
    diagnostics: mask!.findings.map((f) => ({
      range: messageRange(spans, row, f.message_index, line.length),
      severity: SEVERITY[f.severity],
      code: f.code,
      source: 'agent-lab',
      message: f.message,
    })),
  };
}

const vocabSizes = new WeakMap<ChatModel, number>();
function vocabSizeOf(model: ChatModel): number {
  let n = vocabSizes.get(model);
  if (n === undefined) {
    n = model.tokenizer.get_vocab(true).size;
    vocabSizes.set(model, n);
  }
  return n;
}

function rowCounts(mask: RowMask): { tokens: number; generation: number; prefix: number } {
  let generation = 0;
  let prefix = 0;
  for (const t of mask.tokens) {
    if (t.generation) generation++;
    if (t.prefix) prefix++;
  }
  return { tokens: mask.tokens.length, generation, prefix };
}

/** Per message of a row: [start, end) columns of its object on the line, or null (not JSON, not found). */
export function messageColumns(line: string, row: unknown, count: number): ([number, number] | null)[] {
  const spans = jsonSpans(line);
  return Array.from({ length: count }, (_, k) => {
    const r = messageRange(spans, row, k, line.length);
    // messageRange falls back to the whole line: that is "not found" here.
    return spans && !(r.start.character === 0 && r.end.character === line.length) ? [r.start.character, r.end.character] : null;
  });
}

/**
 * The mask panel's file totals: the rows the server has masked, summed over the file's
 * non-blank lines (`rows` maps a line's text to its result, as the pass keeps them). Lines
 * not masked yet leave `complete` false.
 */
export function chatFileCounts(lines: Iterable<string>, rows: ReadonlyMap<string, ChatRowResult>): ChatFileCounts {
  const out: ChatFileCounts = { rows: 0, failed: 0, lines: 0, tokens: 0, generation: 0, prefix: 0, complete: true };
  for (const line of lines) {
    if (line.trim() === '') continue;
    out.lines++;
    const r = rows.get(line);
    if (!r) out.complete = false;
    else if (!r.counts) out.failed++;
    else {
      out.rows++;
      out.tokens += r.counts.tokens;
      out.generation += r.counts.generation;
      out.prefix += r.counts.prefix;
    }
  }
  return out;
}

/**
 * A chat row's mask as the agentLab/lossMask answer: the rendered row as `text`, one entry per
 * token, `supervised` where either rule supervises, and the `chat` part saying which rule does,
 * the findings, where each message lies on the line, and the file's totals.
 */
export function chatLossMask(
  args: { uri: string; line: number; lineText: string; row: unknown; mask: RowMask; model: ChatModel; templateDir: string; maxLength: number | null; file: ChatFileCounts },
): LossMaskResult {
  const { mask, model } = args;
  const toks = mask.tokens;
  const count = Math.max(-1, ...toks.map((t) => t.messageIndex)) + 1;
  const messagesIn = (() => {
    const r = args.row as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null) return count;
    if (Array.isArray(r['messages'])) return r['messages'].length;
    return (Array.isArray(r['prompt']) ? r['prompt'].length : 0) + (Array.isArray(r['completion']) ? r['completion'].length : 0);
  })();
  return {
    uri: args.uri,
    row: args.line,
    text: mask.text,
    tokenizer: { source: 'template', path: args.templateDir, vocabSize: vocabSizeOf(model) },
    ids: toks.map((t) => t.id),
    offsets: toks.map((t) => [t.start, t.end]),
    supervised: toks.map((t) => t.generation || t.prefix),
    special: toks.map((t) => model.specialTokens.has(t.text)),
    spans: [],
    maxLen: args.maxLength ?? 0,
    overLength: false,
    chat: {
      template: args.templateDir,
      hasGenerationTags: mask.hasGenerationTags,
      generation: toks.map((t) => t.generation),
      prefix: toks.map((t) => t.prefix),
      roles: toks.map((t) => t.role),
      messages: toks.map((t) => t.messageIndex),
      messageColumns: messageColumns(args.lineText, args.row, Math.max(count, messagesIn)),
      findings: mask.findings.map((f) => ({ code: f.code, severity: f.severity, message: f.message, ...(f.message_index !== undefined ? { message_index: f.message_index } : {}) })),
      file: args.file,
    },
  };
}

/**
 * The quick fix of an all-zero assistant mask: the row as prompt-completion, whose
 * completion TRL supervises (completion_only_loss, on by default for such rows) whatever the
 * template. Only a `messages` row ending with an assistant message has one; when it has
 * earlier assistant turns they become prompt (not trained), and the title says so.
 */
export function promptCompletionFix(line: string): { title: string; text: string } | null {
  let row: unknown;
  try {
    row = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof row !== 'object' || row === null || Array.isArray(row)) return null;
  const { messages, ...rest } = row as Record<string, unknown>;
  if (!Array.isArray(messages) || messages.length < 2) return null;
  const last = messages[messages.length - 1] as { role?: unknown } | null;
  if (!last || last.role !== 'assistant') return null;
  const earlier = messages.slice(0, -1).filter((m) => (m as { role?: unknown } | null)?.role === 'assistant').length;
  const title =
    earlier > 0
      ? `Make the row prompt-completion: completion_only_loss trains its last assistant turn (the ${earlier} earlier one${earlier === 1 ? ' becomes' : 's become'} prompt, untrained)`
      : 'Make the row prompt-completion: completion_only_loss trains its assistant turn whatever the template';
  return { title, text: JSON.stringify({ prompt: messages.slice(0, -1), completion: [last], ...rest }) };
}

// ---- the pass -----------------------------------------------------------------------------

export interface ChatState {
  gen: number;
  chatRows: Map<string, ChatRowResult>;
  chatKey: string;
  lastPass: { ms: number; version: number; rows: number } | null;
}

export interface ChatPassContext {
  template: ResolvedTemplate;
  opts: ChatOptions;
  maxDiagnostics: number;
  sliceMs: number;
  isOpen: () => boolean;
  publish: (diagnostics: Diagnostic[], version: number) => void;
}

export async function runChatPass(doc: TextDocument, s: ChatState, gen: number, t0: number, ctx: ChatPassContext): Promise<void> {
  const version = doc.version;
  const { template } = ctx;
  if (!template.model) {
    // One diagnostic for the file: no folder, or a folder that does not load.
    s.lastPass = { ms: performance.now() - t0, version, rows: 0 };
    ctx.publish([oneDiagnostic(template.problem ?? 'no chat template', 'chat-template', Math.min(1, lineText(doc, 0).length), template.dir ? DiagnosticSeverity.Error : DiagnosticSeverity.Information)], version);
    return;
  }
  const key = `${template.key}|${JSON.stringify(ctx.opts)}`;
  if (s.chatKey !== key) {
    s.chatRows = new Map();
    s.chatKey = key;
  }
  const out: Diagnostic[] = [];
  const next = new Map<string, ChatRowResult>();
  let total = 0;
  let rows = 0;
  let sliceStart = performance.now();
  // A partial publish after the first slice, then one a second: a 10,000-row file shows its first rows' findings at once.
  let lastPublish = -Infinity;
  const note = (): Diagnostic => ({
    range: { start: { line: 0, character: 0 }, end: { line: 0, character: Math.min(1, lineText(doc, 0).length) } },
    severity: DiagnosticSeverity.Information,
    code: 'large-document',
    source: 'agent-lab',
    message: `chat dataset: checking rows in the background, ${rows.toLocaleString('en-US')} of about ${doc.lineCount.toLocaleString('en-US')} so far`,
  });
  for (let line = 0; line < doc.lineCount; line++) {
    const lt = lineText(doc, line);
    if (lt.trim().length === 0) continue;
    let r = s.chatRows.get(lt) ?? next.get(lt);
    if (!r) r = analyseChatLine(lt, template.model, ctx.opts);
    next.set(lt, r);
    rows++;
    for (const d of r.diagnostics) {
      total++;
      if (out.length < ctx.maxDiagnostics) out.push({ ...d, range: { start: { line, character: d.range.start.character }, end: { line, character: d.range.end.character } } });
    }
    if (performance.now() - sliceStart > ctx.sliceMs) {
      await yieldNow();
      if (s.gen !== gen || !ctx.isOpen()) return; // superseded or closed
      sliceStart = performance.now();
      if (sliceStart - lastPublish > 1000) {
        lastPublish = sliceStart;
        ctx.publish([note(), ...out], version);
      }
    }
  }
  s.chatRows = next;
  s.lastPass = { ms: performance.now() - t0, version, rows };
  if (total > out.length) {
    out.unshift({
      range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
      severity: DiagnosticSeverity.Information,
      code: 'large-document',
      source: 'agent-lab',
      message: `showing the first ${out.length} of ${total} problems`,
    });
  }
  ctx.publish(out, version);
}

// ---- hovers -------------------------------------------------------------------------------

const show = (s: string): string => JSON.stringify(s);

/**
 * The hover at a column of a row: on a message's text, the token under the cursor (its text,
 * id, role, and each mask's verdict); elsewhere in the row, the row's counts and findings.
 */
export function chatHover(line: string, character: number, mask: RowMask | null, error: Diagnostic | null, row: unknown): Hover | null {
  if (error) return { contents: { kind: MarkupKind.Markdown, value: `**Agent Lab: chat row**\n\n${error.message}` } };
  if (!mask) return null;
  const gen = mask.tokens.filter((t) => t.generation).length;
  const pre = mask.tokens.filter((t) => t.prefix).length;
  const summary =
    `${mask.tokens.length} tokens; supervised: ${gen} by the generation blocks (assistant_only_loss), ${pre} by the prefix difference (completion_only_loss)` +
    (mask.hasGenerationTags ? '' : ' (the template has no generation blocks)');
  const spans = jsonSpans(line);
  const at = spans?.filter((s) => s.string && s.start < character && character < s.end && s.path[s.path.length - 1] === 'content').pop();
  if (at && typeof row === 'object' && row !== null) {
    const field = at.path[0];
    const idx = at.path[1];
    const r = row as Record<string, unknown>;
    const np = Array.isArray(r['prompt']) ? r['prompt'].length : 0;
    const k = typeof idx === 'number' ? (field === 'completion' ? np + idx : idx) : -1;
    const content = (JSON.parse(line.slice(at.start, at.end)) as string) ?? '';
    const inMsg = mask.tokens.filter((t) => t.messageIndex === k);
    if (k >= 0 && inMsg.length && content) {
      const from = inMsg[0]!.start;
      const lead = content.length - content.trimStart().length;
      const found = mask.text.indexOf(content.trim(), from);
      if (found >= 0) {
        const off = found + Math.max(0, decodedOffset(line, at, character) - lead);
        const tok = mask.tokens.find((t) => t.start <= off && off < t.end) ?? mask.tokens.find((t) => t.start >= off);
        if (tok) {
          const verdict = (on: boolean): string => (on ? 'supervised' : 'masked');
          const value = [
            `**Agent Lab: token** ${show(tok.text)} · id ${tok.id} · ${tok.role} (message ${tok.messageIndex})`,
            '',
            `- generation blocks (assistant_only_loss): **${verdict(tok.generation)}**`,
            `- prefix difference (completion_only_loss): **${verdict(tok.prefix)}**`,
            '',
            `Row: ${summary}.`,
          ].join('\n');
          return { contents: { kind: MarkupKind.Markdown, value } };
        }
      }
    }
  }
  const findings = mask.findings.map((f) => `- ${f.severity} \`${f.code}\`: ${f.message}`);
  return { contents: { kind: MarkupKind.Markdown, value: [`**Agent Lab: chat row**`, '', `${summary}.`, ...(findings.length ? ['', ...findings] : [])].join('\n') } };
}
