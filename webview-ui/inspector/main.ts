// Trajectory Inspector (webview). A filterable, virtualised list (fixed-height rows drawn
// from a small pool of elements, so 10,000 rows scroll like 10) and the selected
// trajectory's step cards. Keyboard: `/` search, ↑/↓/PgUp/PgDn/Home/End in the list,
// Enter to the cards, ↑/↓ between cards, Enter/Space reveals a step in the editor, Esc
// back to the list. The filter, the selection and the scroll survive a reload.
import '../shared/base.css';
import './inspector.css';
import type { InspectorFilter, InspectorState, StepCard, ToWebview, TrajectoryDetail, TrajectorySource, TrajectorySummary } from '../../core/protocol/panels';
import { EMPTY_FILTER, failureMeaning } from '../../core/protocol/panels';
import { connect, loadState, post, saveState } from '../shared/api';
import { byId, clear, h, showBanner } from '../shared/dom';
import { keyTarget, scrollToShow, visibleWindow } from '../shared/virtualList';
import { facetsOf, filterRows, formatReward, outcomeLabel, searchTextOf } from './filter';

const ROW_HEIGHT = 46;
const t0 = performance.now();

// ---- state -------------------------------------------------------------------------------
let source: TrajectorySource | null = null;
let rows: TrajectorySummary[] = [];
let haystacks: string[] = [];
let visibleRows: number[] = [];
/** index (TrajectorySummary.index) -> position in visibleRows */
let positionOf = new Map<number, number>();
let filter: InspectorFilter = { ...EMPTY_FILTER };
let selected: number | null = null;
let detail: TrajectoryDetail | null = null;
const restored = loadState<InspectorState>('inspector');
let pendingScroll: number | null = restored?.scrollTop ?? null;
if (restored) {
  filter = { ...restored.filter };
  selected = restored.selected;
}

// ---- layout ------------------------------------------------------------------------------
const app = byId('app');
const searchBox = h('input', { id: 'q', type: 'search', placeholder: 'Search question, calls, answer…  (/)', 'aria-label': 'Search trajectories', spellcheck: 'false' });
const outcomeSel = h('select', { id: 'outcome', 'aria-label': 'Outcome' });
const kindSel = h('select', { id: 'kind', 'aria-label': 'Task shape' });
const failureSel = h('select', { id: 'failure', 'aria-label': 'Failure category' });
const guardSel = h('select', { id: 'guard', 'aria-label': 'Guard that fired' });
const countEl = h('span', { id: 'count', class: 'muted', 'aria-live': 'polite' });
const titleEl = h('h1', { id: 'source' }, 'Trajectories');
const banner = h('div', { id: 'banner', hidden: true });
const spacer = h('div', { class: 'spacer' });
const list = h('div', { id: 'list', class: 'list', role: 'listbox', tabindex: 0, 'aria-label': 'Trajectories' }, spacer);
const detailEl = h('section', { id: 'detail', class: 'detail', 'aria-label': 'Trajectory' }, h('p', { class: 'muted empty' }, 'Select a trajectory.'));
app.append(
  h('header', { class: 'top' }, h('div', { class: 'title' }, titleEl, countEl), h('div', { class: 'filters', role: 'search' }, searchBox, outcomeSel, kindSel, failureSel, guardSel)),
  banner,
  h('main', { class: 'split' }, list, detailEl),
);

function setOptions(sel: HTMLSelectElement, options: [value: string, label: string, title?: string][], value: string): void {
  clear(sel);
  for (const [v, l, title] of options) sel.append(h('option', { value: v, selected: v === value, ...(title ? { title } : {}) }, l));
  sel.value = options.some(([v]) => v === value) ? value : (options[0]?.[0] ?? '');
}

function renderFacets(): void {
  const f = facetsOf(rows);
  setOptions(
    outcomeSel,
    [
      ['all', `All outcomes (${rows.length})`],
      ['solved', `Solved (${f.solved})`],
      ['failed', `Failed (${f.failed})`],
    ],
    filter.outcome,
  );
  setOptions(kindSel, [['', 'All shapes'], ...f.kinds.map((k): [string, string] => [k.value, `${k.value} (${k.count})`])], filter.kind);
  setOptions(
    failureSel,
    // Each label is the first real mistake of the trajectory; its meaning is the option's tooltip.
    [['', 'Any failure'], ['none', 'No failure'], ...f.failures.map((k): [string, string, string] => [k.value, `${k.value} (${k.count})`, failureMeaning(k.value)])],
    filter.failure,
  );
  setOptions(guardSel, [['', 'Any guard'], ...f.guards.map((k): [string, string] => [k.value, `${k.value} (${k.count})`])], filter.guard);
  searchBox.value = filter.text;
}

