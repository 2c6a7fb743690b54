// Adds `{% generation %}` blocks to a chat template that lacks them (issue 30), so that
// transformers' return_assistant_tokens_mask / TRL's assistant_only_loss supervise each
// assistant turn's content and end-of-turn token -- the shape TRL's own training templates
// use (trl/chat_templates/*_training.jinja), except that the separator whitespace after the
// end-of-turn token stays outside, so the generation mask equals the prefix-difference mask.
//
// Not by family name: the patch is found by rendering. Each output expression inside the
// message loop is split into its `+` operands and instrumented with private-use markers;
// probe conversations say which operand emits the first and the last character of each
// assistant turn's supervised text (what messages[:k+1] adds to messages[:k] with the
// generation prompt). The tags go around the smallest run of sibling nodes holding both,
// after string literals are cut at those characters and output operands every branch of an
// `if` starts with are hoisted out of it; where that run also renders other roles, it is
// duplicated under `{% if message.role == 'assistant' %}`. The result is then checked by
// rendering: byte-identical text on every probe, and each generation block equal to the
// turn's supervised text (differences are reported, never silent). Anything else: a reason.
import { Template } from '@huggingface/jinja';
import { compileChatTemplate, rewriteGenerationTags } from './template';

export type PatchResult =
  | {
      ok: true;
      /** The patched template text. */
      template: string;
      /** How many generation blocks were inserted. */
      blocks: number;
      /** Where the generation mask of the patched template differs from the prefix-difference mask, each precisely. */
      notes: string[];
    }
  | { ok: false; reason: string };

export interface PatchOptions {
  /** Template variables the template reads (bos_token, eos_token, ...), as ChatModel.tokenVars gives them. */
  vars?: Record<string, unknown>;
}

// ---- a small Jinja tree: enough to move output operands and wrap sibling runs ------------

interface TextNode {
  k: 'text';
  s: string;
}
interface OutNode {
  k: 'out';
  expr: string;
  l: boolean;
  r: boolean;
  /** The source as written, while the node is unchanged. */
  raw?: string;
  id?: number;
  /** The output it was split from: printed as written again where all its pieces stay together. */
  origin?: { raw: string; pieces: OutNode[] };
}
interface TagNode {
  k: 'tag';
  raw: string;
  kw: string;
  body: string;
  l: boolean;
  r: boolean;
}
interface Branch {
  head: TagNode;
  children: Node[];
}
interface BlockNode {
  k: 'block';
  kw: string;
  branches: Branch[];
  end: TagNode;
}
type Node = TextNode | OutNode | TagNode | BlockNode | { k: 'comment'; raw: string };

class Refusal extends Error {}

