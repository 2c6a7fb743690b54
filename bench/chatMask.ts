// Chat-template loss masks in the language server (issue 30): a 10,000-row TRL
// conversational dataset (multi-turn, with tool calls) opened in a real server over stdio
// (`agent-lab lsp --stdio`, the bundle: build first), the template folder given by the
// `agentLab.chatTemplate` setting. Figures: time to the first published diagnostics and to
// the complete pass; hover latency (a client's request -> response) at random positions in
// message texts while the pass runs, and while the document is being edited (an edit every
// 10th hover). Targets (issue 30): first diagnostics within 3 s, hover p95 under 50 ms.
//   npx tsx bench/chatMask.ts [--rows N] [--hovers N] [--template DIR]   (JSON is the last line)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Hover, PublishDiagnosticsParams } from 'vscode-languageserver-protocol';
import { mulberry32 } from '../core/mulberry32';
import { type LatencyStats, LspClient, latencyStats, repoRootFrom } from './lspClient';

const CITIES = ['Paris, France', 'Santiago, Chile', 'Lima, Peru', 'Oslo, Norway', 'Cairo, Egypt', 'Tokyo, Japan'];
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_current_temperature',
      description: 'Get the current temperature at a location.',
      parameters: { type: 'object', properties: { location: { type: 'string', description: 'City, Country' } }, required: ['location'] },
    },
  },
];

/** Row i: a distinct multi-turn conversation with a tool call (TRL's tool-calling format). */
export function chatRow(i: number): Record<string, unknown> {
  const a = CITIES[i % CITIES.length]!;
  const b = CITIES[(i * 7 + 3) % CITIES.length]!;
  const t = (10 + (i % 23)).toFixed(1);
  return {
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: `Question ${i}: what is the temperature in ${a}?` },
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_current_temperature', arguments: { location: a } } }] },
      { role: 'tool', name: 'get_current_temperature', content: t },
      { role: 'assistant', content: `It is ${t} degrees celsius in ${a.split(',')[0]}.` },
      { role: 'user', content: `And how does ${b} compare?` },
      { role: 'assistant', content: `I would need to look ${b.split(',')[0]} up as well; ${a.split(',')[0]} is at ${t} degrees.` },
    ],
    tools: TOOLS,
  };
}

export function chatDatasetText(rows: number): string {
  const out: string[] = [];
  for (let i = 0; i < rows; i++) out.push(JSON.stringify(chatRow(i)));
  return out.join('\n') + '\n';
}

type Stats = LatencyStats;
const stats = (xs: number[]): Stats => latencyStats(xs, 1);

/** A position inside a message's "content" string of a line. */
function contentPosition(line: string, rand: () => number): number {
  const starts: number[] = [];
  for (let at = line.indexOf('"content": "'); at >= 0; at = line.indexOf('"content": "', at + 1)) starts.push(at + 12);
  const s = starts[Math.floor(rand() * starts.length)] ?? 0;
  const e = line.indexOf('"', s);
  return s + Math.floor(rand() * Math.max(1, e - s));
}

export interface ChatBenchFigures {
  rows: number;
  chars: number;
  template: string;
  first_diagnostics_ms: number;
  full_pass_ms: number;
  diagnostics: number;
  hover_during_pass_ms: Stats;
  hover_while_editing_ms: Stats;
  targets: { first_diagnostics_ms: 3000; hover_p95_ms: 50 };
  meets_targets: boolean;
}

export async function runChatMaskBench(opts: { rows?: number; hovers?: number; template?: string; log?: (s: string) => void } = {}): Promise<ChatBenchFigures> {
  const root = repoRootFrom(__dirname);
  const rows = opts.rows ?? 10_000;
  const hovers = opts.hovers ?? 200;
  const template = opts.template ?? path.join(root, 'test/fixtures/chat-templates/qwen2.5');
  const log = opts.log ?? (() => undefined);
  const text = chatDatasetText(rows);
  const lines = text.slice(0, -1).split('\n');
  const tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-chat-bench-'));
  // A chat dataset's usual name (a TRL dataset, not a world's split).
  // eslint-disable-next-line agent-lab/folder-names
  const file = path.join(tmp, 'train.jsonl');
  writeFileSync(file, text);
  const uri = pathToFileURL(file).toString();
  const rand = mulberry32(11);
  log(`dataset: ${rows} rows, ${(text.length / 1048576).toFixed(1)} MB; template ${template}`);
  const client = await LspClient.start({ configuration: { chatTemplate: template }, initializationOptions: { diagnosticsDelayMs: 0 } });
  try {
    // The server asks for its configuration after `initialized`: give it a moment.
    await new Promise((r) => setTimeout(r, 300));
    const isFinal = (p: PublishDiagnosticsParams): boolean => !p.diagnostics.some((d) => String(d.message).startsWith('chat dataset: checking rows'));
    const t0 = performance.now();
    const final = client.waitForDiagnostics(uri, isFinal, 600_000);
    const first = await client.open(uri, text, 'plaintext', true);
    const firstMs = performance.now() - t0;
    log(`first diagnostics: ${firstMs.toFixed(0)} ms (${first?.diagnostics.length ?? 0})`);
    const during: number[] = [];
    let done = false;
    void final.then(() => {
      done = true;
    });
    while (!done && during.length < hovers) {
      const line = Math.floor(rand() * lines.length);
      const h0 = performance.now();
      await client.request<Hover | null>('textDocument/hover', { textDocument: { uri }, position: { line, character: contentPosition(lines[line]!, rand) } });
      during.push(performance.now() - h0);
    }
    const fin = await final;
    const fullMs = performance.now() - t0;
    log(`full pass: ${fullMs.toFixed(0)} ms (${fin.diagnostics.length} diagnostics)`);
    const editing: number[] = [];
    for (let i = 0; i < hovers; i++) {
      if (i % 10 === 0) {
        const line = Math.floor(rand() * lines.length);
        const col = lines[line]!.indexOf('degrees') + 1;
        await client.change(uri, [{ range: { start: { line, character: col }, end: { line, character: col } }, text: 'x' }], false);
        lines[line] = `${lines[line]!.slice(0, col)}x${lines[line]!.slice(col)}`;
      }
      const line = Math.floor(rand() * lines.length);
      const h0 = performance.now();
      await client.request<Hover | null>('textDocument/hover', { textDocument: { uri }, position: { line, character: contentPosition(lines[line]!, rand) } });
      editing.push(performance.now() - h0);
    }
    const figures: ChatBenchFigures = {
      rows,
      chars: text.length,
      template: path.relative(root, template),
      first_diagnostics_ms: Math.round(firstMs),
      full_pass_ms: Math.round(fullMs),
      diagnostics: fin.diagnostics.length,
      hover_during_pass_ms: stats(during),
      hover_while_editing_ms: stats(editing),
      targets: { first_diagnostics_ms: 3000, hover_p95_ms: 50 },
      meets_targets: false,
    };
    // The targets: first diagnostics within 3 s, hovers under 50 ms p95 while the file is edited
    // (hover_during_pass_ms, the first pass's seconds, is reported beside them).
    figures.meets_targets = figures.first_diagnostics_ms <= 3000 && figures.hover_while_editing_ms.p95 <= 50;
    return figures;
  } finally {
    await client.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  runChatMaskBench({
    ...(arg('rows') ? { rows: Number(arg('rows')) } : {}),
    ...(arg('hovers') ? { hovers: Number(arg('hovers')) } : {}),
    ...(arg('template') ? { template: path.resolve(arg('template')!) } : {}),
    log: (s) => console.log(s),
  }).then(
    (f) => console.log(JSON.stringify(f)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
