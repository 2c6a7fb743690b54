// Training Curves (webview): chart.js charts of the runs' metrics, overlaid, updated live as
// records arrive. Each chart says its series count and points (data-series, data-points)
// for tests and screen readers; a chart can be saved as PNG (the extension asks where).
// Colours from the theme (--vscode-charts-*), re-read when the theme changes.
import '../shared/base.css';
import './curves.css';
import Chart from 'chart.js/auto';
import type { ChartConfiguration, ChartDataset, Plugin } from 'chart.js';
import type { MetricRecord } from '../../core/protocol/metrics';
import type { CurvesState, PreflightView, RunMeta, RunRef } from '../../core/protocol/panels';
import { connect, loadState, post, saveState } from '../shared/api';
import { byId, clear, h, onThemeChange, showBanner, themeVar } from '../shared/dom';
import { ChartSpec, Marker, Point, Region, buildCharts, chipText, formatTick, lineCount, mergeRecords } from './series';
import { type PreflightButton, buttonMessage, preflightTable } from './preflight';

interface RunView {
  ref: RunRef;
  records: MetricRecord[];
  live: boolean;
  problems: string[];
  meta: RunMeta | null;
}

const runs = new Map<string, RunView>();
const restored = loadState<CurvesState>('curves');
const hidden = new Set<string>(restored?.hidden ?? []);

const app = byId('app');
const runBar = h('div', { id: 'runs', class: 'runs', role: 'toolbar', 'aria-label': 'Runs' });
const addBtn = h('button', { id: 'add-run', class: 'secondary' }, '+ Add run…');
const status = h('div', { id: 'status', hidden: true });
const grid = h('div', { id: 'charts', class: 'charts' });
const preflights = h('div', { id: 'preflights', class: 'preflights' });
const empty = h('p', { id: 'empty', class: 'muted empty' }, 'No metrics yet.');
app.append(h('header', { class: 'top' }, h('h1', {}, 'Training Curves'), runBar, addBtn), status, preflights, grid, empty);
addBtn.addEventListener('click', () => post({ type: 'curves/addRun' }));

// ---- colours -----------------------------------------------------------------------------
const PALETTE = ['--vscode-charts-blue', '--vscode-charts-orange', '--vscode-charts-green', '--vscode-charts-purple', '--vscode-charts-red', '--vscode-charts-yellow'];
const FALLBACK = ['#3794ff', '#d18616', '#89d185', '#b180d7', '#f14c4c', '#cca700'];
function runColor(i: number): string {
  return themeVar(PALETTE[i % PALETTE.length]!, FALLBACK[i % FALLBACK.length]!);
}

/** `color` with alpha `a` (hex #rgb/#rrggbb/#rrggbbaa or rgb()/rgba()). */
export function withAlpha(color: string, a: number): string {
  const hex = /^#([0-9a-f]{3,8})$/i.exec(color.trim());
  if (hex) {
    let s = hex[1]!;
    if (s.length === 3 || s.length === 4) s = [...s].map((c) => c + c).join('');
    const n = (k: number) => parseInt(s.slice(k, k + 2), 16);
    return `rgba(${n(0)}, ${n(2)}, ${n(4)}, ${a})`;
  }
  const rgb = /^rgba?\(([^)]+)\)$/i.exec(color.trim());
  if (rgb) {
    const [r, g, b] = rgb[1]!.split(/[\s,/]+/).filter(Boolean);
    return `rgba(${r}, ${g}, ${b}, ${a})`;
  }
  return color;
}

function themeDefaults(): void {
  Chart.defaults.color = themeVar('--vscode-foreground', '#888');
  Chart.defaults.borderColor = withAlpha(themeVar('--vscode-foreground', '#888888'), 0.12);
  Chart.defaults.font.family = themeVar('--vscode-font-family', 'sans-serif');
  Chart.defaults.font.size = 11;
}

// ---- plugins: background (so a saved PNG is readable) and the "no gradient" regions ---------
const background: Plugin = {
  id: 'agentLabBackground',
  beforeDraw(chart) {
    const ctx = chart.ctx;
    ctx.save();
    ctx.fillStyle = themeVar('--vscode-editor-background', '#ffffff');
    ctx.fillRect(0, 0, chart.width, chart.height);
    ctx.restore();
  },
};