function lex(src: string): (TextNode | OutNode | TagNode | { k: 'comment'; raw: string })[] {
  const out: (TextNode | OutNode | TagNode | { k: 'comment'; raw: string })[] = [];
  let i = 0;
  while (i < src.length) {
    const next = src.slice(i).search(/{[{%#]/);
    if (next < 0) {
      out.push({ k: 'text', s: src.slice(i) });
      break;
    }
    if (next > 0) out.push({ k: 'text', s: src.slice(i, i + next) });
    const start = i + next;
    const kind = src[start + 1];
    if (kind === '#') {
      const end = src.indexOf('#}', start + 2);
      if (end < 0) throw new Refusal('an unclosed {# comment');
      out.push({ k: 'comment', raw: src.slice(start, end + 2) });
      i = end + 2;
      continue;
    }
    const close = kind === '{' ? '}}' : '%}';
    let j = start + 2;
    let quote: string | null = null;
    while (j < src.length) {
      const c = src[j]!;
      if (quote) {
        if (c === '\\') j++;
        else if (c === quote) quote = null;
      } else if (c === '"' || c === "'") quote = c;
      else if (src.startsWith(close, j)) break;
      j++;
    }
    if (j >= src.length) throw new Refusal(`an unclosed ${kind === '{' ? '{{' : '{%'} tag`);
    const raw = src.slice(start, j + 2);
    let inner = src.slice(start + 2, j);
    const l = inner.startsWith('-');
    const r = inner.endsWith('-');
    inner = inner.slice(l ? 1 : 0, r ? -1 : undefined).trim();
    if (kind === '{') out.push({ k: 'out', expr: inner, l, r, raw });
    else {
      const kw = /^\w+/.exec(inner)?.[0] ?? '';
      if (kw === 'raw') throw new Refusal('a {% raw %} block');
      out.push({ k: 'tag', raw, kw, body: inner.slice(kw.length).trim(), l, r });
    }
    i = j + 2;
  }
  return out;
}

const OPENERS = new Set(['if', 'for', 'macro', 'call', 'filter', 'generation']);

function parse(src: string): Node[] {
  const flat = lex(src);
  const root: Node[] = [];
  const stack: { block: BlockNode; list: Node[] }[] = [];
  let list = root;
  for (const n of flat) {
    if (n.k !== 'tag') {
      list.push(n);
      continue;
    }
    const opens = OPENERS.has(n.kw) || (n.kw === 'set' && !/^[\w.,\s()]+=/.test(n.body) && !n.body.includes('='));
    if (opens) {
      const block: BlockNode = { k: 'block', kw: n.kw, branches: [{ head: n, children: [] }], end: n };
      list.push(block);
      stack.push({ block, list });
      list = block.branches[0]!.children;
    } else if ((n.kw === 'elif' || n.kw === 'else') && stack.length > 0) {
      const top = stack[stack.length - 1]!.block;
      const b: Branch = { head: n, children: [] };
      top.branches.push(b);
      list = b.children;
    } else if (n.kw.startsWith('end') && stack.length > 0) {
      const top = stack.pop()!;
      if (`end${top.block.kw}` !== n.kw) throw new Refusal(`{% ${n.kw} %} closes a {% ${top.block.kw} %}`);
      top.block.end = n;
      list = top.list;
    } else list.push(n);
  }
  if (stack.length > 0) throw new Refusal(`an unclosed {% ${stack[stack.length - 1]!.block.kw} %}`);
  return root;
}

type Markers = { open(id: number): string; close(id: number): string } | null;

function serialize(nodes: Node[], m: Markers = null): string {
  let s = '';
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i]!;
    const o = n.k === 'out' ? n.origin : undefined;
    if (!m && o && o.pieces[0] === n && o.pieces.every((p, j) => nodes[i + j] === p)) {
      s += o.raw;
      i += o.pieces.length - 1;
      continue;
    }
    if (n.k === 'text') s += n.s;
    else if (n.k === 'comment' || n.k === 'tag') s += n.raw;
    else if (n.k === 'out') {
      if (m && n.id !== undefined) {
        // The dashes move to the markers, so whitespace is stripped exactly as before.
        s += `{{${n.l ? '-' : ''} '${m.open(n.id)}' }}{{ ${n.expr} }}{{ '${m.close(n.id)}' ${n.r ? '-' : ''}}}`;
      } else s += n.raw ?? `{{${n.l ? '-' : ''} ${n.expr} ${n.r ? '-' : ''}}}`;
    } else {
      for (const b of n.branches) s += b.head.raw + serialize(b.children, m);
      s += n.end.raw;
    }
  }
  return s;
}

// ---- expressions: top-level `+` operands and string literals ------------------------------

/** The top-level `+` operands of an expression, or null when it is not a plain concatenation. */
function plusOperands(expr: string): string[] | null {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let last = 0;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (depth === 0) {
      if (c === '+') {
        parts.push(expr.slice(last, i).trim());
        last = i + 1;
      } else if ('-*/%~<>!='.includes(c)) return null;
      else if (/\s/.test(c) && /^\s(if|else|and|or|not|in|is)\s/.test(expr.slice(i, i + 6) + ' ')) return null;
    }
  }
  parts.push(expr.slice(last).trim());
  // Only a concatenation with a string literal in it is text throughout (`1 + 2` is a sum).
  return parts.length > 1 && parts.every((p) => p !== '') && parts.some((p) => literalValue(p) !== null) ? parts : null;
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"' };

/** The value of a string literal expression, or null when it is not one. */
function literalValue(expr: string): string | null {
  const m = /^(['"])((?:[^\\]|\\.)*)\1$/s.exec(expr);
  if (!m) return null;
  let v = '';
  const body = m[2]!;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === m[1]) return null;
    if (c !== '\\') {
      v += c;
      continue;
    }
    const e = ESCAPES[body[i + 1] ?? ''];
    if (e === undefined) return null;
    v += e;
    i++;
  }
  return v;
}

function literal(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n').replace(/\t/g, '\\t').replace(/\r/g, '\\r')}'`;
}

// ---- the message loop and its operands --------------------------------------------------------

function findMessageLoop(nodes: Node[]): BlockNode {
  const loops: BlockNode[] = [];
  const walk = (ns: Node[]): void => {
    for (const n of ns) {
      if (n.k !== 'block') continue;
      if (n.kw === 'for' && /^\w+\s+in\s+.*messages/.test(n.branches[0]!.head.body) && hasOut(n.branches[0]!.children)) loops.push(n);
      else n.branches.forEach((b) => walk(b.children));
    }
  };
  walk(nodes);
  if (loops.length !== 1) throw new Refusal(loops.length === 0 ? 'no `{% for ... in messages %}` loop that renders the messages' : `${loops.length} loops over messages render text: which one renders the assistant turns is ambiguous`);
  return loops[0]!;
}

function hasOut(ns: Node[]): boolean {
  return ns.some((n) => n.k === 'out' || (n.k === 'block' && n.branches.some((b) => hasOut(b.children))));
}

function loopVar(loop: BlockNode): string {
  return /^(\w+)/.exec(loop.branches[0]!.head.body)![1]!;
}

/** Splits every output in `ns` (recursively) into its `+` operands. */
function splitOutputs(ns: Node[]): void {
  for (let i = 0; i < ns.length; i++) {
    const n = ns[i]!;
    if (n.k === 'block') n.branches.forEach((b) => splitOutputs(b.children));
    if (n.k !== 'out') continue;
    const parts = plusOperands(n.expr);
    if (!parts) continue;
    const origin = { raw: n.raw ?? serialize([n]), pieces: [] as OutNode[] };
    const outs: OutNode[] = parts.map((expr, j) => ({ k: 'out', expr, l: j === 0 && n.l, r: j === parts.length - 1 && n.r, origin }));
    origin.pieces = outs;
    ns.splice(i, 1, ...outs);
    i += outs.length - 1;
  }
}

function numberOuts(ns: Node[], all: OutNode[]): void {
  for (const n of ns) {
    if (n.k === 'out') {
      n.id = all.length;
      all.push(n);
    } else if (n.k === 'block') n.branches.forEach((b) => numberOuts(b.children, all));
  }
}

/** Cuts a string-literal output in two at `at` characters of its value. */
function cutLiteral(ns: Node[], target: OutNode, at: number): boolean {
  for (let i = 0; i < ns.length; i++) {
    const n = ns[i]!;
    if (n.k === 'block' && n.branches.some((b) => cutLiteral(b.children, target, at))) return true;
    if (n !== target) continue;
    const v = literalValue(n.expr);
    if (v === null) return false;
    const a: OutNode = { k: 'out', expr: literal(v.slice(0, at)), l: n.l, r: false };
    const b: OutNode = { k: 'out', expr: literal(v.slice(at)), l: false, r: n.r };
    const origin = n.origin ?? { raw: n.raw ?? serialize([n]), pieces: [n] };
    origin.pieces = origin.pieces.flatMap((p) => (p === n ? [a, b] : [p]));
    a.origin = b.origin = origin;
    ns.splice(i, 1, a, b);
    return true;
  }
  return false;
}

const sameOut = (a: Node | undefined, b: Node | undefined): boolean => {
  if (a?.k !== 'out' || b?.k !== 'out') return false;
  const va = literalValue(a.expr);
  return va !== null ? va === literalValue(b.expr) : a.expr.replace(/\s+/g, '') === b.expr.replace(/\s+/g, '');
};
const isBlank = (n: Node): boolean => n.k === 'comment' || (n.k === 'text' && n.s.trim() === '');

/**
 * Outputs every branch of an exhaustive `if` starts with are output once before it (innermost
 * first) -- only where whitespace control gives the same text whatever the branch's input:
 * the whitespace the move takes away or brings together is stripped before and after.
 */
function hoist(ns: Node[]): void {
  for (let i = 0; i < ns.length; i++) {
    const n = ns[i]!;
    if (n.k !== 'block') continue;
    n.branches.forEach((b) => hoist(b.children));
    if (n.kw !== 'if' || n.branches[n.branches.length - 1]!.head.kw !== 'else') continue;
    const moved: Node[] = [];
    for (;;) {
      const firsts = n.branches.map((b) => b.children.findIndex((c) => !isBlank(c)));
      if (firsts.some((f) => f < 0)) break;
      const heads = n.branches.map((b, j) => b.children[firsts[j]!]);
      if (!heads.every((h) => sameOut(h, heads[0]))) break;
      const op = heads[0] as OutNode;
      const before = moved.length > 0 ? '' : (ns[i - 1]?.k === 'text' ? (ns[i - 1] as TextNode).s : '');
      // Before the `if`: what preceded it was stripped by its dash exactly when the output's dash strips it now.
      if (op.l ? !(n.branches[0]!.head.l || before === '') : before !== '') break;
      const safe = n.branches.every((b, j) => {
        const f = firsts[j]!;
        const blanks = b.children.slice(0, f).some((c) => c.k === 'text' && c.s !== '');
        if (blanks && !op.l && !b.head.r) return false; // indentation the output printed would vanish
        const after = b.children[f + 1];
        if (after === undefined || after.k !== 'text') return true;
        const next = b.children[f + 2];
        // Whitespace after the output now follows the branch's tag: it must be stripped either way.
        return after.s.trim() === '' && (b.head.r || (next !== undefined && dashLeft(next)));
      });
      if (!safe) break;
      // All branches left: the output and the blank text before it go.
      n.branches.forEach((b, j) => b.children.splice(0, firsts[j]! + 1));
      moved.push(heads[0]!);
    }
    if (moved.length > 0) {
      ns.splice(i, 0, ...moved);
      i += moved.length;
    }
  }
}

// ---- rendering with attribution ------------------------------------------------------------

const MARK_BASE = 0xe100;
const MARK_MAX = 0xf8ff;
const MARKERS: Markers = { open: (id) => String.fromCharCode(MARK_BASE + 2 * id), close: (id) => String.fromCharCode(MARK_BASE + 2 * id + 1) };

interface Attributed {
  text: string;
  /** For each character: the output node id that emitted it (-1: outside the loop's outputs) and which emission of it. */
  owner: Int32Array;
  emission: Int32Array;
  emissionStart: number[];
  emissionEnd: number[];
}

function render(source: string, vars: Record<string, unknown>): string {
  return new Template(rewriteGenerationTags(source).text).render(vars);
}

function attribute(raw: string): Attributed {
  let text = '';
  const owner: number[] = [];
  const emission: number[] = [];
  const emissionStart: number[] = [];
  const emissionEnd: number[] = [];
  const stack: { id: number; e: number }[] = [];
  for (const ch of raw) {
    const code = ch.charCodeAt(0);
    if (ch.length === 1 && code >= MARK_BASE && code <= MARK_MAX) {
      const id = (code - MARK_BASE) >> 1;
      if ((code - MARK_BASE) % 2 === 0) {
        stack.push({ id, e: emissionStart.length });
        emissionStart.push(text.length);
        emissionEnd.push(text.length);
      } else {
        const top = stack.pop();
        if (top) emissionEnd[top.e] = text.length;
      }
      continue;
    }
    for (let u = 0; u < ch.length; u++) {
      const top = stack[stack.length - 1];
      owner.push(top ? top.id : -1);
      emission.push(top ? top.e : -1);
    }
    text += ch;
  }
  return { text, owner: Int32Array.from(owner), emission: Int32Array.from(emission), emissionStart, emissionEnd };
}

interface Probe {
  messages: Record<string, unknown>[];
  tools?: unknown[];
}

const TOOL = { type: 'function', function: { name: 'get_weather', description: 'The weather at a place.', parameters: { type: 'object', properties: { place: { type: 'string' } }, required: ['place'] } } };
const CALL = (id: string, place: string): unknown => ({ id, type: 'function', function: { name: 'get_weather', arguments: { place } } });
const PROBES: Probe[] = [
  {
    messages: [
      { role: 'user', content: 'First question?' },
      { role: 'assistant', content: 'First answer.' },
      { role: 'user', content: 'Second question?' },
      { role: 'assistant', content: 'Second answer.' },
    ],
  },
  { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello?' }, { role: 'assistant', content: 'Hello.' }] },
  {
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: '', tool_calls: [CALL('call00001', 'Oslo')] },
      { role: 'tool', name: 'get_weather', tool_call_id: 'call00001', content: 'rain' },
      { role: 'assistant', content: 'It rains in Oslo.' },
    ],
    tools: [TOOL],
  },
  {
    messages: [
      { role: 'user', content: 'Weather in Lima?' },
      { role: 'assistant', content: 'Let me look.', tool_calls: [CALL('call00002', 'Lima')] },
      { role: 'tool', name: 'get_weather', tool_call_id: 'call00002', content: 'sun' },
      { role: 'assistant', content: 'It is sunny in Lima.' },
    ],
    tools: [TOOL],
  },
];

interface Turn {
  probe: number;
  message: number;
  /** [start, end) of the supervised text in the full rendering. */
  start: number;
  end: number;
}

/** The stable assistant turns of a probe: what messages[:k+1] adds to messages[:k] with the generation prompt, trailing whitespace left out. */
function turnsOf(source: string, base: Record<string, unknown>, p: Probe, probe: number): { full: string; turns: Turn[]; gp: string[] } | null {
  const vars = (messages: unknown[], agp: boolean): Record<string, unknown> => ({ ...base, ...(p.tools ? { tools: p.tools } : {}), messages, add_generation_prompt: agp });
  let full: string;
  try {
    full = render(source, vars(p.messages, false));
  } catch {
    return null; // the original does not render this probe (Gemma 3 and tools): not a case to keep
  }
  const turns: Turn[] = [];
  const gp: string[] = [];
  p.messages.forEach((m, k) => {
    if (m['role'] !== 'assistant') return;
    let before: string;
    let upTo: string;
    try {
      before = render(source, vars(p.messages.slice(0, k), true));
      upTo = render(source, vars(p.messages.slice(0, k + 1), false));
    } catch {
      return;
    }
    if (!upTo.startsWith(before) || !full.startsWith(upTo)) return; // a later turn changes it: no stable target
    const end = before.length + upTo.slice(before.length).trimEnd().length;
    if (end > before.length) turns.push({ probe, message: k, start: before.length, end });
    try {
      const noGp = render(source, vars(p.messages.slice(0, k), false));
      if (before.startsWith(noGp)) gp.push(before.slice(noGp.length));
    } catch {
      /* no generation prompt known for this turn */
    }
  });
  return { full, turns, gp };
}

const show = (s: string): string => JSON.stringify(s.length > 50 ? `${s.slice(0, 50)}…` : s);

/**
 * The template with `{% generation %}` blocks around each assistant turn's content and
 * end-of-turn token, or the reason it cannot be patched safely.
 */
export function patchGenerationTags(template: string, opts: PatchOptions = {}): PatchResult {
  try {
    return patch(template, { bos_token: '<s>', eos_token: '</s>', ...(opts.vars ?? {}) });
  } catch (err) {
    if (err instanceof Refusal) return { ok: false, reason: err.message };
    throw err;
  }
}

function patch(source: string, base: Record<string, unknown>): PatchResult {
  if (rewriteGenerationTags(source).count > 0) throw new Refusal('the template already has {% generation %} blocks');
  try {
    new Template(source);
  } catch (err) {
    throw new Refusal(`the template does not parse: ${err instanceof Error ? err.message : String(err)}`);
  }
  const tree = parse(source);
  const loop = findMessageLoop(tree);
  const cases = PROBES.map((p, i) => ({ p, r: turnsOf(source, base, p, i) })).filter((c): c is { p: Probe; r: NonNullable<typeof c.r> } => c.r !== null);
  if (!cases.some((c) => c.r.turns.length > 0)) throw new Refusal('no probe conversation renders an assistant turn whose text a later turn leaves unchanged: nothing to place the blocks by');
  const body = (): Node[][] => loop.branches.map((b) => b.children);
  body().forEach(splitOutputs);

  // Cut literals at the turns' first and last characters until every turn starts and ends on an output's edge.
  let outs: OutNode[] = [];
  const instrument = (): Attributed[] => {
    outs = [];
    body().forEach((b) => numberOuts(b, outs));
    if (MARK_BASE + 2 * outs.length > MARK_MAX) throw new Refusal(`too many outputs in the message loop (${outs.length})`);
    const marked = serialize(tree, MARKERS);
    return cases.map((c) => {
      const a = attribute(render(marked, { ...base, ...(c.p.tools ? { tools: c.p.tools } : {}), messages: c.p.messages, add_generation_prompt: false }));
      if (a.text !== c.r.full) throw new Refusal('instrumenting the template changed what it renders (whitespace control this patcher does not model)');
      return a;
    });
  };
  const outsideNotes: string[] = [];
  for (let round = 0; ; round++) {
    const att = instrument();
    const cuts: { node: OutNode; at: number }[] = [];
    cases.forEach((c, ci) => {
      const a = att[ci]!;
      for (const t of c.r.turns) {
        // Text the template writes after the loop (Phi-3's final eos_token) ends the last turn's
        // prefix difference, but no block inside the loop can hold it: the block stops before it, said in a note.
        if (round === 0 && a.owner[t.start]! >= 0 && a.owner[t.end - 1]! < 0) {
          let e = t.end;
          while (e > t.start && a.owner[e - 1]! < 0) e--;
          const inLoop = e - (c.r.full.slice(t.start, e).length - c.r.full.slice(t.start, e).trimEnd().length);
          const note = `the last turn: ${JSON.stringify(c.r.full.slice(inLoop, t.end))} after it is written after the message loop, outside any block (the last turn's prefix difference includes it)`;
          if (!outsideNotes.includes(note)) outsideNotes.push(note);
          t.end = inLoop;
          if (t.end <= t.start) throw new Refusal('an assistant turn is written outside the message loop');
        }
        for (const [pos, edge] of [
          [t.start, 'start'],
          [t.end - 1, 'end'],
        ] as const) {
          const id = a.owner[pos]!;
          if (id < 0) throw new Refusal(`message ${t.message} of a probe: ${show(c.r.full.slice(t.start, t.end))} is not written by an output of the message loop`);
          const e = a.emission[pos]!;
          const at = edge === 'start' ? pos - a.emissionStart[e]! : pos + 1 - a.emissionStart[e]!;
          const len = a.emissionEnd[e]! - a.emissionStart[e]!;
          if ((edge === 'start' && at > 0) || (edge === 'end' && at < len)) cuts.push({ node: outs[id]!, at });
        }
      }
    });
    if (cuts.length === 0) break;
    if (round >= 200) throw new Refusal('the turns do not settle on output boundaries');
    const seen = new Set<string>();
    for (const { node, at } of cuts) {
      const key = `${node.id}@${at}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (literalValue(node.expr) === null) throw new Refusal(`an assistant turn's supervised text starts or ends inside {{ ${node.expr} }}, which is not a string literal that can be cut`);
      body().forEach((b) => cutLiteral(b, node, at));
      break; // ids shift after a cut: re-instrument
    }
  }
  body().forEach(hoist);
  const att = instrument();

  // Where each turn's block goes: the smallest sibling run holding its first and last outputs.
  const parentOf = new Map<Node, { list: Node[]; branch: Branch | null; block: BlockNode | null }>();
  const index = (ns: Node[], branch: Branch | null, block: BlockNode | null): void => {
    for (const n of ns) {
      parentOf.set(n, { list: ns, branch, block });
      if (n.k === 'block') n.branches.forEach((b) => index(b.children, b, n));
    }
  };
  body().forEach((b, i) => index(b, loop.branches[i]!, loop));
  const chain = (n: Node): { list: Node[]; node: Node; branch: Branch | null }[] => {
    const out: { list: Node[]; node: Node; branch: Branch | null }[] = [];
    let cur: Node = n;
    for (;;) {
      const p = parentOf.get(cur);
      if (!p) break;
      out.unshift({ list: p.list, node: cur, branch: p.branch });
      if (p.block === loop || !p.block) break;
      cur = p.block;
    }
    return out;
  };
  interface Place {
    list: Node[];
    from: number;
    to: number;
    conditional: boolean;
  }
  const places: Place[] = [];
  const v = loopVar(loop);
  const assistantOnly = (path: { branch: Branch | null }[]): boolean =>
    path.some(({ branch }) => {
      if (!branch || (branch.head.kw !== 'if' && branch.head.kw !== 'elif')) return false;
      const cond = branch.head.body;
      const conj = cond.split(/\s+and\s+/).map((c) => c.trim().replace(/^\((.*)\)$/, '$1').trim());
      const re = new RegExp(`^${v}(\\.role|\\[\\s*['"]role['"]\\s*\\])\\s*==\\s*['"]assistant['"]$`);
      return !/\bor\b/.test(cond) && conj.some((c) => re.test(c));
    });
  cases.forEach((c, ci) => {
    const a = att[ci]!;
    for (const t of c.r.turns) {
      const first = chain(outs[a.owner[t.start]!]!);
      const last = chain(outs[a.owner[t.end - 1]!]!);
      let d = 0;
      while (d + 1 < first.length && d + 1 < last.length && first[d]!.node === last[d]!.node) d++;
      if (first[d]!.list !== last[d]!.list) throw new Refusal(`message ${t.message} of a probe: its first and last supervised characters are written in different branches`);
      const list = first[d]!.list;
      const from = list.indexOf(first[d]!.node);
      const to = list.indexOf(last[d]!.node);
      if (from > to) throw new Refusal(`message ${t.message} of a probe: its supervised text is written out of order`);
      const path = first.slice(0, d + 1);
      scopeGuard(list, from, to, body());
      // Turn shapes that want overlapping runs of one list share their union (the check below says what it costs).
      const existing = places.find((p) => p.list === list && p.from <= to && from <= p.to);
      if (existing) {
        existing.from = Math.min(existing.from, from);
        existing.to = Math.max(existing.to, to);
        existing.conditional ||= !assistantOnly(path);
        continue;
      }
      if (places.some((p) => p.list !== list && (contains(p.list.slice(p.from, p.to + 1), list) || contains(list.slice(from, to + 1), p.list))))
        throw new Refusal('two assistant turns want nested generation blocks');
      places.push({ list, from, to, conditional: !assistantOnly(path) });
    }
  });

  // Insert from the back of each list so indices stay true.
  places.sort((x, y) => y.from - x.from);
  for (const p of places) {
    const run = p.list.slice(p.from, p.to + 1);
    const text = serialize(run);
    const first = run[0]!;
    const lastNode = run[run.length - 1]!;
    const ld = dashLeft(first) ? '-' : '';
    const rd = dashRight(lastNode) ? '-' : '';
    const wrapped = p.conditional
      ? `{%${ld} if ${v}.role == 'assistant' %}{% generation %}${text}{% endgeneration %}{% else %}${text}{% endif ${rd}%}`
      : `{%${ld} generation %}${text}{% endgeneration ${rd}%}`;
    // The new tags are block tags: trim_blocks eats a newline right after the closing one, and
    // lstrip_blocks the indentation before the opening one, which the outputs around them printed.
    const next = p.list[p.to + 1];
    if (!rd && lastNode.k === 'out' && next?.k === 'text' && next.s.startsWith('\n')) next.s = `\n${next.s}`;
    const prev = p.list[p.from - 1];
    let indent = '';
    if (!ld && prev?.k === 'text') {
      const m = /(^|\n)([ \t]+)$/.exec(prev.s);
      if (m) {
        indent = `{{ ${literal(m[2]!)} }}`;
        prev.s = prev.s.slice(0, prev.s.length - m[2]!.length);
      }
    }
    p.list.splice(p.from, run.length, { k: 'text', s: indent + wrapped });
  }
  const patched = serialize(tree);
  return { ok: true, template: patched, blocks: places.length, notes: [...outsideNotes, ...verify(source, patched, base, cases)] };
}