// ---- the virtual list --------------------------------------------------------------------
interface Slot {
  el: HTMLDivElement;
  outcome: HTMLSpanElement;
  idx: HTMLSpanElement;
  kind: HTMLSpanElement;
  fail: HTMLSpanElement;
  meta: HTMLSpanElement;
  guards: HTMLSpanElement;
  question: HTMLDivElement;
  pos: number;
  index: number;
}
const pool: Slot[] = [];

function makeSlot(): Slot {
  const outcome = h('span', { class: 'outcome', 'aria-hidden': 'true' });
  const idx = h('span', { class: 'idx' });
  const kind = h('span', { class: 'badge plain kind' });
  const fail = h('span', { class: 'fail' });
  const meta = h('span', { class: 'meta muted' });
  const guards = h('span', { class: 'guards' });
  const question = h('div', { class: 'q' });
  const el = h('div', { class: 'row', role: 'option' }, h('div', { class: 'r1' }, outcome, idx, kind, fail, guards, meta), question);
  el.addEventListener('click', () => {
    const s = pool.find((p) => p.el === el);
    if (s && s.pos >= 0) select(s.index, false);
  });
  // The tooltip is made when the pointer arrives (not for every row drawn while scrolling).
  el.addEventListener('mouseenter', () => {
    const s = pool.find((p) => p.el === el);
    const r = s && s.pos >= 0 ? rows[s.index] : undefined;
    if (r) el.title = `${outcomeLabel(r)} — ${r.question}`;
  });
  el.addEventListener('dblclick', () => {
    const s = pool.find((p) => p.el === el);
    if (s && s.pos >= 0) post({ type: 'inspector/reveal', index: s.index, step: 0 });
  });
  list.append(el);
  return { el, outcome, idx, kind, fail, meta, guards, question, pos: -1, index: -1 };
}

function fillSlot(slot: Slot, pos: number): void {
  const r = rows[visibleRows[pos]!]!;
  slot.el.style.transform = `translateY(${pos * ROW_HEIGHT}px)`;
  slot.el.hidden = false;
  if (slot.pos === pos && slot.index === r.index) {
    slot.el.setAttribute('aria-selected', String(r.index === selected));
    return;
  }
  slot.pos = pos;
  slot.index = r.index;
  slot.el.id = `row-${r.index}`;
  slot.el.dataset['index'] = String(r.index);
  slot.el.setAttribute('aria-selected', String(r.index === selected));
  slot.el.setAttribute('aria-posinset', String(pos + 1));
  slot.el.setAttribute('aria-setsize', String(visibleRows.length));
  slot.outcome.className = `outcome ${r.solved === true ? 'ok' : r.solved === false ? 'bad' : 'unk'}`;
  slot.outcome.textContent = r.solved === true ? '✓' : r.solved === false ? '✗' : '•';
  slot.idx.textContent = `#${r.index + 1}`;
  slot.kind.textContent = r.kind || 'transcript';
  slot.fail.textContent = r.failure === 'memorised' ? '⚠ memorised' : (r.failure ?? '');
  // A fresh world's question answered with the seed world's value: remembered, not read.
  slot.fail.className = r.failure === 'memorised' ? 'fail memorised' : 'fail';
  slot.fail.hidden = r.failure === null;
  slot.fail.title = failureMeaning(r.failure);
  slot.guards.textContent = r.guards.length ? `⚑ ${r.guards.join(', ')}` : '';
  slot.meta.textContent = `${r.steps} step${r.steps === 1 ? '' : 's'} · r ${formatReward(r.reward)}`;
  slot.question.textContent = r.question;
}

