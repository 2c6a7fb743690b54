// The language server's documents: JSONL rows mapped exactly through JSON string escapes,
// dataset recognition, tokenizer choice, and the features computed on a unit (hover,
// completion, semantic tokens, symbols, folding, the loss-mask request).
import * as assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { SemanticTokensBuilder } from 'vscode-languageserver';
import { isDatasetRecognizedParams, isLossMaskParams, isLossMaskResult } from '../../core/protocol/lsp';
import { encodeAsciiString } from '../../core/pyjson';
import { encodeWithMask } from '../../core/sftFormat';
import { canonicalTokenizerJson, trainBpe, trainDefaultTokenizer } from '../../core/tokenizer';
import { scanRow } from '../../core/transcript/jsonRow';
import { analyseTranscript } from '../../language-server/analysis/transcript';
import { tokenTable } from '../../language-server/analysis/tokens';
import {
  Settings,
  Unit,
  analyseRow,
  detectKind,
  rowUnit,
  transcriptUnit,
  unitDiagnostics,
} from '../../language-server/documents';
import { completionsAt } from '../../language-server/features/completion';
import { hoverAt } from '../../language-server/features/hover';
import { lossMaskOf } from '../../language-server/features/lossMask';
import { LEGEND, pushUnitTokens } from '../../language-server/features/semanticTokens';
import { unitFolds, unitSymbols } from '../../language-server/features/structure';
import { globToRegExp, matchesAnyGlob } from '../../language-server/globs';
import { TokenizerStore } from '../../language-server/tokenizers';
import { repoRoot } from '../support/reference';

const sample = (name: string): string => readFileSync(path.join(repoRoot, 'samples', name), 'utf8');
const store = new TokenizerStore();
const tok = store.resolve(null, null);

function transcriptDoc(text: string): { doc: TextDocument; unit: Unit } {
  const doc = TextDocument.create('file:///t.transcript', 'agent-transcript', 1, text);
  return { doc, unit: transcriptUnit(doc, analyseTranscript(text.replace(/\n$/, '')), tok) };
}
const hoverText = (unit: Unit, offset: number): string => {
  const h = hoverAt(unit, offset);
  assert.ok(h, `a hover at ${offset}`);
  return (h.contents as { value: string }).value;
};

