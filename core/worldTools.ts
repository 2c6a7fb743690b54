// A world's tools as an MCP tool list (docs/worlds.md, "Tools"): the seed's mcp_adapter
// renders any list into the system prompt's tool line (`tools_line`) and the schemas a
// constrained decoder wants (`schemas`). The lab runs two tools whose semantics are fixed —
// search (BM25 over the world's corpus) and calc (the exact calculator) — so a world's list
// may only narrow them: drop calc, shorten an argument, restrict its characters
// (`x-agent-lab-chars`, for k too). The default list is the textbook's, whose tool line
// and grammar are byte for byte what the lab always used.
import { CALC_TEMPLATE, Hole, SEARCH_TEMPLATE, Template, TemplateItem } from './grammar';
import { DEFAULT_SEARCH_K, SYSTEM_PROMPT } from './env';
import { JsonObject, JsonValue, pyJsonDumps } from './pyjson';
import { isObj } from './protocol/isObj';
import { AGENT_TOOLS, JsonSchemaProperty, McpTool, toolsLine } from './tools/schemas';
import { assistantTurns, parseAssistantStep, renderCallBody } from './wire';
import { WorldFileError } from './worldSource';

/** The extension key a property uses to narrow its characters (a string of the allowed ones). */
export const CHARS_KEY = 'x-agent-lab-chars';

/** A tool property with the lab's narrowing keys. */
export type WorldToolProperty = JsonSchemaProperty & { maxLength?: number; [CHARS_KEY]?: string };


function holeOf(template: Template, name: string): Hole {
  const h = template.items.find((i): i is Hole => typeof i !== 'string' && i.name === name);
  if (!h) throw new Error(`no hole ${name} in ${template.tool}`);
  return h;
}

const DEFAULT_HOLES: Record<string, Record<string, Hole>> = {
  search: { query: holeOf(SEARCH_TEMPLATE, 'query'), k: holeOf(SEARCH_TEMPLATE, 'k') },
  calc: { expr: holeOf(CALC_TEMPLATE, 'expr') },
};

/**
 * Parses and checks a tool list (a JSON array, or MCP's `{"tools": [...]}`). A problem is a
 * WorldFileError naming the file and the field (`tools[1].inputSchema.properties.query.maxLength`).
 */
/** The longest description a tool or argument may have (a paragraph; MCP servers' run to a few hundred characters). */
export const MAX_DESCRIPTION = 2000;

