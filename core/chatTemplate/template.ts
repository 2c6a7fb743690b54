// A Hugging Face chat template compiled with @huggingface/jinja (the semantics of
// transformers' apply_chat_template: trim_blocks and lstrip_blocks on, one trailing newline
// of the template dropped), plus the `{% generation %}` tag that transformers' AssistantTracker
// adds and @huggingface/jinja only strips. Before parsing, each generation tag is rewritten
// into an output expression that prints a private-use marker; after rendering, the markers
// are cut out and their positions are the generation spans, in UTF-16 offsets of the text.
import { Template } from '@huggingface/jinja';

/** Bad input of a template (it does not parse, or raises while rendering): the message says why. */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

const GEN_OPEN = '\uE000';
const GEN_CLOSE = '\uE001';
// A block tag `{% generation %}` / `{% endgeneration %}`, with either whitespace-control dash.
const TAG = /{%(-?)\s*(end)?generation\s*(-?)%}/g;

export interface Rendered {
  text: string;
  /** [start, end) UTF-16 offsets of each generation block, in order. */
  generation: [number, number][];
}

export interface CompiledTemplate {
  /** The template's text as given (before the generation rewrite). */
  readonly source: string;
  /** Whether the template has `{% generation %}` blocks at all. */
  readonly hasGenerationTags: boolean;
  render(vars: Record<string, unknown>): Rendered;
}

/**
 * Rewrites generation tags into marker outputs. The tags are block tags, so trim_blocks
 * (the newline after `%}` is eaten) and lstrip_blocks (spaces before a tag at a line start
 * are eaten) apply to them first, as Jinja would; the dashes become the output tag's dashes.
 */
export function rewriteGenerationTags(template: string): { text: string; count: number } {
  let count = 0;
  const lstripped = template.replace(/^[ \t]*({%-?\s*(?:end)?generation\s*-?%})/gm, '$1');
  const trimmed = lstripped.replace(/({%-?\s*(?:end)?generation\s*-?%})\n/g, '$1');
  const text = trimmed.replace(TAG, (_m, l: string, end: string | undefined, r: string) => {
    count++;
    return `{{${l} '${end ? GEN_CLOSE : GEN_OPEN}' ${r}}}`;
  });
  return { text, count };
}

/** The largest literal `range(N)` a template may hold: @huggingface/jinja builds the whole list, so range(10**9) would take the process's memory. */
const MAX_LITERAL_RANGE = 1_000_000;

export function compileChatTemplate(source: string): CompiledTemplate {
  for (const m of source.matchAll(/\brange\(\s*(?:[-\d]+\s*,\s*)?(\d+)(?:\s*\*\*\s*(\d+))?/g)) {
    const n = m[2] !== undefined ? Number(m[1]) ** Number(m[2]) : Number(m[1]);
    if (n > MAX_LITERAL_RANGE) throw new ChatTemplateError(`the chat template asks for ${m[0]}...): over ${MAX_LITERAL_RANGE.toLocaleString('en-US')} items, refused (it would take the memory of the process rendering it)`);
  }
  const { text, count } = rewriteGenerationTags(source);
  let template: Template;
  try {
    template = new Template(text);
  } catch (err) {
    const msg = errorText(err);
    // The parser runs off the end of a template with an unclosed tag and says only this.
    const hint = /Cannot read properties of undefined/.test(msg) ? ' (an unclosed block or expression?)' : '';
    throw new ChatTemplateError(`the chat template does not parse: ${msg}${hint}`);
  }
  return {
    source,
    hasGenerationTags: count > 0,
    render(vars: Record<string, unknown>): Rendered {
      if (containsMarker(vars)) throw new ChatTemplateError('the row holds a private-use character U+E000/U+E001 that marks generation blocks');
      let raw: string;
      try {
        raw = template.render(vars);
      } catch (err) {
        const msg = errorText(err);
        // A filter or method Python's Jinja2 has and @huggingface/jinja lacks is not the row's fault: say so.
        const hint = /^Unknown (\w+ )?(filter|method)|is not a function|Unknown ObjectValue/i.test(msg) ? " (@huggingface/jinja lacks this; transformers' Jinja2 may render it)" : '';
        throw new ChatTemplateError(`the chat template fails to render: ${msg}${hint}`);
      }
      return cutMarkers(raw);
    },
  };
}

function cutMarkers(raw: string): Rendered {
  if (!raw.includes(GEN_OPEN) && !raw.includes(GEN_CLOSE)) return { text: raw, generation: [] };
  let text = '';
  const generation: [number, number][] = [];
  let open = -1;
  for (const ch of raw) {
    if (ch === GEN_OPEN) {
      // Nested or unclosed blocks: the outermost opening wins, as AssistantTracker's flag does.
      if (open < 0) open = text.length;
    } else if (ch === GEN_CLOSE) {
      if (open >= 0 && text.length > open) generation.push([open, text.length]);
      open = -1;
    } else text += ch;
  }
  if (open >= 0 && text.length > open) generation.push([open, text.length]);
  return { text, generation };
}

function containsMarker(v: unknown): boolean {
  if (typeof v === 'string') return v.includes(GEN_OPEN) || v.includes(GEN_CLOSE);
  if (Array.isArray(v)) return v.some(containsMarker);
  if (typeof v === 'object' && v !== null) return Object.values(v).some(containsMarker);
  return false;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The template text of a tokenizer folder, as transformers picks it: `chat_template.jinja`
 * wins; else tokenizer_config.json's `chat_template`, a string or a list of named templates
 * (`tool_use` when the row has tools and the list has it, else `default`).
 */
export function pickTemplate(jinjaFile: string | undefined, configTemplate: unknown, hasTools: boolean): string {
  if (jinjaFile !== undefined) return jinjaFile;
  if (typeof configTemplate === 'string') return configTemplate;
  if (Array.isArray(configTemplate)) {
    const named = new Map<string, string>();
    for (const t of configTemplate) {
      if (typeof t === 'object' && t !== null && typeof (t as { name?: unknown }).name === 'string' && typeof (t as { template?: unknown }).template === 'string') {
        named.set((t as { name: string }).name, (t as { template: string }).template);
      }
    }
    const chosen = (hasTools ? named.get('tool_use') : undefined) ?? named.get('default');
    if (chosen !== undefined) return chosen;
    throw new ChatTemplateError(`tokenizer_config.json's chat_template list has no template named "default" (names: ${[...named.keys()].join(', ') || 'none'})`);
  }
  throw new ChatTemplateError('no chat template: neither chat_template.jinja nor a chat_template in tokenizer_config.json');
}
