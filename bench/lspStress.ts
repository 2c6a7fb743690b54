// The language server under hostile editing (issue 11, finding 6): a real server process
// (`agent-lab lsp --stdio`) and a client over its pipes. Transcripts and datasets of 1 KB
// to 20 MB are opened, then for a while random edits land on them (characters, pasted
// transcripts, special tokens and near misses, lone surrogates, deleted ranges, broken
// rows, newlines that split rows), weighted towards the largest transcript, while hovers
// keep asking about a small document and other requests (hovers on the large documents,
// completion, code actions, symbols, semantic tokens) come in between. It prints p50 / p95
// / max latency per request kind and the server's peak memory (VmHWM), and checks that the
// server never exits and that the large transcript's diagnostics arrive, capped, once the
// edits stop. The JSON object is the last line.
//
//   npx tsx bench/lspStress.ts            full size (1 KB .. 20 MB, 60 s of edits)
//   npx tsx bench/lspStress.ts --smoke    CI size (1 KB .. 1 MB, 6 s of edits)
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CancellationTokenSource } from 'vscode-jsonrpc';
import type { PublishDiagnosticsParams } from 'vscode-languageserver-protocol';
import { mulberry32 } from '../core/mulberry32';
import { ChunkedTextDocument } from '../language-server/textDocument';
import { LspClient, repoRootFrom } from './lspClient';
import { distilledRows } from './lsp';

export interface StressOptions {
  /** Sizes of the transcripts and datasets (characters). */
  sizes?: number[];
  /** How long edits and requests run (ms). */
  durationMs?: number;
  seed?: number;
  log?: (line: string) => void;
}

export interface LatencyStats {
  n: number;
  p50: number;
  p95: number;
  max: number;
  /** Requests still unanswered after 2 s, cancelled by the client (hovers on a document being re-analysed). */
  cancelled?: number;
}

export interface StressFigures {
  sizes: number[];
  duration_ms: number;
  edits: number;
  edits_by_kind: Record<string, number>;
  /** Per request kind; `hover-small` is the hover on the small transcript while the others are edited. */
  latency_ms: Record<string, LatencyStats>;
  peak_rss_mb: number;
  /** Time from the last edit to the largest transcript's diagnostics for its final version. */
  final_diagnostics_ms: number;
  final_diagnostics_count: number;
  max_diagnostics: number;
  server_exited: boolean;
  /** The acceptance target: hover on a small document p95 <= 50 ms while the largest transcript is edited. */
  target_hover_small_p95_ms: 50;
  meets_target: boolean;
}

function stats(xs: number[], cancelled = 0): LatencyStats {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] ?? NaN;
  const r = (x: number): number => Math.round(x * 10) / 10;
  return { n: s.length, p50: r(q(0.5)), p95: r(q(0.95)), max: r(s[s.length - 1] ?? NaN), ...(cancelled ? { cancelled } : {}) };
}

let rowsCache: ReturnType<typeof distilledRows> | null = null;
/** The distilled rows, made once (distillation takes about a second: never inside the timed loop). */
function rows(): ReturnType<typeof distilledRows> {
  return (rowsCache ??= distilledRows());
}

/** A transcript of about `chars` characters: distilled transcripts, one after another (not in the wire format past the first: many diagnostics). */
export function transcriptOfSize(chars: number): string {
  const all = rows();
  const parts: string[] = [];
  let n = 0;
  for (let i = 0; n < chars; i++) {
    const t = all[i % all.length]!.text;
    parts.push(t);
    n += t.length;
  }
  return parts.join('').slice(0, Math.max(chars, 1));
}

/** A dataset of about `chars` characters: distinct distilled rows. */
export function datasetOfSize(chars: number): string {
  const all = rows();
  const lines: string[] = [];
  let n = 0;
  for (let i = 0; n < chars || lines.length === 0; i++) {
    const r = all[i % all.length]!;
    const line = JSON.stringify({ task: `${r.task} #${i}`, text: r.text, kind: r.kind });
    lines.push(line);
    n += line.length + 1;
  }
  return lines.join('\n') + '\n';
}

