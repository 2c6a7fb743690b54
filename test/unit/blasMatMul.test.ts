// The wasm backend's matrix products on the machine's BLAS (trainer/model/blasMatMul.ts):
// the same products as XNNPACK's kernel and tfjs's cpu backend on every layout the model
// uses (transposes, batches, one side shared by every batch, empty sides), XNNPACK's own
// kernel for what it does not take, and the way it is switched off.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from '../../trainer/model/backend';
import { blasMatMulState, describeBlas, setBlasMatMul } from '../../trainer/model/blasMatMul';
import { makeRng } from '../../trainer/model/model';

const ROOT = path.join(__dirname, '..', '..');

function values(shape: number[], seed: number): Float32Array {
  const rng = makeRng(seed);
  return Float32Array.from({ length: shape.reduce((p, d) => p * d, 1) }, () => rng.uniform() * 2 - 1);
}

/** tf.matMul of the same values on the wasm backend (BLAS or XNNPACK) and on the cpu backend. */
async function product(aShape: number[], bShape: number[], tA: boolean, tB: boolean, blas: boolean): Promise<{ shape: number[]; data: Float32Array }> {
  await tf.setBackend('wasm');
  setBlasMatMul(blas);
  try {
    const a = tf.tensor(values(aShape, 1), aShape);
    const b = tf.tensor(values(bShape, 2), bShape);
    const c = tf.matMul(a, b, tA, tB);
    const out = { shape: c.shape, data: c.dataSync() as Float32Array };
    tf.dispose([a, b, c]);
    return out;
  } finally {
    setBlasMatMul(true);
  }
}

async function onCpu(aShape: number[], bShape: number[], tA: boolean, tB: boolean): Promise<{ shape: number[]; data: Float32Array }> {
  await tf.setBackend('cpu');
  const a = tf.tensor(values(aShape, 1), aShape);
  const b = tf.tensor(values(bShape, 2), bShape);
  const c = tf.matMul(a, b, tA, tB);
  const out = { shape: c.shape, data: c.dataSync() as Float32Array };
  tf.dispose([a, b, c]);
  await tf.setBackend('wasm');
  return out;
}

function maxAbs(x: Float32Array, y: Float32Array): number {
  assert.equal(x.length, y.length);
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!));
  return m;
}

