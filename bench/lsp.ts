// Language-server figures (`agent-lab bench lsp --json`; JSON is the last line).
//
// The dataset is every distilled transcript of the default world (both splits, 250 rows,
// written as `agent-lab distill` writes them). Two sets of figures:
//  - stdio: a real server process (`agent-lab lsp --stdio`) and a client over its pipes,
//    timed as a client sees it: didOpen -> publishDiagnostics (a new URI each time, so
//    no cache helps), hover request -> response at random positions inside transcripts,
//    and a one-character didChange -> the new version's publishDiagnostics. The edit
//    figure is measured with the debounce set to 0 (`debounce_ms` says what an editor adds).
//  - in_process: the same analysis functions called directly (no transport).
// The targets: full diagnostics <= 100 ms median, hover p95 <= 10 ms, re-diagnosis <= 20 ms median.
// `--large` adds a ~50 MB dataset: time to the first streamed publish, the final pass,
// and hover latency while the pass runs.
import * as path from 'node:path';
import type { Hover, PublishDiagnosticsParams } from 'vscode-languageserver-protocol';
import { DistillStats, ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { buildCorpus, makeTaskPool } from '../core/world';
import { DEFAULT_TUNING } from '../language-server/tuning';
import { analyseRow, placeRowDiagnostics, DocDiagnostic, rowUnit } from '../language-server/documents';
import { hoverAt } from '../language-server/features/hover';
import { TokenizerStore } from '../language-server/tokenizers';
import { type LatencyStats, LspClient, latencyStats, repoRootFrom } from './lspClient';
import { mulberry32 } from '../core/mulberry32';

export interface LspBenchOptions {
  iterations?: number;
  hovers?: number;
  edits?: number;
  large?: boolean;
  log?: (line: string) => void;
}

export interface LspBenchFigures {
  dataset: { rows: number; chars: number; diagnostics: number };
  stdio: {
    /** The first open in a fresh server (tokenizer trained, its caches empty). */
    full_diagnostics_cold_ms: number;
    /** Opens under new URIs (no per-document cache; tokenizer caches warm). */
    full_diagnostics_ms: Stats;
    hover_ms: Stats;
    rediagnose_ms: Stats;
  };
  in_process: {
    full_diagnostics_ms: Stats;
    hover_ms: Stats;
    rediagnose_row_ms: Stats;
  };
  debounce_ms: number;
  large?: {
    chars: number;
    rows: number;
    first_publish_ms: number;
    final_publish_ms: number;
    hover_during_pass_ms: Stats;
    published_diagnostics: number;
  };
  targets: { full_diagnostics_median_ms: 100; hover_p95_ms: 10; rediagnose_median_ms: 20 };
  meets_targets: boolean;
}

export type Stats = LatencyStats;
const stats = (xs: number[]): Stats => latencyStats(xs, 3);

/** Deterministic PRNG (mulberry32) so every run probes the same positions. */
const rng = mulberry32;

/** Every distilled transcript of the default world, as `distill` writes the rows. */
export function distilledRows(): { task: string; text: string; kind: string }[] {
  const corpus = buildCorpus(0, 120);
  const pool = makeTaskPool(0, 200, 50);
  const env = new ToolEnv(corpus);
  const rows: { task: string; text: string; kind: string }[] = [];
  for (const tasks of [pool.train, pool.heldout]) {
    const stats: DistillStats = { perKind: {} };
    rows.push(...distill(tasks, makeStubTeacher(tasks), env, 4, stats));
  }
  return rows;
}

export function datasetText(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

/** A position inside the `text` literal of a row: [line, column]. */
function randomTextPosition(lines: string[], rand: () => number): [number, number] {
  const line = Math.floor(rand() * lines.length);
  const l = lines[line]!;
  const start = l.indexOf('"text": "') + 9;
  const end = l.lastIndexOf('", "kind"');
  const lo = start > 8 ? start : 0;
  const hi = end > lo ? end : l.length;
  return [line, lo + Math.floor(rand() * (hi - lo))];
}

export async function runLspBench(opts: LspBenchOptions = {}): Promise<LspBenchFigures> {
  const log = opts.log ?? (() => undefined);
  const iterations = opts.iterations ?? 15;
  const hovers = opts.hovers ?? 300;
  const edits = opts.edits ?? 40;
  const rows = distilledRows();
  const text = datasetText(rows);
  const lines = text.slice(0, -1).split('\n');
  const rand = rng(7);
  log(`dataset: ${rows.length} rows, ${text.length} chars`);

  // ---- in process -------------------------------------------------------------------------
  const store = new TokenizerStore();
  const tok = store.resolve(null, null);
  const fullIn: number[] = [];
  let diagCount = 0;
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    const out: DocDiagnostic[] = [];
    lines.forEach((l, line) => placeRowDiagnostics(line, analyseRow(l, tok), out, DEFAULT_TUNING.maxDiagnostics));
    fullIn.push(performance.now() - t0);
    diagCount = out.length;
  }
  const results = lines.map((l) => analyseRow(l, tok));
  const hoverIn: number[] = [];
  for (let i = 0; i < hovers; i++) {
    const [line, col] = randomTextPosition(lines, rand);
    const t0 = performance.now();
    const unit = rowUnit(line, results[line]!, tok);
    const off = unit?.toOffset({ line, character: col });
    if (unit && off !== null && off !== undefined) hoverAt(unit, off);
    hoverIn.push(performance.now() - t0);
  }
  const editIn: number[] = [];
  for (let i = 0; i < edits; i++) {
    const [line, col] = randomTextPosition(lines, rand);
    const l = lines[line]!;
    const edited = `${l.slice(0, col)}x${l.slice(col)}`;
    const t0 = performance.now();
    analyseRow(edited, tok);
    editIn.push(performance.now() - t0);
  }

  // ---- over stdio ---------------------------------------------------------------------------
  const root = repoRootFrom(__dirname);
  const client = await LspClient.start({ initializationOptions: { diagnosticsDelayMs: 0 }, rootUri: null });
  const fullStdio: number[] = [];
  const hoverStdio: number[] = [];
  const editStdio: number[] = [];
  let coldStdio = NaN;
  let large: LspBenchFigures['large'];
  try {
    // The default tokenizer trains on first use (about a second): a one-line transcript
    // triggers it, so the first dataset open below is cold only in its caches.
    const warm = `file://${path.join(root, 'bench-warmup.transcript')}`;
    await client.open(warm, '<|system|>S<|end|>');
    await client.close(warm);
    const coldUri = `file://${path.join(root, 'bench-cold.traces.jsonl')}`;
    const c0 = performance.now();
    await client.open(coldUri, text);
    coldStdio = performance.now() - c0;
    await client.close(coldUri);
    for (let i = 0; i < iterations; i++) {
      const uri = `file://${path.join(root, `bench-${i}.traces.jsonl`)}`;
      const t0 = performance.now();
      await client.open(uri, text);
      fullStdio.push(performance.now() - t0);
      if (i < iterations - 1) await client.close(uri);
    }
    const uri = `file://${path.join(root, `bench-${iterations - 1}.traces.jsonl`)}`;
    for (let i = 0; i < hovers; i++) {
      const [line, col] = randomTextPosition(lines, rand);
      const t0 = performance.now();
      await client.request<Hover | null>('textDocument/hover', { textDocument: { uri }, position: { line, character: col } });
      hoverStdio.push(performance.now() - t0);
    }
    for (let i = 0; i < edits; i++) {
      const [line, col] = randomTextPosition(lines, rand);
      const t0 = performance.now();
      await client.change(uri, [{ range: { start: { line, character: col }, end: { line, character: col } }, text: 'x' }]);
      editStdio.push(performance.now() - t0);
      lines[line] = `${lines[line]!.slice(0, col)}x${lines[line]!.slice(col)}`;
    }
    await client.close(uri);
    if (opts.large) large = await largeFigures(client, rows, root, log);
  } finally {
    await client.stop();
  }

  const figures: LspBenchFigures = {
    dataset: { rows: rows.length, chars: text.length, diagnostics: diagCount },
    stdio: {
      full_diagnostics_cold_ms: Math.round(coldStdio * 1000) / 1000,
      full_diagnostics_ms: stats(fullStdio),
      hover_ms: stats(hoverStdio),
      rediagnose_ms: stats(editStdio),
    },
    in_process: { full_diagnostics_ms: stats(fullIn), hover_ms: stats(hoverIn), rediagnose_row_ms: stats(editIn) },
    debounce_ms: DEFAULT_TUNING.diagnosticsDelayMs,
    ...(large ? { large } : {}),
    targets: { full_diagnostics_median_ms: 100, hover_p95_ms: 10, rediagnose_median_ms: 20 },
    meets_targets: false,
  };
  figures.meets_targets =
    figures.stdio.full_diagnostics_ms.median <= 100 && figures.stdio.hover_ms.p95 <= 10 && figures.stdio.rediagnose_ms.median <= 20;
  return figures;
}

/** About 50 MB of distinct rows (each question numbered), opened in a running server. */
export function largeDatasetText(rows: readonly { task: string; text: string; kind: string }[], targetChars = 50 * 1024 * 1024): string {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < targetChars; i++) {
    const r = rows[i % rows.length]!;
    const copy = { task: `${r.task} #${i}`, text: r.text.replace(r.task, `${r.task} #${i}`), kind: r.kind };
    const line = JSON.stringify(copy);
    parts.push(line);
    size += line.length + 1;
  }
  return parts.join('\n') + '\n';
}

