// The Grammar Debugger's data logic: the acceptor traced character by character (its
// verdict is core/grammar.ts's checkCall, on every case), the live states in words, the
// allowed characters as a reader scans them, and the call under a cursor.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { checkCall, startStates } from '../../core/grammar';
import { callAt, charGroups, codePointIndex, describeState, findCalls, grammarTrace, offsetOfCodePoint } from '../../core/transcript/grammarTrace';
import { transcriptText } from '../../core/transcript/trajectories';

describe('grammar trace (core/transcript/grammarTrace.ts)', () => {
  it('a call with k = 0: rejected at the 0, in the value of k, which allows 1-9', () => {
    const body = '{"tool": "search", "args": {"query": "q", "k": 0}}';
    const t = grammarTrace(body);
    assert.equal(t.rejectedAt, body.indexOf('0'));
    assert.equal(t.steps.length, t.rejectedAt! + 1);
    assert.deepEqual(t.expected, [...'123456789']);
    assert.deepEqual(t.steps[t.rejectedAt!]!.allowedGroups, ['1-9']);
    assert.deepEqual(t.steps[t.rejectedAt!]!.states, ['search: k, 0 chars (exactly 1)']);
    assert.equal(t.reason, `'0' (character ${body.indexOf('0') + 1}) is not allowed: the call is in search: k, 0 chars (exactly 1), which allows 1-9`);
  });

  it('a complete call: every step accepted, <|end|> legal only at the end', () => {
    const body = '{"tool": "calc", "args": {"expr": "2022-2048"}}';
    const t = grammarTrace(body);
    assert.ok(t.accepted && t.complete);
    assert.equal(t.reason, null);
    assert.equal(t.steps.length, body.length + 1);
    assert.deepEqual(t.steps.map((s) => s.accepts), [...Array(body.length).fill(false), true]);
    // Both templates are alive until "s" or "c" decides.
    assert.equal(t.steps[0]!.states.length, 2);
    assert.equal(t.steps[body.indexOf('c') + 1]!.states.length, 1);
  });

  it('incomplete and empty calls say what comes next', () => {
    assert.match(grammarTrace('{"tool": "calc", "args": {"expr": "1+2').reason!, /^incomplete: .*calc: expr, 3 chars \(1-40\).*next comes .*"/);
    assert.match(grammarTrace('').reason!, /^empty: a call starts with \{/);
  });

  it('agrees with checkCall on the samples and on mutated calls', () => {
    const bodies = ['', '{', '{"tool": "search", "args": {"query": "Stack-100M hidden size", "k": 2}}', '{"tool": "search", "args": {"query": "", "k": 2}}', `{"tool": "calc", "args": {"expr": "${'1'.repeat(41)}"}}`, '{"tool":"calc"}', '{"tool": "calc", "args": {"expr": "2*3"}}}', '{"tool": "search", "args": {"query": "é", "k": 2}}'];
    for (const file of ['compare', 'lookup', 'sum', 'broken-call']) {
      const text = transcriptText(readFileSync(`samples/${file}.transcript`, 'utf8'));
      for (const c of findCalls(text)) bodies.push(text.slice(c.bodyStart, c.bodyEnd));
    }
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (const b of bodies.slice(2, 6)) {
      for (let i = 0; i < 40; i++) {
        const at = Math.floor(rnd() * (b.length + 1));
        bodies.push(b.slice(0, at) + '{"}: ,0a9-'[Math.floor(rnd() * 10)] + b.slice(at + (rnd() < 0.5 ? 1 : 0)));
      }
    }
    for (const b of bodies) {
      const t = grammarTrace(b);
      const v = checkCall(b);
      assert.deepEqual({ accepted: t.accepted, complete: t.complete, rejectedAt: t.rejectedAt, expected: t.expected }, v, b);
    }
  });

  it('says the live states in words and groups the allowed characters', () => {
    assert.deepEqual(startStates().map(describeState), ['search: literal ‹{"tool": "search", "args": {"query": "› (0 of 38 typed)', 'calc: literal ‹{"tool": "calc", "args": {"expr": "› (0 of 35 typed)']);
    assert.deepEqual(charGroups('0123456789+-*/.() '), ['space', '(', ')', '*', '+', '-', '.', '/', '0-9']);
    assert.deepEqual(charGroups('abcXYZ_'), ['X-Z', '_', 'a-c']);
    assert.deepEqual(charGroups('ab'), ['a', 'b']);
  });

  it('finds the call under a cursor, and maps cursor offsets to character indices and back', () => {
    const text = transcriptText(readFileSync('samples/broken-call.transcript', 'utf8'));
    const calls = findCalls(text);
    assert.equal(calls.length, 2);
    const c = calls[0]!;
    assert.ok(text.startsWith('<|tool_call|>', c.start) && text.startsWith('<|end|>', c.bodyEnd));
    assert.equal(callAt(text, c.start)?.start, c.start);
    assert.equal(callAt(text, c.end)?.start, c.start, 'just after <|end|> still counts');
    assert.equal(callAt(text, 0), null);
    const zero = text.indexOf('0}}', c.bodyStart);
    const i = codePointIndex(text, c, zero);
    assert.equal(grammarTrace(text.slice(c.bodyStart, c.bodyEnd)).rejectedAt, i);
    assert.equal(offsetOfCodePoint(text, c, i), zero);
    assert.equal(codePointIndex(text, c, 0), 0, 'clamped to the body');
    assert.equal(findCalls('<|tool_call|>{"tool"').length, 1, 'an unterminated call');
  });
});
