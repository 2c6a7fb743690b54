// Grammar Debugger (webview): a tool-call body stepped through character by character.
// The strip shows each character as accepted, rejected or not reached; the step view shows
// the acceptor's live states before the current character, the characters allowed there,
// and the verdict. ←/→ Home/End step (in editor mode the editor's cursor follows);
// typing in the box checks a call of your own.
import '../shared/base.css';
import './grammar.css';
import type { GrammarSource, GrammarState, GrammarTrace } from '../../core/protocol/panels';
import { connect, loadState, post, saveState } from '../shared/api';
import { byId, clear, h, showBanner } from '../shared/dom';

const app = byId('app');
const sourceEl = h('span', { id: 'source', class: 'muted' });
const fromEditor = h('button', { id: 'from-editor', class: 'secondary', title: 'Debug the tool call under the editor’s cursor' }, 'Use call under cursor');
const input = h('textarea', { id: 'body', class: 'mono', rows: 2, spellcheck: 'false', 'aria-label': 'Tool-call body (between <|tool_call|> and <|end|>)', placeholder: '{"tool": "search", "args": {"query": "…", "k": 2}}' });
const status = h('div', { id: 'status', hidden: true });
const verdict = h('div', { id: 'verdict', class: 'verdict', role: 'status' });
const strip = h('div', { id: 'strip', class: 'strip mono', role: 'listbox', tabindex: 0, 'aria-label': 'Characters of the call: ←/→ to step' });
const stepEl = h('section', { id: 'step', class: 'step', 'aria-live': 'polite' });
app.append(
  h('header', { class: 'top' }, h('div', { class: 'title' }, h('h1', {}, 'Grammar Debugger'), sourceEl), fromEditor),
  status,
  h('label', { for: 'body', class: 'muted lbl' }, 'Call body — what follows ', h('code', {}, '<|tool_call|>'), ', up to ', h('code', {}, '<|end|>')),
  input,
  verdict,
  strip,
  h('p', { class: 'muted hint' }, h('kbd', {}, '←'), ' ', h('kbd', {}, '→'), ' step · ', h('kbd', {}, 'Home'), ' ', h('kbd', {}, 'End'), ' · click a character'),
  stepEl,
);

let trace: GrammarTrace | null = null;
let source: GrammarSource = { kind: 'typed' };
let pos = 0;
const restored = loadState<GrammarState>('grammar');
if (restored) {
  input.value = restored.text;
  pos = restored.cursor;
}

/** A character as the strip shows it (blanks visible). */
function shown(ch: string): string {
  if (ch === ' ') return '·';
  if (ch === '\n') return '↵';
  if (ch === '\t') return '⇥';
  return ch;
}

function lastPos(t: GrammarTrace): number {
  return t.rejectedAt ?? t.chars.length;
}

function renderTrace(t: GrammarTrace): void {
  trace = t;
  clear(verdict);
  if (t.complete) verdict.append(h('span', { class: 'badge ok' }, '✓ complete'), ' accepted: ', h('code', {}, '<|end|>'), ' is legal after it');
  else if (t.rejectedAt !== null) verdict.append(h('span', { class: 'badge bad' }, `✗ rejected at character ${t.rejectedAt + 1}`), ' ', t.reason ?? '');
  else verdict.append(h('span', { class: 'badge warn' }, '… incomplete'), ' ', t.reason ?? '');
  verdict.className = `verdict ${t.complete ? 'ok' : t.rejectedAt !== null ? 'bad' : 'warn'}`;
  document.body.dataset['verdict'] = t.complete ? 'complete' : t.rejectedAt !== null ? 'rejected' : 'incomplete';
  document.body.dataset['rejectedAt'] = t.rejectedAt === null ? '' : String(t.rejectedAt);
  clear(strip);
  const frag = document.createDocumentFragment();
  t.chars.forEach((ch, i) => {
    const cls = t.rejectedAt === null || i < t.rejectedAt ? 'ok' : i === t.rejectedAt ? 'bad' : 'unreached';
    frag.append(h('span', { class: `ch ${cls}${/\s/.test(ch) ? ' blank' : ''}`, 'data-i': i, id: `ch-${i}`, role: 'option', title: `character ${i + 1}: ${JSON.stringify(ch)}` }, shown(ch)));
  });
  if (t.rejectedAt === null) {
    frag.append(h('span', { class: `ch end ${t.complete ? 'ok' : 'warn'}`, 'data-i': t.chars.length, id: `ch-${t.chars.length}`, role: 'option', title: 'after the last character: is <|end|> legal?' }, '⏎end'));
  }
  strip.append(frag);
  setPos(Math.min(pos, lastPos(t)), false);
}

