// Compare Runs (webview): the runs as one results table and, for two runs and a split both
// evaluated with per-task rows, the tasks one solves and the other does not. Text only
// (never markup from a file), theme colours, keyboard-reachable controls.
import '../shared/base.css';
import './compare.css';
import type { CompareTable, TaskDiff, TaskDiffRow } from '../../core/protocol/panels';
import { connect, post, saveState } from '../shared/api';
import { byId, clear, h, showBanner } from '../shared/dom';
import { commonRowSplits, splitName, tableText } from './model';

const app = byId('app');
const status = h('div', { id: 'status', hidden: true });
const refresh = h('button', { id: 'refresh', class: 'secondary', title: 'Read the run folders again' }, 'Refresh');
const tableBox = h('div', { id: 'table', class: 'table-box' });
const pickA = h('select', { id: 'run-a', 'aria-label': 'Run A' });
const pickB = h('select', { id: 'run-b', 'aria-label': 'Run B' });
const pickSplit = h('select', { id: 'split', 'aria-label': 'Split' });
const diffBtn = h('button', { id: 'diff' }, 'Compare tasks');
const diffBox = h('div', { id: 'diff-result' });
app.append(
  h('header', { class: 'top' }, h('h1', {}, 'Compare Runs'), refresh),
  status,
  tableBox,
  h('section', { class: 'pair' }, h('h2', {}, 'Two runs, task by task'), h('div', { class: 'controls' }, 'A ', pickA, ' B ', pickB, ' on ', pickSplit, diffBtn), diffBox),
);
saveState({ panel: 'compare' });

let table: CompareTable = { rows: [], splits: [], shapes: [] };

refresh.addEventListener('click', () => post({ type: 'compare/refresh' }));
diffBtn.addEventListener('click', () => {
  if (pickA.value && pickB.value && pickSplit.value) post({ type: 'compare/askDiff', a: pickA.value, b: pickB.value, split: pickSplit.value });
});
pickA.addEventListener('change', fillSplits);
pickB.addEventListener('change', fillSplits);

function renderTable(): void {
  clear(tableBox);
  const t = tableText(table);
  document.body.dataset['rows'] = String(t.rows.length);
  if (t.rows.length === 0) {
    tableBox.append(h('p', { class: 'muted' }, 'No run yet.'));
    return;
  }
  const el = h(
    'table',
    { class: 'results' },
    h('thead', {}, h('tr', {}, ...t.head.map((c) => h('th', { scope: 'col' }, c)))),
    h(
      'tbody',
      {},
      ...t.rows.map((r) => h('tr', { 'data-run': r.cells[0] }, ...r.cells.map((c, i) => (i === 0 ? h('th', { scope: 'row', title: r.titles[i] }, c) : h('td', { title: r.titles[i] || null }, c))))),
    ),
  );
  tableBox.append(el, h('p', { class: 'muted note' }, 'A figure is exact match: percent (solved/evaluated, of the split’s tasks when fewer were evaluated). Hover a figure for the evaluation that made it. Minutes are what the budget counted.'));
}

function fillRuns(): void {
  const keep = [pickA.value, pickB.value];
  for (const [i, sel] of [pickA, pickB].entries()) {
    clear(sel);
    for (const r of table.rows) sel.append(h('option', { value: r.dir }, r.name));
    const want = keep[i] && table.rows.some((r) => r.dir === keep[i]) ? keep[i]! : (table.rows[i]?.dir ?? table.rows[0]?.dir ?? '');
    sel.value = want;
  }
  fillSplits();
}

function fillSplits(): void {
  const keep = pickSplit.value;
  clear(pickSplit);
  const splits = commonRowSplits(table, pickA.value, pickB.value);
  for (const s of splits) pickSplit.append(h('option', { value: s }, splitName(s)));
  if (splits.includes(keep)) pickSplit.value = keep;
  diffBtn.disabled = splits.length === 0 || pickA.value === pickB.value;
  diffBtn.title = splits.length === 0 ? 'These two runs have no split both evaluated with per-task rows: Evaluate them on one split.' : '';
}

function diffRows(rows: readonly TaskDiffRow[], a: string, b: string): HTMLElement {
  const side = (s: TaskDiffRow['a']) => `${s.answer ?? '(no answer)'}${s.solved === false && s.failure ? ` — ${s.failure}` : ''}`;
  return h(
    'table',
    { class: 'tasks' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'question'), h('th', { scope: 'col' }, 'shape'), h('th', { scope: 'col' }, 'gold'), h('th', { scope: 'col' }, a), h('th', { scope: 'col' }, b))),
    h('tbody', {}, ...rows.map((r) => h('tr', {}, h('td', {}, r.question), h('td', {}, r.kind), h('td', {}, r.gold ?? '—'), h('td', {}, side(r.a)), h('td', {}, side(r.b))))),
  );
}

function renderDiff(d: TaskDiff): void {
  clear(diffBox);
  diffBox.dataset['onlyA'] = String(d.onlyA.length);
  diffBox.dataset['onlyB'] = String(d.onlyB.length);
  const summary =
    `${splitName(d.split)}: ${d.a} solves ${d.onlyA.length} task${d.onlyA.length === 1 ? '' : 's'} ${d.b} does not; ${d.b} solves ${d.onlyB.length} ${d.a} does not; ` +
    `both solve ${d.both}, neither ${d.neither}${d.unmatched ? `; ${d.unmatched} evaluated by one run only (a limited evaluation)` : ''}.`;
  diffBox.append(h('p', { class: 'summary' }, summary));
  const inspect = (name: string) => {
    const row = table.rows.find((r) => r.name === name);
    const btn = h('button', { class: 'secondary' }, `Inspect ${name}'s ${splitName(d.split)} rows`);
    btn.addEventListener('click', () => row && post({ type: 'compare/inspect', run: row.dir, split: d.split }));
    return btn;
  };
  diffBox.append(h('div', { class: 'controls' }, inspect(d.a), inspect(d.b)));
  if (d.onlyA.length) diffBox.append(h('h3', {}, `Solved by ${d.a}, not by ${d.b}`), diffRows(d.onlyA, d.a, d.b));
  if (d.onlyB.length) diffBox.append(h('h3', {}, `Solved by ${d.b}, not by ${d.a}`), diffRows(d.onlyB, d.a, d.b));
}

connect(
  (msg) => {
    switch (msg.type) {
      case 'compare/table':
        table = msg.table;
        showBanner(status, 'info', '');
        renderTable();
        fillRuns();
        return;
      case 'compare/diff':
        showBanner(status, 'info', '');
        renderDiff(msg.diff);
        return;
      case 'compare/status':
        showBanner(status, 'info', msg.message);
        return;
      default:
        return;
    }
  },
  (error) => showBanner(status, 'error', `A message from the extension was refused: ${error}`),
);
