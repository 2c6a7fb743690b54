// The language server over real stdio (`agent-lab lsp --stdio` as a child process), as
// any LSP client sees it: capabilities, diagnostics at exact ranges, hovers, quick fixes
// applied and re-checked, semantic tokens, symbols, folding, completion, the custom
// agentLab/lossMask request, dataset recognition, debounce and cancellation, random edits,
// a ~50 MB dataset that must not freeze the client, and a clean shutdown.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type {
  CodeAction,
  CompletionItem,
  Diagnostic,
  DocumentSymbol,
  FoldingRange,
  Hover,
  PublishDiagnosticsParams,
  SemanticTokens,
  TextEdit,
} from 'vscode-languageserver-protocol';
import { CancellationTokenSource } from 'vscode-languageserver-protocol';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { LossMaskRequest, LossMaskResult, isLossMaskResult } from '../../core/protocol/lsp';
import { encodeWithMask } from '../../core/sftFormat';
import { canonicalTokenizerJson, trainBpe, trainDefaultTokenizer } from '../../core/tokenizer';
import { analyseTranscript } from '../../language-server/analysis/transcript';
import {
  DocDiagnostic,
  analyseRow,
  placeRowDiagnostics,
  toDocDiagnostic,
  transcriptText,
  transcriptUnit,
  unitDiagnostics,
} from '../../language-server/documents';
import { TokenizerStore } from '../../language-server/tokenizers';
import { datasetText, distilledRows, largeDatasetText } from '../../bench/lsp';
import { LspClient, repoRootFrom, withTimeout } from '../../bench/lspClient';

const root = repoRootFrom(__dirname);
const sample = (name: string): string => readFileSync(path.join(root, 'samples', name), 'utf8');
const uriOf = (p: string): string => pathToFileURL(p).toString();
const tok = new TokenizerStore().resolve(null, null);
const hoverValue = (h: Hover | null): string => (h ? (h.contents as { value: string }).value : '');

function applyEdits(text: string, edits: TextEdit[]): string {
  const doc = TextDocument.create('file:///x', 'x', 1, text);
  return TextDocument.applyEdits(doc, edits);
}