const regionsByChart = new Map<string, Region[]>();
const noGradient: Plugin = {
  id: 'agentLabNoGradient',
  beforeDatasetsDraw(chart) {
    const regions = regionsByChart.get(chart.canvas.dataset['chart'] ?? '') ?? [];
    if (!regions.length) return;
    const { ctx, chartArea, scales } = chart;
    const x = scales['x'];
    if (!x) return;
    ctx.save();
    const red = themeVar('--vscode-charts-red', '#f14c4c');
    ctx.fillStyle = withAlpha(red, 0.16);
    ctx.strokeStyle = withAlpha(red, 0.6);
    for (const r of regions) {
      const x0 = Math.max(chartArea.left, x.getPixelForValue(r.from));
      const x1 = Math.min(chartArea.right, x.getPixelForValue(r.to));
      if (x1 <= x0) continue;
      ctx.fillRect(x0, chartArea.top, x1 - x0, chartArea.bottom - chartArea.top);
      ctx.fillStyle = red;
      ctx.font = `600 11px ${themeVar('--vscode-font-family', 'sans-serif')}`;
      if (x1 - x0 > 60) ctx.fillText('no gradient', x0 + 4, chartArea.top + 12);
      ctx.fillStyle = withAlpha(red, 0.16);
    }
    ctx.restore();
  },
};

// The curriculum's phase changes: a dotted vertical per change, labelled with the phase.
const markersByChart = new Map<string, Marker[]>();
const phaseMarks: Plugin = {
  id: 'agentLabPhaseMarks',
  afterDatasetsDraw(chart) {
    const marks = markersByChart.get(chart.canvas.dataset['chart'] ?? '') ?? [];
    if (!marks.length) return;
    const { ctx, chartArea, scales } = chart;
    const x = scales['x'];
    if (!x) return;
    ctx.save();
    ctx.font = `11px ${themeVar('--vscode-font-family', 'sans-serif')}`;
    marks.forEach((m, i) => {
      const px = x.getPixelForValue(m.x);
      if (px < chartArea.left || px > chartArea.right) return;
      const color = runColor(m.runIndex);
      ctx.strokeStyle = color;
      ctx.setLineDash([2, 3]);
      ctx.beginPath();
      ctx.moveTo(px, chartArea.top);
      ctx.lineTo(px, chartArea.bottom);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = color;
      const text = `step ${m.x}: ${m.label}`;
      const w = ctx.measureText(text).width;
      // Right of the line unless it would leave the chart, then left of it; never outside the
      // chart area (a long label near the left edge starts at the edge); stacked when several runs mark.
      const right = px + 4 + w <= chartArea.right;
      const tx = Math.max(chartArea.left + 2, right ? px + 4 : Math.min(px - 4 - w, chartArea.right - w - 2));
      ctx.fillText(text, tx, chartArea.top + 12 + 13 * i);
    });
    ctx.restore();
  },
};

// ---- charts ----------------------------------------------------------------------------------
interface ChartCard {
  el: HTMLElement;
  canvas: HTMLCanvasElement;
  chart: Chart<'line', Point[]>;
  note: HTMLElement;
  title: HTMLElement;
}
const cards = new Map<string, ChartCard>();

function datasetsOf(spec: ChartSpec): ChartDataset<'line', Point[]>[] {
  return spec.series.map((s) => {
    const color = runColor(s.runIndex);
    const base = { label: s.label, data: s.points, borderColor: color, backgroundColor: color, parsing: false as const, normalized: true };
    if (s.role === 'bandLow') return { ...base, borderWidth: 0, pointRadius: 0, fill: false, backgroundColor: 'transparent' };
    if (s.role === 'bandHigh') return { ...base, borderWidth: 0, pointRadius: 0, fill: '-1', backgroundColor: withAlpha(color, 0.2) };
    const dense = s.points.length > 60;
    // A measured line (held-out, dev) keeps its points, hollow and on top: over a dense, noisy
    // line of the same run's colour it would otherwise vanish where the two meet.
    if (s.role === 'dashed') return { ...base, borderWidth: 2.25, borderDash: [6, 4], pointRadius: 3, pointHoverRadius: 5, pointBackgroundColor: 'transparent', pointBorderWidth: 1.5, tension: 0 };
    return {
      ...base,
      ...(dense ? { borderColor: withAlpha(color, 0.6) } : {}),
      borderWidth: 1.75,
      pointRadius: dense ? 0 : 2,
      pointHoverRadius: 4,
      tension: 0,
    };
  });
}

