// `agent-lab mask --template DIR [--json] FILE.jsonl` as a user (or a CI job) runs it: the
// exact JSON shape, exit 1 on an error finding, one line and exit 2 on bad input, and the
// transcript form `agent-lab mask FILE` unchanged.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { segment } from '../../core/lossMask';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const FIX = path.join(repoRoot, 'test/fixtures/chat-templates');

function run(...args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: repoRoot });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const ROWS = [
  { messages: [{ role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'The capital of France is Paris.' }] },
  { prompt: [{ role: 'user', content: 'What is the capital of Chile?' }], completion: [{ role: 'assistant', content: 'Santiago.' }] },
];

describe('agent-lab mask --template (chat templates)', function () {
  let tmp: string;
  let data: string;
  before(function () {
    this.timeout(180000);
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-chatmask-'));
    data = path.join(tmp, 'train.jsonl');
    writeFileSync(data, ROWS.map((r) => JSON.stringify(r)).join('\n') + '\n');
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('prints {"rows": [{"row", "tokens": [{"id", "text", "generation", "prefix"}], "findings": [{"code", "message"}]}]} and exits 0 on a template with generation blocks', () => {
    const r = run('mask', '--template', path.join(FIX, 'qwen2.5-generation'), '--json', data);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const out = JSON.parse(r.stdout) as { rows: { row: number; tokens: Record<string, unknown>[]; findings: unknown[] }[] };
    assert.deepEqual(Object.keys(out), ['rows']);
    assert.deepEqual(
      out.rows.map((x) => x.row),
      [1, 2],
    );
    for (const row of out.rows) {
      assert.deepEqual(Object.keys(row), ['row', 'tokens', 'findings']);
      for (const t of row.tokens) {
        assert.deepEqual(Object.keys(t), ['id', 'text', 'generation', 'prefix']);
        assert.equal(typeof t['id'], 'number');
      }
      assert.deepEqual(row.findings, []);
    }
    const sup = (i: number, k: string): string =>
      out.rows[i]!.tokens
        .filter((t) => t[k])
        .map((t) => t['text'])
        .join('');
    assert.equal(sup(0, 'generation'), 'The capital of France is Paris.<|im_end|>');
    assert.equal(sup(0, 'prefix'), 'The capital of France is Paris.<|im_end|>');
    assert.equal(sup(1, 'generation'), 'Santiago.<|im_end|>');
    assert.equal(sup(1, 'prefix'), 'Santiago.<|im_end|>\n');
  });

  it('exits 1 when a row has an error finding: an upstream template without generation blocks (a CI gate)', () => {
    const r = run('mask', '--template', path.join(FIX, 'llama3.1'), '--json', data);
    assert.equal(r.code, 1);
    const out = JSON.parse(r.stdout) as { rows: { findings: { code: string; message: string }[] }[] };
    assert.deepEqual(
      out.rows.map((x) => x.findings.map((f) => f.code)),
      [['all-zero-generation-mask'], ['all-zero-generation-mask']],
    );
    // The prompt-completion row's all-zero mask is a warning: completion_only_loss trains it anyway.
    assert.equal(r.stderr, 'agent-lab mask: 1 of 2 rows have an error finding (rows 1)\n');
    // Without --json: a summary per row and for the file.
    const h = run('mask', '--template', path.join(FIX, 'llama3.1'), data);
    assert.equal(h.code, 1);
    assert.match(h.stdout, /^row 1: \d+ tokens; supervised: 0 by the generation mask, \d+ by the prefix mask\n {2}error all-zero-generation-mask: /m);
    assert.match(h.stdout, /^2 rows, \d+ tokens; supervised: 0 by the generation mask, \d+ by the prefix mask$/m);
  });

  it('--max-length reports supervised tokens lost to truncation', () => {
    const r = run('mask', '--template', path.join(FIX, 'qwen2.5-generation'), '--max-length', '20', '--json', data);
    assert.equal(r.code, 1, 'all supervision truncated is an error');
    const out = JSON.parse(r.stdout) as { rows: { findings: { code: string }[] }[] };
    assert.ok(out.rows[0]!.findings.some((f) => f.code === 'all-supervision-truncated'));
  });

  it('bad input: one line naming the cause, exit 2, nothing on stdout', () => {
    const notConv = path.join(tmp, 'text.jsonl');
    writeFileSync(notConv, `${JSON.stringify(ROWS[0])}\n${JSON.stringify({ text: 'hello' })}\n`);
    let r = run('mask', '--template', path.join(FIX, 'qwen2.5'), '--json', notConv);
    assert.deepEqual(r, { code: 2, stdout: '', stderr: `agent-lab mask: ${notConv} line 2: not a conversation: a standard (text) row: no chat template applies; conversational rows have "messages"\n` });

    const broken = path.join(tmp, 'broken');
    mkdirSync(broken);
    writeFileSync(path.join(broken, 'tokenizer.json'), '{"model": ');
    r = run('mask', '--template', broken, '--json', data);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^agent-lab mask: template folder .*broken: tokenizer\.json is not valid JSON: .*\n$/);

    const bad = path.join(tmp, 'bad-template');
    mkdirSync(bad);
    writeFileSync(path.join(bad, 'tokenizer.json'), readFileSync(path.join(FIX, 'qwen2.5', 'tokenizer.json')));
    writeFileSync(path.join(bad, 'chat_template.jinja'), "{{ raise_exception('this template refuses every row') }}");
    r = run('mask', '--template', bad, '--json', data);
    assert.deepEqual(r, { code: 2, stdout: '', stderr: `agent-lab mask: ${data} line 1: the chat template fails to render: this template refuses every row\n` });

    r = run('mask', '--max-length', '5', data);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--max-length and --template-kwargs go with --template DIR/);
  });

  it('the transcript form is unchanged', () => {
    const t = path.join(tmp, 'a.transcript');
    const text = '<|system|>s<|end|><|user|>q<|end|><|assistant|>a<|end|>';
    writeFileSync(t, text);
    const r = run('mask', '--json', t);
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.stdout), segment(text));
  });
  it('--patch-out NEWDIR writes the patched template folder, which then passes the gate; an existing NEWDIR, a FILE beside it or a template it cannot patch are refused', () => {
    const out = path.join(tmp, 'llama-patched');
    const r = run('mask', '--template', path.join(FIX, 'llama3.1'), '--patch-out', out);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `wrote ${out}: chat_template.jinja with 2 generation blocks, tokenizer.json, tokenizer_config.json, README.md\n`);
    assert.equal(readFileSync(path.join(out, 'tokenizer.json'), 'utf8'), readFileSync(path.join(FIX, 'llama3.1', 'tokenizer.json'), 'utf8'));
    // The original fails the gate (all-zero generation mask), the patched folder passes it.
    assert.equal(run('mask', '--template', path.join(FIX, 'llama3.1'), data).code, 1);
    const gate = run('mask', '--template', out, '--json', data);
    assert.equal(gate.code, 0, gate.stderr);
    // Never over a folder: the same command again is refused, and nothing changes.
    const before = readFileSync(path.join(out, 'chat_template.jinja'), 'utf8');
    const again = run('mask', '--template', path.join(FIX, 'qwen2.5'), '--patch-out', out);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /--patch-out .*llama-patched exists: the patched template goes to a new folder, never over one/);
    assert.equal(readFileSync(path.join(out, 'chat_template.jinja'), 'utf8'), before);
    const smol = run('mask', '--template', path.join(FIX, 'smollm3'), '--patch-out', path.join(tmp, 'smol-patched'));
    assert.equal(smol.code, 1);
    assert.match(smol.stderr, /smollm3: the template cannot be patched safely: the template already has \{% generation %\} blocks/);
    assert.equal(existsSync(path.join(tmp, 'smol-patched')), false);
    const both = run('mask', '--template', path.join(FIX, 'llama3.1'), '--patch-out', path.join(tmp, 'x'), data);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /reads no dataset: unexpected argument/);
    assert.match(run('mask', '--template', path.join(FIX, 'llama3.1')).stderr, /missing FILE/);
  });
});