describe('trainer: matrix products on the BLAS (wasm)', function () {
  this.timeout(60000);
  before(async function () {
    await initBackend('wasm');
    if (!blasMatMulState().blas) {
      // Not a pass: the BLAS path is not exercised on this machine, and the output says why.
      console.log(`      not run: ${describeBlas()} (apt-get install libopenblas0-pthread)`);
      this.skip();
    }
  });

  it('names the library that runs', () => {
    assert.match(describeBlas(), /\(lib[^)]*\)|Accelerate/);
    assert.equal(blasMatMulState().note, null);
  });

  const cases: [string, number[], number[], boolean, boolean][] = [
    ['plain', [37, 19], [19, 23], false, false],
    ['a transposed', [19, 37], [19, 23], true, false],
    ['b transposed', [37, 19], [23, 19], false, true],
    ['both transposed', [19, 37], [23, 19], true, true],
    ['batched', [3, 2, 9, 8], [3, 2, 8, 5], false, false],
    ['batched, b transposed', [4, 9, 8], [4, 5, 8], false, true],
    ['one b for every batch', [3, 9, 8], [8, 5], false, false],
    ['one b of batch 1 for every batch', [3, 9, 8], [1, 8, 5], false, false],
    ['one a for every batch', [9, 8], [2, 8, 5], false, false],
    ['a vector row', [1, 128], [128, 352], false, false],
    ['the attention shape', [850, 32], [425, 32], false, true],
  ];
  for (const [name, aShape, bShape, tA, tB] of cases) {
    it(`${name}: ${JSON.stringify(aShape)}${tA ? 'ᵀ' : ''} x ${JSON.stringify(bShape)}${tB ? 'ᵀ' : ''} equals XNNPACK's and the cpu backend's`, async () => {
      const before = blasMatMulState().products;
      const blas = await product(aShape, bShape, tA, tB, true);
      assert.equal(blasMatMulState().products, before + 1, 'the BLAS computed it');
      const xnn = await product(aShape, bShape, tA, tB, false);
      assert.equal(blasMatMulState().products, before + 1, 'XNNPACK computed the other');
      const cpu = await onCpu(aShape, bShape, tA, tB);
      assert.deepEqual(blas.shape, cpu.shape);
      assert.deepEqual(xnn.shape, cpu.shape);
      const k = tA ? aShape[aShape.length - 2]! : aShape[aShape.length - 1]!;
      const tol = 1e-6 * k * 4;
      assert.ok(maxAbs(blas.data, cpu.data) <= tol, `BLAS vs cpu: ${maxAbs(blas.data, cpu.data)}`);
      assert.ok(maxAbs(blas.data, xnn.data) <= tol, `BLAS vs XNNPACK: ${maxAbs(blas.data, xnn.data)}`);
    });
  }

  it('an empty inner side gives zeros, an empty outer side an empty product', async () => {
    await tf.setBackend('wasm');
    const z = tf.matMul(tf.zeros([3, 0]), tf.zeros([0, 4]));
    assert.deepEqual(z.shape, [3, 4]);
    assert.deepEqual(Array.from(z.dataSync()), new Array(12).fill(0));
    const e = tf.matMul(tf.zeros([0, 5]), tf.ones([5, 4]));
    assert.deepEqual(e.shape, [0, 4]);
  });

  it('a broadcast it does not take goes to XNNPACK\'s kernel, with its result', async () => {
    // [2,1] against [1,3] batch dims: neither side is shared whole, so the BLAS kernel declines.
    const before = blasMatMulState().products;
    const blas = await product([2, 1, 4, 5], [1, 3, 5, 6], false, false, true).catch((e: Error) => e);
    const xnn = await product([2, 1, 4, 5], [1, 3, 5, 6], false, false, false).catch((e: Error) => e);
    assert.equal(blasMatMulState().products, before, 'the BLAS took none');
    if (blas instanceof Error || xnn instanceof Error) {
      assert.ok(blas instanceof Error && xnn instanceof Error, 'both kernels agree on refusing');
      assert.equal(blas.message, xnn.message);
    } else {
      assert.deepEqual(blas.shape, xnn.shape);
      assert.deepEqual(Array.from(blas.data), Array.from(xnn.data));
    }
  });

  it('mismatched inner sides keep tfjs\'s own error', async () => {
    await tf.setBackend('wasm');
    assert.throws(() => tf.matMul(tf.ones([2, 3]), tf.ones([4, 5])), /inner shapes \(3\) and \(4\)/);
  });

  it('AGENT_LAB_BLAS=off keeps XNNPACK, and the run says so', () => {
    const script = "const b=require('./trainer/model/backend');b.initBackend('wasm').then(i=>console.log(JSON.stringify(i.matmul)))";
    const r = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: ROOT, env: { ...process.env, AGENT_LAB_BLAS: 'off' }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout.trim().split('\n').pop()!), 'XNNPACK (AGENT_LAB_BLAS=off)');
  });

  it('a library without cblas_sgemm is refused with its name, and XNNPACK runs', () => {
    const script = "const b=require('./trainer/model/backend');b.initBackend('wasm').then(i=>console.log(JSON.stringify(i.matmul)))";
    const r = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: ROOT, env: { ...process.env, AGENT_LAB_BLAS: 'libc.so.6' }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(JSON.parse(r.stdout.trim().split('\n').pop()!), /^XNNPACK \(no BLAS library loaded \(libc\.so\.6: no cblas_sgemm/);
  });

  it('koffi staged as the per-platform .vsix stages it (dist/koffi/) is the one loaded', () => {
    // scripts/package-vsix.sh: koffi's index.js and this platform's koffi.node only.
    const triplet = `${process.platform}_${process.arch}`;
    const src = path.join(ROOT, 'node_modules', 'koffi');
    const staged = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-koffi-'));
    try {
      fs.mkdirSync(path.join(staged, 'build', 'koffi', triplet), { recursive: true });
      fs.copyFileSync(path.join(src, 'index.js'), path.join(staged, 'index.js'));
      fs.copyFileSync(path.join(src, 'build', 'koffi', triplet, 'koffi.node'), path.join(staged, 'build', 'koffi', triplet, 'koffi.node'));
      const script =
        "const b=require('./trainer/model/backend');b.initBackend('wasm').then(i=>console.log(JSON.stringify({matmul:i.matmul,staged:Object.keys(require.cache).some(k=>k.startsWith(process.env.AGENT_LAB_KOFFI_DIR))})))";
      const r = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: ROOT, env: { ...process.env, AGENT_LAB_KOFFI_DIR: staged }, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { matmul: string; staged: boolean };
      assert.equal(out.staged, true, 'the staged index.js was required');
      assert.equal(out.matmul, describeBlas());
    } finally {
      fs.rmSync(staged, { recursive: true, force: true });
    }
  });
});