function setPos(p: number, fromUser: boolean): void {
  if (!trace) return;
  pos = Math.max(0, Math.min(p, lastPos(trace)));
  for (const el of strip.querySelectorAll('.ch.cur')) el.classList.remove('cur');
  const cell = byIdOrNull(`ch-${pos}`);
  cell?.classList.add('cur');
  if (cell) {
    strip.setAttribute('aria-activedescendant', cell.id);
    cell.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }
  renderStep();
  document.body.dataset['pos'] = String(pos);
  persist();
  if (fromUser && source.kind === 'editor') post({ type: 'grammar/reveal', index: pos });
}

function byIdOrNull(id: string): HTMLElement | null {
  return document.getElementById(id);
}

function chips(groups: string[]): HTMLElement {
  const box = h('div', { class: 'chips' });
  for (const g of groups) box.append(h('code', { class: 'chip' }, g));
  if (!groups.length) box.append(h('span', { class: 'muted' }, 'nothing'));
  return box;
}

function renderStep(): void {
  clear(stepEl);
  const t = trace;
  if (!t) return;
  const s = t.steps[pos]!;
  const atEnd = pos === t.chars.length;
  const ch = t.chars[pos];
  const heading = atEnd ? `After the last character (${t.chars.length})` : `Before character ${pos + 1}: ${JSON.stringify(ch)}`;
  const states = h('ul', { class: 'states' });
  for (const st of s.states) states.append(h('li', { class: 'mono' }, st));
  let outcome: HTMLElement;
  if (atEnd) {
    outcome = s.accepts
      ? h('p', { class: 'outcome ok' }, '✓ The acceptor accepts: <|end|> is legal here; the call is complete.')
      : h('p', { class: 'outcome warn' }, `… Not complete: <|end|> is not legal yet. ${t.reason ?? ''}`);
  } else if (pos === t.rejectedAt) {
    outcome = h('p', { class: 'outcome bad' }, `✗ Rejected: ${t.reason ?? ''}`);
  } else {
    const next = t.steps[pos + 1];
    outcome = h('p', { class: 'outcome ok' }, `✓ ${JSON.stringify(ch)} is accepted${next ? `; then: ${next.states.join(' or ')}` : ''}`);
  }
  stepEl.append(
    h('h2', {}, heading),
    h('div', { class: 'cols' }, h('div', {}, h('h3', {}, `Live states (${s.states.length})`), states), h('div', {}, h('h3', {}, `Allowed next (${[...s.allowed].length} character${[...s.allowed].length === 1 ? '' : 's'})`), chips(s.allowedGroups), h('p', { class: 'muted' }, s.accepts ? '<|end|> is legal here.' : '<|end|> is not legal here.'))),
    outcome,
  );
}

function renderSource(s: GrammarSource): void {
  source = s;
  if (s.kind === 'editor') {
    sourceEl.textContent = `tool call at ${s.label}:${s.line + 1}`;
    showBanner(status, 'info', '');
  } else if (s.kind === 'typed') {
    sourceEl.textContent = 'typed in the panel';
    showBanner(status, 'info', '');
  } else {
    sourceEl.textContent = '';
    showBanner(status, 'info', s.message);
  }
}

function persist(): void {
  saveState({ panel: 'grammar', text: input.value, cursor: pos, source: source.kind === 'editor' ? 'editor' : 'typed' });
}

strip.addEventListener('click', (e) => {
  const el = (e.target as HTMLElement).closest<HTMLElement>('.ch');
  if (el) setPos(Number(el.dataset['i']), true);
});
strip.addEventListener('keydown', (e) => {
  if (!trace) return;
  const moves: Record<string, number> = { ArrowRight: pos + 1, ArrowLeft: pos - 1, Home: 0, End: lastPos(trace) };
  if (e.key in moves) {
    e.preventDefault();
    setPos(moves[e.key]!, true);
  }
});
let timer = 0;
input.addEventListener('input', () => {
  window.clearTimeout(timer);
  timer = window.setTimeout(() => {
    pos = [...input.value.slice(0, input.selectionStart ?? input.value.length)].length;
    post({ type: 'grammar/check', text: input.value });
  }, 120);
});
input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter') e.preventDefault(); // a call body is one line
});
fromEditor.addEventListener('click', () => post({ type: 'grammar/fromEditor' }));

connect(
  (msg) => {
    if (msg.type !== 'grammar/trace') return;
    renderSource(msg.source);
    if (document.activeElement !== input || msg.source.kind !== 'typed') input.value = msg.trace.text;
    if (msg.cursor !== null) pos = msg.cursor;
    else if (msg.source.kind === 'editor') pos = Number.MAX_SAFE_INTEGER; // the verdict's step (clamped)
    renderTrace(msg.trace);
  },
  (error) => showBanner(status, 'error', `A message from the extension was refused: ${error}`),
);