describe('language server: JSONL rows', () => {
  it('maps every decoded character of `text` to its exact source columns, through every escape', () => {
    const text = 'line one\nsays "hi" \\ back\tslash é ü € 😀 \u0001 end<|end|>';
    const rows = [
      JSON.stringify({ task: 't', text, kind: 'k' }),
      `{"task": "t", "text": ${encodeAsciiString(text)}, "kind": "k"}`, // Python's ensure_ascii
      `{"text":"${[...text].map((c) => '\\u' + c.codePointAt(0)!.toString(16).padStart(4, '0')).join('')}"}`.replace(
        /\\u1f600/,
        '\\ud83d\\ude00',
      ),
    ];
    for (const row of rows) {
      const scan = scanRow(row);
      assert.equal(scan.error, null, row);
      const s = scan.text!;
      assert.equal(s.value, text);
      assert.equal(s.approximate, false);
      for (let i = 0; i < text.length; i++) {
        const src = row.slice(s.map[i]!, s.map[i + 1]!);
        const decoded = JSON.parse(`"${src}"`) as string;
        // A surrogate pair written raw occupies two units, each its own column.
        assert.equal(decoded, text[i], `unit ${i} of ${row.slice(0, 30)}: ${JSON.stringify(src)}`);
      }
      assert.equal(row[s.map[text.length]!], '"');
    }
  });

  it('lands a grammar rejection on the escape that spells the rejected character', () => {
    const transcript = `<|system|>S<|end|><|user|>Q<|end|><|assistant|>T\n<|tool_call|>{"tool": "search", "args": {"query": "q", "k": 0}}<|end|>`;
    // The 0 written as \u0030, the quotes as \".
    const row = JSON.stringify({ task: 'q', text: transcript }).replace('\\"k\\": 0', '\\"k\\": \\u0030');
    const r = analyseRow(row, tok);
    const d = r.diagnostics.find((x) => x.d.code === 'grammar-rejected');
    assert.ok(d);
    assert.equal(row.slice(d.startCol, d.endCol), '\\u0030');
    assert.match(d.d.message, /expected a digit 1-9 for k, got '0'/);
    // The newline after T is two columns: the unterminated..., and positions after it stay exact.
    const unit = rowUnit(7, r, tok)!;
    const callAt = unit.analysis.text.indexOf('<|tool_call|>');
    assert.deepEqual(unit.toPosition(callAt), { line: 7, character: row.indexOf('<|tool_call|>') });
    assert.equal(unit.toOffset({ line: 7, character: row.indexOf('<|tool_call|>') }), callAt);
    assert.equal(unit.toOffset({ line: 7, character: 2 }), null, 'outside the text literal');
    assert.equal(unit.toOffset({ line: 8, character: row.indexOf('<|tool_call|>') }), null, 'another line');
  });

  it('reports rows that are not JSON, not objects, or have no string text', () => {
    const cases: [string, string, RegExp][] = [
      ['{"text": "abc"', 'row-not-json', /not valid JSON/],
      ['[1, 2]', 'row-not-json', /not an object/],
      ['{"task": "x"}', 'row-no-text', /no "text" field/],
      ['{"text": 5}', 'row-no-text', /not a string/],
      ['{"text": {"a": 1}}', 'row-no-text', /not a string/],
      ['{"text": "a\\qb"}', 'row-not-json', /invalid escape/],
    ];
    for (const [row, code, msg] of cases) {
      const r = analyseRow(row, tok);
      const d = r.diagnostics.find((x) => x.d.code === code);
      assert.ok(d, `${row}: ${code}; got ${JSON.stringify(r.diagnostics.map((x) => x.d.code))}`);
      assert.match(d.d.message, msg, row);
      assert.ok(d.startCol >= 0 && d.endCol <= Math.max(row.length, 1) && d.startCol < d.endCol, row);
    }
  });

  it('escapes quick-fix text for the JSON string it lands in', () => {
    const transcript = `<|system|>S<|end|><|user|>Q<|end|><|assistant|>T\n<|tool_call|>{"tool":"calc","args":{"expr":"1+2"}}<|end|><|tool_result|>3<|end|><|assistant|>Answer: 3<|end|>`;
    const row = JSON.stringify({ text: transcript });
    const r = analyseRow(row, tok);
    const d = r.diagnostics.find((x) => x.d.code === 'call-noncanonical')!;
    assert.ok(d.fixCols);
    const [e] = d.fixCols;
    const fixed = row.slice(0, e!.startCol) + e!.newText + row.slice(e!.endCol);
    assert.equal(JSON.parse(fixed).text, transcript.replace('{"tool":"calc","args":{"expr":"1+2"}}', '{"tool": "calc", "args": {"expr": "1+2"}}'));
    assert.deepEqual(analyseRow(fixed, tok).diagnostics, []);
  });

  it('finds no problem in the sample dataset', () => {
    const lines = sample('train.traces.jsonl').trimEnd().split('\n');
    assert.equal(lines.length, 24);
    for (const l of lines) assert.deepEqual(analyseRow(l, tok).diagnostics, []);
  });
});

