// Train (SFT) from a Hugging Face model folder in the editor (issue 29, extension/baseModel.ts):
// the model quick pick's items, the folder's verdict from the real `agent-lab model inspect
// --base DIR --json` on tiny generated folders (a supported Llama, an unsupported
// architecture, no tokenizer.json, no weights, a lab-exported one), the Full / LoRA choice,
// the job spec's fields, and the road the editor takes: a traces file prepared as the
// extension prepares it, the trained tokenizer dropped, and the worker's runJob training from
// the folder fully and with LoRA (the spec's base and lora reaching runSft; over added rows too).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { canonicalTokenizerJson, defaultWorldTexts, tokenizerJsonSize, trainDefaultTokenizer, withWireSpecials } from '../../core/tokenizer';
import { checkJobSpec, type SftJobSpec } from '../../core/protocol/worker';
import {
  EDITOR_LORA_SPEC,
  baseFolderVerdict,
  editorRefusal,
  modelPickItems,
  sftModelFields,
  trainModeItems,
  type BaseFolderInfo,
} from '../../extension/baseModel';
import { describeRun, readRun, runModelLabel } from '../../extension/runFolders';
import { initBackend } from '../../trainer/model/backend';
import { writeHfFolder } from '../../trainer/hf/hfExport';
import { type JobHooks, runJob } from '../../trainer/run/jobs';
import { LORA_TARGETS, parseLoraSpec } from '../../trainer/model/lora';
import { ModelConfig, StackModel } from '../../trainer/model/model';
import { PRESET_NAMES } from '../../trainer/model/modelConfig';
import { foreignByteLevelTokenizer } from '../support/hfTokenizer';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const inspect = (dir: string): { code: number | null; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [bin, 'model', 'inspect', '--base', dir, '--json'], { encoding: 'utf8', cwd: repoRoot });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const quietHooks = (logs: string[] = []): JobHooks => ({
  started: () => {},
  progress: () => {},
  metrics: () => {},
  log: (_level, message) => logs.push(message),
  checkpoint: () => {},
  isCancelled: () => false,
});

