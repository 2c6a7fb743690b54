// The Trajectory Inspector's data logic without a browser: transcripts, datasets and eval
// rows parsed into summaries and step cards; the filters; the virtual list's arithmetic;
// the offsets of a row's transcript inside its JSON line.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { EMPTY_FILTER, InspectorFilter, TrajectorySummary } from '../../core/protocol/panels';
import { scanRow } from '../../core/transcript/jsonRow';
import { decodedOffsetAt, rawColumnOf, stringValueRange } from '../../core/transcript/jsonText';
import { compactCall, detailOf, guardOf, parseSource, parseSteps, splitTurns, summarizeText, transcriptText } from '../../core/transcript/trajectories';
import { FORCED_ANSWER_TEXT, FORMAT_ERROR, REPEATED_CALL } from '../../trainer/agent/agentRuntime';
import { syntheticEvalRows } from '../ui/fixtures';
import { facetsOf, filterRows, formatReward, outcomeLabel, searchTerms, searchTextOf } from '../../webview-ui/inspector/filter';
import { keyTarget, scrollToShow, visibleWindow } from '../../webview-ui/shared/virtualList';

const f = (over: Partial<InspectorFilter>): InspectorFilter => ({ ...EMPTY_FILTER, ...over });

describe('inspector data: parsing', () => {
  it('a .transcript: its question, one card per assistant step, calls, observations, the answer', () => {
    const text = readFileSync('samples/compare.transcript', 'utf8');
    const src = parseSource(text, true);
    assert.equal(src.kind, 'transcript');
    assert.equal(src.rows.length, 1);
    const row = src.rows[0]!;
    assert.match(row.summary.question, /^Which is larger, the publication year of STaR/);
    assert.deepEqual(row.summary.calls, ['search("STaR publication year", 2)', 'search("Stack-100M pretraining sequence length", 2)', 'calc("2022-2048")']);
    assert.equal(row.summary.answer, 'Stack-100M');
    assert.equal(row.summary.solved, null, 'a transcript carries no verdict');
    const d = detailOf(row);
    assert.equal(d.steps.length, 4);
    assert.deepEqual(d.steps[0]!.call, { tool: 'search', args: '{"query": "STaR publication year", "k": 2}' });
    assert.equal(d.steps[2]!.observation, '-26');
    assert.equal(d.steps[3]!.answer, 'Stack-100M');
    // Offsets: each card spans from its <|assistant|> to the end of its tool result; they tile the turns.
    const t = transcriptText(text);
    for (const s of d.steps) assert.ok(t.startsWith('<|assistant|>', s.start), `step ${s.n} starts at its marker`);
    assert.ok(t.slice(d.steps[0]!.start, d.steps[0]!.end).endsWith('<|end|>'));
    assert.equal(d.steps[1]!.start, d.steps[0]!.end);
  });

  it('a malformed call is a FormatError card; a k of 0 parses as a call (the grammar, not the parser, rejects it)', () => {
    const broken = parseSteps(transcriptText(readFileSync('samples/broken-call.transcript', 'utf8')));
    assert.equal(broken.steps[0]!.call?.args, '{"query": "Stack-100M pretraining sequence length", "k": 0}');
    const t = `<|system|>s<|end|><|user|>q?<|end|><|assistant|>Thought: x\n<|tool_call|>{"tool": "search"<|end|><|tool_result|>${FORMAT_ERROR}<|end|><|assistant|>Thought: y\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+"}}<|end|><|tool_result|>CalcError: bad<|end|><|assistant|>${FORCED_ANSWER_TEXT} 3<|end|>`;
    const p = parseSteps(t);
    assert.equal(p.question, 'q?');
    assert.deepEqual(p.steps.map((s) => s.guard), ['FormatError', 'CalcError', 'ForcedAnswer']);
    assert.equal(p.steps[0]!.malformed, '{"tool": "search"');
    assert.equal(p.steps[2]!.harness, true);
    assert.equal(p.steps[2]!.answer, '3');
    assert.deepEqual(p.problems, []);
  });

  it('names the guard of each harness observation of the agent runtime', () => {
    assert.equal(guardOf(FORMAT_ERROR), 'FormatError');
    assert.equal(guardOf(REPEATED_CALL), 'RepeatedCall');
    assert.equal(guardOf('NoResults'), 'NoResults');
    assert.equal(guardOf("ToolError: unknown or malformed tool 'x'"), 'ToolError');
    assert.equal(guardOf('[1] a passage'), null);
  });

  it('turns: an unterminated turn ends where the next opens; a result without a call is a problem', () => {
    const turns = splitTurns('<|user|>q<|assistant|>Thought: a<|end|>');
    assert.deepEqual(turns.map((t) => [t.role, t.closed]), [['user', false], ['assistant', true]]);
    assert.deepEqual(parseSteps('<|user|>q<|end|><|tool_result|>x<|end|>').problems.length, 1);
  });

  it('a dataset: one summary per row, its line, its shape; bad lines said, not fatal', () => {
    const text = readFileSync('samples/train.traces.jsonl', 'utf8');
    const src = parseSource(`${text}not json\n{"text": 3}\n`, false);
    assert.equal(src.kind, 'dataset');
    assert.equal(src.rows.length, 24);
    assert.deepEqual(src.rows.map((r) => r.summary.line), [...Array(24).keys()]);
    assert.ok(src.rows.every((r) => r.summary.kind !== '' && r.summary.solved === null && r.summary.steps >= 2));
    assert.deepEqual(src.problems, ['line 25: not JSON', 'line 26: no "text" with a transcript']);
  });

  it('eval rows: the row’s verdict (solved, failure, reward, steps) wins over the transcript', () => {
    const rows = syntheticEvalRows(18);
    const src = parseSource(rows.map((r) => JSON.stringify(r)).join('\n'), false);
    assert.equal(src.kind, 'eval');
    for (let i = 0; i < rows.length; i++) {
      const s = src.rows[i]!.summary;
      assert.equal(s.solved, rows[i]!.solved);
      assert.equal(s.failure, rows[i]!.failure);
      assert.equal(s.reward, rows[i]!.reward);
      assert.equal(s.steps, rows[i]!.steps);
      assert.equal(s.gold, rows[i]!.gold);
    }
    const repeat = src.rows.find((_, i) => rows[i]!.variant === 'repeat')!;
    assert.ok(repeat.summary.guards.includes('RepeatedCall'));
    const forced = src.rows.find((_, i) => rows[i]!.variant === 'out-of-steps')!;
    assert.ok(forced.summary.guards.includes('ForcedAnswer'));
    assert.equal(forced.summary.failure, 'out_of_steps');
  });

  it('the list’s cheap summary agrees with the step cards (calls, guards, steps, last answer)', () => {
    for (const r of syntheticEvalRows(90)) {
      const fast = summarizeText(r.text);
      const full = parseSteps(r.text);
      assert.deepEqual(fast.calls, full.calls, r.text);
      assert.deepEqual(fast.guards, [...new Set(full.steps.map((s) => s.guard).filter((g) => g !== null))]);
      assert.equal(fast.steps, full.steps.length);
      assert.equal(fast.answer, full.steps[full.steps.length - 1]!.answer);
      assert.equal(fast.question, full.question);
    }
  });

  it('compact calls', () => {
    assert.equal(compactCall('calc', { expr: '2*3' }), 'calc("2*3")');
    assert.equal(compactCall('search', { query: 'a "b"', k: 2 }), 'search("a \\"b\\"", 2)');
  });
});

