// The `agent-lab` command line as a user runs it: the executable at the repository root,
// its JSON outputs (compared as parsed JSON), its files and its exit codes.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { segment } from '../../core/lossMask';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const golden = JSON.parse(readFileSync(path.join(repoRoot, 'test/golden/pipeline.json'), 'utf8'));
const world = JSON.parse(readFileSync(path.join(repoRoot, 'test/golden/world_seed0.json'), 'utf8'));

function run(...args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: repoRoot });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
const readJsonl = (file: string): unknown[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l));

describe('agent-lab CLI', function () {
  let tmp: string;
  before(function () {
    this.timeout(120000);
    // The executable runs the bundle: rebuild so the test exercises this tree's code.
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-cli-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  describe('calc', () => {
    it('treats a leading minus followed by a digit as the expression', () => {
      assert.deepEqual(run('calc', '-3+4'), { code: 0, stdout: '1\n', stderr: '' });
    });
    it('prints a CalcError as an observation with exit code 0', () => {
      const r = run('calc', '--', '1/0');
      assert.equal(r.code, 0);
      assert.equal(r.stdout, 'CalcError: division by zero\n');
    });
    it('joins several arguments into one expression', () => {
      assert.equal(run('calc', '2', '*', '(3', '+', '4)').stdout, '14\n');
    });
    it('a missing expression is a usage error (exit 2, usage line, no stack trace)', () => {
      const r = run('calc');
      assert.equal(r.code, 2);
      assert.match(r.stderr, /usage: agent-lab calc/);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  });

  describe('grammar', () => {
    it('prints the verdict object for a rejected call', () => {
      const r = run('grammar', '--json', '{"tool": search');
      assert.equal(r.code, 0);
      assert.deepEqual(JSON.parse(r.stdout), { accepted: false, complete: false, rejectedAt: 9, expected: ['"'] });
    });
    it('accepts a canonical call and reports an incomplete one with what may follow', () => {
      assert.deepEqual(JSON.parse(run('grammar', '--json', '--', '{"tool": "calc", "args": {"expr": "1+1"}}').stdout), {
        accepted: true,
        complete: true,
        rejectedAt: null,
        expected: [],
      });
      const partial = JSON.parse(run('grammar', '--json', '{"tool": "').stdout);
      assert.deepEqual(partial, { accepted: true, complete: false, rejectedAt: null, expected: ['c', 's'] });
    });
  });

  describe('search', () => {
    it('ranks and scores as the reference (k defaults to 2)', () => {
      const r = run('search', 'Stack-100M', 'layer', 'count');
      assert.equal(r.code, 0);
      const want = (golden.bm25 as [string, number, [string, number][]][]).find(([q, k]) => q === 'Stack-100M layer count' && k === 2)!;
      const got = JSON.parse(r.stdout) as { doc_id: string; score: number }[];
      assert.deepEqual(got.map((h) => h.doc_id), want[2].map(([d]) => d));
      got.forEach((h, i) => assert.ok(Math.abs(h.score - want[2][i]![1]) <= 1e-9));
    });
    it('returns [] for unknown words and honours --k', () => {
      assert.deepEqual(JSON.parse(run('search', 'xyzzy').stdout), []);
      assert.equal(JSON.parse(run('search', '--k', '5', 'hidden', 'size').stdout).length, 5);
    });
    it('rejects a non-integer k with exit code 2', () => {
      const r = run('search', '--k', 'two', 'x');
      assert.equal(r.code, 2);
      assert.match(r.stderr, /--k' needs an integer, got 'two'/);
    });
  });

  describe('world and distill', () => {
    it('writes the corpus and the task pool as the reference builds them', () => {
      const out = path.join(tmp, 'world');
      const r = run('world', '--out', out);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(readJsonl(path.join(out, 'corpus.jsonl')), world.corpus);
      assert.deepEqual(readJsonl(path.join(out, 'train.jsonl')), world.train);
      assert.deepEqual(readJsonl(path.join(out, 'heldout.jsonl')), world.heldout);
    });
    it('refuses a pool too small for the requested split, naming the counts', () => {
      const r = run('world', '--train', '300', '--out', path.join(tmp, 'w2'));
      assert.equal(r.code, 2);
      assert.match(r.stderr, /pool too small/);
      assert.equal(existsSync(path.join(tmp, 'w2', 'corpus.jsonl')), false);
    });
    it('needs --out', () => {
      const r = run('world');
      assert.equal(r.code, 2);
      assert.match(r.stderr, /missing required option '--out'/);
    });
    it('distills the held-out split into exactly the named file, in the seed order', () => {
      const out = path.join(tmp, 'heldout.traces.jsonl');
      const r = run('distill', '--split', 'heldout', '--out', out);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(readJsonl(out), golden.traces.heldout);
    });
    it('rejects an unknown split with exit code 2', () => {
      const r = run('distill', '--split', 'test', '--out', path.join(tmp, 'x.jsonl'));
      assert.equal(r.code, 2);
      assert.match(r.stderr, /must be one of train, heldout/);
    });
  });

  describe('mask', () => {
    it('prints _segment of a transcript file, ignoring one trailing newline', () => {
      const text = (golden.traces.train as { text: string }[])[3]!.text;
      const file = path.join(tmp, 'one.transcript');
      writeFileSync(file, text + '\n');
      const r = run('mask', '--json', file);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), segment(text));
    });
    it('names a missing file (exit 1, no stack trace)', () => {
      const r = run('mask', '--json', path.join(tmp, 'nope.transcript'));
      assert.equal(r.code, 1);
      assert.match(r.stderr, /cannot read .*nope\.transcript: ENOENT/);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  });

  it('an unknown command or option is a usage error', () => {
    assert.equal(run('frobnicate').code, 2);
    const r = run('calc', '--precise', '1+1');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown option '--precise'/);
  });

  it('demo writes a readable run folder and prints its report', function () {
    this.timeout(120000);
    const runDir = path.join(tmp, 'run-demo');
    const r = run('demo', '--minutes', '0', '--run', runDir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /passages\s+268/);
    assert.match(r.stdout, /teacher yield \(train\)\s+lookup \d+\/\d+/);
    assert.match(r.stdout, /drop rate/);
    for (const f of ['config.json', 'tokenizer.json', 'report.json', 'data/train.traces.jsonl', 'data/heldout.traces.jsonl', 'world/corpus.jsonl']) {
      assert.ok(existsSync(path.join(runDir, f)), f);
    }
    const report = JSON.parse(readFileSync(path.join(runDir, 'report.json'), 'utf8'));
    assert.equal(report.passages, 268);
    assert.deepEqual(report.overlap, { exact: 2, swapped: 2 });
    assert.ok(report.supervisedShare > 0 && report.supervisedShare < 1);
    // The seed world's 1,317 training transcripts, and the default recipe's augmentation:
    // 5,160 from 40 counterfactual-value worlds, none of them a reserved evaluation world.
    const rows = readJsonl(path.join(runDir, 'data/train.traces.jsonl')) as { world?: string }[];
    const fromSeed = (r: { world?: string }) => r.world === undefined || r.world === 'seed:0';
    assert.equal(rows.filter(fromSeed).length, 1317);
    assert.equal(report.sft.examples, 1317);
    const freshWorlds = new Set(rows.filter((r) => !fromSeed(r)).map((r) => r.world));
    assert.deepEqual(report.augmentation, { worlds: 40, rows: rows.length - 1317, share: 0.75 });
    assert.equal(rows.length - 1317, 5160);
    assert.equal(freshWorlds.size, 40);
    for (const w of freshWorlds) assert.match(String(w), /^values:([1-9]|[1-3][0-9]|40)$/);
    assert.match(r.stdout, /augmentation\s+5160 transcripts from 40 counterfactual-value worlds \(75\.0% of the training draws\)/);
    assert.equal(report.excludedOverlapping, 93);
  });
});
