// Loss Mask (webview): the transcript as tokens, supervised and masked in two theme
// colours (harness text a third), special tokens outlined; the info line says a token's id
// and offsets (hover, or ←/→ through the tokens), Enter or a click reveals it in the editor.
// Counts, the supervised share, and a warning when an example supervises nothing or
// everything (or is over-length, so SFT drops it). A TRL chat row (issue 30) shows which rule
// supervises each token (generation blocks, prefix difference, both, neither), its findings
// as banners, and each rule's count for the row and for the file.
import '../shared/base.css';
import './lossMask.css';
import type { LossMaskState, MaskView } from '../../core/protocol/panels';
import { connect, post, saveState } from '../shared/api';
import { byId, clear, h, showBanner } from '../shared/dom';
import { CHAT_CLASS_WORDS, MaskModel, TokenCell, describeToken, fileSummary, maskModel, percent } from './model';

const app = byId('app');
const title = h('h1', { id: 'label' }, 'Loss Mask');
const stats = h('div', { id: 'stats', class: 'stats' });
const legend = h(
  'div',
  { class: 'legend', id: 'legend', 'aria-hidden': 'true' },
  h('span', { class: 'tok sup' }, 'supervised'),
  h('span', { class: 'tok mask' }, 'masked'),
  h('span', { class: 'tok harness', id: 'legend-harness', hidden: true }, 'harness'),
  h('span', { class: 'tok mask special' }, '<|special|>'),
);
// A TRL chat row's two rules (issue 30): both, one or the other (they disagree), neither.
const chatLegend = h(
  'div',
  { class: 'legend', id: 'chat-legend', 'aria-hidden': 'true', hidden: true },
  h('span', { class: 'tok sup' }, 'both rules'),
  h('span', { class: 'tok gen' }, 'generation blocks only'),
  h('span', { class: 'tok prefix' }, 'prefix difference only'),
  h('span', { class: 'tok mask' }, 'masked'),
  h('span', { class: 'tok mask special' }, 'special'),
);
const fileLine = h('div', { id: 'file', class: 'muted', hidden: true });
const status = h('div', { id: 'status', hidden: true });
const banners = h('div', { id: 'banners' });
const info = h('div', { id: 'info', class: 'info mono', 'aria-live': 'polite' }, 'Hover a token, or focus the tokens and use ←/→: id and offsets show here; Enter reveals it in the editor.');
const tokens = h('div', { id: 'tokens', class: 'tokens mono', tabindex: 0, role: 'listbox', 'aria-label': 'Tokens' });
app.append(h('header', { class: 'top' }, h('div', { class: 'title' }, title, h('span', { id: 'tokenizer', class: 'muted' })), stats, fileLine, legend, chatLegend), status, banners, info, tokens);

let model: MaskModel | null = null;
let view: MaskView | null = null;
let current = -1;
let spans: HTMLSpanElement[] = [];