async function largeFigures(
  client: LspClient,
  rows: { task: string; text: string; kind: string }[],
  root: string,
  log: (line: string) => void,
): Promise<NonNullable<LspBenchFigures['large']>> {
  const big = largeDatasetText(rows);
  const lineCount = big.length - big.replace(/\n/g, '').length;
  log(`large dataset: ${lineCount} rows, ${big.length} chars`);
  const uri = `file://${path.join(root, 'bench-large.traces.jsonl')}`;
  const t0 = performance.now();
  const first = client.waitForDiagnostics(uri, () => true, 600_000);
  const final = client.waitForDiagnostics(uri, (p: PublishDiagnosticsParams) => p.diagnostics.some((d) => d.code === 'large-document' && typeof d.message === 'string' && d.message.includes('checked in the background')), 600_000);
  await client.open(uri, big, 'agent-dataset', false);
  const firstAt = await first.then(() => performance.now() - t0);
  const hoversDuring: number[] = [];
  let done = false;
  void final.then(() => {
    done = true;
  });
  const rand = rng(11);
  while (!done && hoversDuring.length < 200) {
    const line = Math.floor(rand() * lineCount);
    const h0 = performance.now();
    await client.request('textDocument/hover', { textDocument: { uri }, position: { line, character: 200 } });
    hoversDuring.push(performance.now() - h0);
    await new Promise((r) => setTimeout(r, 20));
  }
  const last = await final;
  const finalAt = performance.now() - t0;
  await client.close(uri);
  return {
    chars: big.length,
    rows: lineCount,
    first_publish_ms: Math.round(firstAt),
    final_publish_ms: Math.round(finalAt),
    hover_during_pass_ms: stats(hoversDuring),
    published_diagnostics: last.diagnostics.length,
  };
}