describe('language server: recognising documents', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const settings: Settings = { datasetGlobs: ['**/*.traces.jsonl'], tokenizerPath: null, workspaceRoots: [] };
  const row = JSON.stringify({ task: 'q', text: '<|system|>S<|end|><|user|>Q<|end|><|assistant|>Answer: 1<|end|>' });
  const kind = (file: string, first: string, languageId = 'jsonl', s = settings): string =>
    detectKind(pathToFileURL(file).toString(), languageId, () => first, s, (p) => existsSync(p)).reason;

  it('by extension, language, glob, run folder and content; other JSONL files are left alone', () => {
    assert.equal(kind(path.join(tmp, 'a.transcript'), ''), 'extension');
    assert.equal(kind(path.join(tmp, 'x.jsonl'), '', 'agent-dataset'), 'language');
    assert.equal(kind(path.join(tmp, 'deep', 'a.traces.jsonl'), '{"a": 1}'), 'glob');
    mkdirSync(path.join(tmp, 'run', 'data'), { recursive: true });
    mkdirSync(path.join(tmp, 'run', 'eval'), { recursive: true });
    writeFileSync(path.join(tmp, 'run', 'config.json'), '{}');
    assert.equal(kind(path.join(tmp, 'run', 'data', 'train.jsonl'), ''), 'run-folder');
    assert.equal(kind(path.join(tmp, 'run', 'eval', 'heldout.jsonl'), ''), 'run-folder');
    assert.equal(kind(path.join(tmp, 'other', 'data', 'train.jsonl'), '{"a": 1}'), 'none');
    assert.equal(kind(path.join(tmp, 'rows.jsonl'), row), 'content');
    assert.equal(kind(path.join(tmp, 'rows.jsonl'), '{"text": "just prose"}'), 'none');
    assert.equal(kind(path.join(tmp, 'metrics.jsonl'), '{"phase": "sft", "step": 1}'), 'none');
    assert.equal(kind(path.join(tmp, 'notes.json'), row, 'json'), 'none', 'not JSONL');
    assert.equal(kind(path.join(tmp, 'a.rows'), '', 'plaintext', { ...settings, datasetGlobs: ['*.rows'] }), 'glob');
  });

  it('handles documents that are not files (untitled, odd URIs) without throwing', () => {
    const ex = (): boolean => false;
    assert.equal(detectKind('untitled:Untitled-1', 'agent-transcript', () => '', settings, ex).kind, 'transcript');
    assert.equal(detectKind('untitled:Untitled-2', 'plaintext', () => row, settings, ex).kind, 'ignored');
    assert.equal(detectKind('vscode-vfs://x/%E0%A4%A.jsonl', 'jsonl', () => row, settings, ex).kind, 'dataset');
  });

  it('globs: ** crosses folders, * does not, {a,b} picks', () => {
    assert.ok(globToRegExp('**/*.traces.jsonl').test('a/b/x.traces.jsonl'));
    assert.ok(globToRegExp('**/*.traces.jsonl').test('x.traces.jsonl'));
    assert.ok(!globToRegExp('*.jsonl').test('a/x.jsonl'));
    assert.ok(globToRegExp('{data,eval}/*.jsonl').test('eval/x.jsonl'));
    assert.ok(matchesAnyGlob('/w/runs/r1/data/t.jsonl', ['runs/*/data/*.jsonl'], ['/w']));
    assert.ok(!matchesAnyGlob('/w/runs/r1/t.jsonl', ['runs/*/data/*.jsonl'], ['/w']));
  });

  it("uses the run's tokenizer.json inside a run folder, the default elsewhere, the setting over both", () => {
    const small = trainBpe(['hello world hello there'], { vocabSize: 280 });
    writeFileSync(path.join(tmp, 'run', 'tokenizer.json'), canonicalTokenizerJson(small));
    writeFileSync(path.join(tmp, 'run', 'config.json'), JSON.stringify({ sftMaxLen: 300 }));
    const s = new TokenizerStore();
    const inRun = s.resolve(path.join(tmp, 'run', 'data', 'train.jsonl'), null);
    assert.equal(inRun.info.source, 'run');
    assert.equal(inRun.info.vocabSize, small.vocabSize);
    assert.equal(inRun.maxLen, 300);
    const outside = s.resolve(path.join(tmp, 'elsewhere.transcript'), null);
    assert.equal(outside.info.source, 'default');
    assert.equal(outside.info.vocabSize, trainDefaultTokenizer().vocabSize);
    const set = s.resolve(path.join(tmp, 'elsewhere.transcript'), path.join(tmp, 'run', 'tokenizer.json'));
    assert.equal(set.info.source, 'setting');
    const broken = path.join(tmp, 'broken.json');
    writeFileSync(broken, '{"nope": 1}');
    const bad = s.resolve(null, broken);
    assert.equal(bad.info.source, 'default');
    assert.match(bad.problem ?? '', /broken\.json/);
  });
});