function makeCard(spec: ChartSpec): ChartCard {
  const canvas = h('canvas', { 'data-chart': spec.id, role: 'img', 'aria-label': spec.title });
  const save = h('button', { class: 'icon save', title: `Save “${spec.title}” as PNG`, 'aria-label': `Save ${spec.title} as PNG` }, '⤓ PNG');
  const note = h('p', { class: 'note muted' });
  const title = h('h2', {}, spec.title);
  const el = h('section', { class: 'chart', 'data-chart': spec.id }, h('div', { class: 'chart-head' }, title, save), h('div', { class: 'canvas-box' }, canvas), note);
  const config: ChartConfiguration<'line', Point[]> = {
    type: 'line',
    data: { datasets: datasetsOf(spec) },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      scales: {
        x: { type: 'linear', title: { display: true, text: spec.xLabel }, ticks: { precision: 0 } },
        y: {
          title: { display: true, text: spec.yLabel },
          // Few significant digits: a KL of 0.00003 reads "3e-5", not "3.000000E-5".
          ticks: { callback: (value, _i, ticks) => formatTick(Number(value), ticks.length > 1 ? Math.abs(ticks[1]!.value - ticks[0]!.value) : Math.abs(Number(value))) },
          ...(spec.yMin !== undefined ? { min: spec.yMin } : {}),
          ...(spec.yMax !== undefined ? { max: spec.yMax } : {}),
        },
      },
      plugins: {
        legend: { labels: { filter: (item, data) => !/^band/.test(roleOf(data.datasets[item.datasetIndex!]?.label ?? '', spec)) , boxWidth: 12 } },
        tooltip: { filter: (item) => !/^band/.test(roleOf(item.dataset.label ?? '', spec)) },
      },
    },
    plugins: [background, noGradient, phaseMarks],
  };
  const chart = new Chart(canvas, config);
  save.addEventListener('click', () => post({ type: 'curves/savePng', chart: spec.id, dataUrl: chart.toBase64Image('image/png', 1) }));
  grid.append(el);
  return { el, canvas, chart, note, title };
}

/** The role of the series labelled `label` in the chart's current spec. */
const specs = new Map<string, ChartSpec>();
function roleOf(label: string, spec: ChartSpec): string {
  const current = specs.get(spec.id) ?? spec;
  return current.series.find((s) => s.label === label)?.role ?? 'line';
}

function render(): void {
  const inputs = [...runs.values()].map((r) => ({ id: r.ref.id, label: r.ref.label, records: r.records, meta: r.meta }));
  const charts = buildCharts(inputs, hidden);
  const seen = new Set<string>();
  for (const spec of charts) {
    seen.add(spec.id);
    specs.set(spec.id, spec);
    regionsByChart.set(spec.id, spec.regions);
    markersByChart.set(spec.id, spec.markers);
    let card = cards.get(spec.id);
    if (!card) {
      card = makeCard(spec);
      cards.set(spec.id, card);
    } else {
      card.chart.data.datasets = datasetsOf(spec);
      card.chart.update('none');
    }
    const points = spec.series.filter((s) => s.role === 'line' || s.role === 'dashed').reduce((n, s) => n + s.points.length, 0);
    card.el.dataset['series'] = String(lineCount(spec));
    card.el.dataset['points'] = String(points);
    card.el.dataset['regions'] = String(spec.regions.length);
    card.el.dataset['markers'] = String(spec.markers.length);
    // The title names only the lines drawn (a title that named fresh values with no such line misled).
    card.title.textContent = spec.title;
    card.canvas.setAttribute('aria-label', `${spec.title}: ${lineCount(spec)} series, ${points} points${spec.regions.length ? `, ${spec.regions.length} no-gradient region(s)` : ''}`);
    card.note.textContent = spec.note ?? '';
    card.note.hidden = spec.note === null;
  }
  for (const [id, card] of cards) {
    if (seen.has(id)) continue;
    card.chart.destroy();
    card.el.remove();
    cards.delete(id);
  }
  // Keep the charts in their defined order.
  for (const spec of charts) grid.append(cards.get(spec.id)!.el);
  empty.hidden = charts.length > 0;
  empty.textContent = runs.size === 0 ? 'No run shown. Train one, or add a run folder.' : 'No metrics yet in the runs shown (a run writes its first line after its first step).';
  renderPreflights();
  document.body.dataset['charts'] = String(charts.length);
  document.body.dataset['updates'] = String(Number(document.body.dataset['updates'] ?? 0) + 1);
}

/** A GRPO run's checks before step 1: the pre-flight checks, the prediction per shape and the verdict. */
function renderPreflights(): void {
  clear(preflights);
  for (const run of runs.values()) {
    if (hidden.has(run.ref.id) || !run.meta?.preflight) continue;
    preflights.append(preflightCard(run.ref.id, run.ref.label, run.meta.preflight));
  }
  preflights.hidden = preflights.childElementCount === 0;
}

