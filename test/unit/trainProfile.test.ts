// `bench train --profile` (bench/trainProfile.ts) and the phase marks it reads
// (trainer/model/stepClock.ts): a step's phases come in the order the trainer runs them, the
// profile attributes kernels to phases, and two worker threads show their exchange.
import * as assert from 'node:assert/strict';
import { initBackend } from '../../trainer/model/backend';
import { IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';
import { setPhaseListener } from '../../trainer/model/stepClock';
import { formatTrainProfile, runTrainProfile } from '../../bench/trainProfile';

const MICRO: ModelConfig = { vocab: 19, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 20, maxSeq: 64, ropeBase: 10000 };

describe('bench train --profile: phases and ops of a training step', function () {
  this.timeout(300000);
  afterEach(() => setPhaseListener(null));

  it('a one-thread step marks forward, loss head, backward, embedding grad, flatten, clip norm and AdamW, in order, and ends', async () => {
    await initBackend('wasm');
    const rng = makeRng(3);
    const ids = Int32Array.from({ length: 24 }, () => Math.floor(rng.uniform() * MICRO.vocab));
    const labels = Int32Array.from(ids, (id, i) => (i % 3 === 0 ? IGNORE : id));
    const model = StackModel.create(MICRO, 1);
    const tr = new Trainer(model, { lr: 1e-3 });
    const seen: (string | null)[] = [];
    setPhaseListener((p) => seen.push(p));
    tr.step({ inputIds: ids, labels, batch: 2, seq: 12 });
    setPhaseListener(null);
    assert.deepEqual(seen, ['split batch', 'forward', 'loss head', 'backward', 'embedding grad', 'free intermediates', 'stats', 'flatten grads', 'clip norm', 'AdamW update', null]);
    // no listener: a step marks nothing and still trains
    const before = tr.stepCount;
    tr.step({ inputIds: ids, labels, batch: 2, seq: 12 });
    assert.equal(tr.stepCount, before + 1);
    tr.dispose();
    model.dispose();
  });

  it('profiles an SFT and a GRPO step of the bench model on one and two threads: kernels by phase, matMuls by shape, the exchange', async () => {
    const lines: string[] = [];
    const r = await runTrainProfile({ backend: 'wasm', threads: 1, steps: 2, profiledSteps: 1, warmup: 1, log: (l) => lines.push(l) });
    assert.equal(r.backend, 'wasm');
    assert.deepEqual(
      r.profiles.map((p) => `${p.name}/${p.threads}`),
      ['sft/1', 'sft/2', 'grpo/1', 'grpo/2'],
    );
    for (const p of r.profiles) {
      const phase = (name: string) => p.phases.find((x) => x.phase === name);
      assert.ok(p.step_ms > 0 && p.tokens > 700 && p.tokens_per_s > 0, `${p.name}/${p.threads}: ${JSON.stringify(p)}`);
      // the forward and backward run kernels on this thread; AdamW over the flat buffer runs none
      assert.ok(phase('forward')!.kernels > 10 && phase('backward')!.kernels > phase('forward')!.kernels / 2, JSON.stringify(p.phases));
      assert.equal(phase('AdamW update')!.kernels, 0);
      const matmulCalls = p.ops.find((o) => o.op === 'BatchMatMul')?.calls ?? 0;
      assert.ok(matmulCalls > 0 && p.matmuls.reduce((n, m) => n + m.calls, 0) <= matmulCalls, JSON.stringify(p.ops));
      // every kernel of the step falls in one of its phases
      assert.equal(p.kernel_calls, p.phases.reduce((n, x) => n + x.kernels, 0));
      if (p.name === 'grpo') assert.ok(phase('reference log-probs')!.kernels > 0);
      if (p.threads === 2) {
        assert.ok(phase('wait for workers') && phase('send shards') && phase('combine shards'), JSON.stringify(p.phases));
        assert.equal(p.worker_ms?.length, 1);
        assert.ok(p.worker_ms![0]! > 0);
      } else assert.equal(phase('wait for workers'), undefined);
    }
    const text = formatTrainProfile(r).join('\n');
    assert.match(text, /SFT step, 1 thread: .* tokens\/s/);
    assert.match(text, /GRPO step, 2 threads: /);
    assert.match(text, /forward [\d.]+ ms \(\d+%\), backward [\d.]+ ms/);
  });
});