describe('language server: features on a unit', () => {
  const text = sample('broken-call.transcript');
  const { unit } = transcriptDoc(text);
  const at = (s: string, skip = 0): number => text.indexOf(s) + skip;

  it('tokens: the ids SFT encodes, with offsets that partition the transcript', () => {
    const t = tokenTable(unit.analysis, tok.tok);
    const ref = encodeWithMask(unit.analysis.text, tok.tok);
    assert.deepEqual(Array.from(t.ids), ref.ids);
    assert.deepEqual(Array.from(t.supervised, (x) => x === 1), ref.supervised);
    let end = 0;
    for (let i = 0; i < t.ids.length; i++) {
      assert.equal(t.starts[i], end, `token ${i} starts where the last ended`);
      end = t.ends[i]!;
    }
    assert.equal(end, unit.analysis.text.length);
    // Multi-byte characters: a token cutting a character covers all of it.
    const u = transcriptDoc('<|system|>é😀 ü<|end|><|user|>€<|end|>').unit;
    const tt = tokenTable(u.analysis, tok.tok);
    for (let i = 0; i < tt.ids.length; i++) assert.ok(tt.ends[i]! >= tt.starts[i]! && tt.ends[i]! <= u.analysis.text.length);
  });

  it('hovers say supervised on thoughts, calls and answers, masked on system, user and tool results', () => {
    assert.match(hoverText(unit, at('Thought: I need')), /\*\*supervised\*\*/);
    assert.match(hoverText(unit, at('"calc"')), /\*\*supervised\*\*/);
    assert.match(hoverText(unit, at('Answer: 4096', 9)), /\*\*supervised\*\*/);
    assert.match(hoverText(unit, at('narrow research')), /\*\*masked\*\*/);
    assert.match(hoverText(unit, at('multiplied by 2')), /\*\*masked\*\*/);
    assert.match(hoverText(unit, at('Configuration record 7')), /\*\*masked\*\*/);
    assert.match(hoverText(unit, at('<|assistant|>') + 2), /\*\*masked\*\*.*\n\nthe <\|assistant\|> marker is masked/);
  });

  it('hovers give the span token count and ids, the token under the cursor, and per-role details', () => {
    const h = hoverText(unit, at('"k": 0'));
    assert.match(h, /span: \d+ tokens · ids `\[\d+(, \d+)*/);
    assert.match(h, /token #\d+: `.*` id \d+ \(supervised\)/);
    assert.match(h, /\*\*tool call\*\* `search`/);
    assert.match(h, /grammar: rejected at character 85: expected a digit 1-9 for k, got '0'/);
    assert.match(h, /"query": "Stack-100M pretraining sequence length"/);
    const result = hoverText(unit, at('4096<|end|><|assistant|>'));
    assert.match(result, /\*\*produced by\*\* `<\|tool_call\|>\{"tool": "calc", "args": \{"expr": "2048\*2"\}\}<\|end\|>`/);
    assert.match(result, /calc returns `4096`: matches this observation/);
    assert.match(hoverText(unit, at('Answer: 4096', 9)), /\*\*final answer\*\* `4096` · normalised `4096`/);
  });

  it("shows the harness's forcing text of an out-of-steps eval row as harness text, not supervised", () => {
    const text = '<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: I must answer now.\nAnswer: 12<|end|>';
    const row = JSON.stringify({ question: 'Q', gold: '12', answer: '12', solved: true, kind: 'lookup', failure: 'out_of_steps', steps: 6, reward: 0.95, text });
    const u = rowUnit(0, analyseRow(row, tok), tok)!;
    const forced = hoverText(u, text.indexOf('must answer'));
    assert.match(forced, /\*\*harness text\*\*/);
    assert.doesNotMatch(forced, /\*\*supervised\*\*/);
    assert.match(hoverText(u, text.indexOf('12<|end|>')), /\*\*supervised\*\*/);
    // The same text in a training row (no failure field) is the policy's own: supervised.
    const train = rowUnit(0, analyseRow(JSON.stringify({ task: 'Q', text }), tok), tok)!;
    assert.match(hoverText(train, text.indexOf('must answer')), /\*\*supervised\*\*/);
  });

  it('completes special tokens over a typed prefix, and canonical tool-call skeletons', () => {
    const { unit: u } = transcriptDoc('<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: x\n<|tool');
    const items = completionsAt(u, u.analysis.text.length);
    const call = items.find((i) => i.label === '<|tool_call|>')!;
    assert.deepEqual((call.textEdit as { range: unknown }).range, {
      start: { line: 1, character: 0 },
      end: { line: 1, character: 6 },
    });
    const search = items.find((i) => i.label === 'search call')!;
    assert.equal(
      (search.textEdit as { newText: string }).newText,
      '<|tool_call|>{"tool": "search", "args": {"query": "${1:query}", "k": ${2:2}\\}\\}<|end|>$0',
    );
    // In a dataset row the skeleton is JSON-escaped.
    const row = JSON.stringify({ text: '<|system|>S<|end|><|user|>Q<|end|><|assistant|>T ' });
    const ru = rowUnit(0, analyseRow(row, tok), tok)!;
    const rowItems = completionsAt(ru, ru.analysis.text.length);
    const calc = rowItems.find((i) => i.label === 'calc call')!;
    assert.equal((calc.textEdit as { newText: string }).newText, '<|tool_call|>{\\\\"tool\\\\": \\\\"calc\\\\", \\\\"args\\\\": {\\\\"expr\\\\": \\\\"${1:expr}\\\\"\\}\\}<|end|>$0');
  });

  it('semantic tokens mark supervised, masked and special text per line', () => {
    const b = new SemanticTokensBuilder();
    pushUnitTokens(b, unit);
    const data = b.build().data;
    const decoded: { line: number; char: number; len: number; type: string; mods: number }[] = [];
    let line = 0;
    let char = 0;
    for (let i = 0; i < data.length; i += 5) {
      line += data[i]!;
      char = data[i]! === 0 ? char + data[i + 1]! : data[i + 1]!;
      decoded.push({ line, char, len: data[i + 2]!, type: LEGEND.tokenTypes[data[i + 3]!]!, mods: data[i + 4]! });
    }
    const lines = text.split('\n');
    const textOf = (d: (typeof decoded)[number]): string => lines[d.line]!.slice(d.char, d.char + d.len);
    const find = (s: string): (typeof decoded)[number] => decoded.find((d) => textOf(d).includes(s))!;
    assert.equal(find('You are a narrow').type, 'masked');
    assert.equal(find('Thought: I need').type, 'supervised');
    assert.equal(decoded.filter((d) => textOf(d) === '<|tool_call|>').every((d) => d.type === 'specialToken' && d.mods === 1), true);
    assert.equal(decoded.filter((d) => textOf(d) === '<|assistant|>').every((d) => d.type === 'specialToken' && d.mods === 0), true);
    assert.ok(decoded.every((d) => d.len > 0 && !textOf(d).includes('\n')));
  });

  it('symbols: the prompt turns and one per step; folding per multi-line step', () => {
    const syms = unitSymbols(unit);
    assert.deepEqual(
      syms.map((s) => s.name.replace(/:.*/, '')),
      ['System prompt', 'User', 'Step 1', 'Step 2', 'Step 3'],
    );
    assert.match(syms[2]!.name, /search query="Stack-100M pretraining sequence length" k=0/);
    assert.match(syms[4]!.name, /Answer: 4096/);
    assert.deepEqual(syms[2]!.children?.map((c) => c.name), ['call', 'result']);
    const folds = unitFolds(unit);
    assert.ok(folds.length >= 3);
    assert.ok(folds.every((f) => f.endLine > f.startLine));
  });

  it('the loss-mask request result is valid and equals the SFT encoding', () => {
    const r = lossMaskOf('file:///t.transcript', unit);
    assert.ok(isLossMaskResult(r));
    assert.deepEqual(r.ids, encodeWithMask(unit.analysis.text, tok.tok).ids);
    assert.equal(r.offsets.map(([s, e]) => r.text.slice(s, e)).join(''), r.text);
    assert.equal(r.row, null);
    assert.equal(r.tokenizer.source, 'default');
    assert.deepEqual([...new Set(r.spans.map((s) => s.role))].sort(), ['assistant', 'system', 'tool_result', 'user']);
    assert.ok(!isLossMaskResult({ ...r, ids: r.ids.slice(1) }), 'parallel arrays must agree');
    assert.ok(!isLossMaskResult({ ...r, offsets: [[0, r.text.length + 5], ...r.offsets.slice(1)] }));
    assert.ok(isLossMaskParams({ textDocument: { uri: 'x' }, row: 3 }));
    assert.ok(!isLossMaskParams({ textDocument: { uri: 'x' }, row: -1 }));
    assert.ok(!isLossMaskParams({ textDocument: {} }));
    assert.ok(isDatasetRecognizedParams({ uri: 'x', reason: 'content' }));
    assert.ok(!isDatasetRecognizedParams({ uri: 'x', reason: 'guess' }));
  });

  it('over-length: a transcript past max_len is flagged from its first token past the limit', () => {
    const long = `<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: ${'counting 1 2 3 4 5 6 7 8 9 '.repeat(80)}\nAnswer: 1<|end|>`;
    const { unit: u } = transcriptDoc(long);
    const n = u.tokenCount();
    assert.ok(n > 1024, `${n} tokens`);
    const d = unitDiagnostics(u).find((x) => x.code === 'over-length')!;
    assert.ok(d);
    assert.match(d.message, new RegExp(`${n} tokens.*would be dropped from SFT`));
    const t = u.tokens();
    assert.equal(d.start, t.starts[1024]);
    assert.equal(d.end, long.length);
  });
});