describe('Train (SFT) from a Hugging Face model folder (extension/baseModel.ts)', function () {
  this.timeout(600000);
  let tmp: string;
  /** Its tokenizer lacks the wire specials: full fine-tuning only. */
  let hf: string;
  /** Its tokenizer holds the wire specials: LoRA adds no rows. */
  let hfSpecials: string;
  let cfg: ModelConfig;
  before(async function () {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-basemodel-'));
    const w = defaultWorldTexts();
    const tokJson = foreignByteLevelTokenizer([...w.passages, ...w.train.slice(0, 200)], 600);
    const V = tokenizerJsonSize(tokJson);
    cfg = { vocab: V, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 48, maxSeq: 512, ropeBase: 10000, normEps: 1e-6 };
    await initBackend('wasm');
    const m = StackModel.create(cfg, 3);
    hf = path.join(tmp, 'hf');
    writeHfFolder(hf, cfg, m.exportWeights(), { 'tokenizer.json': JSON.stringify(tokJson) });
    m.dispose();
    // The same tokenizer with the nine wire specials as its own added tokens, and their rows.
    const withSpecials = withWireSpecials(tokJson, V).json;
    const cfgS = { ...cfg, vocab: V + 9 };
    const ms = StackModel.create(cfgS, 4);
    hfSpecials = path.join(tmp, 'hf-specials');
    writeHfFolder(hfSpecials, cfgS, ms.exportWeights(), { 'tokenizer.json': JSON.stringify(withSpecials) });
    ms.dispose();
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A copy of the supported folder, changed by `edit`. */
  const variant = (name: string, edit: (dir: string) => void): string => {
    const dir = path.join(tmp, name);
    fs.cpSync(hf, dir, { recursive: true });
    edit(dir);
    return dir;
  };

  it('the model pick: the presets (agentLab.preset first), then the folder item; the last folder first while it exists', () => {
    const items = modelPickItems('small', undefined);
    assert.deepEqual(
      items.map((i) => i.label),
      ['small', ...PRESET_NAMES.filter((n) => n !== 'small'), 'A Hugging Face model folder…'],
    );
    assert.match(items[0]!.description, /agentLab\.preset/);
    assert.deepEqual(items.at(-1)!.pick, { browse: true });
    assert.match(items[1]!.detail ?? '', /^\d+ layers?, width \d+, \d+ heads, context \d+: fresh weights$/);

    const withLast = modelPickItems('tiny', hf);
    assert.deepEqual(withLast[0], { label: 'hf', description: 'Hugging Face model folder · last used', detail: hf, pick: { folder: hf } });
    assert.equal(withLast[1]!.label, 'tiny');
    assert.equal(withLast.length, PRESET_NAMES.length + 2);
    // A folder since deleted is not offered.
    assert.deepEqual(modelPickItems('tiny', path.join(tmp, 'gone')).map((i) => i.label), modelPickItems('tiny', undefined).map((i) => i.label));
  });

  it("a supported folder passes model inspect; its own tokenizer's missing specials are counted", () => {
    const v = baseFolderVerdict(hf, inspect(hf));
    assert.ok(v.ok, JSON.stringify(v));
    assert.equal(v.info.architecture, 'LlamaForCausalLM');
    assert.ok(v.info.parameters > 0);
    assert.deepEqual(v.info.tokenizer, { kind: 'hf', added: 9 });
    assert.equal(editorRefusal(v.info), null);
    const s = baseFolderVerdict(hfSpecials, inspect(hfSpecials));
    assert.ok(s.ok && s.info.tokenizer.kind === 'hf' && s.info.tokenizer.added === 0, JSON.stringify(s));
  });

  it("an unsupported architecture, a missing file: refused with the loader's own line, naming the folder", () => {
    const mistral = variant('mistral', (dir) => {
      const f = path.join(dir, 'config.json');
      const c = JSON.parse(fs.readFileSync(f, 'utf8')) as Record<string, unknown>;
      fs.writeFileSync(f, JSON.stringify({ ...c, architectures: ['MistralForCausalLM'], model_type: 'mistral' }));
    });
    const noWeights = variant('no-weights', (dir) => fs.rmSync(path.join(dir, 'model.safetensors')));
    const noConfig = variant('no-config', (dir) => fs.rmSync(path.join(dir, 'config.json')));
    for (const [dir, pattern] of [
      [mistral, /MistralForCausalLM/],
      [noWeights, /model\.safetensors/],
      [noConfig, /config\.json/],
    ] as const) {
      const r = inspect(dir);
      assert.equal(r.code, 2, `${dir}: ${r.stderr}`);
      const loaderLine = r.stderr.trim().replace(/^agent-lab model: /, '');
      const v = baseFolderVerdict(dir, r);
      assert.ok(!v.ok);
      assert.equal(v.message, `Agent Lab: cannot train from ${dir}: ${loaderLine}`);
      assert.match(v.message, pattern);
      assert.equal(v.message.split('\n').length, 1);
    }
    // No tokenizer.json: inspect reports it; the editor refuses it before a run folder is made.
    const noTok = variant('no-tokenizer', (dir) => fs.rmSync(path.join(dir, 'tokenizer.json')));
    const r = inspect(noTok);
    assert.equal(r.code, 0, r.stderr);
    const v = baseFolderVerdict(noTok, r);
    assert.ok(!v.ok);
    assert.equal(v.message, `Agent Lab: cannot train from ${noTok}: no tokenizer.json (the tokenizer the model was trained with is needed)`);
    // Output that is not inspect's JSON is not taken for a verdict.
    const garbled = baseFolderVerdict(hf, { code: 0, stdout: 'not json', stderr: '' });
    assert.ok(!garbled.ok && /printed no JSON/.test(garbled.message));
  });

  it("a folder the lab exported (the lab's own tokenizer) is pointed to the CLI, not trained from a fresh run", () => {
    const tok = trainDefaultTokenizer();
    const labCfg = { ...cfg, vocab: tok.vocabSize };
    const m = StackModel.create(labCfg, 5);
    const lab = path.join(tmp, 'lab');
    writeHfFolder(lab, labCfg, m.exportWeights(), { 'tokenizer.json': canonicalTokenizerJson(tok) });
    m.dispose();
    const v = baseFolderVerdict(lab, inspect(lab));
    assert.ok(v.ok, JSON.stringify(v));
    assert.deepEqual(v.info.tokenizer, { kind: 'lab' });
    assert.match(editorRefusal(v.info) ?? '', new RegExp(`^Agent Lab: ${lab.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} holds the lab's own tokenizer .*agent-lab train sft --base`));
  });

  it('Full or LoRA (r 8, alpha 16), both offered; where the tokenizer gains rows, LoRA says they train too', () => {
    const info = (added: number): BaseFolderInfo => ({ dir: '/m', architecture: 'Qwen2ForCausalLM', parameters: 1234567, tokenizer: { kind: 'hf', added } });
    const both = trainModeItems(info(0));
    assert.deepEqual(both.map((i) => [i.label, i.lora]), [['Full fine-tuning', undefined], ['LoRA (r 8, alpha 16)', '8,16']]);
    assert.equal(both[0]!.description, 'all 1,234,567 parameters');
    assert.match(both[1]!.detail, /only the adapters train/);
    const withRows = trainModeItems(info(9));
    assert.deepEqual(withRows.map((i) => [i.label, i.lora]), [['Full fine-tuning', undefined], ['LoRA (r 8, alpha 16)', '8,16']]);
    assert.match(withRows[1]!.detail, /the adapters train .* and the 9 embedding rows added for the wire-format specials/);
    // The editor's LoRA is a spec the trainer takes: r 8, alpha 16, every target.
    assert.deepEqual(parseLoraSpec(EDITOR_LORA_SPEC), { r: 8, alpha: 16, targets: [...LORA_TARGETS] });
  });

  it('the job spec: a preset, or base (an absolute path) with lora; the protocol refuses lora without base', () => {
    assert.deepEqual(sftModelFields({ preset: 'small' }), { preset: 'small' });
    assert.deepEqual(sftModelFields({ base: 'models/smol' }), { base: path.resolve('models/smol') });
    assert.deepEqual(sftModelFields({ base: hf, lora: '8,16' }), { base: hf, lora: '8,16' });
    const spec: SftJobSpec = { kind: 'sft', runDir: '/r', steps: 4, ...sftModelFields({ base: hf, lora: '8,16' }) };
    assert.equal(checkJobSpec(spec), null);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', lora: '8,16' }) ?? '', /job\.lora .*job\.base is needed/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', base: 3 }) ?? '', /job\.base must be a string/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', base: '' }) ?? '', /job\.base must be a folder path/);
    // A traces file alone makes a new run in the worker: not with a run to continue or resume, not empty.
    assert.equal(checkJobSpec({ kind: 'sft', runDir: '/r', traces: '/w/train.traces.jsonl', base: '/m' }), null);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', traces: '' }) ?? '', /job\.traces must be a trajectories file/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', traces: 3 }) ?? '', /job\.traces must be a string/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', traces: '/t', from: '/s' }) ?? '', /job\.traces makes a new run .*drop job\.from and job\.resume/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', traces: '/t', resume: true }) ?? '', /job\.traces makes a new run/);
  });

  it("the editor's road: the worker's job makes the run from a traces file (its prepared tokenizer dropped) and trains from the folder fully and with LoRA", async () => {
    const traces = path.join(repoRoot, 'samples', 'train.traces.jsonl');
    // A preset's run: the worker trains the tokenizer on the file (the editor prepares nothing).
    const preset = path.join(tmp, 'run-preset');
    const p = await runJob({ kind: 'sft', runDir: preset, traces, backend: 'wasm', steps: 1, evalLimit: 0 }, quietHooks());
    assert.equal(p.summary.steps, 1);
    assert.equal(p.summary.prepared?.trainRows, fs.readFileSync(path.join(preset, 'data', 'train.traces.jsonl'), 'utf8').trim().split('\n').length);
    assert.equal(p.summary.prepared?.world, 'default');
    // The lab's BPE (no kind recorded), trained on the file's transcripts in the worker.
    assert.equal((JSON.parse(fs.readFileSync(path.join(preset, 'config.json'), 'utf8')) as Record<string, Record<string, unknown>>)['tokenizer']!['kind'], undefined);
    assert.ok(fs.existsSync(path.join(preset, 'tokenizer.json')));
    // A new run only: the same folder again is refused as bad input, and nothing in it is touched.
    const before = fs.readFileSync(path.join(preset, 'data', 'train.traces.jsonl'), 'utf8');
    await assert.rejects(runJob({ kind: 'sft', runDir: preset, traces, backend: 'wasm', steps: 1 }, quietHooks()), /cannot train on .*already exists and is not empty/);
    assert.equal(fs.readFileSync(path.join(preset, 'data', 'train.traces.jsonl'), 'utf8'), before);
    // Full fine-tuning: the model's own tokenizer becomes the run's, its specials added.
    const full = path.join(tmp, 'run-full');
    const logs: string[] = [];
    const r = await runJob({ kind: 'sft', runDir: full, traces, backend: 'wasm', steps: 2, evalLimit: 0, ...sftModelFields({ base: hf }) }, quietHooks(logs));
    assert.equal(r.summary.steps, 2, logs.join('\n'));
    assert.ok(logs.some((l) => /prepared .*run-full: \d+ trajectories from .*train\.traces\.jsonl/.test(l)), logs.join('\n'));
    assert.ok(fs.existsSync(path.join(full, 'data', 'train.traces.jsonl')));
    const config = JSON.parse(fs.readFileSync(path.join(full, 'config.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    assert.equal(config['tokenizer']!['kind'], 'hf');
    assert.equal(config['tokenizer']!['base'], path.join(hf, 'tokenizer.json'));
    assert.deepEqual(config['model'], { ...cfg, vocab: cfg.vocab + 9 });
    assert.equal(config['lora'], undefined);
    // The Runs view's reader: a run like any other, named by its model folder rather than the unused preset.
    const fullRun = readRun(full);
    assert.equal(fullRun.kind, 'sft');
    assert.equal(fullRun.step, 2);
    assert.deepEqual(fullRun.base, { dir: hf, lora: null });
    assert.equal(runModelLabel(fullRun), 'hf');
    assert.match(describeRun(fullRun), /^sft · hf · /);

    // LoRA on the folder whose tokenizer holds the specials: the adapters are what trains.
    const lora = path.join(tmp, 'run-lora');
    const rl = await runJob({ kind: 'sft', runDir: lora, traces, backend: 'wasm', steps: 2, evalLimit: 0, ...sftModelFields({ base: hfSpecials, lora: EDITOR_LORA_SPEC }) }, quietHooks());
    assert.equal(rl.summary.steps, 2);
    const lconfig = JSON.parse(fs.readFileSync(path.join(lora, 'config.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    assert.equal(lconfig['lora']!['r'], 8);
    assert.equal(lconfig['lora']!['alpha'], 16);
    const loraRun = readRun(lora);
    assert.deepEqual(loraRun.base, { dir: hfSpecials, lora: 'r 8, alpha 16' });
    assert.match(describeRun(loraRun), /^sft · hf-specials \(LoRA\) · /);
    // A preset's run keeps its preset.
    assert.equal(runModelLabel({ preset: 'tiny', base: null }), 'tiny');

    // LoRA where the tokenizer gains rows: the nine added rows train beside the adapters, recorded by id.
    const withRows = path.join(tmp, 'run-lora-rows');
    const rr = await runJob({ kind: 'sft', runDir: withRows, traces, backend: 'wasm', steps: 2, evalLimit: 0, ...sftModelFields({ base: hf, lora: EDITOR_LORA_SPEC }) }, quietHooks());
    assert.equal(rr.summary.steps, 2);
    const rconfig = JSON.parse(fs.readFileSync(path.join(withRows, 'config.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    assert.deepEqual(rconfig['lora']!['trainedRows'], Array.from({ length: 9 }, (_, k) => cfg.vocab + k));
    assert.deepEqual(rconfig['model']!['vocab'], cfg.vocab + 9);
  });
});
