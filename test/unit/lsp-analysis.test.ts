// The language server's transcript analysis: every diagnostic it reports, at its exact
// range, with its code and a message naming what was expected; the grammar in words; the
// loss-mask spans; the final answer.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { checkCall } from '../../core/grammar';
import { segment } from '../../core/lossMask';
import { renderCallBody } from '../../core/wire';
import { describeExpected, runGrammar, shortestCompletion } from '../../core/transcript/grammarText';
import { scanSpecials, suggestSpecial } from '../../language-server/analysis/specials';
import { TDiagnostic, TranscriptAnalysis, analyseTranscript, spanAt } from '../../language-server/analysis/transcript';
import { AGENT_TOOLS, skeleton, toolsLine } from '../../language-server/analysis/toolSchemas';
import { repoRoot } from '../support/reference';

const P = '<|system|>S<|end|><|user|>Q?<|end|>';
const CALC = (expr: string): string => `<|tool_call|>{"tool": "calc", "args": {"expr": "${expr}"}}<|end|>`;
const GOOD = `${P}<|assistant|>Thought: add.\n${CALC('1+2')}<|tool_result|>3<|end|><|assistant|>Thought: done.\nAnswer: 3<|end|>`;

function only(a: TranscriptAnalysis, code: string): TDiagnostic {
  const ds = a.diagnostics.filter((d) => d.code === code);
  assert.equal(ds.length, 1, `one ${code}; got ${JSON.stringify(a.diagnostics.map((d) => d.code))}`);
  return ds[0]!;
}
const covered = (a: TranscriptAnalysis, d: TDiagnostic): string => a.text.slice(d.start, d.end);
function applyFix(text: string, d: TDiagnostic): string {
  assert.ok(d.fix, `${d.code} has a fix`);
  let out = text;
  for (const e of [...d.fix.edits].sort((x, y) => y.start - x.start)) out = out.slice(0, e.start) + e.newText + out.slice(e.end);
  return out;
}