/** Human-readable lines, then the JSON (the last line). */
export function formatLspBench(f: LspBenchFigures): string[] {
  const ms = (x: number): string => `${x.toFixed(2)} ms`;
  const out = [
    `dataset: ${f.dataset.rows} distilled transcripts, ${f.dataset.chars} chars, ${f.dataset.diagnostics} diagnostics`,
    `stdio   full diagnostics  median ${ms(f.stdio.full_diagnostics_ms.median)}  p95 ${ms(f.stdio.full_diagnostics_ms.p95)}  cold ${ms(f.stdio.full_diagnostics_cold_ms)}  (target median <= 100 ms)`,
    `stdio   hover             median ${ms(f.stdio.hover_ms.median)}  p95 ${ms(f.stdio.hover_ms.p95)}  (target p95 <= 10 ms)`,
    `stdio   one-char edit     median ${ms(f.stdio.rediagnose_ms.median)}  p95 ${ms(f.stdio.rediagnose_ms.p95)}  (target median <= 20 ms; debounce ${f.debounce_ms} ms not included)`,
    `in-proc full diagnostics  median ${ms(f.in_process.full_diagnostics_ms.median)}; hover p95 ${ms(f.in_process.hover_ms.p95)}; edited row median ${ms(f.in_process.rediagnose_row_ms.median)}`,
  ];
  if (f.large) {
    out.push(
      `large   ${(f.large.chars / 1048576).toFixed(1)} MB, ${f.large.rows} rows: first publish ${f.large.first_publish_ms} ms, final ${f.large.final_publish_ms} ms, hover during the pass p95 ${ms(f.large.hover_during_pass_ms.p95)} (max ${ms(f.large.hover_during_pass_ms.max)}), ${f.large.published_diagnostics} diagnostics published`,
    );
  }
  out.push(`targets ${f.meets_targets ? 'met' : 'NOT met'}`);
  return out;
}