let frame = 0;
/** The slowest list render so far (ms), for the benchmark (bench/inspector.ts). */
let renderMax = 0;
function renderList(): void {
  frame = 0;
  const started = performance.now();
  const viewport = list.clientHeight;
  const w = visibleWindow(list.scrollTop, viewport, ROW_HEIGHT, visibleRows.length, 6);
  const need = w.last - w.first;
  while (pool.length < need) pool.push(makeSlot());
  for (let j = 0; j < pool.length; j++) {
    const slot = pool[j]!;
    const pos = w.first + j;
    if (j < need) fillSlot(slot, pos);
    else if (!slot.el.hidden) {
      slot.el.hidden = true;
      slot.pos = -1;
      slot.index = -1;
    }
  }
  if (selected !== null && positionOf.has(selected)) list.setAttribute('aria-activedescendant', `row-${selected}`);
  else list.removeAttribute('aria-activedescendant');
  const took = performance.now() - started;
  if (took > renderMax) document.body.dataset['renderMaxMs'] = (renderMax = took).toFixed(1);
}

function scheduleList(): void {
  if (!frame) frame = requestAnimationFrame(renderList);
}
list.addEventListener('scroll', () => {
  scheduleList();
  scheduleSave();
});
new ResizeObserver(scheduleList).observe(list);

function applyFilter(keepScroll: boolean): void {
  visibleRows = filterRows(rows, haystacks, filter);
  positionOf = new Map(visibleRows.map((r, pos) => [rows[r]!.index, pos]));
  spacer.style.height = `${visibleRows.length * ROW_HEIGHT}px`;
  const noun = rows.length === 1 ? 'trajectory' : 'trajectories';
  countEl.textContent = visibleRows.length === rows.length ? `${rows.length} ${noun}` : `${visibleRows.length} of ${rows.length} ${noun}`;
  document.body.dataset['rows'] = String(visibleRows.length);
  if (!keepScroll) list.scrollTop = 0;
  for (const s of pool) s.pos = -1; // contents changed: refill every slot
  renderList();
  scheduleSave();
}

// ---- selection and detail ------------------------------------------------------------------
const details = new Map<number, TrajectoryDetail>();

function select(index: number, scroll: boolean): void {
  selected = index;
  const pos = positionOf.get(index);
  if (scroll && pos !== undefined) list.scrollTop = scrollToShow(pos, list.scrollTop, list.clientHeight, ROW_HEIGHT);
  renderList();
  const cached = details.get(index);
  if (cached) renderDetail(cached);
  else if (detail?.index !== index) {
    // Never leave another trajectory's cards under a new selection (Enter would act on them).
    detail = null;
    detailEl.setAttribute('aria-busy', 'true');
    delete detailEl.dataset['index'];
    clear(detailEl);
    detailEl.append(h('p', { class: 'muted empty' }, 'Loading…'));
    post({ type: 'inspector/select', index });
  }
  scheduleSave();
}

function text(label: string, value: string, cls = ''): HTMLElement {
  return h('div', { class: `field ${cls}` }, h('span', { class: 'lbl' }, label), h('span', { class: 'val' }, value));
}

function cardOf(d: TrajectoryDetail, s: StepCard): HTMLElement {
  const kindLabel = s.call ? s.call.tool : s.malformed !== null ? 'malformed call' : s.answer !== null ? 'answer' : 'step';
  const head = h(
    'div',
    { class: 'card-head' },
    h('span', { class: 'step-n' }, `Step ${s.n}`),
    h('span', { class: `badge ${s.malformed !== null ? 'bad' : 'plain'}` }, kindLabel),
    s.guard ? h('span', { class: 'badge warn guard', title: 'A guard of the agent loop or a tool error fired here' }, s.guard) : null,
    s.harness ? h('span', { class: 'badge plain harness', title: 'The harness wrote this turn (forced answer when out of steps)' }, 'harness') : null,
  );
  const card = h(
    'div',
    {
      class: `card${s.guard ? ' guarded' : ''}${s.harness ? ' harness' : ''}`,
      role: 'button',
      tabindex: 0,
      'data-step': s.n,
      'aria-label': `Step ${s.n}: ${kindLabel}${s.guard ? `, ${s.guard}` : ''}. Enter reveals it in the editor.`,
      title: 'Click (or Enter) to reveal this step in the editor',
    },
    head,
    s.thought ? text('Thought', s.thought, 'thought') : null,
    s.call ? h('div', { class: 'call mono' }, h('span', { class: 'tool' }, s.call.tool), ' ', s.call.args) : null,
    s.malformed !== null ? h('div', { class: 'call mono bad' }, s.malformed) : null,
    s.observation !== null ? h('div', { class: `obs mono${s.guard ? ' guard-obs' : ''}`, title: s.observation }, s.observation) : null,
  );
  if (s.answer !== null) {
    const match = d.gold !== null ? normalize(s.answer) === normalize(d.gold) : null;
    card.append(
      h(
        'div',
        { class: 'final' },
        h('span', { class: 'lbl' }, 'Answer'),
        h('span', { class: 'val answer-text' }, s.answer),
        match === null ? null : h('span', { class: `badge ${match ? 'ok' : 'bad'}` }, match ? '= gold' : `≠ gold ${d.gold}`),
      ),
    );
  }
  const reveal = () => post({ type: 'inspector/reveal', index: d.index, step: s.n });
  card.addEventListener('click', reveal);
  card.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      reveal();
    }
  });
  return card;
}

