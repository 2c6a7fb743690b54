// LoRA (trainer/model/lora.ts): the --lora spec and its refusals, PEFT's equations (y = Wx +
// (alpha/r) B A x, checked against an explicit per-layer computation), adapter gradients
// against central finite differences, a frozen base (bit-identical after training, on one
// thread and with a worker thread), checkpoints that hold the adapters and refuse a
// changed base folder, and the same LoRA steps on webgpu (the async step, the tensor
// optimiser; SwiftShader where there is no GPU) as on wasm.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initBackend } from '../../trainer/model/backend';
import { loadCheckpoint, saveCheckpoint } from '../../trainer/run/checkpoint';
import { InputError } from '../../store/files';
import { writeHfFolder } from '../../trainer/hf/hfExport';
import { loadHfFolder, withAddedRows } from '../../trainer/hf/hfModel';
import { EMBED_ROWS, HEAD_ROWS, LORA_TARGETS, LoraModel, LoraSpec, baseFiles, checkLoraRecord, countLoraParams, loraParamSpecs, mergeLora, parseLoraSpec, targetSlot } from '../../trainer/model/lora';
import { Batch, IGNORE, ModelConfig, StackModel, countParams, makeRng, paramSpecs } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';

const MICRO: ModelConfig = { vocab: 23, dModel: 16, layers: 2, heads: 4, kvHeads: 2, mlp: 24, maxSeq: 32, ropeBase: 10000 };
/** What Hugging Face checkpoints bring: q/k/v biases, an untied head, head_dim apart from d/heads, eps 1e-6. */
const MICRO_HF: ModelConfig = { ...MICRO, headDim: 6, qkvBias: true, tiedHead: false, normEps: 1e-6 };

function randomWeights(cfg: ModelConfig, seed: number, std = 0.3): Record<string, Float32Array> {
  const rng = makeRng(seed);
  const w: Record<string, Float32Array> = {};
  for (const s of paramSpecs(cfg)) {
    const n = s.shape.reduce((a, c) => a * c, 1);
    w[s.name] = Float32Array.from({ length: n }, () => (s.shape.length === 1 && !s.name.endsWith('bqkv') ? 1 : 0) + std * rng.normal());
  }
  return w;
}

function randomAdapters(cfg: ModelConfig, spec: LoraSpec, seed: number, std = 0.3): Record<string, Float32Array> {
  const rng = makeRng(seed);
  const out: Record<string, Float32Array> = {};
  for (const s of loraParamSpecs(cfg, spec)) out[s.name] = Float32Array.from({ length: s.shape[0]! * s.shape[1]! }, () => std * rng.normal());
  return out;
}

function batchOf(cfg: ModelConfig, rows: number, seq: number, seed: number): Batch {
  const rng = makeRng(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq);
  for (let i = 0; i < rows * seq; i++) {
    inputIds[i] = Math.floor(rng.uniform() * cfg.vocab);
    labels[i] = rng.uniform() < 0.3 ? IGNORE : Math.floor(rng.uniform() * cfg.vocab);
  }
  return { inputIds, labels, batch: rows, seq };
}