/**
 * transformers compiles `{% generation %}` to a call block, whose body is a scope of its own: a
 * plain `{% set x = ... %}` inside the block would no longer reach what follows it (@huggingface/jinja,
 * which only strips the tags, would not show it). Such a run is refused.
 */
function scopeGuard(list: Node[], from: number, to: number, loopBody: Node[][]): void {
  const names = new Set<string>();
  const walk = (ns: Node[]): void => {
    for (const n of ns) {
      if (n.k === 'tag' && n.kw === 'set') {
        const m = /^(\w+)\s*=/.exec(n.body);
        if (m) names.add(m[1]!);
      } else if (n.k === 'block' && n.kw !== 'for' && n.kw !== 'macro') n.branches.forEach((b) => walk(b.children));
    }
  };
  const run = list.slice(from, to + 1);
  walk(run);
  if (names.size === 0) return;
  const skip = new Set<Node>(run);
  const rest = (ns: Node[]): Node[] => ns.filter((x) => !skip.has(x)).map((x) => (x.k === 'block' ? { ...x, branches: x.branches.map((br) => ({ head: br.head, children: rest(br.children) })) } : x));
  // What is read outside the run: its text without the targets of other assignments.
  const outside = loopBody
    .map((b) => serialize(rest(b)))
    .join('')
    .replace(/{%-?\s*set\s+\w+\s*=/g, '');
  for (const name of names) {
    // A name, not an attribute or a key of that name (message.content, message['content']).
    if (new RegExp(`(?<![.\\w'"])${name}\\b`).test(outside)) throw new Refusal(`{% set ${name} %} inside the assistant turn is read outside it: in a {% generation %} block (a scope of its own in transformers) it would no longer be`);
  }
}

function contains(ns: Node[], list: Node[]): boolean {
  return ns.some((n) => n.k === 'block' && n.branches.some((b) => b.children === list || contains(b.children, list)));
}
const dashLeft = (n: Node): boolean => (n.k === 'out' ? n.l : n.k === 'tag' ? n.l : n.k === 'block' ? n.branches[0]!.head.l : false);
const dashRight = (n: Node): boolean => (n.k === 'out' ? n.r : n.k === 'tag' ? n.r : n.k === 'block' ? n.end.r : false);

/** Renders the patch against the original on every probe; refuses on any text difference, reports mask differences. */
function verify(source: string, patched: string, base: Record<string, unknown>, cases: { p: Probe; r: { full: string; turns: Turn[] } }[]): string[] {
  const compiled = compileChatTemplate(patched);
  const notes: string[] = [];
  for (const { p, r } of cases) {
    for (let k = 0; k <= p.messages.length; k++) {
      for (const agp of [false, true]) {
        const vars = { ...base, ...(p.tools ? { tools: p.tools } : {}), messages: p.messages.slice(0, k), add_generation_prompt: agp };
        let want: string;
        try {
          want = render(source, vars);
        } catch {
          continue;
        }
        const got = compiled.render(vars).text;
        if (got !== want) throw new Refusal(`the patched template renders differently (${k} messages, add_generation_prompt=${agp}): ${show(got)} against ${show(want)}`);
      }
    }
    const out = compiled.render({ ...base, ...(p.tools ? { tools: p.tools } : {}), messages: p.messages, add_generation_prompt: false });
    const assistants = p.messages.filter((m) => m['role'] === 'assistant').length;
    if (out.generation.length !== assistants) throw new Refusal(`a probe with ${assistants} assistant turns gets ${out.generation.length} generation blocks`);
    for (const t of r.turns) {
      const span = out.generation.find(([a, b]) => a < t.end && t.start < b);
      const kind = p.tools && (p.messages[t.message]!['tool_calls'] !== undefined) ? 'a tool-call turn' : 'a plain turn';
      if (!span) throw new Refusal(`${kind}'s supervised text ${show(r.full.slice(t.start, t.end))} is in no generation block`);
      if (span[0] === t.start && span[1] === t.end) continue;
      const extraBefore = r.full.slice(span[0], t.start);
      const extraAfter = r.full.slice(t.end, span[1]);
      if (span[0] > t.start || span[1] < t.end || extraBefore.trim() !== '' || extraAfter.trim() !== '') {
        throw new Refusal(`${kind}: the generation block would hold ${show(r.full.slice(span[0], span[1]))} where the prefix-difference mask supervises ${show(r.full.slice(t.start, t.end))}`);
      }
      const note = `${kind}: the generation block also holds ${JSON.stringify(extraBefore + extraAfter)} ${extraBefore ? 'before' : 'after'} the supervised text (the template writes it in the same place for every turn shape), which the prefix-difference mask leaves to the generation prompt or separator`;
      if (!notes.includes(note)) notes.push(note);
    }
  }
  return notes;
}
