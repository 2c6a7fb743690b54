// The pipeline port against golden data from the seed's Python (test/golden/pipeline.json,
// made by test/golden/gen_pipeline.py — see its header), plus live differential checks
// against the reference on generated cases no golden file holds.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ToolEnv, distill, makeStubTeacher, normalize } from '../../core/distill';
import { checkCall } from '../../core/grammar';
import { segment } from '../../core/lossMask';
import type { JsonObject } from '../../core/pyjson';
import { Bm25Retriever, HashEmbedRetriever } from '../../core/tools/retrieval';
import { MALFORMED_TOOL, parseAssistantStep, renderCall } from '../../core/wire';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { referenceUnavailable, repoRoot, runReference } from '../support/reference';

interface Golden {
  traces: Record<'train' | 'heldout', { task: string; text: string; kind: string }[]>;
  segments: [string, boolean][][];
  odd_segments: [string, [string, boolean][]][];
  grammar: [string, { accepted: boolean; complete: boolean; rejectedAt: number | null; expected: string[] }][];
  bm25: [string, number, [string, number][]][];
  hashed: [string, number, [string, number][]][];
  parsed: [string, { kind: string; thought: string; tool: string | null; args: JsonObject | null; answer: string | null }][];
  rendered: [string, JsonObject, string][];
  normalized: [string, string][];
}
const golden = JSON.parse(readFileSync(path.join(repoRoot, 'test/golden/pipeline.json'), 'utf8')) as Golden;
const UNIVERSE = [...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)), '\n', '\t', 'é', '—', '<'];

describe('distillation (stub teacher) matches the reference', () => {
  const corpus = buildCorpus();
  const pool = makeTaskPool();
  const env = new ToolEnv(corpus);
  for (const split of ['train', 'heldout'] as const) {
    it(`every distilled transcript of the ${split} split, in order`, () => {
      const tasks = pool[split];
      const rows = distill(tasks, makeStubTeacher(tasks), env, 4);
      assert.equal(rows.length, golden.traces[split].length);
      assert.deepEqual(rows, golden.traces[split]);
    });
  }
  it('keeps only solved trajectories whose final answer normalises to gold (seed test)', () => {
    const rows = distill(pool.train.slice(0, 40), makeStubTeacher(pool.train), env, 2);
    assert.ok(rows.length >= 35, `teacher yield collapsed: ${rows.length}/40`);
    const gold = new Map(pool.train.map((t) => [t.question, t.gold]));
    for (const r of rows) {
      const finalAnswer = r.text.split('Answer:').pop()!.split('<|end|>')[0]!;
      assert.equal(normalize(finalAnswer), normalize(gold.get(r.task)!));
    }
    assert.deepEqual(new Set(rows.map((r) => r.kind)), new Set(['lookup', 'double', 'sum', 'compare']));
  });
});

describe('loss mask (_segment)', () => {
  it('matches the reference on distilled transcripts', () => {
    golden.segments.forEach((want, i) => assert.deepEqual(segment(golden.traces.train[i]!.text), want));
  });
  it('matches the reference on odd transcripts (trailing text, nested markers, whitespace)', () => {
    for (const [text, want] of golden.odd_segments) assert.deepEqual(segment(text), want, JSON.stringify(text));
  });
  it('partitions every transcript and supervises calls, never tool results', () => {
    for (const row of [...golden.traces.train, ...golden.traces.heldout]) {
      const segs = segment(row.text);
      assert.equal(segs.map(([t]) => t).join(''), row.text);
      for (const [text, sup] of segs) {
        if (text.includes('<|tool_call|>')) assert.equal(sup, true);
        if (text === '<|assistant|>' || text === '<|tool_result|>' || text === '<|user|>') assert.equal(sup, false);
      }
    }
  });
});

describe('grammar acceptor', () => {
  it(`gives the reference's verdicts on ${golden.grammar.length} strings (prefixes, mutations, limits)`, () => {
    for (const [text, want] of golden.grammar) {
      const got = checkCall(text);
      // `expected` is compared on the characters the reference probed.
      const gotExpected = got.expected.filter((c) => UNIVERSE.includes(c));
      assert.deepEqual({ ...got, expected: gotExpected }, want, JSON.stringify(text));
    }
  });
  it('rejects a dropped quote early (seed test) and names what was legal', () => {
    const v = checkCall('{"tool": search');
    assert.equal(v.accepted, false);
    assert.equal(v.rejectedAt, 9);
    assert.deepEqual(v.expected, ['"']);
    assert.deepEqual(checkCall('{"tool": "search", "args": {"query": "x", "k": 0}}').expected, [...'123456789']);
  });
  it('counts the rejected index in code points', () => {
    const v = checkCall('{"tool": "search", "args": {"query": "\u{1F600}"');
    assert.equal(v.rejectedAt, 38);
  });
});

describe('retrieval', () => {
  const corpus = buildCorpus();
  const bm = new Bm25Retriever(corpus);
  const he = new HashEmbedRetriever(corpus);
  it('BM25 rankings equal the reference and scores agree within 1e-9', () => {
    for (const [q, k, want] of golden.bm25) {
      const got = bm.search(q, k);
      assert.deepEqual(got.map((h) => h.passage.docId), want.map(([d]) => d), `${q} k=${k}`);
      got.forEach((h, i) => assert.ok(Math.abs(h.score - want[i]![1]) <= 1e-9, `${q}: ${h.score} vs ${want[i]![1]}`));
    }
  });
  it('the hashing-trick retriever equals the reference', () => {
    for (const [q, k, want] of golden.hashed) {
      const got = he.search(q, k);
      assert.deepEqual(got.map((h) => h.passage.docId), want.map(([d]) => d), `${q} k=${k}`);
      got.forEach((h, i) => assert.ok(Math.abs(h.score - want[i]![1]) <= 1e-12));
    }
  });
});