describe('language server over stdio', function () {
  this.timeout(120_000);
  let client: LspClient;
  let tmp: string;

  before(async function () {
    this.timeout(180_000);
    // The executable runs the bundle: build it so this tree's code is what runs (the test
    // tier has just built it: AGENT_LAB_SKIP_BUILD=1; AGENT_LAB_LSP_FROM_SOURCE=1 runs tsx).
    if (process.env['AGENT_LAB_SKIP_BUILD'] !== '1' && process.env['AGENT_LAB_LSP_FROM_SOURCE'] !== '1') {
      const b = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.mjs')], { cwd: root, encoding: 'utf8' });
      assert.equal(b.status, 0, b.stderr);
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-proto-'));
    client = await LspClient.start({ initializationOptions: { diagnosticsDelayMs: 0 } });
  });
  after(async () => {
    if (client) await client.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('announces its capabilities (incremental sync, hover, completion, code actions, symbols, folding, semantic tokens)', () => {
    const caps = client.initializeResult.capabilities;
    assert.deepEqual(caps.textDocumentSync, { openClose: true, change: 2 });
    assert.equal(caps.hoverProvider, true);
    assert.deepEqual(caps.completionProvider?.triggerCharacters, ['<', '|']);
    assert.equal(caps.documentSymbolProvider, true);
    assert.equal(caps.foldingRangeProvider, true);
    const st = caps.semanticTokensProvider as { legend: { tokenTypes: string[] }; full: boolean; range: boolean };
    assert.deepEqual(st.legend.tokenTypes, ['supervised', 'masked', 'specialToken']);
    assert.equal(st.range, true);
  });

  describe('a transcript', () => {
    const file = (): string => path.join(tmp, 'broken-call.transcript');
    const text = sample('broken-call.transcript');
    let diags: PublishDiagnosticsParams;
    before(async () => {
      writeFileSync(file(), text);
      diags = (await client.open(uriOf(file()), text, 'agent-transcript'))!;
    });

    it('publishes the grammar rejection at the exact character, with code and message', () => {
      assert.equal(diags.diagnostics.length, 1);
      const d = diags.diagnostics[0]!;
      const line = text.split('\n')[1]!;
      const col = line.indexOf('"k": 0') + 5;
      assert.deepEqual(d.range, { start: { line: 1, character: col }, end: { line: 1, character: col + 1 } });
      assert.equal(d.code, 'grammar-rejected');
      assert.equal(d.severity, 1);
      assert.equal(d.source, 'agent-lab');
      assert.equal(d.message, "tool call rejected by the grammar: expected a digit 1-9 for k, got '0'");
    });

    it('hovers: role, supervised/masked, tokens, the call verdict', async () => {
      const uri = uriOf(file());
      const h = await client.request<Hover>('textDocument/hover', { textDocument: { uri }, position: { line: 1, character: 90 } });
      const v = hoverValue(h);
      assert.match(v, /^\*\*assistant · step 1\*\* · \*\*supervised\*\*/);
      assert.match(v, /grammar: rejected at character 85/);
      const sys = await client.request<Hover>('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: 20 } });
      assert.match(hoverValue(sys), /^\*\*system prompt\*\* · \*\*masked\*\*/);
      assert.ok(sys.range);
    });

    it('semantic tokens, symbols, folding and completion answer', async () => {
      const uri = uriOf(file());
      const st = await client.request<SemanticTokens>('textDocument/semanticTokens/full', { textDocument: { uri } });
      assert.ok(st.data.length > 0 && st.data.length % 5 === 0);
      const range = await client.request<SemanticTokens>('textDocument/semanticTokens/range', {
        textDocument: { uri },
        range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } },
      });
      assert.ok(range.data.length > 0 && range.data.length < st.data.length);
      const syms = await client.request<DocumentSymbol[]>('textDocument/documentSymbol', { textDocument: { uri } });
      assert.equal(syms.filter((s) => s.name.startsWith('Step ')).length, 3);
      const folds = await client.request<FoldingRange[]>('textDocument/foldingRange', { textDocument: { uri } });
      assert.ok(folds.length > 0);
      const items = await client.request<CompletionItem[]>('textDocument/completion', { textDocument: { uri }, position: { line: 3, character: 0 } });
      assert.ok(items.some((i) => i.label === '<|tool_call|>'));
      assert.ok(items.some((i) => i.label === 'search call' && i.insertTextFormat === 2));
    });

    it('agentLab/lossMask returns the token-level mask (ids as SFT encodes them)', async () => {
      const uri = uriOf(file());
      const r = await client.request<LossMaskResult>(LossMaskRequest.method, { textDocument: { uri } });
      assert.ok(isLossMaskResult(r));
      assert.equal(r.text, text.replace(/\n$/, ''));
      assert.deepEqual(r.ids, encodeWithMask(r.text, trainDefaultTokenizer()).ids);
      assert.equal(r.tokenizer.source, 'default');
      const sup = r.offsets.filter((_, i) => r.supervised[i]).map(([s, e]) => r.text.slice(s, e)).join('');
      assert.ok(sup.includes('Answer: 4096<|end|>'));
      assert.ok(!sup.includes('You are a narrow'));
      await assert.rejects(client.request(LossMaskRequest.method, { textDocument: {} }), /invalid params/);
      await assert.rejects(client.request(LossMaskRequest.method, { textDocument: { uri: 'file:///nope.transcript' } }), /not open/);
    });

    it('a quick fix applied through didChange clears its diagnostic', async () => {
      const f = path.join(tmp, 'fixme.transcript');
      const bad = `<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: x\n<|tool_call|>{"tool":"calc","args":{"expr":"1+2"}}<|end|><|tool_result|>3<|end|><|assistant|>Answer: 3<|end|>\n`;
      const uri = uriOf(f);
      const first = (await client.open(uri, bad, 'agent-transcript'))!;
      const w = first.diagnostics.find((d) => d.code === 'call-noncanonical')!;
      assert.ok(w);
      const actions = await client.request<CodeAction[]>('textDocument/codeAction', {
        textDocument: { uri },
        range: w.range,
        context: { diagnostics: [w] },
      });
      const fix = actions.find((a) => a.title === 'Canonicalise the tool call')!;
      assert.ok(fix && fix.kind === 'quickfix' && fix.isPreferred);
      const edits = fix.edit!.changes![uri]!;
      const after = (await client.change(uri, edits.map((e) => ({ range: e.range, text: e.newText }))))!;
      assert.deepEqual(after.diagnostics, []);
      assert.ok(applyEdits(bad, edits).includes('{"tool": "calc", "args": {"expr": "1+2"}}'));
      await client.close(uri);
    });

    it('adds a missing <|end|> with a quick fix', async () => {
      const uri = uriOf(path.join(tmp, 'noend.transcript'));
      const bad = `<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: x\nAnswer: 3`;
      const first = (await client.open(uri, bad, 'agent-transcript'))!;
      const d = first.diagnostics.find((x) => x.code === 'turn-unterminated')!;
      const actions = await client.request<CodeAction[]>('textDocument/codeAction', { textDocument: { uri }, range: d.range, context: { diagnostics: [d] } });
      const fix = actions.find((a) => a.title === 'Add the missing <|end|>')!;
      const edits = fix.edit!.changes![uri]!;
      assert.equal(applyEdits(bad, edits), `${bad}<|end|>`);
      const after = (await client.change(uri, edits.map((e) => ({ range: e.range, text: e.newText }))))!;
      assert.deepEqual(after.diagnostics, []);
      await client.close(uri);
    });
  });

  describe('datasets', () => {
    it('a *.traces.jsonl: row diagnostics land on the right column through the escapes', async () => {
      const rows = sample('train.traces.jsonl').trimEnd().split('\n');
      // Break row 3: its first k becomes 0, written as \u0030.
      rows[2] = rows[2]!.replace('\\"k\\": 2', '\\"k\\": \\u0030');
      rows.splice(5, 0, '{"task": "no text here"}', 'not json at all');
      const text = rows.join('\n') + '\n';
      const uri = uriOf(path.join(tmp, 'broken.traces.jsonl'));
      const p = (await client.open(uri, text, 'jsonl'))!;
      const byCode = (c: string): Diagnostic[] => p.diagnostics.filter((d) => d.code === c);
      const g = byCode('grammar-rejected');
      assert.equal(g.length, 1);
      assert.equal(g[0]!.range.start.line, 2);
      assert.equal(rows[2]!.slice(g[0]!.range.start.character, g[0]!.range.end.character), '\\u0030');
      assert.equal(byCode('row-no-text')[0]!.range.start.line, 5);
      assert.equal(byCode('row-not-json')[0]!.range.start.line, 6);
      const h = await client.request<Hover>('textDocument/hover', { textDocument: { uri }, position: { line: 2, character: g[0]!.range.start.character + 2 } });
      assert.match(hoverValue(h), /\*\*supervised\*\*/);
      assert.match(hoverValue(h), /row 3 · task: /);
      const mask = await client.request<LossMaskResult>(LossMaskRequest.method, { textDocument: { uri }, row: 0 });
      assert.ok(isLossMaskResult(mask));
      assert.equal(mask.row, 0);
      assert.equal(mask.text, JSON.parse(rows[0]!).text);
      await assert.rejects(client.request(LossMaskRequest.method, { textDocument: { uri } }), /needs "row"/);
      const syms = await client.request<DocumentSymbol[]>('textDocument/documentSymbol', { textDocument: { uri } });
      assert.equal(syms.length, 24);
      assert.match(syms[0]!.name, /^Row 1: /);
      await client.close(uri);
    });

    it('recognises a JSONL by content and says so; leaves other JSONL files alone', async () => {
      const rowsUri = uriOf(path.join(tmp, 'mine.jsonl'));
      const other = uriOf(path.join(tmp, 'metrics.jsonl'));
      const otherText = '{"phase": "sft", "step": 1, "loss": 2.5}\n{"phase": "sft", "step": 2, "loss": 2.4, broken\n';
      await client.open(other, otherText, 'jsonl', false);
      const p = (await client.open(rowsUri, sample('train.traces.jsonl').split('\n')[0] + '\n', 'jsonl'))!;
      assert.deepEqual(p.diagnostics, []);
      const note = client.notifications.find((n) => n.method === 'agentLab/datasetRecognized' && (n.params as { uri: string }).uri === rowsUri);
      assert.deepEqual(note?.params, { uri: rowsUri, reason: 'content' });
      // Nothing was ever published for the metrics file, though it is invalid JSONL.
      assert.equal(client.published.get(other), undefined);
      await client.close(rowsUri);
      await client.close(other);
    });

    it("a run folder's data/ file is a dataset measured with the run's tokenizer and max_len", async () => {
      const run = path.join(tmp, 'run');
      mkdirSync(path.join(run, 'data'), { recursive: true });
      const small = trainBpe(['hello world'], { vocabSize: 270 });
      writeFileSync(path.join(run, 'tokenizer.json'), canonicalTokenizerJson(small));
      writeFileSync(path.join(run, 'config.json'), JSON.stringify({ kind: 'demo', sftMaxLen: 1024 }));
      const uri = uriOf(path.join(run, 'data', 'train.jsonl'));
      const line = sample('train.traces.jsonl').split('\n')[0]!;
      const p = (await client.open(uri, `${line}\n`, 'jsonl'))!;
      // With a 270-token vocabulary the transcript is mostly single bytes: over 1024 tokens.
      const over = p.diagnostics.find((d) => d.code === 'over-length');
      assert.ok(over, JSON.stringify(p.diagnostics));
      assert.match(over.message as string, /would be dropped from SFT/);
      const mask = await client.request<LossMaskResult>(LossMaskRequest.method, { textDocument: { uri }, row: 0 });
      assert.equal(mask.tokenizer.source, 'run');
      assert.equal(mask.tokenizer.vocabSize, small.vocabSize);
      assert.equal(mask.overLength, true);
      assert.deepEqual(mask.ids, encodeWithMask(mask.text, small).ids);
      await client.close(uri);
    });
  });

  describe('responsiveness', () => {
    it('debounces edits: a burst of changes is diagnosed once, for the last version', async () => {
      const slow = await LspClient.start({ initializationOptions: { diagnosticsDelayMs: 200 } });
      try {
        const uri = uriOf(path.join(tmp, 'burst.transcript'));
        await slow.open(uri, '<|system|>S<|end|>', 'agent-transcript');
        const before = slow.published.get(uri)!.length;
        let last: Promise<PublishDiagnosticsParams | null> = Promise.resolve(null);
        for (let i = 0; i < 6; i++) {
          last = slow.change(uri, [{ range: { start: { line: 0, character: 17 + i }, end: { line: 0, character: 17 + i } }, text: 'x' }], i === 5);
        }
        const p = (await last)!;
        assert.equal(p.version, 7);
        const after = slow.published.get(uri)!.slice(before);
        assert.deepEqual(after.map((x) => x.version), [7], 'only the last version was diagnosed');
      } finally {
        await slow.stop();
      }
    });

    it('answers a cancelled request with RequestCancelled or a result, and keeps serving', async () => {
      const uri = uriOf(path.join(tmp, 'big-cancel.traces.jsonl'));
      await client.open(uri, datasetText(distilledRows()), 'agent-dataset');
      const source = new CancellationTokenSource();
      const p = client.conn.sendRequest('textDocument/semanticTokens/full', { textDocument: { uri } }, source.token);
      source.cancel();
      await p.then(
        (r: unknown) => assert.ok(r),
        (e: { code?: number }) => assert.equal(e.code, -32800),
      );
      const h = await client.request<Hover>('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: 300 } });
      assert.match(hoverValue(h), /supervised|masked/);
      await client.close(uri);
    });

    it('survives random edits of markers, quotes and bytes, and its last diagnostics match the last text', async () => {
      let seed = 2024;
      const rand = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
      const pieces = ['<|assistant|>', '<|end|>', '<|tool_call|>', '<|tool_result|>', '<|', '|>', '"', '\\', '{', '}', '\n', 'é', '😀', '\u0000', '\r\n', 'x', 'Answer: 2'];
      for (const [name, lang, start] of [
        ['fuzz.transcript', 'agent-transcript', sample('sum.transcript')],
        ['fuzz.traces.jsonl', 'agent-dataset', sample('train.traces.jsonl').split('\n').slice(0, 3).join('\n') + '\n'],
      ] as const) {
        const uri = uriOf(path.join(tmp, name));
        await client.open(uri, start, lang);
        let doc = TextDocument.create(uri, lang, 1, start);
        for (let i = 0; i < 150; i++) {
          const text = doc.getText();
          const a = Math.floor(rand() * (text.length + 1));
          const del = rand() < 0.4 ? Math.floor(rand() * 8) : 0;
          const ins = rand() < 0.8 ? pieces[Math.floor(rand() * pieces.length)]! : '';
          const range = { start: doc.positionAt(a), end: doc.positionAt(Math.min(text.length, a + del)) };
          doc = TextDocument.update(doc, [{ range, text: ins }], doc.version + 1);
          await client.change(uri, [{ range, text: ins }], false);
          if (i % 25 === 0) {
            const pos = doc.positionAt(Math.floor(rand() * doc.getText().length));
            await withTimeout(client.request('textDocument/hover', { textDocument: { uri }, position: pos }), 5000, 'hover during fuzzing');
            await withTimeout(client.request('textDocument/completion', { textDocument: { uri }, position: pos }), 5000, 'completion');
            await withTimeout(client.request('textDocument/semanticTokens/full', { textDocument: { uri } }), 5000, 'semantic tokens');
            await withTimeout(client.request('textDocument/documentSymbol', { textDocument: { uri } }), 5000, 'symbols');
          }
        }
        const last = await client.waitForDiagnostics(uri, (p) => p.version === doc.version, 20_000, true);
        assert.equal(client.exitCode, null, `the server is alive; stderr: ${client.stderr.slice(-500)}`);
        // Incremental sync kept the server's text equal to ours: its diagnostics are what
        // the same analysis gives in process for our copy of the document.
        const expected: DocDiagnostic[] = [];
        if (lang === 'agent-transcript') {
          const unit = transcriptUnit(doc, analyseTranscript(transcriptText(doc.getText())), tok);
          for (const d of unitDiagnostics(unit)) expected.push(toDocDiagnostic(unit, d));
        } else {
          doc.getText().split('\n').forEach((l, line) => {
            const lt = l.replace(/\r$/, '');
            if (lt.trim()) placeRowDiagnostics(line, analyseRow(lt, tok), expected, Infinity);
          });
        }
        const key = (d: { code?: unknown; range: unknown }): string => `${String(d.code)} ${JSON.stringify(d.range)}`;
        assert.deepEqual(last.diagnostics.map(key), expected.map(key), `${name} after 150 random edits`);
        await client.close(uri);
      }
      assert.doesNotMatch(client.stderr, /failed:/, 'no handler threw');
    });

    it('a ~50 MB dataset streams its diagnostics and never stops answering', async function () {
      this.timeout(300_000);
      const rows = distilledRows().map((r, i) => (i % 10 === 3 ? { ...r, text: r.text.replace('"k": 2', '"k": 0') } : r));
      const big = largeDatasetText(rows);
      assert.ok(big.length > 50 * 1024 * 1024);
      const uri = uriOf(path.join(tmp, 'huge.traces.jsonl'));
      const t0 = Date.now();
      const first = client.waitForDiagnostics(uri, () => true, 240_000);
      const done = client.waitForDiagnostics(
        uri,
        (p) => p.diagnostics.some((d) => d.code === 'large-document' && String(d.message).includes('checked in the background')),
        240_000,
      );
      await client.open(uri, big, 'agent-dataset', false);
      let finished = false;
      void done.then(() => (finished = true));
      await first;
      const firstMs = Date.now() - t0;
      const latencies: number[] = [];
      while (!finished) {
        const h0 = Date.now();
        const h = await withTimeout(client.request<Hover>('textDocument/hover', { textDocument: { uri }, position: { line: 12_345, character: 300 } }), 10_000, 'hover during the pass');
        latencies.push(Date.now() - h0);
        assert.match(hoverValue(h), /supervised|masked/);
        await new Promise((r) => setTimeout(r, 50));
      }
      const last = await done;
      const total = Date.now() - t0;
      latencies.sort((a, b) => a - b);
      const p95 = latencies[Math.floor(0.95 * (latencies.length - 1))] ?? 0;
      console.log(`      50 MB: first publish after ${firstMs} ms, final after ${total} ms; ${latencies.length} hovers during the pass, p95 ${p95} ms, max ${latencies[latencies.length - 1]} ms`);
      assert.ok(latencies.length >= 3, 'hovers were answered while the pass ran');
      assert.ok(p95 < 500, `hover p95 during the pass ${p95} ms`);
      const note = last.diagnostics.find((d) => d.code === 'large-document')!;
      assert.match(String(note.message), /large dataset \(5\d\.\d MB, [\d,]+ rows\).*showing the first 2,000 of [\d,]+ problems/);
      assert.ok(last.diagnostics.length <= 2001);
      assert.ok(last.diagnostics.some((d) => d.code === 'grammar-rejected'));
      await client.close(uri);
    });
  });

  it('the CLI: `lsp` needs --stdio, `bench` knows lsp (exit 2 for bad usage)', () => {
    const bin = path.join(root, 'bin', 'agent-lab');
    const r = spawnSync(process.execPath, [bin, 'lsp'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /pass --stdio/);
    const b = spawnSync(process.execPath, [bin, 'bench', 'nothing'], { encoding: 'utf8' });
    assert.equal(b.status, 2);
    assert.match(b.stderr, /unknown bench 'nothing'/);
  });

  it('shuts down and exits with code 0', async () => {
    const c = await LspClient.start();
    assert.equal(await c.stop(), 0);
  });
});
