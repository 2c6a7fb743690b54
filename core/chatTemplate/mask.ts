// The loss mask of one conversational row under a model's chat template, two ways:
//  - `generation`: what transformers' `return_assistant_tokens_mask` (TRL's
//    `assistant_only_loss=True`) computes: the characters inside the template's
//    `{% generation %}` blocks, mapped to the tokens that hold them;
//  - `prefix`: the prefix-difference mask frameworks re-derive: for each assistant turn k,
//    render messages[:k] with add_generation_prompt and messages[:k+1] without; the turn's
//    supervised text is what the second adds to the first (whitespace after the turn's last
//    special token is the next turn's separator, not supervised). For prompt-completion rows it
//    is TRL's `completion_only_loss`: everything the completion adds to the prompt.
// Findings say what would make a fine-tune silently wrong (codes in FINDING_CODES).
import { ChatModel } from './model';
import { ChatTemplateError, Rendered } from './template';
import { ConversationRow, Message } from './row';

export type Severity = 'error' | 'warning';

export const FINDING_CODES = {
  'all-zero-generation-mask': 'error',
  'all-supervision-truncated': 'error',
  'eot-not-supervised': 'warning',
  'gen-prompt-supervised': 'warning',
  'empty-think-supervised': 'warning',
  'context-tokenization': 'warning',
  'truncated-supervision': 'warning',
  'prefix-unstable': 'warning',
  'tool-call-roundtrip': 'warning',
  'offsets-approximate': 'warning',
  'packing-merge': 'warning',
} as const satisfies Record<string, Severity>;
export type FindingCode = keyof typeof FINDING_CODES;

export interface Finding {
  code: FindingCode;
  severity: Severity;
  message: string;
  /** The message index it concerns, when one. */
  message_index?: number;
}

export interface MaskToken {
  id: number;
  /** The rendered text the token covers. */
  text: string;
  start: number;
  end: number;
  generation: boolean;
  prefix: boolean;
  /** The role of the message whose rendering holds the token, or 'template' (generation prompt, tails). */
  role: string;
  /** The index in `messages` of that message, or -1. */
  messageIndex: number;
}

export interface RowMask {
  text: string;
  tokens: MaskToken[];
  findings: Finding[];
  hasGenerationTags: boolean;
}

export interface MaskOptions {
  /** TRL's `max_length`: tokens from this index on are truncated away. */
  maxLength?: number;
  /** Extra template variables (e.g. `enable_thinking`), under the row's own `chat_template_kwargs`. */
  templateKwargs?: Record<string, unknown>;
}

function finding(code: FindingCode, message: string, messageIndex?: number): Finding {
  return { code, severity: FINDING_CODES[code], message, ...(messageIndex !== undefined ? { message_index: messageIndex } : {}) };
}

const show = (s: string, max = 60): string => JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);