/** A base of vocab - 3 rows whose tokenizer gained three tokens: the model's last three rows. */
const ADDED = (cfg: ModelConfig): number[] => [cfg.vocab - 3, cfg.vocab - 2, cfg.vocab - 1];
const sameBits = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const BASE = { dir: '/nonexistent', files: [] };
const maxDiff = (a: Float32Array, b: Float32Array): number => {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe('trainer/model/lora: LoRA adapters over a frozen base (PEFT semantics)', function () {
  this.timeout(300000);

  it('parses r,alpha[,targets] and refuses, naming it, what does not parse, r <= 0, alpha <= 0 and an unknown target', () => {
    assert.deepEqual(parseLoraSpec('8,16'), { r: 8, alpha: 16, targets: [...LORA_TARGETS] });
    assert.deepEqual(parseLoraSpec('4,8,v,q'), { r: 4, alpha: 8, targets: ['q', 'v'] });
    assert.deepEqual(parseLoraSpec('2, 0.5, down'), { r: 2, alpha: 0.5, targets: ['down'] });
    const refuses = (text: string, re: RegExp) => assert.throws(() => parseLoraSpec(text), re);
    refuses('8', /--lora "8" does not parse: --lora r,alpha/);
    refuses('', /does not parse/);
    refuses('8,,q', /does not parse/);
    refuses('0,16', /r must be >= 1 \(got 0\)/);
    refuses('-2,16', /r must be >= 1 \(got -2\)/);
    refuses('2.5,16', /r "2.5" is not an integer/);
    refuses('x,16', /r "x" is not an integer/);
    refuses('8,0', /alpha must be a number > 0 \(got "0"\)/);
    refuses('8,abc', /alpha must be a number > 0 \(got "abc"\)/);
    refuses('8,16,q,lm_head', /unknown target "lm_head" \(targets: q, k, v, o, gate, up, down\)/);
    refuses('8,16,q_proj', /unknown target "q_proj"/);
    assert.deepEqual(checkLoraRecord({ r: 2, alpha: 4, targets: ['o', 'q'] }, 'x'), { r: 2, alpha: 4, targets: ['q', 'o'] });
    assert.throws(() => checkLoraRecord({ r: 2, alpha: 4, targets: ['w'] }, 'config.json'), /config\.json: "lora\.targets" must be a list/);
    // The added rows a run trains beside its adapters: consecutive ids, kept as recorded.
    assert.deepEqual(checkLoraRecord({ r: 2, alpha: 4, targets: ['q'], trainedRows: [5, 6] }, 'x'), { r: 2, alpha: 4, targets: ['q'], trainedRows: [5, 6] });
    assert.throws(() => checkLoraRecord({ r: 2, alpha: 4, targets: ['q'], trainedRows: [] }, 'config.json'), /config\.json: "lora\.trainedRows" must be a list of consecutive embedding ids \(got \[\]\)/);
  });

  it('counts: adapters are r*(in+out) per targeted layer; a tiny fraction of the model', () => {
    const spec = parseLoraSpec('8,16');
    const hd = 16 / 4;
    const perLayer = 8 * (16 + 4 * hd) + 2 * 8 * (16 + 2 * hd) + 8 * (4 * hd + 16) + 2 * 8 * (16 + 24) + 8 * (24 + 16);
    assert.equal(countLoraParams(MICRO, spec), 2 * perLayer);
    assert.equal(loraParamSpecs(MICRO, spec).length, 2 * 7 * 2);
    assert.ok(countLoraParams(MICRO, parseLoraSpec('1,1,q')) < countParams(MICRO));
  });

  for (const cfg of [MICRO, MICRO_HF]) {
    const note = cfg.qkvBias ? ' (q/k/v biases, untied head, head_dim apart)' : '';
    it(`each merged layer computes y = W x + (alpha/r) B (A x) (an explicit product, layer by layer)${note}`, async () => {
      await initBackend('cpu');
      const spec = parseLoraSpec('3,5,q,k,v,o,gate,up,down');
      const base = randomWeights(cfg, 1);
      const ad = randomAdapters(cfg, spec, 2);
      const merged = mergeLora(cfg, base, spec, ad);
      const s = 5 / 3;
      const rng = makeRng(3);
      for (let i = 0; i < cfg.layers; i++) {
        for (const t of spec.targets) {
          const slot = targetSlot(cfg, t);
          const x = Float32Array.from({ length: slot.in }, () => rng.normal());
          const W = base[`layers.${i}.${slot.weight}`]!;
          const M = merged[`layers.${i}.${slot.weight}`]!;
          const A = ad[`layers.${i}.${t}.lora_A`]!;
          const B = ad[`layers.${i}.${t}.lora_B`]!;
          // A x, then B (A x), in float64: PEFT's unmerged forward
          const ax = Array.from({ length: spec.r }, (_, k) => x.reduce((acc, xv, j) => acc + A[k * slot.in + j]! * xv, 0));
          for (let o = 0; o < slot.out; o++) {
            let wx = 0;
            let mx = 0;
            for (let j = 0; j < slot.in; j++) {
              wx += W[j * slot.cols + slot.col + o]! * x[j]!;
              mx += M[j * slot.cols + slot.col + o]! * x[j]!;
            }
            const bax = ax.reduce((acc, a, k) => acc + B[o * spec.r + k]! * a, 0);
            assert.ok(Math.abs(mx - (wx + s * bax)) < 1e-4, `layer ${i} ${t} out ${o}: ${mx} vs ${wx + s * bax}`);
          }
        }
      }
      // Weights no target touches are the base's own; a target's columns only change its own.
      const only = parseLoraSpec('3,5,k');
      const mk = mergeLora(cfg, base, only, randomAdapters(cfg, only, 4));
      const slot = targetSlot(cfg, 'k');
      const Wk = base['layers.0.wqkv']!;
      const Mk = mk['layers.0.wqkv']!;
      let changedOutside = 0;
      for (let j = 0; j < slot.in; j++) for (let c = 0; c < slot.cols; c++) if ((c < slot.col || c >= slot.col + slot.out) && Wk[j * slot.cols + c] !== Mk[j * slot.cols + c]) changedOutside++;
      assert.equal(changedOutside, 0);
      assert.equal(mk['layers.0.wo'], base['layers.0.wo']);
      // The model on merged weights starts at the base exactly (B = 0 at init).
      const net = StackModel.fromWeights(cfg, base);
      const plain = net.logits(Int32Array.from([1, 2, 3, 4]), 1, 4);
      const lora = LoraModel.create(StackModel.fromWeights(cfg, base), spec, BASE, 7);
      assert.ok(sameBits(lora.net.logits(Int32Array.from([1, 2, 3, 4]), 1, 4), plain));
      net.dispose();
      lora.dispose();
    });

    for (const withRows of [false, true]) {
    const rowsNote = withRows ? ', and the 3 added embedding rows trained beside them' + (cfg.tiedHead === false ? ' (and their head rows)' : ' (the tied head the same rows)') : '';
    it(`adapter gradients agree with central finite differences, A and B of every target${rowsNote}${note}`, async () => {
      await initBackend('cpu');
      const spec: LoraSpec = { ...parseLoraSpec('2,3'), ...(withRows ? { trainedRows: ADDED(cfg) } : {}) };
      const base = randomWeights(cfg, 11);
      const start = randomAdapters(cfg, spec, 12); // B != 0: dA would be 0 at PEFT's init
      const lora = LoraModel.fromAdapters(StackModel.fromWeights(cfg, base), spec, BASE, start);
      const b = batchOf(cfg, 2, 8, 5);
      // Every added token read and predicted: the rows' gradients come from both the embedding and the head.
      ADDED(cfg).forEach((id, k) => {
        b.inputIds[3 * k] = id;
        b.labels[3 * k + 1] = id;
      });
      const r = lora.lossAndGrads(b);
      const grads: Record<string, Float32Array> = {};
      for (const [k, t] of r.grads) {
        grads[k] = new Float32Array(t.dataSync());
        t.dispose();
      }
      assert.deepEqual(Object.keys(grads).sort(), loraParamSpecs(cfg, spec).map((s) => s.name).sort());
      const rng = makeRng(99);
      // (1e-2 leaves ~2% curvature error on the first layer's k; 3e-3 is well above float32 noise)
      const eps = 3e-3;
      for (const s of loraParamSpecs(cfg, spec)) {
        const gnorm = Math.sqrt(grads[s.name]!.reduce((a, x) => a + x * x, 0));
        assert.ok(gnorm > 1e-3, `${s.name}: a gradient this small (${gnorm}) would not test anything`);
        const n = start[s.name]!.length;
        const u = Float32Array.from({ length: n }, () => rng.normal());
        const norm = Math.sqrt(u.reduce((a, x) => a + x * x, 0));
        let analytic = 0;
        for (let i = 0; i < n; i++) analytic += (u[i]! / norm) * grads[s.name]![i]!;
        const at = (sign: number): number => {
          const w = Float32Array.from(start[s.name]!, (x, i) => x + (sign * eps * u[i]!) / norm);
          lora.setWeights({ [s.name]: w });
          return lora.net.evaluate(b).loss;
        };
        const numeric = (at(1) - at(-1)) / (2 * eps);
        lora.setWeights({ [s.name]: start[s.name]! });
        const tol = 2e-4 + 0.01 * Math.abs(analytic);
        assert.ok(Math.abs(numeric - analytic) < tol, `${s.name}: finite difference ${numeric} vs gradient ${analytic}`);
      }
      if (withRows) assert.deepEqual(Object.keys(grads).filter((k) => k.endsWith('.rows')), cfg.tiedHead === false ? [EMBED_ROWS, HEAD_ROWS] : [EMBED_ROWS]);
      lora.dispose();
    });
    }
  }

  it('lossAndGrads(batch, only) computes just those gradients, equal to the full backward pass\'s', async () => {
    await initBackend('wasm');
    for (const cfg of [MICRO_HF, { ...MICRO, prevTokens: 2 }]) {
      const m = StackModel.fromWeights(cfg, randomWeights(cfg, 41));
      const b = batchOf(cfg, 2, 10, 6);
      const all = m.lossAndGrads(b);
      for (const only of [new Set(['layers.0.wqkv', 'layers.1.w_down']), new Set(['lm_head', 'final_norm', 'layers.1.bqkv']), new Set(['tok_embeddings'])]) {
        const some = m.lossAndGrads(b, only);
        assert.equal(some.loss, all.loss);
        const want = [...only].filter((n) => paramSpecs(cfg).some((s) => s.name === n));
        assert.deepEqual([...some.grads.keys()].sort(), want.sort());
        for (const [k, t] of some.grads) {
          assert.ok(sameBits(t.dataSync() as Float32Array, all.grads.get(k)!.dataSync() as Float32Array), k);
          t.dispose();
        }
      }
      for (const t of all.grads.values()) t.dispose();
      m.dispose();
    }
  });

  for (const threads of [0, 1]) {
    it(`training moves only the adapters: the base is bit-identical after steps, the loss falls (${threads ? 'a worker thread + this one' : 'one thread'}, wasm)`, async () => {
      await initBackend('wasm');
      const cfg = MICRO_HF;
      const base = randomWeights(cfg, 21, 0.1);
      const spec = parseLoraSpec('4,8,q,v,down');
      const lora = LoraModel.create(StackModel.fromWeights(cfg, base), spec, BASE, 3);
      const tr = new Trainer(lora, { lr: 0.02, parallel: threads });
      assert.equal(tr.workers.threads, threads);
      const batch = batchOf(cfg, 4, 12, 8);
      const first = tr.step(batch);
      let last = first;
      for (let k = 0; k < 14; k++) last = tr.step(batch);
      assert.ok(last.loss < first.loss - 0.05, `loss ${first.loss} -> ${last.loss}`);
      if (threads) assert.equal(last.shards, 2);
      // The frozen copies and every weight no adapter touches are the base's, bit for bit.
      const net = lora.net.exportWeights();
      for (const s of paramSpecs(cfg)) {
        const frozen = lora.frozenWeight(s.name);
        if (frozen) {
          assert.ok(sameBits(frozen, base[s.name]!), `${s.name}: the frozen base changed`);
          assert.ok(!sameBits(net[s.name]!, base[s.name]!), `${s.name}: the merged weight did not move`);
        } else assert.ok(sameBits(net[s.name]!, base[s.name]!), `${s.name} is not adapted but changed`);
      }
      // ... and the net's adapted weights are base + s B A of the adapters trained (mergeLora, in JS, to float32 rounding).
      const again = mergeLora(cfg, base, spec, lora.exportWeights());
      for (const name of Object.keys(again)) assert.ok(maxDiff(again[name]!, net[name]!) < 1e-6, name);
      tr.dispose();
      lora.dispose();
    });
  }

  for (const [cfg, threads] of [
    [MICRO_HF, 0],
    [MICRO_HF, 1],
    [MICRO, 0],
  ] as const) {
    const where = `${cfg.tiedHead === false ? 'untied head' : 'tied head'}, ${threads ? 'a worker thread + this one' : 'one thread'}`;
    it(`added rows train beside the adapters: they leave their mean, every original row is the base's bit for bit, only they have optimiser state (${where})`, async () => {
      await initBackend('wasm');
      const V0 = cfg.vocab - 3;
      const base = withAddedRows({ ...cfg, vocab: V0 }, randomWeights({ ...cfg, vocab: V0 }, 23, 0.1), cfg.vocab);
      const spec: LoraSpec = { ...parseLoraSpec('4,8,q,v,down'), trainedRows: ADDED(cfg) };
      const lora = LoraModel.create(StackModel.fromWeights(cfg, base), spec, BASE, 3);
      const d = cfg.dModel;
      const rowWeights = cfg.tiedHead === false ? ['tok_embeddings', 'lm_head'] : ['tok_embeddings'];
      // The count: adapters plus n x d a row weight; step 0 is the base exactly (rows at their mean).
      assert.equal(lora.paramCount(), countLoraParams(cfg, parseLoraSpec('4,8,q,v,down')) + 3 * d * rowWeights.length);
      const plain = StackModel.fromWeights(cfg, base);
      assert.ok(sameBits(lora.net.logits(Int32Array.from([V0, 1, V0 + 2]), 1, 3), plain.logits(Int32Array.from([V0, 1, V0 + 2]), 1, 3)));
      plain.dispose();
      const tr = new Trainer(lora, { lr: 0.02, parallel: threads });
      assert.equal(tr.workers.threads, threads);
      const batch = batchOf(cfg, 4, 12, 8);
      ADDED(cfg).forEach((id, k) => {
        batch.inputIds[5 * k] = id;
        batch.labels[5 * k + 2] = id;
      });
      const first = tr.step(batch);
      let last = first;
      for (let k = 0; k < 14; k++) last = tr.step(batch);
      assert.ok(last.loss < first.loss - 0.05, `loss ${first.loss} -> ${last.loss}`);
      const net = lora.net.exportWeights();
      const trained = lora.exportWeights();
      for (const w of rowWeights) {
        assert.ok(sameBits(net[w]!.subarray(0, V0 * d), base[w]!.subarray(0, V0 * d)), `${w}: an original row changed`);
        const rows = net[w]!.subarray(V0 * d);
        assert.ok(sameBits(rows, trained[w === 'lm_head' ? HEAD_ROWS : EMBED_ROWS]!), `${w}: the net's rows are not the trained ones`);
        for (let r = 0; r < 3; r++) assert.ok(!sameBits(rows.subarray(r * d, (r + 1) * d), base[w]!.subarray((V0 + r) * d, (V0 + r + 1) * d)), `${w} row ${V0 + r} did not move from its mean`);
      }
      for (const s of paramSpecs(cfg)) if (!rowWeights.includes(s.name) && !lora.frozenWeight(s.name)) assert.ok(sameBits(net[s.name]!, base[s.name]!), `${s.name} changed`);
      // AdamW holds moments of the rows only, not of the whole embedding.
      const st = tr.adam.exportState();
      assert.deepEqual(Object.keys(st.m).filter((k) => !k.includes('.lora_')), cfg.tiedHead === false ? [EMBED_ROWS, HEAD_ROWS] : [EMBED_ROWS]);
      assert.equal(st.m[EMBED_ROWS]!.length, 3 * d);
      // mergeLora (JS, what a checkpoint loads as) puts the same rows in place.
      const again = mergeLora(cfg, base, spec, trained);
      for (const name of Object.keys(again)) assert.ok(maxDiff(again[name]!, net[name]!) < 1e-6, name);
      tr.dispose();
      lora.dispose();
    });
  }

  it('a checkpoint with trained rows holds them and their ids; loading appends them to the base folder\'s rows; rows not at the end are refused', async () => {
    await initBackend('wasm');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-lora-rows-'));
    try {
      const cfg = MICRO_HF;
      const V0 = cfg.vocab - 3;
      const hf = path.join(tmp, 'base');
      writeHfFolder(hf, { ...cfg, vocab: V0 }, randomWeights({ ...cfg, vocab: V0 }, 31, 0.1));
      const folder = loadHfFolder(hf);
      const spec: LoraSpec = { ...parseLoraSpec('2,4,o,up'), trainedRows: ADDED(cfg) };
      const lora = LoraModel.create(StackModel.fromWeights(cfg, withAddedRows(folder.model, folder.weights, cfg.vocab)), spec, { dir: hf, files: baseFiles(hf) }, 5);
      const tr = new Trainer(lora, { lr: 0.02 });
      for (let k = 0; k < 3; k++) tr.step(batchOf(cfg, 2, 10, k));
      const run = path.join(tmp, 'run');
      await saveCheckpoint(run, 3, lora, tr);
      const ck = loadCheckpoint(run, 'latest');
      assert.deepEqual(ck.lora?.spec, spec);
      assert.deepEqual(Object.keys(ck.lora!.adapters), loraParamSpecs(cfg, spec).map((s) => s.name));
      assert.deepEqual(Object.keys(ck.optimizer!.m), Object.keys(ck.lora!.adapters));
      assert.ok(sameBits(ck.lora!.adapters[EMBED_ROWS]!, lora.exportWeights()[EMBED_ROWS]!));
      assert.equal(ck.lora!.baseWeights['tok_embeddings']!.length, cfg.vocab * cfg.dModel);
      const net = lora.net.exportWeights();
      for (const s of paramSpecs(cfg)) assert.ok(maxDiff(ck.weights[s.name]!, net[s.name]!) < 1e-6, s.name);
      for (const w of ['tok_embeddings', 'lm_head']) assert.ok(sameBits(ck.weights[w]!.subarray(0, V0 * cfg.dModel), folder.weights[w]!), w);
      // Resumed: the same model again from the base and the checkpoint.
      const back = LoraModel.fromAdapters(StackModel.fromWeights(ck.config, ck.lora!.baseWeights), ck.lora!.spec, ck.lora!.base, ck.lora!.adapters);
      const ids = Int32Array.from([V0 + 1, 3, V0, 4]);
      assert.ok(sameBits(back.net.logits(ids, 1, 4), lora.net.logits(ids, 1, 4)));
      back.dispose();
      // checkpoint.json naming rows that are not the model's last ones: refused, one line.
      const info = path.join(ck.dir, 'checkpoint.json');
      const json = JSON.parse(fs.readFileSync(info, 'utf8')) as { lora: Record<string, unknown> };
      json.lora['trainedRows'] = [V0 - 1, V0, V0 + 1];
      fs.writeFileSync(info, JSON.stringify(json));
      assert.throws(() => loadCheckpoint(run, 'latest'), (e: Error) => e instanceof InputError && /trained rows 19\.\.21 are not the last rows of a 23-row embedding/.test(e.message) && !e.message.includes('\n'));
      json.lora['trainedRows'] = [V0, V0 + 2];
      fs.writeFileSync(info, JSON.stringify(json));
      assert.throws(() => loadCheckpoint(run, 'latest'), /"lora\.trainedRows" must be a list of consecutive embedding ids \(got \[20,22\]\)/);
      tr.dispose();
      lora.dispose();
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('webgpu trains the same adapters as wasm (async step, tensor optimiser; in child processes)', function () {
    const child = (backend: string, env: NodeJS.ProcessEnv = {}): { out: Record<string, unknown> | null; err: string } => {
      const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '..', 'support', 'loraBackend.ts'), backend], {
        encoding: 'utf8',
        cwd: path.join(__dirname, '..', '..'),
        env: { ...process.env, ...env },
        timeout: 240_000,
      });
      const line = (r.stdout ?? '').trim().split('\n').filter((l) => l.startsWith('{')).pop();
      return { out: r.status === 0 && line ? (JSON.parse(line) as Record<string, unknown>) : null, err: (r.stderr ?? '').trim().split('\n').pop() ?? '' };
    };
    const wasm = child('wasm');
    assert.ok(wasm.out, wasm.err);
    const icd = '/usr/lib/chromium/vk_swiftshader_icd.json';
    const gpu = child('webgpu', fs.existsSync(icd) && !process.env['VK_ICD_FILENAMES'] ? { VK_ICD_FILENAMES: icd } : {});
    if (!gpu.out) {
      console.log(`      (pending, NOT a pass: webgpu did not start here: ${gpu.err})`);
      this.skip();
    }
    const a = wasm.out!;
    const b = gpu.out!;
    assert.equal(b['backend'], 'webgpu');
    assert.equal(b['optimizer'], 'tensor');
    console.log(`      webgpu on ${String(b['adapter'])}`);
    const near = (x: number[], y: number[], what: string): void => {
      assert.equal(x.length, y.length, what);
      x.forEach((v, i) => assert.ok(Math.abs(v - y[i]!) < 1e-5 * Math.max(1, Math.abs(v)), `${what}[${i}]: ${v} vs ${y[i]}`));
    };
    near(a['losses'] as number[], b['losses'] as number[], 'losses');
    near(a['logits'] as number[], b['logits'] as number[], 'logits');
    for (const [k, v] of Object.entries(a['adapters'] as Record<string, number[]>)) near(v, (b['adapters'] as Record<string, number[]>)[k]!, k);
    assert.ok((a['losses'] as number[])[2]! < (a['losses'] as number[])[0]!);
  });

  it('a checkpoint holds the adapters and says which base; loading merges; a changed base folder is refused in one line', async () => {
    await initBackend('wasm');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-lora-'));
    try {
      const cfg = MICRO_HF;
      const hf = path.join(tmp, 'base');
      writeHfFolder(hf, cfg, randomWeights(cfg, 31, 0.1));
      const folder = loadHfFolder(hf);
      const spec = parseLoraSpec('2,4,o,up');
      const lora = LoraModel.create(StackModel.fromWeights(folder.model, folder.weights), spec, { dir: hf, files: baseFiles(hf) }, 5);
      const tr = new Trainer(lora, { lr: 0.02 });
      for (let k = 0; k < 3; k++) tr.step(batchOf(cfg, 2, 10, k));
      const run = path.join(tmp, 'run');
      await saveCheckpoint(run, 3, lora, tr, { note: 1 });
      const ck = loadCheckpoint(run, 'latest');
      assert.ok(ck.lora);
      assert.deepEqual(ck.lora.spec, spec);
      assert.deepEqual(Object.keys(ck.lora.adapters), loraParamSpecs(cfg, spec).map((s) => s.name));
      assert.deepEqual(Object.keys(ck.optimizer!.m), Object.keys(ck.lora.adapters));
      // The weights file holds nothing but the adapters: a checkpoint of r/in of the model.
      const bytes = fs.statSync(path.join(ck.dir, 'model.safetensors')).size;
      assert.ok(bytes < 4 * countLoraParams(cfg, spec) + 2048, `${bytes} bytes`);
      const net = lora.net.exportWeights();
      for (const s of paramSpecs(cfg)) assert.ok(maxDiff(ck.weights[s.name]!, net[s.name]!) < 1e-6, s.name);
      const m = StackModel.fromWeights(ck.config, ck.weights);
      assert.ok(maxDiff(m.logits(Int32Array.from([3, 4, 5]), 1, 3), lora.net.logits(Int32Array.from([3, 4, 5]), 1, 3)) < 1e-5);
      m.dispose();
      // The same folder rewritten (other weights, same size): refused, naming the file.
      const later = new Date(Date.now() + 5000);
      fs.utimesSync(path.join(hf, 'model.safetensors'), later, later);
      assert.throws(
        () => loadCheckpoint(run, 'latest'),
        (e: Error) => e instanceof InputError && /its LoRA base changed since the run trained on it \(.*base\/model\.safetensors is \d+ bytes modified .*, the run recorded/.test(e.message) && !e.message.includes('\n'),
      );
      fs.rmSync(hf, { recursive: true });
      assert.throws(() => loadCheckpoint(run, 'latest'), /its LoRA base changed .*base is gone/);
      tr.dispose();
      lora.dispose();
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