/** The verifier's normalisation, roughly (display only: the row's `solved` is the verdict). */
function normalize(s: string): string {
  const t = s.trim().replace(/\.+$/, '');
  const n = Number(t);
  return t !== '' && Number.isFinite(n) ? String(n) : t.toLowerCase().split(/\s+/).join(' ');
}

function renderDetail(d: TrajectoryDetail): void {
  detail = d;
  detailEl.removeAttribute('aria-busy');
  detailEl.dataset['index'] = String(d.index);
  clear(detailEl);
  const outcome = d.solved === true ? h('span', { class: 'badge ok' }, '✓ solved') : d.solved === false ? h('span', { class: 'badge bad', ...(failureMeaning(d.failure) ? { title: `First mistake: ${failureMeaning(d.failure)}` } : {}) }, `✗ failed${d.failure ? `: ${d.failure}` : ''}`) : null;
  const memorised =
    d.failure === 'memorised'
      ? h('span', { class: 'badge warn memorised', title: "The answer is the seed world's value; this world's differs: the student remembered instead of reading its corpus." }, '⚠ memorised')
      : null;
  const header = h(
    'div',
    { class: 'detail-head' },
    h('h2', { class: 'question' }, d.question || '(no question)'),
    h(
      'div',
      { class: 'meta-line' },
      d.kind ? h('span', { class: 'badge plain' }, d.kind) : null,
      outcome,
      memorised,
      h('span', { class: 'muted' }, `${d.steps.length} step${d.steps.length === 1 ? '' : 's'}`),
      d.reward !== null ? h('span', { class: 'muted' }, `reward ${d.reward.toFixed(3)}`) : null,
      h('button', { class: 'icon reveal-row', title: 'Reveal this trajectory in the editor' }, '↗ source'),
    ),
    d.gold !== null || d.answer !== null
      ? h(
          'div',
          { class: 'verdict' },
          text('Answer', d.answer ?? '(none)', d.solved === false ? 'bad' : d.solved === true ? 'ok' : ''),
          d.gold !== null ? text('Gold', d.gold) : null,
        )
      : null,
  );
  header.querySelector('.reveal-row')!.addEventListener('click', () => post({ type: 'inspector/reveal', index: d.index, step: 0 }));
  const cards = h('div', { class: 'cards', role: 'list' });
  for (const s of d.steps) cards.append(cardOf(d, s));
  if (d.steps.length === 0) cards.append(h('p', { class: 'muted' }, 'No assistant step.'));
  for (const p of d.problems) cards.append(h('p', { class: 'banner warning' }, p));
  detailEl.append(header, cards);
}

