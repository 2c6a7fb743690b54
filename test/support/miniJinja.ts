// A small Jinja interpreter for the export tests: enough of the language to run the chat
// template the export ships (for/if/elif/else, {{ }}, string literals, + and ==,
// subscripts, calls, `-` whitespace control, trim_blocks/lstrip_blocks as transformers sets
// them, and the {% generation %} tag of transformers' AssistantTracker). It renders the
// template *text*, so a test of it tests the template, not a hand copy of its logic. The
// real Jinja2 renders it too where python3-jinja2 is installed (test/support/chat_template.py).

type Value = string | boolean | number | null | undefined | Value[] | { [k: string]: Value } | ((...a: Value[]) => Value);

type Token = { kind: 'text'; text: string } | { kind: 'out' | 'stmt'; body: string; trimL: boolean; trimR: boolean };

type Node =
  | { kind: 'text'; text: string }
  | { kind: 'out'; expr: string }
  | { kind: 'for'; name: string; iter: string; body: Node[] }
  | { kind: 'if'; branches: { cond: string | null; body: Node[] }[] }
  | { kind: 'generation'; body: Node[] };

function lex(src: string): Token[] {
  const tokens: Token[] = [];
  const re = /\{\{(-?)([\s\S]*?)(-?)\}\}|\{%(-?)([\s\S]*?)(-?)%\}|\{#[\s\S]*?#\}/g;
  let at = 0;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    if (m.index > at) tokens.push({ kind: 'text', text: src.slice(at, m.index) });
    if (m[0].startsWith('{{')) tokens.push({ kind: 'out', body: m[2]!.trim(), trimL: m[1] === '-', trimR: m[3] === '-' });
    else if (m[0].startsWith('{%')) tokens.push({ kind: 'stmt', body: m[5]!.trim(), trimL: m[4] === '-', trimR: m[6] === '-' });
    at = m.index + m[0].length;
  }
  if (at < src.length) tokens.push({ kind: 'text', text: src.slice(at) });
  // Whitespace control: `-` strips all whitespace on its side; trim_blocks drops the first
  // newline after a block tag; lstrip_blocks strips spaces and tabs before one on its line.
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.kind === 'text') continue;
    const prev = tokens[i - 1];
    const next = tokens[i + 1];
    if (prev?.kind === 'text') {
      if (t.trimL) prev.text = prev.text.replace(/\s+$/, '');
      else if (t.kind === 'stmt') prev.text = prev.text.replace(/(^|\n)[ \t]+$/, '$1');
    }
    if (next?.kind === 'text') {
      if (t.trimR) next.text = next.text.replace(/^\s+/, '');
      else if (t.kind === 'stmt') next.text = next.text.replace(/^\n/, '');
    }
  }
  return tokens;
}

function parse(tokens: Token[]): Node[] {
  let i = 0;
  const block = (ends: string[]): { body: Node[]; end: string } => {
    const body: Node[] = [];
    while (i < tokens.length) {
      const t = tokens[i++]!;
      if (t.kind === 'text') body.push({ kind: 'text', text: t.text });
      else if (t.kind === 'out') body.push({ kind: 'out', expr: t.body });
      else {
        const word = t.body.split(/\s+/)[0]!;
        if (ends.includes(word)) return { body, end: t.body };
        if (word === 'for') {
          const m = /^for\s+(\w+)\s+in\s+(.+)$/.exec(t.body);
          if (!m) throw new Error(`bad for: ${t.body}`);
          body.push({ kind: 'for', name: m[1]!, iter: m[2]!, body: block(['endfor']).body });
        } else if (word === 'if') {
          const branches: { cond: string | null; body: Node[] }[] = [];
          let cond: string | null = t.body.slice(2).trim();
          for (;;) {
            const b = block(['elif', 'else', 'endif']);
            branches.push({ cond, body: b.body });
            if (b.end === 'endif') break;
            cond = b.end === 'else' ? null : b.end.slice(4).trim();
          }
          body.push({ kind: 'if', branches });
        } else if (word === 'generation') body.push({ kind: 'generation', body: block(['endgeneration']).body });
        else throw new Error(`unsupported tag: {% ${t.body} %}`);
      }
    }
    if (ends.length) throw new Error(`missing {% ${ends.join(' / ')} %}`);
    return { body, end: '' };
  };
  return block([]).body;
}