function peakRssMb(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmHWM:\s+(\d+) kB/.exec(status);
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

const GARBAGE = [
  '<|tool_cal|>',
  '<|end>',
  '<end|>',
  '<|tool_call',
  '<|assistant|>',
  '<|end|>',
  '<|tool_result|>',
  '\ud800',
  '\udfff',
  '\u0000',
  '{"tool": "calc", "args": {"expr": "1/0"}}',
  '{"tool": "search", "args": {"query": "x", "k": 0}}',
  '"',
  '\\',
  '\\u12',
  '}{',
  '😀'.repeat(50),
  'x'.repeat(5000),
];

export async function runLspStress(opts: StressOptions = {}): Promise<StressFigures> {
  const log = opts.log ?? (() => undefined);
  const sizes = opts.sizes ?? [1024, 100 * 1024, 1024 * 1024, 20 * 1024 * 1024];
  const durationMs = opts.durationMs ?? 60_000;
  const rand = mulberry32(opts.seed ?? 11);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const root = repoRootFrom(__dirname);
  const client = await LspClient.start({ rootUri: null });
  const pid = client.child.pid;
  const maxDiagnostics = 2000;
  const latencies: Record<string, number[]> = {};
  const cancelledBy: Record<string, number> = {};
  const editsByKind: Record<string, number> = {};
  let edits = 0;

  // The client's copy of each document is a ChunkedTextDocument too: the harness must not
  // spend its own time copying 20 MB per edit (that would count as server latency).
  interface Doc {
    uri: string;
    doc: ChunkedTextDocument;
    kind: 'transcript' | 'dataset';
    size: number;
  }
  const docs: Doc[] = [];
  const smallUri = `file://${path.join(root, 'stress-small.transcript')}`;
  const small: Doc = { uri: smallUri, doc: new ChunkedTextDocument(smallUri, 'agent-transcript', 1, transcriptOfSize(1024)), kind: 'transcript', size: 1024 };
  try {
    log(`opening ${sizes.length} transcripts and ${sizes.length} datasets (${sizes.map((s) => `${(s / 1024).toFixed(0)} KB`).join(', ')}) and the small transcript`);
    await client.open(small.uri, small.doc.getText(), 'agent-transcript');
    const firsts: Promise<void>[] = [];
    for (const size of sizes) {
      for (const kind of ['transcript', 'dataset'] as const) {
        const uri = `file://${path.join(root, kind === 'transcript' ? `stress-${size}.transcript` : `stress-${size}.traces.jsonl`)}`;
        const text = kind === 'transcript' ? transcriptOfSize(size) : datasetOfSize(size);
        const d: Doc = { uri, doc: new ChunkedTextDocument(uri, kind, 1, text), kind, size };
        docs.push(d);
        // Open: the time to the document's first diagnostics (all are opened at once).
        const t0 = performance.now();
        firsts.push(
          client.waitForDiagnostics(d.uri, () => true, 600_000).then(() => {
            (latencies[`open-${kind}-${d.size >= 1024 * 1024 ? 'large' : 'small'}`] ??= []).push(performance.now() - t0);
          }),
        );
        await client.open(d.uri, text, kind === 'transcript' ? 'agent-transcript' : 'agent-dataset', false);
      }
    }
    // The editing phase starts once every document has its first diagnostics.
    await Promise.all(firsts);
    const largest = docs.filter((d) => d.kind === 'transcript').sort((a, b) => b.size - a.size)[0]!;

    const timed = async (kind: string, method: string, params: unknown, cancelAfterMs = 2000): Promise<void> => {
      const source = new CancellationTokenSource();
      const timer = setTimeout(() => source.cancel(), cancelAfterMs);
      const t0 = performance.now();
      try {
        await client.conn.sendRequest(method, params, source.token);
        (latencies[kind] ??= []).push(performance.now() - t0);
      } catch {
        cancelledBy[kind] = (cancelledBy[kind] ?? 0) + 1;
      } finally {
        clearTimeout(timer);
        source.dispose();
      }
    };

    const paste = transcriptOfSize(1500).slice(0, 1500);
    const pasteRow = JSON.stringify({ text: transcriptOfSize(800) });
    const edit = async (d: Doc): Promise<void> => {
      const kinds = d.kind === 'dataset' ? ['char', 'garbage', 'delete', 'newline', 'row'] : ['char', 'garbage', 'delete', 'paste'];
      const kind = pick(kinds);
      const length = d.doc.length;
      const at = Math.floor(rand() * (length + 1));
      let removeTo = at;
      let insert = '';
      if (kind === 'char') insert = pick(['x', ' ', '1', '"', '|', '<', '>']);
      else if (kind === 'garbage') insert = pick(GARBAGE);
      else if (kind === 'delete') removeTo = Math.min(length, at + 1 + Math.floor(rand() * 200));
      else if (kind === 'paste') insert = paste;
      else if (kind === 'newline') insert = '\n';
      else insert = `\n${pick(['{', 'null', '[1,2]', '{"text": 5}', '{"text": "<|system|>x"}', pasteRow])}\n`;
      const range = { start: d.doc.positionAt(at), end: d.doc.positionAt(removeTo) };
      d.doc.update([{ range, text: insert }], d.doc.version + 1);
      edits++;
      editsByKind[kind] = (editsByKind[kind] ?? 0) + 1;
      await client.change(d.uri, [{ range, text: insert }], false);
    };

    const position = (d: Doc) => d.doc.positionAt(Math.floor(rand() * Math.max(1, d.doc.length)));
    const until = performance.now() + durationMs;
    log(`editing for ${(durationMs / 1000).toFixed(0)} s`);
    const editor = (async () => {
      while (performance.now() < until) {
        await edit(rand() < 0.6 ? largest : pick(docs));
        await new Promise((r) => setTimeout(r, 50 + rand() * 150));
      }
    })();
    const hoverer = (async () => {
      while (performance.now() < until) {
        await timed('hover-small', 'textDocument/hover', { textDocument: { uri: small.uri }, position: position(small) }, 10_000);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const others = (async () => {
      while (performance.now() < until) {
        const d = pick(docs);
        const which = pick(['hover', 'completion', 'codeAction', 'semanticTokens/range', 'documentSymbol', 'semanticTokens/full']);
        const pos = position(d);
        const td = { textDocument: { uri: d.uri } };
        const label = `${which}-${d.size >= 1024 * 1024 ? 'large' : 'small'}`;
        if (which === 'hover') await timed(label, 'textDocument/hover', { ...td, position: pos });
        else if (which === 'completion') await timed(label, 'textDocument/completion', { ...td, position: pos });
        else if (which === 'codeAction') await timed(label, 'textDocument/codeAction', { ...td, range: { start: pos, end: pos }, context: { diagnostics: [] } });
        else if (which === 'documentSymbol') await timed(label, 'textDocument/documentSymbol', td);
        else if (which === 'semanticTokens/range') await timed(label, 'textDocument/semanticTokens/range', { ...td, range: { start: pos, end: { line: pos.line + 40, character: 0 } } });
        else await timed(label, 'textDocument/semanticTokens/full', td);
        await new Promise((r) => setTimeout(r, 100 + rand() * 300));
      }
    })();
    await Promise.all([editor, hoverer, others]);

    // Edits have stopped: the largest transcript's diagnostics for its last version arrive, capped.
    log('waiting for the final diagnostics of the largest transcript');
    const t0 = performance.now();
    const lastVersion = (client as unknown as { versions: Map<string, number> }).versions.get(largest.uri);
    const past = client.published.get(largest.uri)?.find((p) => p.version === lastVersion);
    const final: PublishDiagnosticsParams = past ?? (await client.waitForDiagnostics(largest.uri, (p) => p.version === lastVersion, 600_000));
    const finalMs = performance.now() - t0;
    const serverExited = client.exitCode !== null;
    // Still alive and answering.
    await timed('hover-small', 'textDocument/hover', { textDocument: { uri: small.uri }, position: { line: 0, character: 3 } });
    const peak = peakRssMb(pid);
    const latency: Record<string, LatencyStats> = {};
    for (const [k, v] of Object.entries(latencies).sort()) latency[k] = stats(v, cancelledBy[k] ?? 0);
    for (const [k, n] of Object.entries(cancelledBy)) latency[k] ??= { ...stats([]), cancelled: n };
    const figures: StressFigures = {
      sizes,
      duration_ms: durationMs,
      edits,
      edits_by_kind: editsByKind,
      latency_ms: latency,
      peak_rss_mb: peak,
      final_diagnostics_ms: Math.round(finalMs),
      final_diagnostics_count: final.diagnostics.length,
      max_diagnostics: maxDiagnostics,
      server_exited: serverExited || client.exitCode !== null,
      target_hover_small_p95_ms: 50,
      meets_target: false,
    };
    figures.meets_target = !figures.server_exited && (latency['hover-small']?.p95 ?? Infinity) <= 50 && final.diagnostics.length <= maxDiagnostics + 2;
    return figures;
  } finally {
    await client.stop();
  }
}

export function formatStress(f: StressFigures): string[] {
  const out = [
    `sizes ${f.sizes.map((s) => (s >= 1048576 ? `${(s / 1048576).toFixed(0)} MB` : `${(s / 1024).toFixed(0)} KB`)).join(', ')}; ${f.edits} edits in ${(f.duration_ms / 1000).toFixed(0)} s (${Object.entries(f.edits_by_kind).map(([k, n]) => `${k} ${n}`).join(', ')})`,
    `${'request'.padEnd(26)} ${'n'.padStart(5)} ${'p50 ms'.padStart(9)} ${'p95 ms'.padStart(9)} ${'max ms'.padStart(9)}  cancelled`,
  ];
  for (const [k, s] of Object.entries(f.latency_ms)) {
    out.push(`${k.padEnd(26)} ${String(s.n).padStart(5)} ${s.p50.toFixed(1).padStart(9)} ${s.p95.toFixed(1).padStart(9)} ${s.max.toFixed(1).padStart(9)}  ${s.cancelled ?? 0}`);
  }
  out.push(`server peak memory (VmHWM) ${f.peak_rss_mb} MB; server exited: ${f.server_exited ? 'YES' : 'no'}`);
  out.push(`largest transcript: final diagnostics ${f.final_diagnostics_ms} ms after the last edit, ${f.final_diagnostics_count} published (cap ${f.max_diagnostics})`);
  out.push(`target: hover on the small document p95 <= ${f.target_hover_small_p95_ms} ms while the largest transcript is edited: ${f.meets_target ? 'met' : 'NOT met'}`);
  return out;
}

if (require.main === module) {
  const smoke = process.argv.includes('--smoke');
  void runLspStress({
    ...(smoke ? { sizes: [1024, 100 * 1024, 1024 * 1024], durationMs: 6000 } : {}),
    log: (line) => console.error(`[stress] ${line}`),
  }).then(
    (f) => {
      for (const line of formatStress(f)) console.log(line);
      console.log(JSON.stringify(f));
      process.exitCode = f.meets_target ? 0 : 1;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