// ---- keyboard --------------------------------------------------------------------------------
list.addEventListener('keydown', (e) => {
  const cur = selected !== null ? (positionOf.get(selected) ?? -1) : -1;
  const target = keyTarget(e.key, cur, visibleRows.length, Math.floor(list.clientHeight / ROW_HEIGHT) - 1);
  if (target !== null) {
    e.preventDefault();
    select(rows[visibleRows[target]!]!.index, true);
  } else if (e.key === 'Enter' || e.key === 'ArrowRight') {
    const first = detailEl.querySelector<HTMLElement>('.card');
    if (first) {
      e.preventDefault();
      first.focus();
    }
  }
});
detailEl.addEventListener('keydown', (e) => {
  const cards = [...detailEl.querySelectorAll<HTMLElement>('.card')];
  const i = cards.indexOf(document.activeElement as HTMLElement);
  if (e.key === 'Escape' || (e.key === 'ArrowLeft' && i >= 0)) {
    e.preventDefault();
    list.focus();
  } else if (i >= 0 && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
    e.preventDefault();
    cards[Math.max(0, Math.min(cards.length - 1, i + (e.key === 'ArrowDown' ? 1 : -1)))]!.focus();
  }
});
document.addEventListener('keydown', (e) => {
  const inField = e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
  if (e.key === '/' && !inField) {
    e.preventDefault();
    searchBox.focus();
    searchBox.select();
  } else if (e.key === 'Escape' && e.target === searchBox) {
    list.focus();
  }
});

// ---- filters -------------------------------------------------------------------------------
let searchTimer = 0;
searchBox.addEventListener('input', () => {
  window.clearTimeout(searchTimer);
  searchTimer = window.setTimeout(() => {
    filter = { ...filter, text: searchBox.value };
    applyFilter(false);
  }, rows.length > 2000 ? 120 : 30);
});
searchBox.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowDown' || e.key === 'Enter') {
    e.preventDefault();
    list.focus();
    if (visibleRows.length && (selected === null || !positionOf.has(selected))) select(rows[visibleRows[0]!]!.index, true);
  }
});
for (const [sel, key] of [
  [outcomeSel, 'outcome'],
  [kindSel, 'kind'],
  [failureSel, 'failure'],
  [guardSel, 'guard'],
] as const) {
  sel.addEventListener('change', () => {
    filter = { ...filter, [key]: sel.value } as InspectorFilter;
    applyFilter(false);
  });
}

// ---- state -----------------------------------------------------------------------------------
let saveTimer = 0;
function scheduleSave(): void {
  if (!source) return;
  window.clearTimeout(saveTimer);
  saveTimer = window.setTimeout(() => {
    if (source) saveState({ panel: 'inspector', source, filter, selected, scrollTop: list.scrollTop });
  }, 150);
}

// ---- messages ----------------------------------------------------------------------------------
function onLoad(msg: Extract<ToWebview, { type: 'inspector/load' }>): void {
  const sameSource = source?.uri === msg.source.uri || (source === null && restored?.source.uri === msg.source.uri);
  source = msg.source;
  rows = msg.rows;
  haystacks = rows.map(searchTextOf);
  details.clear();
  detail = null;
  titleEl.textContent = msg.source.label;
  titleEl.title = `${msg.source.kind}: ${msg.source.label}`;
  if (!sameSource) {
    filter = { ...EMPTY_FILTER };
    selected = null;
    pendingScroll = null;
  }
  if (msg.outcome) filter = { ...filter, outcome: msg.outcome };
  showBanner(banner, msg.problems.length ? 'warning' : 'info', msg.problems.length ? `Skipped: ${msg.problems.join('; ')}` : '');
  renderFacets();
  applyFilter(true);
  if (pendingScroll !== null) {
    list.scrollTop = pendingScroll;
    pendingScroll = null;
    renderList();
  }
  if (selected === null && rows.length === 1) selected = 0;
  if (selected !== null && selected < rows.length) select(selected, false);
  else {
    selected = null;
    detail = null;
    clear(detailEl);
    detailEl.append(h('p', { class: 'muted empty' }, rows.length ? 'Select a trajectory (↑/↓, or click).' : 'No trajectories in this file.'));
  }
  document.body.dataset['loaded'] = String(rows.length);
  document.body.dataset['loadMs'] = String(Math.round(performance.now() - t0));
}

connect(
  (msg) => {
    switch (msg.type) {
      case 'inspector/load':
        onLoad(msg);
        return;
      case 'inspector/detail':
        details.set(msg.detail.index, msg.detail);
        if (details.size > 300) details.delete(details.keys().next().value!);
        if (msg.detail.index === selected) renderDetail(msg.detail);
        return;
      case 'inspector/error':
        showBanner(banner, 'error', msg.message);
        return;
      default:
        return;
    }
  },
  (error) => showBanner(banner, 'error', `A message from the extension was refused: ${error}`),
);