describe('wire format', () => {
  it('parse_assistant_step agrees with the reference (calls, malformed calls, derailments)', () => {
    for (const [text, want] of golden.parsed) {
      const got = parseAssistantStep(text);
      const asSeed =
        got.kind === 'final'
          ? { kind: 'final', thought: got.thought, tool: null, args: null, answer: got.answer }
          : got.kind === 'malformed'
            ? { kind: 'tool', thought: got.thought, tool: MALFORMED_TOOL, args: { raw: got.raw }, answer: null }
            : { kind: 'tool', thought: got.thought, tool: got.tool, args: got.args, answer: null };
      assert.deepEqual(asSeed, want, JSON.stringify(text));
    }
  });
  it('render_call is byte-identical to json.dumps with the seed separators', () => {
    for (const [tool, args, want] of golden.rendered) assert.equal(renderCall(tool, args), want);
  });
  it('normalize agrees with the reference', () => {
    for (const [s, want] of golden.normalized) assert.equal(normalize(s), want, JSON.stringify(s));
  });
});

describe('live differential checks against the Python reference', function () {
  before(function () {
    const reason = referenceUnavailable();
    if (reason) {
      console.log(`      skipped: ${reason}`);
      this.skip();
    }
  });

  it('distillation with another seed and fewer distractors', () => {
    const corpus = buildCorpus(5, 40);
    const pool = makeTaskPool(5, 60, 20);
    const env = new ToolEnv(corpus);
    const ours = distill(pool.heldout, makeStubTeacher(pool.heldout), env, 2);
    const theirs = runReference<unknown[]>(
      `from stacklm.agent.corpus import build_corpus, make_task_pool
from stacklm.agent.distill import ToolEnv, distill
from stacklm.agent.stub_teacher import make_stub_teacher
tr, he = make_task_pool(5, 60, 20)
print(json.dumps(distill(he, make_stub_teacher(he), ToolEnv(build_corpus(5, 40)), 2)))`,
    );
    assert.deepEqual(ours, theirs);
  });

  it('grammar verdicts on 1,500 random strings built from call fragments', () => {
    let seed = 99;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const fragments = ['{"tool": "', 'search', 'calc', '", "args": {"', 'query": "', 'expr": "', '", "k": ', '}}', '"}}', 'a', 'Z', '1', '0', '9', ' ', '+', '(', ')', '-', '.', '"', '/', '*', ',', '_', 'é', '\n', '{', ':'];
    const cases: string[] = [];
    for (let i = 0; i < 1500; i++) {
      const n = 1 + rand(12);
      let s = '';
      // Half the cases start from a valid prefix so they get deep into the templates.
      if (i % 2 === 0) s = ['{"tool": "search", "args": {"query": "', '{"tool": "calc", "args": {"expr": "'][rand(2)]!;
      for (let j = 0; j < n; j++) s += fragments[rand(fragments.length)]!;
      cases.push(s);
    }
    const theirs = runReference<{ accepted: boolean; complete: boolean; rejectedAt: number | null; expected: string[] }[]>(
      `from stacklm.agent import grammar as G
U = INPUT["universe"]
def verdict(text):
    st = G.start_states()
    for i, ch in enumerate(text):
        nxt = G.step(st, ch)
        if not nxt:
            return {"accepted": False, "complete": False, "rejectedAt": i, "expected": sorted(c for c in U if G.step(st, c))}
        st = nxt
    done = G.accepts(st)
    return {"accepted": True, "complete": done, "rejectedAt": None, "expected": [] if done else sorted(c for c in U if G.step(st, c))}
print(json.dumps([verdict(t) for t in INPUT["cases"]]))`,
      { cases, universe: UNIVERSE },
    );
    cases.forEach((text, i) => {
      const got = checkCall(text);
      assert.deepEqual({ ...got, expected: got.expected.filter((c) => UNIVERSE.includes(c)) }, theirs[i], JSON.stringify(text));
    });
  });

  it('BM25 on 300 random queries over the default corpus, with varied k', () => {
    const corpus = buildCorpus();
    const words = [...new Set(corpus.flatMap((p) => p.text.split(/\s+/)))].slice(0, 400);
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const queries = Array.from({ length: 300 }, () => {
      const n = rand(6);
      return { q: Array.from({ length: n }, () => words[rand(words.length)]).join(' ') + (rand(5) === 0 ? ' xyzzy' : ''), k: rand(12) - 1 };
    });
    const theirs = runReference<[string, number][][]>(
      `from stacklm.agent.corpus import build_corpus
from stacklm.agent.tools import BM25Retriever
bm = BM25Retriever(build_corpus())
print(json.dumps([[[p.doc_id, s] for p, s in bm.search(c["q"], c["k"])] for c in INPUT]))`,
      queries,
    );
    const bm = new Bm25Retriever(corpus);
    queries.forEach(({ q, k }, i) => {
      const got = bm.search(q, k);
      assert.deepEqual(got.map((h) => h.passage.docId), theirs[i]!.map(([d]) => d), `${q} k=${k}`);
      got.forEach((h, j) => assert.ok(Math.abs(h.score - theirs[i]![j]![1]) <= 1e-9));
    });
  });
});
