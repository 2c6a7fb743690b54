// Checkpoints: a bit-identical round trip (weights and AdamW state), training resumed from
// a checkpoint continues exactly as the uninterrupted run, a process killed in the middle
// of a save leaves `latest` on the previous complete checkpoint, and the files are plain
// safetensors (read back independently here and, when python3 is present, by Python).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initBackend } from '../../trainer/model/backend';
import {
  decodeSafetensors,
  encodeSafetensors,
  latestCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  optimConfigOf,
  pruneCheckpoints,
  restoreModel,
  saveCheckpoint,
} from '../../trainer/run/checkpoint';
import { Batch, IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';

const MICRO: ModelConfig = { vocab: 17, dModel: 16, layers: 2, heads: 2, kvHeads: 1, mlp: 24, maxSeq: 32, ropeBase: 10000 };

function batchOf(seed: number): Batch {
  const rng = makeRng(seed);
  const n = 2 * 12;
  return {
    batch: 2,
    seq: 12,
    inputIds: Int32Array.from({ length: n }, () => Math.floor(rng.uniform() * MICRO.vocab)),
    labels: Int32Array.from({ length: n }, (_, i) => (i % 12 < 3 ? IGNORE : Math.floor(rng.uniform() * MICRO.vocab))),
  };
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

describe('trainer/run/checkpoint: safetensors checkpoints, atomic and resumable', function () {
  this.timeout(120000);
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-ckpt-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('safetensors encode/decode round-trips with metadata, header 8-byte aligned', () => {
    const bytes = encodeSafetensors(
      { a: { dtype: 'F32', shape: [2, 3], data: Float32Array.from([1, -2, 3.5, NaN, -0, 1e-40]) }, b: { dtype: 'I32', shape: [2], data: Int32Array.from([7, -9]) } },
      { hello: 'world' },
    );
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    assert.equal(n % 8, 0);
    const back = decodeSafetensors(bytes);
    assert.equal(back.metadata['hello'], 'world');
    assert.deepEqual(back.tensors['a']!.shape, [2, 3]);
    assert.ok(sameBits(back.tensors['a']!.data as Float32Array, Float32Array.from([1, -2, 3.5, NaN, -0, 1e-40])));
    assert.deepEqual(Array.from(back.tensors['b']!.data), [7, -9]);
  });

  it('round trip is bit-identical and resumed training continues exactly', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 3);
    const tr = new Trainer(m, { lr: 0.01, warmupSteps: 2, totalSteps: 20 });
    for (let s = 0; s < 3; s++) tr.step(batchOf(s));
    const dir = await saveCheckpoint(tmp, 3, m, tr, { recipe: 'test', dataPosition: 6 });
    assert.equal(path.basename(dir), 'step-3');
    assert.equal(latestCheckpoint(tmp), 'step-3');
    const ck = loadCheckpoint(tmp, 'latest');
    assert.equal(ck.step, 3);
    assert.deepEqual(ck.extra, { recipe: 'test', dataPosition: 6 });
    assert.deepEqual(ck.config, MICRO);
    const w = m.exportWeights();
    for (const k of Object.keys(w)) assert.ok(sameBits(w[k]!, ck.weights[k]!), k);
    const st = tr.exportState();
    assert.equal(ck.optimizer!.t, 3);
    for (const k of Object.keys(st.m)) {
      assert.ok(sameBits(st.m[k]!, ck.optimizer!.m[k]!), `m.${k}`);
      assert.ok(sameBits(st.v[k]!, ck.optimizer!.v[k]!), `v.${k}`);
    }
    // resume into fresh objects; the next steps match the uninterrupted run bit for bit
    const m2 = restoreModel(ck);
    const tr2 = new Trainer(m2, optimConfigOf(ck)!);
    tr2.importState(ck.optimizer!);
    for (let s = 3; s < 6; s++) {
      const a = tr.step(batchOf(s));
      const b = tr2.step(batchOf(s));
      assert.equal(a.loss, b.loss);
      assert.equal(a.lr, b.lr);
      assert.equal(a.step, b.step);
    }
    const wa = m.exportWeights();
    const wb = m2.exportWeights();
    for (const k of Object.keys(wa)) assert.ok(sameBits(wa[k]!, wb[k]!), k);
    tr.dispose();
    tr2.dispose();
    m.dispose();
    m2.dispose();
  });

  it('a process killed in the middle of a save leaves latest on the previous complete checkpoint', async () => {
    // A child process saves step 1 completely, then is SIGKILLed right after writing the
    // weights file of step 2.
    const script = `
      const { initBackend } = require(${JSON.stringify(path.resolve('trainer/model/backend.ts'))});
      const { StackModel } = require(${JSON.stringify(path.resolve('trainer/model/model.ts'))});
      const { Trainer } = require(${JSON.stringify(path.resolve('trainer/model/optim.ts'))});
      const ck = require(${JSON.stringify(path.resolve('trainer/run/checkpoint.ts'))});
      (async () => {
        await initBackend('cpu');
        const m = StackModel.create(${JSON.stringify(MICRO)}, 1);
        const tr = new Trainer(m, { lr: 0.01 });
        await ck.saveCheckpoint(${JSON.stringify(tmp)}, 1, m, tr, {});
        ck.checkpointHooks.afterFile = (f) => { if (f.endsWith('model.safetensors')) process.kill(process.pid, 'SIGKILL'); };
        await ck.saveCheckpoint(${JSON.stringify(tmp)}, 2, m, tr, {});
        console.log('not killed');
      })();
    `;
    const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { encoding: 'utf8', cwd: process.cwd() });
    assert.equal(r.signal, 'SIGKILL', r.stderr);
    assert.ok(!r.stdout.includes('not killed'));
    const names = fs.readdirSync(path.join(tmp, 'checkpoints'));
    assert.ok(names.some((n) => n.startsWith('.tmp-step-2')), `a half-written temp folder remains: ${names.join(', ')}`);
    assert.ok(!names.includes('step-2'));
    assert.equal(latestCheckpoint(tmp), 'step-1');
    assert.deepEqual(
      listCheckpoints(tmp).map((c) => c.name),
      ['step-1'],
    );
    await initBackend('wasm');
    const ck = loadCheckpoint(tmp, 'latest');
    assert.equal(ck.step, 1);
    // the next save cleans the leftover up
    const m = restoreModel(ck);
    await saveCheckpoint(tmp, 2, m, null, {});
    assert.ok(!fs.readdirSync(path.join(tmp, 'checkpoints')).some((n) => n.startsWith('.tmp')));
    assert.equal(latestCheckpoint(tmp), 'step-2');
    assert.equal(loadCheckpoint(tmp).optimizer, null);
    m.dispose();
  });

  it('latest falls back to the newest complete checkpoint; pruning keeps latest; re-saving a step replaces it', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 2);
    for (const s of [1, 2, 3]) await saveCheckpoint(tmp, s, m, null, { s });
    fs.rmSync(path.join(tmp, 'checkpoints', 'latest'));
    assert.equal(latestCheckpoint(tmp), 'step-3');
    fs.writeFileSync(path.join(tmp, 'checkpoints', 'latest'), 'step-9\n'); // dangling pointer
    assert.equal(latestCheckpoint(tmp), 'step-3');
    await saveCheckpoint(tmp, 3, m, null, { s: 'again' });
    assert.deepEqual(loadCheckpoint(tmp, 'step-3').extra, { s: 'again' });
    assert.deepEqual(pruneCheckpoints(tmp, 1), ['step-1', 'step-2']);
    assert.deepEqual(
      listCheckpoints(tmp).map((c) => c.name),
      ['step-3'],
    );
    assert.throws(() => loadCheckpoint(tmp, 'step-1'), /missing/);
    m.dispose();
  });

  it('Python reads the weights file as safetensors (header, dtype, shapes, values)', async function () {
    const py = spawnSync('python3', ['-c', 'import json,struct'], { encoding: 'utf8' });
    if (py.status !== 0) this.skip();
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 4);
    const dir = await saveCheckpoint(tmp, 0, m, null, {});
    const code = `
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
h = json.loads(data[8:8+n])
e = h['tok_embeddings']
b, _ = e['data_offsets']
first = struct.unpack('<f', data[8+n+b:8+n+b+4])[0]
print(json.dumps({'dtype': e['dtype'], 'shape': e['shape'], 'first': first, 'format': h['__metadata__']['format']}))
`;
    const r = spawnSync('python3', ['-c', code, path.join(dir, 'model.safetensors')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const got = JSON.parse(r.stdout) as { dtype: string; shape: number[]; first: number; format: string };
    assert.equal(got.dtype, 'F32');
    assert.deepEqual(got.shape, [MICRO.vocab, MICRO.dModel]);
    assert.equal(got.format, 'agent-lab-stack/1');
    assert.equal(Math.fround(got.first), m.exportWeights()['tok_embeddings']![0]);
    m.dispose();
  });
});