/** Expressions: literals, names, x['k'], x.k, f(a, ...), a + b, a == b, a != b, not a. */
function evaluate(src: string, scope: Record<string, Value>): Value {
  let p = 0;
  const ws = (): void => {
    while (p < src.length && /\s/.test(src[p]!)) p++;
  };
  const eat = (s: string): boolean => {
    ws();
    if (src.startsWith(s, p)) {
      p += s.length;
      return true;
    }
    return false;
  };
  const primary = (): Value => {
    ws();
    const c = src[p]!;
    if (c === "'" || c === '"') {
      let out = '';
      p++;
      while (src[p] !== c) {
        if (p >= src.length) throw new Error(`unterminated string in ${src}`);
        if (src[p] === '\\') {
          const e = src[++p]!;
          out += e === 'n' ? '\n' : e === 't' ? '\t' : e;
        } else out += src[p];
        p++;
      }
      p++;
      return out;
    }
    if (eat('(')) {
      const v = expr();
      if (!eat(')')) throw new Error(`expected ) in ${src}`);
      return v;
    }
    const m = /^[A-Za-z_]\w*/.exec(src.slice(p));
    if (!m) throw new Error(`unexpected ${JSON.stringify(src.slice(p))} in ${src}`);
    p += m[0].length;
    if (m[0] === 'true' || m[0] === 'True') return true;
    if (m[0] === 'false' || m[0] === 'False') return false;
    if (m[0] === 'none' || m[0] === 'None') return null;
    return scope[m[0]];
  };
  const postfix = (): Value => {
    let v = primary();
    for (;;) {
      if (eat('[')) {
        const k = expr();
        if (!eat(']')) throw new Error(`expected ] in ${src}`);
        v = (v as Record<string, Value>)?.[k as string];
      } else if (eat('.')) {
        const m = /^\w+/.exec(src.slice(p))!;
        p += m[0].length;
        v = (v as Record<string, Value>)?.[m[0]];
      } else if (eat('(')) {
        const args: Value[] = [];
        if (!eat(')')) {
          do args.push(expr());
          while (eat(','));
          if (!eat(')')) throw new Error(`expected ) in ${src}`);
        }
        if (typeof v !== 'function') throw new Error(`not callable in ${src}`);
        v = v(...args);
      } else return v;
    }
  };
  const unary = (): Value => {
    ws();
    if (/^not\b/.test(src.slice(p))) {
      p += 3;
      return !truthy(unary());
    }
    return postfix();
  };
  const sum = (): Value => {
    let v = unary();
    while (eat('+')) {
      const r = unary();
      if (typeof v !== 'string' || typeof r !== 'string') throw new Error(`+ on non-strings in ${src}`);
      v = v + r;
    }
    return v;
  };
  const expr = (): Value => {
    const l = sum();
    if (eat('==')) return l === sum();
    if (eat('!=')) return l !== sum();
    return l;
  };
  const v = expr();
  ws();
  if (p !== src.length) throw new Error(`trailing ${JSON.stringify(src.slice(p))} in ${src}`);
  return v;
}

const truthy = (v: Value): boolean => !(v === undefined || v === null || v === false || v === '' || v === 0 || (Array.isArray(v) && v.length === 0));

/** Renders `template` with `vars`; `generation` holds each {% generation %} block's [start, end). */
export function renderJinja(template: string, vars: Record<string, Value>): { text: string; generation: [number, number][] } {
  const nodes = parse(lex(template));
  let text = '';
  const generation: [number, number][] = [];
  const run = (body: Node[], scope: Record<string, Value>): void => {
    for (const n of body) {
      if (n.kind === 'text') text += n.text;
      else if (n.kind === 'out') {
        const v = evaluate(n.expr, scope);
        text += v === undefined || v === null ? '' : String(v);
      } else if (n.kind === 'for') {
        const items = evaluate(n.iter, scope);
        if (!Array.isArray(items)) throw new Error(`for over a non-list: ${n.iter}`);
        for (const item of items) run(n.body, { ...scope, [n.name]: item });
      } else if (n.kind === 'if') {
        const branch = n.branches.find((b) => b.cond === null || truthy(evaluate(b.cond, scope)));
        if (branch) run(branch.body, scope);
      } else {
        const start = text.length;
        run(n.body, scope);
        generation.push([start, text.length]);
      }
    }
  };
  const raiseException = (message: Value): Value => {
    throw new Error(`raise_exception: ${String(message)}`);
  };
  run(nodes, { raise_exception: raiseException, ...vars });
  return { text, generation };
}
