// `agent-lab train sft --base HF_DIR`: a Hugging Face model folder as the starting weights.
// The lab's own exported students start (their tokenizer is the run's); a folder with no
// tokenizer, or another run's, or a model's own Hugging Face tokenizer over a run that holds a
// lab tokenizer, is refused in one line, exit 2, before the run folder is touched (a model's
// own tokenizer in a fresh run: test/unit/hfTokenizerRun.test.ts).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { canonicalTokenizerJson, tokenizerFromJsonText, trainDefaultTokenizer } from '../../core/tokenizer';
import { initBackend } from '../../trainer/model/backend';
import { loadCheckpoint } from '../../trainer/run/checkpoint';
import { writeHfFolder } from '../../trainer/hf/hfExport';
import { ModelConfig, StackModel } from '../../trainer/model/model';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const run = (...args: string[]): { code: number; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: repoRoot });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
};

/** A Hugging Face tokenizer.json of the kind SmolLM or Qwen ship (not the lab's: other specials, other vocabulary). */
const FOREIGN_TOKENIZER = JSON.stringify({
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{ id: 0, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: { '<|endoftext|>': 0, a: 1 }, merges: [] },
});

describe('agent-lab train sft --base HF_DIR', function () {
  this.timeout(600000);
  let tmp: string;
  let data: string;
  let cfg: ModelConfig;
  let hf: string;
  const oneLine = (r: { code: number; stderr: string }, pattern: RegExp): void => {
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, pattern);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  };
  before(async function () {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hfbase-'));
    // A run folder with data and its tokenizer (the demo's data step, stub teacher).
    data = path.join(tmp, 'data-run');
    const d = run('demo', '--minutes', '0', '--run', data);
    assert.equal(d.code, 0, d.stderr);
    const tokJson = fs.readFileSync(path.join(data, 'tokenizer.json'), 'utf8');
    const vocab = tokenizerFromJsonText(tokJson).vocabSize;
    // The base: a small Llama-shaped student with that tokenizer, written as a Hugging Face folder.
    cfg = { vocab, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 48, maxSeq: 512, ropeBase: 10000, normEps: 1e-6 };
    await initBackend('wasm');
    const m = StackModel.create(cfg, 9);
    hf = path.join(tmp, 'hf');
    writeHfFolder(hf, cfg, m.exportWeights(), { 'tokenizer.json': tokJson });
    m.dispose();
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("a model's own Hugging Face tokenizer is not mixed with a run's lab tokenizer; no tokenizer at all is refused; nothing written", () => {
    const foreign = path.join(tmp, 'foreign');
    fs.cpSync(hf, foreign, { recursive: true });
    fs.writeFileSync(path.join(foreign, 'tokenizer.json'), FOREIGN_TOKENIZER);
    // The data run holds the lab's tokenizer: the model's own would mean other ids (test/unit/hfTokenizerRun.test.ts trains with it).
    const before = fs.readdirSync(data).sort();
    oneLine(run('train', 'sft', '--base', foreign, '--steps', '1', '--run', data), /--base .*foreign\/tokenizer\.json: the run folder holds another tokenizer, .*tokenizer\.json \(sha256:[0-9a-f]+\): the model's own tokenizer needs a run folder without one/);
    assert.deepEqual(fs.readdirSync(data).sort(), before);
    const target = path.join(tmp, 'r-foreign');
    fs.rmSync(path.join(foreign, 'tokenizer.json'));
    oneLine(run('train', 'sft', '--base', foreign, '--steps', '1', '--run', target), /--base .*foreign: no tokenizer\.json/);
    assert.ok(!fs.existsSync(target));
  });

  it("refuses a lab tokenizer that is not the run's, and a new run (it would train its own)", () => {
    const other = path.join(tmp, 'other');
    fs.cpSync(hf, other, { recursive: true });
    fs.writeFileSync(path.join(other, 'tokenizer.json'), canonicalTokenizerJson(trainDefaultTokenizer()));
    const before = fs.readdirSync(data).sort();
    oneLine(run('train', 'sft', '--base', other, '--steps', '1', '--run', data), /tokenizer\.json \(sha256:[0-9a-f]+\) is not the run's tokenizer .*: the model's ids would mean other strings/);
    assert.deepEqual(fs.readdirSync(data).sort(), before);
    const fresh = path.join(tmp, 'r-new');
    oneLine(run('train', 'sft', '--base', hf, '--steps', '1', '--run', fresh), /the run folder has no tokenizer\.json yet, and a new run trains its own/);
    assert.ok(!fs.existsSync(fresh));
    const both = run('train', 'sft', '--base', hf, '--from', data, '--run', fresh);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--base and --from both give the starting weights/);
    const bad = path.join(tmp, 'bad-config');
    fs.cpSync(hf, bad, { recursive: true });
    fs.writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ ...JSON.parse(fs.readFileSync(path.join(hf, 'config.json'), 'utf8')), hidden_act: 'gelu' }));
    oneLine(run('train', 'sft', '--base', bad, '--steps', '1', '--run', data), /config\.json: "hidden_act" "gelu" is not supported/);
  });

  it("starts from the folder's weights when its tokenizer is the run's: the run records the base and trains", () => {
    const r = run('train', 'sft', '--base', hf, '--steps', '3', '--eval-limit', '0', '--backend', 'wasm', '--threads', '1', '--run', data);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /starting from .*hf \(LlamaForCausalLM, \d+ parameters, F32\)/);
    const config = JSON.parse(fs.readFileSync(path.join(data, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(config['model'], cfg);
    assert.equal((config['base'] as Record<string, unknown>)['dir'], hf);
    const ck = loadCheckpoint(data, 'latest');
    assert.equal(ck.step, 3);
    assert.deepEqual(ck.config, cfg);
  });
});