export function computeRowMask(model: ChatModel, row: ConversationRow, opts: MaskOptions = {}): RowMask {
  const template = model.template(row.tools !== undefined);
  const baseVars: Record<string, unknown> = { ...model.tokenVars, ...(opts.templateKwargs ?? {}), ...row.templateKwargs };
  if (row.tools) baseVars['tools'] = row.tools;
  const render = (messages: Message[], addGenerationPrompt: boolean): Rendered =>
    template.render({ ...baseVars, messages, add_generation_prompt: addGenerationPrompt });
  // A prefix render may raise where the whole conversation does not (a template that wants a
  // user turn first, say): that turn's prefix mask is then unavailable, not the row.
  // Prefixes are rendered once each (the message bounds and the turns' F share them).
  const prefixCache = new Map<string, string | null>();
  const tryRender = (messages: Message[], addGenerationPrompt: boolean): string | null => {
    const key = `${messages.length}|${addGenerationPrompt}`;
    if (prefixCache.has(key)) return prefixCache.get(key)!;
    let out: string | null;
    try {
      out = render(messages, addGenerationPrompt).text;
    } catch (err) {
      if (!(err instanceof ChatTemplateError)) throw err;
      out = null;
    }
    prefixCache.set(key, out);
    return out;
  };

  const full = render(row.messages, false);
  const text = full.text;
  const findings: Finding[] = [];
  const ids = model.encode(text);
  const offsets = tokenOffsets(model, ids, text, findings);

  // Where each message's rendering lies: the growth of the render from messages[:k] to messages[:k+1].
  const bounds: (number | null)[] = [];
  for (let k = 0; k <= row.messages.length; k++) {
    const r = k === row.messages.length ? text : tryRender(row.messages.slice(0, k), false);
    // A template that cannot render no messages (most read messages[0]) starts the first message at 0.
    bounds.push(r !== null && text.startsWith(r) ? r.length : k === 0 ? 0 : null);
  }

  // The prefix-difference spans, and each assistant turn's generation-prompt region.
  const prefixSpans: [number, number][] = [];
  const genPromptRegions: { k: number; from: number; to: number }[] = [];
  const turns: { k: number; from: number; to: number }[] = [];
  if (row.kind === 'prompt-completion') {
    const prompt = row.messages.slice(0, row.promptLength);
    const last = prompt[prompt.length - 1];
    let p: string | null;
    if (last?.role === 'assistant') {
      // continue_final_message: the prompt's render cut after the final message's content.
      p = tryRender(prompt, false);
      const content = typeof last['content'] === 'string' ? last['content'].trim() : '';
      if (p !== null && content) {
        const at = p.lastIndexOf(content);
        p = at >= 0 ? p.slice(0, at + content.length) : null;
      }
    } else p = prompt.length ? tryRender(prompt, true) : '';
    if (p === null || !text.startsWith(p)) {
      findings.push(finding('prefix-unstable', 'the prompt rendered alone is not the start of prompt + completion rendered: TRL warns of this mismatch and its completion mask is not the completion'));
    } else {
      prefixSpans.push([p.length, text.length]);
      const start = bounds[row.promptLength] ?? p.length;
      if (p.length > start) genPromptRegions.push({ k: row.promptLength, from: start, to: p.length });
      turns.push({ k: row.promptLength, from: p.length, to: text.length });
    }
  } else {
    row.messages.forEach((m, k) => {
      if (m.role !== 'assistant') return;
      const p = tryRender(row.messages.slice(0, k), true);
      const f = k + 1 === row.messages.length ? text : tryRender(row.messages.slice(0, k + 1), false);
      if (p === null || f === null || !f.startsWith(p) || !text.startsWith(f)) {
        const why =
          p === null || f === null
            ? 'the template raises on the conversation cut before or after it'
            : !f.startsWith(p)
              ? 'the turn rendered after the generation prompt does not start with that prompt'
              : 'the conversation up to this turn renders differently from the start of the whole conversation (a later turn changes how it is rendered)';
        findings.push(finding('prefix-unstable', `assistant message ${k}: no prefix mask: ${why}`, k));
        return;
      }
      const end = turnEnd(model, f, p.length);
      prefixSpans.push([p.length, end]);
      turns.push({ k, from: p.length, to: f.length });
      const start = bounds[k];
      if (start !== null && start !== undefined && p.length > start) genPromptRegions.push({ k, from: start, to: p.length });
    });
  }

  const tokens: MaskToken[] = ids.map((id, i) => {
    const [start, end] = offsets[i]!;
    let messageIndex = -1;
    for (let k = 0; k < row.messages.length; k++) {
      const a = bounds[k];
      const b = bounds[k + 1];
      if (a !== null && a !== undefined && b !== null && b !== undefined && start >= a && start < b) {
        messageIndex = k;
        break;
      }
    }
    return {
      id,
      text: text.slice(start, end),
      start,
      end,
      generation: overlaps(full.generation, start, end),
      prefix: overlaps(prefixSpans, start, end),
      role: messageIndex >= 0 ? row.messages[messageIndex]!.role : 'template',
      messageIndex,
    };
  });

  const wantsSupervision = row.kind === 'prompt-completion' || row.messages.some((m) => m.role === 'assistant');
  const generationCount = tokens.filter((t) => t.generation).length;
  if (wantsSupervision && generationCount === 0) {
    const f = finding(
      'all-zero-generation-mask',
      template.hasGenerationTags
        ? 'the assistant mask is all zero: the template has {% generation %} blocks but none holds a token of this row; assistant_only_loss would train on nothing'
        : 'the assistant mask is all zero: the chat template has no {% generation %} blocks, so return_assistant_tokens_mask / TRL assistant_only_loss supervise nothing in this row (the loss looks fine, the model learns nothing); use the prefix mask (completion_only_loss / a prompt-completion dataset) or a template patched with generation blocks',
    );
    // A prompt-completion row is trained by completion_only_loss (TRL's default for such rows),
    // which does not need generation blocks: only assistant_only_loss=True would lose it.
    if (row.kind === 'prompt-completion') {
      f.severity = 'warning';
      f.message = `${f.message.split(';')[0]}; with TRL's default completion_only_loss this prompt-completion row is trained on its completion (the prefix mask) all the same`;
    }
    findings.push(f);
  }

  for (const turn of turns) {
    const inTurn = tokens.filter((t) => t.start >= turn.from && t.start < turn.to);
    const eot = [...inTurn].reverse().find((t) => model.specialTokens.has(t.text));
    if (eot && generationCount > 0 && !eot.generation) {
      findings.push(
        finding('eot-not-supervised', `assistant message ${turn.k}: its end-of-turn token ${show(eot.text)} (id ${eot.id}) is outside the generation mask: the model never learns to stop`, turn.k),
      );
    }
  }

  for (const region of genPromptRegions) {
    const supplied = tokens.filter((t) => t.generation && t.end > region.from && t.start < region.to);
    if (supplied.length) {
      findings.push(
        finding(
          'gen-prompt-supervised',
          `assistant message ${region.k}: ${supplied.length} supervised token(s) ${show(supplied.map((t) => t.text).join(''))} are what the generation prompt already supplies at inference; training on them teaches nothing the model will emit`,
          region.k,
        ),
      );
    }
  }

  for (const m of text.matchAll(/<think>\s*<\/think>/g)) {
    const from = m.index!;
    const to = from + m[0].length;
    const covered = tokens.filter((t) => t.end > from && t.start < to);
    const which = [covered.some((t) => t.generation) ? 'generation' : '', covered.some((t) => t.prefix) ? 'prefix' : ''].filter(Boolean);
    if (which.length) {
      findings.push(
        finding('empty-think-supervised', `an empty ${show(m[0])} block at character ${from} is supervised by the ${which.join(' and ')} mask: the model learns to skip thinking`),
      );
    }
  }

  checkPackingBoundary(tokens, findings);
  checkContextTokenization(model, row, text, bounds, tokens, findings);
  checkToolCalls(row, text, bounds, findings);

  if (opts.maxLength !== undefined && tokens.length > opts.maxLength) {
    for (const rule of ['generation', 'prefix'] as const) {
      const all = tokens.filter((t) => t[rule]).length;
      const lost = tokens.slice(opts.maxLength).filter((t) => t[rule]).length;
      if (lost === 0) continue;
      findings.push(
        lost === all
          ? finding('all-supervision-truncated', `every supervised token of the ${rule} mask (${all}) lies beyond max_length=${opts.maxLength} (the row has ${tokens.length} tokens): truncation leaves nothing to learn`)
          : finding('truncated-supervision', `${lost} of ${all} supervised tokens of the ${rule} mask lie beyond max_length=${opts.maxLength} (the row has ${tokens.length} tokens) and are cut, end-of-turn included`),
      );
    }
  }

  return { text, tokens, findings, hasGenerationTags: template.hasGenerationTags };
}