export function parseToolList(text: string, file: string): McpTool[] {
  const bad = (field: string | null, what: string) => new WorldFileError(file, 1, field, what);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw bad(null, `not JSON (${(err as Error).message.split('\n')[0]})`);
  }
  const list = isObj(v) && Array.isArray(v['tools']) ? v['tools'] : v;
  if (!Array.isArray(list) || list.length === 0) throw bad(null, 'expected a non-empty list of tools (or {"tools": [...]})');
  const out: McpTool[] = [];
  const seen = new Set<string>();
  list.forEach((t, i) => {
    const at = `tools[${i}]`;
    if (!isObj(t)) throw bad(at, 'must be an object {"name", "description", "inputSchema"}');
    const name = t['name'];
    if (name !== 'search' && name !== 'calc') throw bad(`${at}.name`, `${JSON.stringify(name)} is not a tool the lab runs (search and calc, whose semantics are fixed)`);
    if (seen.has(name)) throw bad(`${at}.name`, `${name} is listed twice`);
    seen.add(name);
    if (typeof t['description'] !== 'string' || t['description'].trim() === '') throw bad(`${at}.description`, 'must be a non-empty string');
    // Descriptions go into every teacher request and the system prompt: a long one costs on every call.
    if (t['description'].length > MAX_DESCRIPTION) throw bad(`${at}.description`, `is ${t['description'].length} characters; at most ${MAX_DESCRIPTION} (it is sent with every teacher request)`);
    const schema = t['inputSchema'];
    if (!isObj(schema) || schema['type'] !== 'object' || !isObj(schema['properties'])) throw bad(`${at}.inputSchema`, 'must be {"type": "object", "properties": {...}}');
    const props = schema['properties'];
    const defaults = DEFAULT_HOLES[name]!;
    const want = Object.keys(defaults);
    const got = Object.keys(props);
    if (got.length !== want.length || !want.every((k) => got.includes(k))) {
      throw bad(`${at}.inputSchema.properties`, `${name} takes exactly ${want.join(', ')} (got ${got.join(', ') || 'none'})`);
    }
    const checked: Record<string, WorldToolProperty> = {};
    for (const key of want) {
      const p = props[key];
      const pf = `${at}.inputSchema.properties.${key}`;
      if (!isObj(p)) throw bad(pf, 'must be an object');
      const hole = defaults[key]!;
      const type = key === 'k' ? 'integer' : 'string';
      if (p['type'] !== type) throw bad(`${pf}.type`, `must be "${type}"`);
      const prop: WorldToolProperty = { type };
      if (typeof p['description'] === 'string') {
        if (p['description'].length > MAX_DESCRIPTION) throw bad(`${pf}.description`, `is ${p['description'].length} characters; at most ${MAX_DESCRIPTION} (it is sent with every teacher request)`);
        prop.description = p['description'];
      }
      if (key === 'k') {
        for (const bound of ['minimum', 'maximum', 'default'] as const) {
          const b = p[bound];
          if (b === undefined) continue;
          if (!Number.isSafeInteger(b) || (b as number) < 1 || (b as number) > 9) throw bad(`${pf}.${bound}`, 'must be an integer from 1 to 9 (k is one digit in the call grammar)');
          prop[bound] = b as number;
        }
        if ((prop.minimum ?? 1) > (prop.maximum ?? 9)) throw bad(`${pf}.minimum`, 'is above the maximum');
      }
      {
        if (key !== 'k' && p['maxLength'] !== undefined) {
          const m = p['maxLength'];
          if (!Number.isSafeInteger(m) || (m as number) < 1 || (m as number) > hole.maxLen) throw bad(`${pf}.maxLength`, `must be an integer from 1 to ${hole.maxLen} (a world may narrow the grammar, not widen it)`);
          prop.maxLength = m as number;
        }
        const chars = p[CHARS_KEY];
        if (chars !== undefined) {
          if (typeof chars !== 'string' || chars === '') throw bad(`${pf}.${CHARS_KEY}`, 'must be a non-empty string of the allowed characters');
          const outside = [...new Set(chars)].filter((c) => !hole.chars.has(c));
          if (outside.length) throw bad(`${pf}.${CHARS_KEY}`, `${JSON.stringify(outside.join(''))} outside the grammar's ${key} characters (a world may narrow them, not widen them)`);
          prop[CHARS_KEY] = chars;
        }
      }
      checked[key] = prop;
    }
    const required = schema['required'];
    if (required !== undefined && (!Array.isArray(required) || !required.every((r) => typeof r === 'string' && want.includes(r)))) {
      throw bad(`${at}.inputSchema.required`, `must list some of ${want.join(', ')}`);
    }
    out.push({
      name,
      description: t['description'] as string,
      inputSchema: { type: 'object', properties: checked, ...(Array.isArray(required) ? { required: required as string[] } : {}) },
    });
  });
  if (!seen.has('search')) throw bad(null, 'the list needs search (the agent answers from the corpus)');
  // The tool line keeps the textbook's order: search, then calc.
  return out.sort((a, b) => (a.name === b.name ? 0 : a.name === 'search' ? -1 : 1));
}

function narrowed(template: Template, tool: McpTool): Template {
  const props = tool.inputSchema.properties as Record<string, WorldToolProperty>;
  const items: TemplateItem[] = template.items.map((item) => {
    if (typeof item === 'string') return item;
    const p = props[item.name];
    if (!p) return item;
    // k's minimum/maximum are the tool's (checked when it runs, as the textbook's schema says 1-5
    // while its grammar takes any digit 1-9); only x-agent-lab-chars narrows the grammar's k.
    return { ...item, chars: p[CHARS_KEY] !== undefined ? new Set(p[CHARS_KEY]) : item.chars, maxLen: p.maxLength ?? item.maxLen };
  });
  return { tool: template.tool, items };
}

/** The call grammar's templates for a tool list (the seed's `schemas`): the default list gives the default templates. */
export function templatesFor(tools: readonly McpTool[] = AGENT_TOOLS): Template[] {
  return tools.map((t) => narrowed(t.name === 'search' ? SEARCH_TEMPLATE : CALC_TEMPLATE, t));
}

