// Export and the smaller CLI items of issue 11: a long transcript no longer makes
// `export --format trl-sft` grow with the square of its length (finding 8); seeds, output
// paths, invalid UTF-8, `mask a b`, progress of a long stub distillation, and the
// extension's workspace-trust manifest (the Low list).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { distilledRows } from '../../bench/lsp';
import { ASST, END, TOOL_RESULT } from '../../core/wire';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
function cli(args: string[], opts: { cwd?: string; timeoutMs?: number } = {}) {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: opts.cwd ?? repoRoot, timeout: opts.timeoutMs ?? 60_000, killSignal: 'SIGKILL' });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - t0 };
}
const noTrace = (stderr: string): void => assert.doesNotMatch(stderr, /\n\s+at |internal error/, stderr);

describe('export and CLI items (issue 11)', function () {
  this.timeout(120_000);
  let tmp: string;
  before(function () {
    this.timeout(120_000);
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-hard-cli-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('finding 8: export --format trl-sft leaves out an over-length transcript first (saying how many) and streams the rows: a 470 KB, 4,000-turn row no longer ends in RangeError', () => {
    const rows = distilledRows().slice(0, 3);
    // One transcript with 4,000 tool steps: its prompt/completion rows would total ~1 GB.
    const t = rows[0]!.text;
    const head = t.slice(0, t.indexOf(ASST));
    const step = `${ASST}Thought: look it up.\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+1"}}${END}${TOOL_RESULT}2${END}`;
    const long = `${head}${step.repeat(4000)}${ASST}Thought: done.\nAnswer: 2${END}`;
    assert.ok(long.length > 460_000);
    const data = path.join(tmp, 'long.traces.jsonl');
    fs.writeFileSync(data, [...rows, { task: 'long', text: long, kind: 'sum' }].map((r) => JSON.stringify(r)).join('\n') + '\n');
    const out = path.join(tmp, 'export');
    const r = cli(['export', '--format', 'trl-sft', '--data', data, '--out', out]);
    noTrace(r.stderr);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /1 of 4 transcripts are longer than max_len 1024 tokens: left out/);
    const manifest = JSON.parse(fs.readFileSync(path.join(out, 'sft', 'manifest.json'), 'utf8'));
    assert.equal(manifest.conversations, 3);
    assert.equal(manifest.over_max_len, 1);
    const pc = fs.readFileSync(path.join(out, 'sft', 'prompt_completion.jsonl'), 'utf8').trim().split('\n');
    assert.equal(pc.length, manifest.assistant_turns);
    assert.ok(fs.statSync(path.join(out, 'sft', 'prompt_completion.jsonl')).size < 1024 * 1024);
  });

  it("Low: world --seed 9007199254740991 is refused naming the user's seed and the largest one that works (not 'got 9007199254740992')", () => {
    const r = cli(['world', '--seed', '9007199254740991', '--out', path.join(tmp, 'w')]);
    assert.equal(r.code, 2);
    noTrace(r.stderr);
    assert.match(r.stderr, /option '--seed' must be at most 9007199254740989, got 9007199254740991/);
    assert.ok(!fs.existsSync(path.join(tmp, 'w')));
  });

  it("Low: world --out /proc/... fails at once (no recursive mkdir loop); world --out '' and train sft --run '' write nothing into the current folder (exit 2)", () => {
    const p = cli(['world', '--out', '/proc/agent-lab-nonexistent/world'], { timeoutMs: 15_000 });
    assert.equal(p.signal, null, 'no hang');
    assert.equal(p.code, 1);
    assert.match(p.stderr, /cannot create the folder \/proc\/agent-lab-nonexistent: ENOENT/);
    const cwd = fs.mkdtempSync(path.join(tmp, 'cwd-'));
    for (const args of [['world', '--out', ''], ['train', 'sft', '--steps', '1', '--run', '']]) {
      const r = cli(args, { cwd });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /needs a path, got an empty string/);
      assert.deepEqual(fs.readdirSync(cwd), [], 'nothing written into the current folder');
    }
  });

  it('Low: mask a b is bad usage (exit 2), and invalid UTF-8 is said out loud, not silently U+FFFD', () => {
    const r = cli(['mask', 'a', 'b']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /expected one FILE, got 2/);
    const f = path.join(tmp, 'bad.transcript');
    fs.writeFileSync(f, Buffer.concat([Buffer.from('<|system|>S<|end|><|user|>caf'), Buffer.from([0xe9]), Buffer.from('<|end|>')]));
    const m = cli(['mask', '--json', f]);
    assert.equal(m.code, 0, m.stderr);
    assert.match(m.stderr, /bad\.transcript is not valid UTF-8 \(the first bad byte is at offset 29\); invalid bytes read as U\+FFFD/);
  });

  it('Low: a long stub distillation prints progress (every 2 s) instead of nothing', () => {
    const r = cli(['distill', '--split', 'train', '--samples', '300', '--out', path.join(tmp, 'many.jsonl')]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.ms > 2500, `the run was too short to need progress (${r.ms} ms)`);
    assert.match(r.stderr, /\[agent-lab\] distill \d+\/200 tasks \(\d+ s\)/);
  });

  it('Low: the extension declares limited support of untrusted workspaces and keeps the teacher URL and tokenizer path out of workspace settings', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    const trust = pkg.capabilities?.untrustedWorkspaces;
    assert.equal(trust?.supported, 'limited');
    assert.deepEqual([...trust.restrictedConfigurations].sort(), ['agentLab.teacher.baseUrl', 'agentLab.tokenizerPath']);
    const props = pkg.contributes.configuration.properties;
    for (const k of ['agentLab.teacher.baseUrl', 'agentLab.tokenizerPath']) assert.equal(props[k].scope, 'machine', k);
  });
});