function overlaps(spans: readonly [number, number][], start: number, end: number): boolean {
  // A token holding any character of a span (transformers marks from char_to_token(start) to char_to_token(end - 1)).
  for (const [a, b] of spans) if (start < b && (end > a || (end === start && start >= a))) return true;
  return false;
}

/** Where the prefix mask of a turn ends: after its last special token when only whitespace follows. */
function turnEnd(model: ChatModel, f: string, from: number): number {
  let lastSpecialEnd = -1;
  for (const s of model.specialTokens) {
    if (!s) continue;
    let at = f.indexOf(s, from);
    while (at >= 0) {
      lastSpecialEnd = Math.max(lastSpecialEnd, at + s.length);
      at = f.indexOf(s, at + 1);
    }
  }
  if (lastSpecialEnd > from && /^\s*$/.test(f.slice(lastSpecialEnd))) return lastSpecialEnd;
  return f.length;
}

/**
 * Character offsets of each token. Fast path: the tokens decoded one by one concatenate to
 * the text. Otherwise (byte-level pieces of one character, decoders that strip a leading
 * space) each token is decoded with the tokens since the last one that ended on a whole
 * character, and placed where that text continues the rendering (a stripped leading space
 * is allowed for). When even that fails, the decoded prefix ids[0..i] is measured (slow,
 * approximate when a normalizer changed the text: a finding says so).
 */