/** The system prompt with the tool line of this list: SYSTEM_PROMPT itself for the default list. */
export function systemPromptFor(tools: readonly McpTool[] = AGENT_TOOLS): string {
  const line = toolsLine(AGENT_TOOLS);
  const at = SYSTEM_PROMPT.lastIndexOf(line);
  if (at < 0) throw new Error('SYSTEM_PROMPT no longer ends with the default tool line');
  return SYSTEM_PROMPT.slice(0, at) + toolsLine(tools) + SYSTEM_PROMPT.slice(at + line.length);
}

/**
 * Why a call breaks a tool list, or null when it keeps to it: a tool not in the list, an
 * argument the tool does not take, a required one missing, or a value its schema refuses
 * (type, minimum/maximum, maxLength, x-agent-lab-chars). The grammar a student decodes
 * with enforces the list's narrowing; a teacher's call (or a traces file's) must be held to
 * it here, before it runs or is trained on (issue 36).
 */
export function toolCallViolation(tool: string, args: Readonly<JsonObject>, tools: readonly McpTool[]): string | null {
  const t = tools.find((x) => x.name === tool);
  if (!t) return `${JSON.stringify(tool)} is not in the world's tool list (${tools.map((x) => x.name).join(', ')})`;
  const props = t.inputSchema.properties as Record<string, WorldToolProperty>;
  const extra = Object.keys(args).filter((k) => !Object.prototype.hasOwnProperty.call(props, k));
  if (extra.length) return `${tool} takes ${Object.keys(props).join(', ')}, not ${extra.map((k) => JSON.stringify(k)).join(', ')}`;
  for (const [key, p] of Object.entries(props)) {
    // A search without k runs with the environment's default, so that is the value the list must allow.
    const v: JsonValue | undefined = args[key] ?? (tool === 'search' && key === 'k' ? DEFAULT_SEARCH_K : undefined);
    if (v === undefined) {
      if (t.inputSchema.required?.includes(key)) return `${tool} needs ${key}`;
      continue;
    }
    const at = `${tool}'s ${key}`;
    if (p.type === 'string') {
      if (typeof v !== 'string') return `${at} must be a string, got ${clipJson(v)}`;
      const len = [...v].length; // code points, as JSON Schema counts (and the grammar)
      if (p.maxLength !== undefined && len > p.maxLength) return `${at} is ${len} characters, over the list's maxLength ${p.maxLength}`;
      const allowed = p[CHARS_KEY];
      if (allowed !== undefined) {
        const outside = [...new Set(v)].filter((c) => !allowed.includes(c));
        if (outside.length) return `${at} has ${JSON.stringify(outside.join(''))}, outside the list's ${CHARS_KEY}`;
      }
      continue;
    }
    if (p.type === 'boolean') {
      if (typeof v !== 'boolean') return `${at} must be a boolean, got ${clipJson(v)}`;
      continue;
    }
    const isInt = typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v));
    if (p.type === 'integer' ? !isInt : !isInt && !(typeof v === 'number' && Number.isFinite(v))) return `${at} must be ${p.type === 'integer' ? 'an integer' : 'a number'}, got ${clipJson(v)}`;
    const n = Number(v);
    if (p.minimum !== undefined && n < p.minimum) return `${at} is ${String(v)}, below the list's minimum ${p.minimum}`;
    if (p.maximum !== undefined && n > p.maximum) return `${at} is ${String(v)}, above the list's maximum ${p.maximum}`;
  }
  return null;
}

/** The first call of a transcript that breaks the tool list (its JSON body, and why), or null. */
export function transcriptToolViolation(text: string, tools: readonly McpTool[]): { call: string; why: string } | null {
  for (const turn of assistantTurns(text)) {
    const a = parseAssistantStep(turn);
    if (a.kind !== 'tool') continue;
    const why = toolCallViolation(a.tool, a.args, tools);
    if (why !== null) return { call: clip(renderCallBody(a.tool, a.args)), why };
  }
  return null;
}

const clip = (s: string, n = 120): string => (s.length > n ? `${s.slice(0, n)}...` : s);
const clipJson = (v: JsonValue): string => clip(pyJsonDumps(v), 40);