function render(v: MaskView): void {
  view = v;
  model = maskModel(v);
  title.textContent = v.label;
  byId('tokenizer').textContent = `tokenizer: ${v.mask.tokenizer.source}${v.mask.tokenizer.path ? ` (${v.mask.tokenizer.path.split('/').pop()})` : ''}, ${v.mask.tokenizer.vocabSize} ids`;
  const c = model.counts;
  const chat = model.chat;
  legend.hidden = chat !== null;
  chatLegend.hidden = chat === null;
  fileLine.hidden = chat === null;
  clear(stats);
  if (chat) {
    byId('tokenizer').textContent = `chat template: ${chat.template.split(/[\\/]/).pop()}${chat.hasGenerationTags ? '' : ' (no {% generation %} blocks)'}, ${v.mask.tokenizer.vocabSize} ids`;
    stats.append(
      h('span', { class: 'stat', 'data-stat': 'tokens' }, h('b', {}, String(c.tokens)), ' tokens'),
      h('span', { class: 'stat', 'data-stat': 'generation' }, h('b', {}, String(chat.generation)), ' supervised by the generation blocks (assistant_only_loss)'),
      h('span', { class: 'stat', 'data-stat': 'prefix' }, h('b', {}, String(chat.prefix)), ' by the prefix difference (completion_only_loss)'),
      h('span', { class: 'stat', 'data-stat': 'disagree' }, h('b', {}, String(chat.disagree)), ' disagree'),
    );
    fileLine.textContent = fileSummary(chat.file);
    fileLine.dataset['complete'] = String(chat.file.complete);
  } else stats.append(
    ...[
    h('span', { class: 'stat', 'data-stat': 'tokens' }, h('b', {}, String(c.tokens)), ' tokens'),
    h('span', { class: 'stat', 'data-stat': 'supervised' }, h('b', {}, String(c.supervised)), ' supervised'),
    h('span', { class: 'stat', 'data-stat': 'share' }, h('b', {}, percent(c.share)), ' share'),
    h('span', { class: 'stat', 'data-stat': 'masked' }, h('b', {}, String(c.masked)), ' masked'),
    c.harness ? h('span', { class: 'stat', 'data-stat': 'harness' }, h('b', {}, String(c.harness)), ' harness') : null,
    h('span', { class: 'stat muted' }, `max_len ${v.mask.maxLen}`),
    ].filter((x): x is HTMLSpanElement => x !== null),
  );
  byId('legend-harness').hidden = v.harness === null;
  clear(banners);
  for (const b of model.banners) {
    const el = h('div', {});
    showBanner(el, b.level, b.text);
    banners.append(el);
  }
  showBanner(status, 'info', '');
  const frag = document.createDocumentFragment();
  spans = model.cells.map((cell) => {
    const el = h(
      'span',
      {
        class: `tok ${cell.cls}${cell.special ? ' special' : ''}`,
        'data-i': cell.i,
        id: `tok-${cell.i}`,
        role: 'option',
        title: chat
          ? `id ${cell.id} · ${cell.role ?? ''} · ${CHAT_CLASS_WORDS[cell.cls as 'sup'] ?? cell.cls}`
          : `id ${cell.id} · offset ${cell.start}–${cell.end} · ${cell.cls === 'sup' ? 'supervised' : cell.cls === 'harness' ? 'harness' : 'masked'}`,
      },
      cell.display,
    );
    frag.append(el);
    return el;
  });
  clear(tokens);
  tokens.append(frag);
  document.body.dataset['tokens'] = String(c.tokens);
  document.body.dataset['supervised'] = String(c.supervised);
  // Chat rows: each rule's count, for the row and the file (the UI tests read these).
  for (const [k, val] of [
    ['chat', chat ? '1' : null],
    ['generation', chat ? String(chat.generation) : null],
    ['prefix', chat ? String(chat.prefix) : null],
    ['disagree', chat ? String(chat.disagree) : null],
    ['fileGeneration', chat ? String(chat.file.generation) : null],
    ['filePrefix', chat ? String(chat.file.prefix) : null],
    ['fileComplete', chat ? String(chat.file.complete) : null],
  ] as const) {
    if (val === null) delete document.body.dataset[k];
    else document.body.dataset[k] = val;
  }
  document.body.dataset['version'] = String(Number(document.body.dataset['version'] ?? 0) + 1);
  if (current >= spans.length) current = spans.length - 1;
  if (current >= 0) setCurrent(current, false);
  const state: LossMaskState = { panel: 'lossMask', uri: v.mask.uri, row: v.mask.row };
  saveState(state);
}

function cellAt(i: number): TokenCell | undefined {
  return model?.cells[i];
}

function setCurrent(i: number, scroll: boolean): void {
  if (current >= 0) spans[current]?.classList.remove('cur');
  current = i;
  const el = spans[i];
  const cell = cellAt(i);
  if (!el || !cell) return;
  el.classList.add('cur');
  tokens.setAttribute('aria-activedescendant', el.id);
  info.textContent = describeToken(cell);
  if (scroll) el.scrollIntoView({ block: 'nearest' });
}

function reveal(i: number): void {
  const cell = cellAt(i);
  if (cell) post({ type: 'lossMask/reveal', start: cell.start, end: cell.end });
}

tokens.addEventListener('mouseover', (e) => {
  const t = (e.target as HTMLElement).closest<HTMLElement>('.tok');
  const i = t ? Number(t.dataset['i']) : NaN;
  const cell = Number.isInteger(i) ? cellAt(i) : undefined;
  if (cell) info.textContent = describeToken(cell);
});
tokens.addEventListener('click', (e) => {
  const t = (e.target as HTMLElement).closest<HTMLElement>('.tok');
  const i = t ? Number(t.dataset['i']) : NaN;
  if (!Number.isInteger(i)) return;
  setCurrent(i, false);
  reveal(i);
});
tokens.addEventListener('focus', () => {
  if (current < 0 && spans.length) setCurrent(0, true);
});
tokens.addEventListener('keydown', (e) => {
  if (!spans.length) return;
  const n = spans.length;
  let next: number | null = null;
  if (e.key === 'ArrowRight') next = Math.min(n - 1, current + 1);
  else if (e.key === 'ArrowLeft') next = Math.max(0, current - 1);
  else if (e.key === 'Home') next = 0;
  else if (e.key === 'End') next = n - 1;
  else if (e.key === ']' || e.key === '[') {
    // Jump to the next (previous) change between supervised and masked.
    const cls = cellAt(current)?.cls;
    const step = e.key === ']' ? 1 : -1;
    let j = current + step;
    while (j >= 0 && j < n && cellAt(j)?.cls === cls) j += step;
    next = Math.max(0, Math.min(n - 1, j));
  } else if (e.key === 'Enter' || e.key === ' ') {
    e.preventDefault();
    reveal(current);
    return;
  }
  if (next !== null) {
    e.preventDefault();
    setCurrent(next, true);
  }
});

connect(
  (msg) => {
    if (msg.type === 'lossMask/show') render(msg.view);
    else if (msg.type === 'lossMask/status') {
      showBanner(status, msg.level, msg.message);
      if (msg.level !== 'waiting' && !view) clear(tokens);
    }
  },
  (error) => showBanner(status, 'error', `A message from the extension was refused: ${error}`),
);