function tokenOffsets(model: ChatModel, ids: number[], text: string, findings: Finding[]): [number, number][] {
  const pieces = ids.map((id) => model.decodeOne(id));
  if (pieces.join('') === text) {
    let at = 0;
    return pieces.map((p) => [at, (at += p.length)] as [number, number]);
  }
  const out: [number, number][] = [];
  let baseIdx = 0;
  let baseAt = 0;
  let prev = 0;
  for (let i = 0; i < ids.length; i++) {
    const raw = model.decode(ids.slice(baseIdx, i + 1));
    const partial = raw.endsWith('\uFFFD') && i + 1 < ids.length;
    const s = partial ? raw.replace(/\uFFFD+$/, '') : raw;
    let end: number;
    if (text.startsWith(s, baseAt)) end = baseAt + s.length;
    else if (/\s/.test(text[baseAt] ?? '') && text.startsWith(s, baseAt + 1)) end = baseAt + 1 + s.length;
    else return prefixOffsets(model, ids, text, findings);
    end = Math.max(prev, end);
    out.push([prev, end]);
    prev = end;
    if (!partial) {
      baseIdx = i + 1;
      baseAt = end;
    }
  }
  if (prev !== text.length) return prefixOffsets(model, ids, text, findings);
  return out;
}

function prefixOffsets(model: ChatModel, ids: number[], text: string, findings: Finding[]): [number, number][] {
  const out: [number, number][] = [];
  let prev = 0;
  let exact = true;
  for (let i = 0; i < ids.length; i++) {
    let s = model.decode(ids.slice(0, i + 1));
    while (s.endsWith('\uFFFD') && i + 1 < ids.length) s = s.slice(0, -1);
    let end = s.length;
    if (!text.startsWith(s)) {
      exact = false;
      end = Math.max(prev, Math.min(commonPrefix(s, text), text.length));
    }
    end = Math.max(prev, Math.min(end, text.length));
    out.push([prev, end]);
    prev = end;
  }
  if (!exact || prev !== text.length) {
    findings.push(finding('offsets-approximate', "the tokenizer's decoded text differs from the rendered text (a normalizer changes it): token positions, and so the masks, are approximate"));
  }
  return out;
}

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * Masks that packing would merge. Packed (TRL `packing=True`), rows are concatenated and a
 * row's first token follows the previous row's last one; the label of that position is this
 * row's first token. When that token is supervised, the previous row's supervised run (its
 * end-of-turn, typically) and this row's run become one, and the model is trained to predict
 * this row's start from an unrelated example's end. TRL's padding-free collator (0.23.1 and
 * later) sets that label to -100 instead, so there the token is not trained at all. Either
 * way the row's mask is not what is trained; a row whose first token is masked has no such
 * boundary, whatever the other rows are.
 */
function checkPackingBoundary(tokens: MaskToken[], findings: Finding[]): void {
  const first = tokens[0];
  if (!first || !(first.generation || first.prefix)) return;
  const rules = [first.generation ? 'generation' : '', first.prefix ? 'prefix' : ''].filter(Boolean).join(' and ');
  findings.push(
    finding(
      'packing-merge',
      `the row's first token ${show(first.text)} is supervised by the ${rules} mask: packed with other rows (TRL packing=True) it is predicted from the end of the row before it, so the two rows' masks merge across the boundary (TRL's padding-free collator drops that label instead, and the token is not trained); start the row with text the template writes before the supervised part (a prompt, a bos token)`,
    ),
  );
}