function preflightCard(id: string, label: string, view: PreflightView): HTMLElement {
  const t = preflightTable(view);
  const table = h(
    'table',
    { class: 'preflight-table' },
    h('thead', {}, h('tr', {}, ...t.head.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...t.rows.map((r) => h('tr', {}, ...r.map((c, i) => (i === 0 ? h('th', { scope: 'row' }, c) : h('td', {}, c)))))),
  );
  const checks = h('ul', { class: 'checks' }, ...view.checks.map((c) => h('li', { class: c.ok ? 'ok' : 'bad', title: c.detail }, `${c.ok ? '✓' : '✗'} ${c.name}`)));
  // Open while it matters (before step 1, or when it did not pass); the reader's toggle is kept across renders.
  const started = runs.get(id)?.records.some((r) => r.phase === 'grpo') ?? false;
  const open = preflightOpen.get(id) ?? (!started || t.verdictClass !== 'pass');
  const el = h(
    'details',
    { class: `preflight ${t.verdictClass}`, 'data-run': label, 'data-verdict': t.verdictClass, open },
    h('summary', {}, h('h2', {}, `Before step 1 — ${label}: ${t.headline}`)),
    checks,
    t.rows.length ? table : h('p', { class: 'muted' }, t.noScreen),
    h('p', { class: 'verdict' }, t.verdict),
    ...(t.next ? [h('p', { class: 'next muted' }, t.next)] : []),
    ...(t.refused ? [retryButtons(id, t.buttons)] : []),
  );
  el.addEventListener('toggle', () => preflightOpen.set(id, el.open));
  return el;
}
const preflightOpen = new Map<string, boolean>();

/**
 * A refused run: one button per next step the verdict names (GRPO again with its pool,
 * temperature or guide; more SFT first), then Train Anyway (the refusal's own buttons, here too).
 */
function retryButtons(id: string, buttons: readonly PreflightButton[]): HTMLElement {
  const els = buttons.map((b) => {
    const cls = b.action.kind === 'force' ? 'secondary retry-force' : b.action.kind === 'sft-more' ? 'retry-sft' : b.action.flags.pool !== undefined ? 'retry-pool' : 'retry-flags';
    const el = h('button', { class: cls }, b.label);
    el.addEventListener('click', () => post(buttonMessage(id, b)));
    return el;
  });
  return h('div', { class: 'actions' }, ...els);
}

function renderRuns(): void {
  clear(runBar);
  let i = 0;
  for (const run of runs.values()) {
    const index = i++;
    const chip = chipText(run);
    const swatch = h('span', { class: 'swatch', 'aria-hidden': 'true' });
    swatch.style.background = runColor(index);
    const toggle = h(
      'button',
      { class: `chip${hidden.has(run.ref.id) ? ' off' : ''}`, title: `${run.ref.dir}\n${chip.title}\nClick to hide or show`, 'aria-pressed': String(!hidden.has(run.ref.id)) },
      swatch,
      run.ref.label,
      run.live ? h('span', { class: 'live' }, ' ● live') : null,
      h('span', { class: 'muted n', title: chip.title }, ` · ${chip.count}`),
    );
    toggle.addEventListener('click', () => {
      if (hidden.has(run.ref.id)) hidden.delete(run.ref.id);
      else hidden.add(run.ref.id);
      renderRuns();
      render();
      persist();
    });
    const remove = h('button', { class: 'icon remove', title: `Remove ${run.ref.label} from the panel`, 'aria-label': `Remove ${run.ref.label}` }, '×');
    remove.addEventListener('click', () => post({ type: 'curves/removeRun', id: run.ref.id }));
    runBar.append(h('span', { class: 'run', 'data-run': run.ref.label }, toggle, remove));
  }
  const problems = [...runs.values()].flatMap((r) => r.problems.map((p) => `${r.ref.label}: ${p}`));
  if (problems.length) showBanner(status, 'warning', `Skipped lines: ${problems.slice(0, 3).join('; ')}`);
}

function persist(): void {
  saveState({ panel: 'curves', runs: [...runs.values()].map((r) => r.ref.dir), hidden: [...hidden] });
}

let pending = 0;
function scheduleRender(): void {
  if (!pending) {
    pending = requestAnimationFrame(() => {
      pending = 0;
      renderRuns();
      render();
    });
  }
}

themeDefaults();
onThemeChange(() => {
  themeDefaults();
  for (const card of cards.values()) card.chart.destroy();
  cards.clear();
  clear(grid);
  scheduleRender();
});

connect(
  (msg) => {
    switch (msg.type) {
      case 'curves/run': {
        const prev = runs.get(msg.run.id);
        const records = msg.reset || !prev ? mergeRecords([], msg.records) : mergeRecords(prev.records, msg.records);
        // A message without meta (an older sender) keeps what the run had.
        const meta = msg.meta !== undefined ? msg.meta : (prev?.meta ?? null);
        runs.set(msg.run.id, { ref: msg.run, records, live: msg.live, problems: msg.problems, meta });
        showBanner(status, 'info', '');
        persist();
        scheduleRender();
        return;
      }
      case 'curves/removed':
        runs.delete(msg.id);
        hidden.delete(msg.id);
        persist();
        scheduleRender();
        return;
      case 'curves/status':
        showBanner(status, 'info', msg.message);
        scheduleRender();
        return;
      default:
        return;
    }
  },
  (error) => showBanner(status, 'error', `A message from the extension was refused: ${error}`),
);