describe('inspector data: filters', () => {
  const rows: TrajectorySummary[] = parseSource(
    syntheticEvalRows(45)
      .map((r) => JSON.stringify(r))
      .join('\n'),
    false,
  ).rows.map((r) => r.summary);
  const hay = rows.map(searchTextOf);

  it('facets count shapes, failures, guards and outcomes', () => {
    const fa = facetsOf(rows);
    assert.equal(fa.solved + fa.failed + fa.unknown, rows.length);
    assert.deepEqual(fa.kinds.map((k) => k.value), [...new Set(rows.map((r) => r.kind))].sort());
    assert.equal(fa.failures.reduce((n, x) => n + x.count, 0), rows.filter((r) => r.failure).length);
  });

  it('outcome, shape, failure and guard narrow the list; no filter keeps every row in order', () => {
    assert.deepEqual(filterRows(rows, hay, EMPTY_FILTER), rows.map((_, i) => i));
    const solved = filterRows(rows, hay, f({ outcome: 'solved' }));
    assert.ok(solved.length > 0 && solved.every((i) => rows[i]!.solved === true));
    const failed = filterRows(rows, hay, f({ outcome: 'failed' }));
    assert.equal(solved.length + failed.length, rows.length);
    assert.ok(filterRows(rows, hay, f({ kind: 'sum' })).every((i) => rows[i]!.kind === 'sum'));
    assert.ok(filterRows(rows, hay, f({ failure: 'none' })).every((i) => rows[i]!.failure === null));
    const fmt = filterRows(rows, hay, f({ failure: 'format' }));
    assert.ok(fmt.length > 0 && fmt.every((i) => rows[i]!.failure === 'format'));
    const rep = filterRows(rows, hay, f({ guard: 'RepeatedCall' }));
    assert.ok(rep.length > 0 && rep.every((i) => rows[i]!.guards.includes('RepeatedCall')));
  });

  it('text search: every term (case-insensitive), quotes keep a phrase; it looks at calls and answers too', () => {
    assert.deepEqual(searchTerms('  Stack-100M "publication year" '), ['stack-100m', 'publication year']);
    const hits = filterRows(rows, hay, f({ text: 'STACK-100M "publication year"' }));
    assert.ok(hits.length > 0);
    for (const i of hits) assert.ok(hay[i]!.includes('stack-100m') && hay[i]!.includes('publication year'));
    const calc = filterRows(rows, hay, f({ text: 'calc(' }));
    assert.ok(calc.every((i) => rows[i]!.calls.some((c) => c.startsWith('calc('))));
    assert.deepEqual(filterRows(rows, hay, f({ text: 'zzzz-nothing' })), []);
  });

  it('10,000 rows filter in well under a frame budget per keystroke', () => {
    const many: TrajectorySummary[] = [];
    for (let i = 0; i < 10_000; i++) many.push({ ...rows[i % rows.length]!, index: i });
    const h = many.map(searchTextOf);
    const t0 = performance.now();
    for (const text of ['s', 'st', 'sta', 'stack', 'stack-100m']) filterRows(many, h, f({ text, outcome: 'failed' }));
    const ms = (performance.now() - t0) / 5;
    assert.ok(ms < 50, `${ms.toFixed(1)} ms per filter`);
  });

  it('labels', () => {
    assert.equal(formatReward(null), '—');
    assert.equal(formatReward(0.96666), '0.97');
    assert.equal(outcomeLabel({ solved: false, failure: 'calc' }), 'failed: calc');
    assert.equal(outcomeLabel({ solved: null, failure: null }), '—');
  });
});