/** Assistant text that tokenizes differently inside the rendered conversation than alone. */
function checkContextTokenization(model: ChatModel, row: ConversationRow, text: string, bounds: (number | null)[], tokens: MaskToken[], findings: Finding[]): void {
  row.messages.forEach((m, k) => {
    if (m.role !== 'assistant' || typeof m['content'] !== 'string') return;
    const a = bounds[k];
    const b = bounds[k + 1];
    if (a === null || a === undefined || b === null || b === undefined) return;
    const content = m['content'].trim();
    if (!content) return;
    const from = text.indexOf(content, a);
    if (from < 0 || from + content.length > b) return;
    const to = from + content.length;
    const inside = tokens.filter((t) => t.end > from && t.start < to);
    const alone = model.encode(content);
    const ctx = inside.map((t) => t.id);
    const straddles = inside.length > 0 && (inside[0]!.start < from || inside[inside.length - 1]!.end > to);
    if (straddles || ctx.length !== alone.length || ctx.some((id, i) => id !== alone[i])) {
      const edge = straddles
        ? inside[0]!.start < from
          ? ` (token ${show(inside[0]!.text)} joins it to the text before)`
          : ` (token ${show(inside[inside.length - 1]!.text)} joins it to the text after)`
        : '';
      findings.push(
        finding(
          'context-tokenization',
          `assistant message ${k}: its text tokenizes differently in context (${ctx.length} tokens) than alone (${alone.length} tokens)${edge}: a prompt and completion tokenized apart would not match the rendered conversation`,
          k,
        ),
      );
    }
  });
}

/** JSON objects and arrays written in a text (each parsed; unparsable brackets skipped). */
function jsonValuesIn(text: string): unknown[] {
  const out: unknown[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c !== '{' && c !== '[') {
      i++;
      continue;
    }
    let depth = 0;
    let j = i;
    let inStr = false;
    for (; j < text.length; j++) {
      const d = text[j];
      if (inStr) {
        if (d === '\\') j++;
        else if (d === '"') inStr = false;
      } else if (d === '"') inStr = true;
      else if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) break;
      }
    }
    if (depth === 0 && j < text.length) {
      try {
        out.push(JSON.parse(text.slice(i, j + 1)));
        i = j + 1;
        continue;
      } catch {
        // not JSON from here: try the next bracket
      }
    }
    i++;
  }
  return out;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/**
 * A tool call the template renders in a form its own parser would not read back: the
 * rendering holds a JSON object naming the call whose arguments are not the call's (a string
 * where an object was meant: arguments given as a JSON string and serialised again), or a
 * `<tool_call>` block that is not JSON. Templates that write calls otherwise (pythonic
 * calls, gpt-oss's channels) are not judged.
 */
function checkToolCalls(row: ConversationRow, text: string, bounds: (number | null)[], findings: Finding[]): void {
  row.messages.forEach((m, k) => {
    const calls = m['tool_calls'];
    if (m.role !== 'assistant' || !Array.isArray(calls) || calls.length === 0) return;
    const a = bounds[k];
    const b = bounds[k + 1];
    if (a === null || a === undefined || b === null || b === undefined) return;
    const region = text.slice(a, Math.min(b, a + 100_000));
    for (const block of region.matchAll(/<tool_call>([\s\S]*?)<\/tool_call>/g)) {
      try {
        JSON.parse(block[1]!);
      } catch {
        findings.push(finding('tool-call-roundtrip', `assistant message ${k}: the template renders a <tool_call> block that is not JSON (${show(block[1]!.trim())}): a parser reading the model's calls would fail on it`, k));
      }
    }
    const values = jsonValuesIn(region).flatMap((v) => (Array.isArray(v) ? v : [v]));
    for (const call of calls) {
      if (typeof call !== 'object' || call === null) continue;
      const c = call as Record<string, unknown>;
      const fn = (typeof c['function'] === 'object' && c['function'] !== null ? c['function'] : c) as Record<string, unknown>;
      const name = fn['name'];
      if (typeof name !== 'string') continue;
      let args = fn['arguments'];
      if (typeof args === 'string') {
        try {
          args = JSON.parse(args) as unknown;
        } catch {
          // a string that is not JSON: compared as it is
        }
      }
      const named = values.filter((v): v is Record<string, unknown> => typeof v === 'object' && v !== null && (v as Record<string, unknown>)['name'] === name);
      if (named.length === 0) continue;
      const read = (v: Record<string, unknown>): unknown => ('arguments' in v ? v['arguments'] : v['parameters']);
      if (named.some((v) => deepEqual(read(v), args))) continue;
      const got = read(named[0]!);
      findings.push(
        finding(
          'tool-call-roundtrip',
          `assistant message ${k}: the call ${name} renders with arguments ${show(JSON.stringify(got) ?? 'undefined')}, not ${show(JSON.stringify(args) ?? 'undefined')}${typeof got === 'string' && typeof fn['arguments'] === 'string' ? ' (arguments given as a JSON string are serialised again: give them as an object)' : ''}: the model learns calls its parser would not read back`,
          k,
        ),
      );
    }
  });
}