describe('language server: transcript analysis', () => {
  it('finds nothing wrong in the distilled samples', () => {
    for (const f of ['lookup', 'sum', 'compare']) {
      const text = readFileSync(path.join(repoRoot, 'samples', `${f}.transcript`), 'utf8').replace(/\n$/, '');
      assert.deepEqual(analyseTranscript(text).diagnostics, [], f);
    }
    assert.deepEqual(analyseTranscript(GOOD).diagnostics, []);
  });

  it('puts a grammar rejection on the first rejected character and names what was legal there', () => {
    const text = readFileSync(path.join(repoRoot, 'samples', 'broken-call.transcript'), 'utf8').replace(/\n$/, '');
    const a = analyseTranscript(text);
    const d = only(a, 'grammar-rejected');
    assert.equal(d.severity, 'error');
    assert.equal(covered(a, d), '0');
    assert.equal(text.slice(d.start - 5, d.start), '"k": ', 'right after "k": ');
    assert.match(d.message, /expected a digit 1-9 for k, got '0'/);
    assert.equal(a.diagnostics.length, 1);
  });

  it('agrees with checkCall on where every call breaks (random bodies)', () => {
    let seed = 12345;
    const rand = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    const alphabet = '{}":, abcdefghijklmnopqrstuvwxyzk0123456789+-*/.()_\\\n';
    const templates = [renderCallBody('search', { query: 'a b', k: 2 }), renderCallBody('calc', { expr: '1+2' })];
    for (let i = 0; i < 400; i++) {
      // Start from a real call and damage it at a random place.
      const base = templates[i % 2]!;
      const cut = Math.floor(rand() * base.length);
      const junk = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => alphabet[Math.floor(rand() * alphabet.length)]).join('');
      const body = base.slice(0, cut) + junk + base.slice(cut + Math.floor(rand() * 3));
      const v = runGrammar(body);
      const ref = checkCall(body);
      assert.equal(v.accepted, ref.accepted, body);
      assert.equal(v.complete, ref.complete, body);
      assert.equal(v.rejectedAt, ref.rejectedAt, body);
      const text = `${P}<|assistant|>T\n<|tool_call|>${body}<|end|>`;
      const a = analyseTranscript(text);
      const start = text.indexOf('<|tool_call|>') + '<|tool_call|>'.length;
      const rejections = a.diagnostics.filter((d) => d.code === 'grammar-rejected');
      const noncanonical = a.diagnostics.some((d) => d.code === 'call-noncanonical');
      if (!ref.accepted && !noncanonical) {
        assert.equal(rejections.length, 1, body);
        const at = [...body].slice(0, ref.rejectedAt!).join('').length;
        assert.equal(rejections[0]!.start, start + at, `rejection of ${JSON.stringify(body)} at code point ${ref.rejectedAt}`);
        const got = [...body][ref.rejectedAt!]!;
        assert.equal(rejections[0]!.end - rejections[0]!.start, got.length);
      }
      if (ref.accepted && !ref.complete) assert.equal(a.diagnostics.filter((d) => d.code === 'call-incomplete').length, 1, body);
    }
  });

  it('words the expected characters: tool names at the branch, hole limits, completions', () => {
    const v = runGrammar('{"tool": "x');
    assert.equal(describeExpected(v.states), "expected 's' (search) or 'c' (calc)");
    const q = runGrammar(`{"tool": "search", "args": {"query": "${'a'.repeat(64)}x`);
    assert.match(describeExpected(q.states), /'"' \(query is at its maximum of 64 characters\)/);
    const e = runGrammar('{"tool": "calc", "args": {"expr": "1+2');
    assert.equal(shortestCompletion(e.states), '"}}');
    assert.match(describeExpected(e.states), /an expression character .* for expr or '"' to end expr/);
  });

  it('says what an incomplete call at <|end|> still needs', () => {
    const text = `${P}<|assistant|>T\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+2<|end|>`;
    const a = analyseTranscript(text);
    const d = only(a, 'call-incomplete');
    assert.equal(covered(a, d), '<|end|>');
    assert.match(d.message, /incomplete tool call/);
    assert.match(d.message, /the call still needs '"}}'/);
  });

  it('flags unknown and misspelled special tokens, with a fix to the nearest real one', () => {
    const text = `${P}<|assistant|>Thought: x\n<|tool_cal|>{"tool": "calc", "args": {"expr": "1"}}<|end|>`;
    const a = analyseTranscript(text);
    const d = only(a, 'unknown-special-token');
    assert.equal(covered(a, d), '<|tool_cal|>');
    assert.match(d.message, /did you mean '<\|tool_call\|>'/);
    assert.ok(applyFix(text, d).includes('<|tool_call|>{"tool"'));
    assert.equal(suggestSpecial('<|end>'), '<|end|>');
    assert.equal(suggestSpecial('<|zzzzzzzzzz|>'), null);
    assert.deepEqual(
      scanSpecials('a<b <|end> <end|> <|user|> x|>').map((h) => [h.raw, h.token]),
      [
        ['<|end>', null],
        ['<end|>', null],
        ['<|user|>', '<|user|>'],
      ],
    );
  });

  it('reports role-order errors on the offending marker', () => {
    const noCall = analyseTranscript(`${P}<|tool_result|>3<|end|><|assistant|>Answer: 3<|end|>`);
    const d = only(noCall, 'result-without-call');
    assert.equal(covered(noCall, d), '<|tool_result|>');
    assert.match(d.message, /no tool call before it/);

    const twoUsers = analyseTranscript(`${P}<|user|>again<|end|><|assistant|>Answer: 3<|end|>`);
    assert.match(only(twoUsers, 'role-order').message, /expected <\|assistant\|> after the user turn, got <\|user\|>/);

    const afterAnswer = analyseTranscript(`${GOOD}<|assistant|>Answer: 4<|end|>`);
    assert.match(only(afterAnswer, 'role-order').message, /after the final answer/);
  });

  it('reports an assistant turn that never ends, with a fix adding <|end|> where it belongs', () => {
    const text = `${P}<|assistant|>Thought: x\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+2"}}<|tool_result|>3<|end|><|assistant|>Answer: 3<|end|>`;
    const a = analyseTranscript(text);
    const d = only(a, 'turn-unterminated');
    assert.equal(covered(a, d), '<|tool_result|>');
    assert.match(d.message, /the assistant turn never ends: expected <\|end\|> before <\|tool_result\|>/);
    assert.deepEqual(analyseTranscript(applyFix(text, d)).diagnostics, []);

    const atEof = analyseTranscript(`${P}<|assistant|>Answer: 3`);
    assert.match(only(atEof, 'turn-unterminated').message, /at the end of the transcript/);
  });

  it('text outside turns is an error; whitespace between turns is information with a fix', () => {
    const text = `${P}hello <|assistant|>Answer: 3<|end|>\n\n`;
    const a = analyseTranscript(text);
    const t = only(a, 'text-outside-turn');
    assert.equal(covered(a, t), 'hello');
    const w = only(a, 'whitespace-between-turns');
    assert.equal(w.severity, 'information');
    assert.equal(covered(a, w), '\n\n');
    assert.match(w.message, /not in the wire format/);
    assert.ok(!applyFix(text, w).endsWith('\n'));
  });

  it('reports a trajectory with no final Answer', () => {
    const a = analyseTranscript(`${P}<|assistant|>Thought: x\n${CALC('1+2')}<|tool_result|>3<|end|>`);
    const d = only(a, 'no-final-answer');
    assert.match(d.message, /no final 'Answer:'/);
    assert.equal(a.finalAnswer, null);
    const ok = analyseTranscript(GOOD);
    assert.deepEqual(ok.finalAnswer && [ok.finalAnswer.answer, ok.finalAnswer.normalized], ['3', '3']);
    const dotted = analyseTranscript(`${P}<|assistant|>Answer:  4042.0 <|end|>`);
    assert.equal(dotted.finalAnswer?.normalized, '4042');
    assert.equal(dotted.text.slice(dotted.finalAnswer!.start, dotted.finalAnswer!.end), '4042.0');
  });

  it('warns on non-canonical JSON with a fix, and maps a rejection in it onto the source value', () => {
    const text = `${P}<|assistant|>T\n<|tool_call|>{"args":{"query":"x y","k":0},"tool":"search"}<|end|><|tool_result|>NoResults<|end|><|assistant|>Answer: 3<|end|>`;
    const a = analyseTranscript(text);
    const w = only(a, 'call-noncanonical');
    assert.equal(w.severity, 'warning');
    assert.match(w.message, /Expected: \{"tool": "search", "args": \{"query": "x y", "k": 0\}\}/);
    const r = only(a, 'grammar-rejected');
    assert.equal(covered(a, r), '0');
    assert.equal(text.slice(r.start - 4, r.start), '"k":');
    const fixed = applyFix(text, w);
    assert.ok(fixed.includes('<|tool_call|>{"tool": "search", "args": {"query": "x y", "k": 0}}<|end|>'));
    assert.equal(analyseTranscript(fixed).diagnostics.filter((d) => d.code === 'call-noncanonical').length, 0);
  });

  it('warns when the calculator would return CalcError, on the expression', () => {
    const a = analyseTranscript(`${P}<|assistant|>T\n${CALC('1/0')}<|tool_result|>CalcError: division by zero<|end|><|assistant|>Answer: 3<|end|>`);
    const d = only(a, 'calc-error');
    assert.equal(covered(a, d), '"1/0"');
    assert.match(d.message, /CalcError: division by zero/);
  });

  it('warns when the mask supervises nothing or everything', () => {
    assert.match(only(analyseTranscript(`${P}`), 'mask-supervises-nothing').message, /supervises nothing/);
    assert.match(only(analyseTranscript('<|assistant|>Answer: 3<|end|>'), 'mask-supervises-everything').message, /supervises everything/);
  });

  it('never throws and keeps ranges inside the text on arbitrary input', () => {
    let seed = 99;
    const rand = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    const pieces = ['<|assistant|>', '<|end|>', '<|tool_call|>', '<|tool_result|>', '<|user|>', '<|system|>', '<|', '|>', '"', '{', '}', 'Answer: 1', '\n', 'é', '😀', '\\u0041', 'x'];
    for (let i = 0; i < 500; i++) {
      const text = Array.from({ length: Math.floor(rand() * 30) }, () => pieces[Math.floor(rand() * pieces.length)]).join('');
      const a = analyseTranscript(text);
      for (const d of a.diagnostics) assert.ok(d.start >= 0 && d.start <= d.end && d.end <= text.length, `${d.code} in ${JSON.stringify(text)}`);
      assert.equal(a.spans.map((s) => text.slice(s.start, s.end)).join(''), text);
      assert.deepEqual(
        a.spans.map((s) => [text.slice(s.start, s.end), s.supervised]),
        segment(text),
      );
    }
  });

  it('spanAt finds the mask span of any offset', () => {
    const a = analyseTranscript(GOOD);
    const thought = GOOD.indexOf('Thought: add');
    assert.equal(spanAt(a, thought)?.supervised, true);
    assert.equal(spanAt(a, GOOD.indexOf('Q?'))?.supervised, false);
    assert.equal(spanAt(a, GOOD.indexOf('<|tool_result|>') + 16)?.supervised, false);
  });
});

describe('language server: tool schemas', () => {
  it("renders the seed's tools line", () => {
    assert.equal(toolsLine(), 'search(query,k), calc(expr)');
  });
  it('builds skeletons in the canonical spelling that the grammar accepts once filled', () => {
    for (const tool of AGENT_TOOLS) {
      const sk = skeleton(tool);
      let filled = sk.body;
      for (const [s, e, name] of [...sk.holes].reverse()) {
        const v = name === 'k' ? '3' : name === 'expr' ? '2+2' : 'some query';
        filled = filled.slice(0, s) + v + filled.slice(e);
      }
      assert.ok(checkCall(filled).complete, filled);
      assert.deepEqual(sk.holes.map((h) => h[2]), Object.keys(tool.inputSchema.properties));
    }
    assert.equal(skeleton(AGENT_TOOLS[0]!).body, '{"tool": "search", "args": {"query": "query", "k": 2}}');
  });
});