describe('inspector data: the virtual list', () => {
  it('renders only the rows in view (plus overscan), for any scroll position', () => {
    assert.deepEqual(visibleWindow(0, 460, 46, 10_000, 5), { first: 0, last: 15, offset: 0 });
    const w = visibleWindow(46 * 5000, 460, 46, 10_000, 5);
    assert.deepEqual([w.first, w.last, w.offset], [4995, 5015, 4995 * 46]);
    const end = visibleWindow(1e9, 460, 46, 10_000, 5);
    assert.equal(end.last, 10_000);
    assert.ok(end.last - end.first <= 10 + 10 + 1);
    assert.deepEqual(visibleWindow(0, 460, 46, 0), { first: 0, last: 0, offset: 0 });
  });

  it('scrolls just enough to show a row; keys move within bounds', () => {
    assert.equal(scrollToShow(0, 100, 460, 46), 0);
    assert.equal(scrollToShow(20, 0, 460, 46), 21 * 46 - 460);
    assert.equal(scrollToShow(3, 0, 460, 46), 0);
    assert.equal(keyTarget('ArrowDown', -1, 10, 5), 0);
    assert.equal(keyTarget('ArrowDown', 9, 10, 5), 9);
    assert.equal(keyTarget('PageDown', 2, 10, 5), 7);
    assert.equal(keyTarget('PageUp', 2, 10, 5), 0);
    assert.equal(keyTarget('End', 0, 10, 5), 9);
    assert.equal(keyTarget('x', 0, 10, 5), null);
    assert.equal(keyTarget('Home', 0, 0, 5), null);
  });
});

describe('inspector data: a row’s transcript inside its JSON line', () => {
  it('maps decoded offsets to raw columns and back, escape-exact', () => {
    const row = { task: 'q', text: 'a"b\nc\u00e9\u{1F600}<|end|>', kind: 'lookup' };
    const line = JSON.stringify(row).replace('é', '\\u00e9');
    const r = stringValueRange(line)!;
    assert.equal(JSON.parse(`"${line.slice(r.start, r.end)}"`), row.text);
    // Every decoded offset maps to the raw column of its escape, and back.
    for (let o = 0; o <= row.text.length; o++) {
      const col = rawColumnOf(line, r, o);
      assert.equal(decodedOffsetAt(line, r, col), o, `offset ${o}`);
    }
    assert.equal(rawColumnOf(line, r, 2), r.start + 3, 'after a"');
    assert.equal(decodedOffsetAt(line, r, r.start + 2), 1, 'inside \\" is the quote');
    assert.equal(stringValueRange('{"text": 3}'), null);
    assert.equal(stringValueRange('{"meta": {"text": "x"}, "text": "y"}')!.start, '{"meta": {"text": "x"}, "text": "'.length);
  });

  it("the panels' offset map and the language server's row scan agree column for column (one escape rule)", () => {
    const row = { task: 'q', text: 'Thought: "x"\\ \t\u0001\n\u00e9\u{1F600}<|tool_call|>["calc", {"expr": "1+2"}]<|end|>', kind: 'calc' };
    const line = JSON.stringify(row).replace('é', '\\u00e9');
    const r = stringValueRange(line)!;
    const scanned = scanRow(line).text!;
    assert.equal(scanned.value, row.text);
    assert.equal(scanned.approximate, false);
    for (let o = 0; o <= row.text.length; o++) assert.equal(rawColumnOf(line, r, o), scanned.map[o], `offset ${o}`);
  });
});
