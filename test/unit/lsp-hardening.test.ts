// The language server's pieces that keep it responsive on huge documents (issue 11,
// findings 6 and 7), in process: the chunked text document answers exactly as the
// library's does, time-sliced analysis and token tables give exactly the one-shot
// results, diagnostics are capped, and a tokenizer.json that is a FIFO, a device or huge
// is refused with a warning instead of hanging the server.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { mulberry32 } from '../../core/mulberry32';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { distilledRows } from '../../bench/lsp';
import { analyseTranscript, analyseTranscriptSteps, runSteps, sortSteps } from '../../language-server/analysis/transcript';
import { countTokens, safeChunks, tokenStartAt, tokenTable, tokenTableSteps } from '../../language-server/analysis/tokens';
import { ChunkedTextDocument } from '../../language-server/textDocument';
import { TokenizerStore, readRegularFile } from '../../language-server/tokenizers';

describe('language server under huge and hostile documents (issue 11)', function () {
  this.timeout(120_000);
  const rows = distilledRows();

  it('finding 6: the chunked text document gives the library\'s text, line count, positions and offsets after every random edit', () => {
    const r = mulberry32(5);
    const pieces = ['a', 'bc', '\n', '\r\n', '\r', '😀', 'y\r', '\nz', '', 'x'.repeat(70_000), rows[0]!.text];
    for (let trial = 0; trial < 150; trial++) {
      let init = '';
      for (let i = Math.floor(r() * 30); i > 0; i--) init += pieces[Math.floor(r() * pieces.length)];
      let lib = TextDocument.create('u', 'x', 1, init);
      const mine = new ChunkedTextDocument('u', 'x', 1, init);
      for (let e = 0; e < 25; e++) {
        const len = lib.getText().length;
        const a = Math.floor(r() * (len + 1));
        const b = Math.floor(r() * (len + 1));
        const sp = lib.positionAt(Math.min(a, b));
        const ep = lib.positionAt(Math.max(a, b));
        const range = r() < 0.2 ? { start: sp, end: { line: ep.line, character: ep.character + 50 } } : { start: sp, end: ep };
        const text = pieces[Math.floor(r() * pieces.length)]! + (r() < 0.3 ? pieces[Math.floor(r() * pieces.length)]! : '');
        const changes = r() < 0.03 ? [{ text }] : [{ range, text }];
        lib = TextDocument.update(lib, changes, e + 2);
        mine.update(changes, e + 2);
        const L = lib.getText();
        assert.equal(mine.length, L.length);
        assert.equal(mine.lineCount, lib.lineCount);
        for (let k = 0; k < 10; k++) {
          const o = Math.floor(r() * (L.length + 3)) - 1;
          assert.deepEqual(mine.positionAt(o), lib.positionAt(o));
          const q = { line: Math.floor(r() * (lib.lineCount + 2)) - 1, character: Math.floor(r() * 80_000) - 2 };
          assert.equal(mine.offsetAt(q), lib.offsetAt(q));
          const rr = { start: lib.positionAt(Math.floor(r() * L.length)), end: lib.positionAt(Math.floor(r() * L.length)) };
          assert.equal(mine.getText(rr), lib.getText(rr));
          const line = Math.floor(r() * lib.lineCount);
          assert.deepEqual(mine.getLineRange(line), lib.getLineRange(line));
        }
        assert.equal(mine.getText(), L);
      }
    }
  });

  it('finding 6: an edit of a 20 MB document costs well under a millisecond, not a 20 MB copy (the library: 80-430 ms)', () => {
    let big = '';
    for (let i = 0; big.length < 20 * 1024 * 1024; i++) big += rows[i % rows.length]!.text + '\n';
    const doc = new ChunkedTextDocument('u', 'x', 1, big);
    doc.positionAt(0);
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const p = doc.positionAt(Math.floor((i / 50) * big.length));
      const t0 = performance.now();
      doc.update([{ range: { start: p, end: p }, text: 'x\n' }], i + 2);
      doc.positionAt(5);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    assert.ok(times[25]! < 5, `median edit ${times[25]!.toFixed(2)} ms`);
    assert.equal(doc.length, big.length + 100);
  });

  it('finding 6: the time-sliced analysis, sort and token table give exactly the one-shot results', () => {
    const tok = trainDefaultTokenizer();
    const r = mulberry32(3);
    let big = '';
    for (let i = 0; big.length < 600_000; i++) big += rows[i % rows.length]!.text;
    const texts = [big, ...rows.slice(0, 20).map((x, i) => x.text.slice(0, 200) + ['é😀 中文', '\n  \n', 'ab '.repeat(30_000), '<|tool_cal|>'][i % 4] + x.text.slice(200))];
    for (const t of texts) {
      const steps = analyseTranscriptSteps(t);
      let pauses = 0;
      let res;
      for (;;) {
        const s = steps.next();
        if (s.done) {
          res = s.value;
          break;
        }
        pauses++;
      }
      const once = analyseTranscript(t);
      assert.deepEqual(res.diagnostics, once.diagnostics);
      assert.deepEqual(res.spans, once.spans);
      if (t === big) assert.ok(pauses > 30, `the analysis pauses (${pauses} points)`);
      const table = runSteps(tokenTableSteps(once, tok));
      assert.deepEqual(table, tokenTable(once, tok));
      // Every token as the SFT encoder makes it: span by span.
      assert.deepEqual(Array.from(table.ids), once.spans.flatMap((s) => tok.encode(t.slice(s.start, s.end))));
      assert.equal(countTokens(once, tok), table.ids.length);
      for (const i of [0, 511, 1024]) if (i < table.ids.length) assert.equal(tokenStartAt(once, tok, i), table.starts[i]);
    }
    // The merge sort is stable and equals Array.prototype.sort.
    const xs = Array.from({ length: 20_000 }, (_, i) => ({ start: Math.floor(r() * 500), end: Math.floor(r() * 5), i }));
    const cmp = (a: { start: number; end: number }, b: { start: number; end: number }) => a.start - b.start || a.end - b.end;
    assert.deepEqual(runSteps(sortSteps(xs.slice(), cmp)), xs.slice().sort(cmp));
  });

  it('finding 6: huge pieces are encoded in chunks cut only where the pre-tokenizer cuts anyway (same ids)', () => {
    const tok = trainDefaultTokenizer();
    const r = mulberry32(7);
    const alphabet = ['a', 'b', ' ', '  ', '\n', '\n\n', '1', '23', 'é', '😀', '.', ',', "'s", '<|tool_call|>', '<|bos|>', 'Thought', ' the', '\t', '\r\n', '——', '中文'];
    for (let trial = 0; trial < 1500; trial++) {
      let s = '';
      for (let i = Math.floor(r() * 200); i > 0; i--) s += alphabet[Math.floor(r() * alphabet.length)];
      const chunks = [...safeChunks(s, 1 + Math.floor(r() * 10))];
      assert.equal(chunks.map((c) => c.text).join(''), s);
      assert.deepEqual(chunks.flatMap((c) => tok.encode(c.text)), tok.encode(s), JSON.stringify(s));
    }
  });

  describe('finding 7: a tokenizer.json that is not a regular file or is huge', () => {
    let tmp: string;
    before(() => {
      tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-tok-'));
    });
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));

    const runWith = (name: string, make: (file: string) => void): string => {
      const run = path.join(tmp, name);
      fs.mkdirSync(run);
      fs.writeFileSync(path.join(run, 'config.json'), '{"kind": "demo"}');
      make(path.join(run, 'tokenizer.json'));
      return run;
    };

    for (const [name, make, why] of [
      ['fifo', (f: string) => assert.equal(spawnSync('mkfifo', [f]).status, 0), /FIFO/],
      ['dev-zero', (f: string) => fs.symlinkSync('/dev/zero', f), /character device/],
      ['folder', (f: string) => fs.mkdirSync(f), /folder|EISDIR/],
      [
        'huge',
        (f: string) => {
          const fd = fs.openSync(f, 'w');
          fs.ftruncateSync(fd, 200 * 1024 * 1024);
          fs.closeSync(fd);
        },
        /over the 64 MB limit/,
      ],
    ] as const) {
      it(`finding 7: a run folder's tokenizer.json that is ${name === 'dev-zero' ? 'a link to /dev/zero' : `a ${name}`} gives a tokenizer warning at once (no hang, no growth)`, () => {
        const run = runWith(name, make);
        const store = new TokenizerStore();
        const t0 = performance.now();
        const rss0 = process.memoryUsage().rss;
        const tok = store.resolve(path.join(run, 'data', 'x.traces.jsonl'), null);
        assert.ok(performance.now() - t0 < 5000);
        assert.ok(process.memoryUsage().rss - rss0 < 100 * 1024 * 1024, 'memory did not grow with the file');
        assert.equal(tok.info.source, 'default');
        assert.match(tok.problem ?? '', why);
        assert.match(tok.problem ?? '', /using the default tokenizer/);
      });
    }

    it('finding 7: the setting agentLab.tokenizerPath pointing at /dev/zero is refused the same way', () => {
      const store = new TokenizerStore();
      const tok = store.resolve(null, '/dev/zero');
      assert.match(tok.problem ?? '', /agentLab\.tokenizerPath \/dev\/zero: it is a character device, not a regular file/);
      assert.throws(() => readRegularFile('/dev/zero', 1024), /character device/);
    });
  });
});
