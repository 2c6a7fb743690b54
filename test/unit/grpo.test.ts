// GRPO's pieces: the policy-gradient loss and its gradient (against an independent
// computation and finite differences), data-parallel shards, the batch built from rollouts
// (harness text never labelled), rewards and their audit, advantages, the pre-flight checks.
import * as assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { AGENT_TOOLS } from '../../core/tools/schemas';
import { SYSTEM_PROMPT, ToolEnv, makeStubTeacher, renderPrompt, rollout } from '../../core/distill';
import {
  DEFAULT_REWARD,
  auditReward,
  completionFromTranscript,
  groupAdvantages,
  parseRewardSpec,
  scoreCompletion,
} from '../../core/reward';
import { canonicalTokenizerJson, trainDefaultTokenizer } from '../../core/tokenizer';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { SEED_WORLD, evaluationEntityNames, loadedWorldId, worldEnv, worldFacts } from '../../core/worlds';
import { initBackend } from '../../trainer/model/backend';
import { reward as evalReward } from '../../trainer/agent/eval';
import { flatlineMessage, microBatches, poolEvaluationNames, rftBatches, rlTaskPool, rftTargets, rolloutBatch, scaleAdvantages, type Rollout } from '../../trainer/grpo/grpo';
import { Trainer } from '../../trainer/model/optim';
import { Batch, IGNORE, ModelConfig, PolicyGradient, StackModel, makeRng, paramSpecs } from '../../trainer/model/model';
import { GradientPool, RolloutItem, combineFlat, rolloutOptions, splitBatch } from '../../trainer/model/parallel';
import { AgentRuntime } from '../../trainer/agent/agentRuntime';
import { modelPolicy, tokenizerCallMask } from '../../trainer/agent/policy';
import { allOfGroup, formatPrescreen, informativeShareAt, informativeShareOf, summarisePrescreen } from '../../trainer/grpo/prescreen';
import { checkPromptDrift, checkSampling, checkSpecialTokens, firstDifferingByte } from '../../trainer/grpo/preflight';
import type { Episode } from '../../trainer/agent/agentRuntime';

const MICRO: ModelConfig = { vocab: 23, dModel: 16, layers: 2, heads: 4, kvHeads: 2, mlp: 24, maxSeq: 32, ropeBase: 10000 };

/** Rows of random ids; about half the positions labelled (the "generated" tokens). */
function pgBatch(rows: number, seq: number, seed: number): Batch {
  const rng = makeRng(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq).fill(IGNORE);
  for (let i = 0; i < rows * seq; i++) inputIds[i] = Math.floor(rng.uniform() * MICRO.vocab);
  for (let r = 0; r < rows; r++) {
    for (let t = 0; t + 1 < seq - r; t++) if (rng.uniform() < 0.5) labels[r * seq + t] = inputIds[r * seq + t + 1]!;
  }
  return { inputIds, labels, batch: rows, seq };
}

/** The GRPO loss computed independently: from the model's per-token log-probs, in float64. */
function referencePgLoss(m: StackModel, b: Batch, pg: PolicyGradient): { loss: number; kl: number; clipped: number } {
  const lp = m.tokenLogprobs(b, pg.temperature ?? 1).logp;
  let sum = 0;
  let kl = 0;
  let clipped = 0;
  let n = 0;
  for (let i = 0; i < lp.length; i++) {
    if (b.labels[i] === IGNORE) continue;
    n++;
    const a = pg.advantages[i]!;
    const ratio = pg.oldLogp ? Math.exp(lp[i]! - pg.oldLogp[i]!) : 1;
    const unclipped = ratio * a;
    const clippedTerm = Math.min(1 + pg.clip, Math.max(1 - pg.clip, ratio)) * a;
    if (clippedTerm < unclipped) clipped++;
    const d = pg.refLogp[i]! - lp[i]!;
    const k3 = Math.exp(d) - d - 1;
    kl += k3;
    sum += -(Math.min(unclipped, clippedTerm) - pg.beta * k3);
  }
  return { loss: sum / n, kl, clipped };
}

function gradsToArrays(g: Map<string, { dataSync(): unknown; dispose(): void }>): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const [k, t] of g) {
    out[k] = new Float32Array(t.dataSync() as Float32Array);
    t.dispose();
  }
  return out;
}

/** Random weights larger than the init so derivatives stand above float32 noise. */
function bigWeights(seed: number): Record<string, Float32Array> {
  const wr = makeRng(seed);
  const w: Record<string, Float32Array> = {};
  for (const s of paramSpecs(MICRO)) {
    const n = s.shape.reduce((a, c) => a * c, 1);
    w[s.name] = Float32Array.from({ length: n }, () => (s.shape.length === 1 ? 1 : 0) + 0.3 * wr.normal());
  }
  return w;
}

// Both backends: wasm is what trains here, and its kernels differ (its OneHot once ignored
// the asked dtype, which made every log-prob ~0 and KL exactly 0 without failing on cpu).
for (const backend of ['cpu', 'wasm'] as const) describe(`GRPO: the policy-gradient loss in the model (${backend})`, function () {
  this.timeout(60000);
  before(async () => {
    await initBackend(backend);
  });

  it('tokenLogprobs: per-position log-probs whose negated sum is the CE loss of evaluate()', () => {
    const m = StackModel.fromWeights(MICRO, bigWeights(2));
    const b = pgBatch(3, 10, 4);
    const { logp } = m.tokenLogprobs(b);
    let sum = 0;
    for (let i = 0; i < logp.length; i++) {
      assert.equal(Number.isNaN(logp[i]!), b.labels[i] === IGNORE, `position ${i}`);
      if (b.labels[i] !== IGNORE) {
        assert.ok(logp[i]! < 0 && logp[i]! > -20, `log-prob ${logp[i]} at ${i}`);
        sum += logp[i]!;
      }
    }
    assert.ok(Math.abs(-sum - m.evaluate(b).ceSum) < 1e-3, `${-sum} vs ${m.evaluate(b).ceSum}`);
    m.dispose();
  });

  it('equals the clipped surrogate + k3 KL computed from the per-token log-probs, and its gradient matches finite differences', () => {
    const weights = bigWeights(3);
    const m = StackModel.fromWeights(MICRO, weights);
    const ref = StackModel.fromWeights(MICRO, bigWeights(4));
    const b = pgBatch(3, 10, 5);
    const rng = makeRng(8);
    const now = m.tokenLogprobs(b).logp;
    const advantages = new Float32Array(b.labels.length);
    const oldLogp = new Float32Array(b.labels.length);
    for (let i = 0; i < advantages.length; i++) {
      advantages[i] = Math.floor(i / b.seq) === 1 ? -1.3 : 0.9 + 0.1 * Math.floor(i / b.seq);
      // Old log-probs off by up to +-0.5: some ratios leave [0.8, 1.2] and are clipped.
      oldLogp[i] = Number.isNaN(now[i]!) ? 0 : now[i]! + (rng.uniform() - 0.5);
    }
    const pg: PolicyGradient = { advantages, oldLogp, refLogp: ref.tokenLogprobs(b).logp, clip: 0.2, beta: 0.3 };
    const expected = referencePgLoss(m, b, pg);
    const out = m.lossAndGrads({ ...b, pg });
    assert.ok(Math.abs(out.loss - expected.loss) < 1e-5, `loss ${out.loss} vs ${expected.loss}`);
    assert.ok(out.pg, 'policy-gradient statistics are returned');
    assert.ok(Math.abs(out.pg.klSum - expected.kl) < 1e-4 * Math.max(1, expected.kl), `kl ${out.pg.klSum} vs ${expected.kl}`);
    assert.equal(out.pg.clipped, expected.clipped);
    assert.ok(expected.clipped > 0 && expected.clipped < out.supervised, `some but not all tokens clipped (${expected.clipped}/${out.supervised})`);
    const grads = gradsToArrays(out.grads);
    const dir = makeRng(99);
    const eps = 1e-2;
    for (const s of paramSpecs(MICRO)) {
      const n = weights[s.name]!.length;
      const u = new Float32Array(n);
      let norm = 0;
      for (let i = 0; i < n; i++) norm += (u[i] = dir.normal()) ** 2;
      norm = Math.sqrt(norm);
      let analytic = 0;
      for (let i = 0; i < n; i++) analytic += (u[i] = u[i]! / norm) * grads[s.name]![i]!;
      const at = (sign: number): number => {
        const w = new Float32Array(weights[s.name]!);
        for (let i = 0; i < n; i++) w[i] = w[i]! + sign * eps * u[i]!;
        m.setWeights({ [s.name]: w });
        return referencePgLoss(m, b, pg).loss;
      };
      const numeric = (at(1) - at(-1)) / (2 * eps);
      m.setWeights({ [s.name]: weights[s.name]! });
      // Clipping makes the loss piecewise: a kink inside [-eps, eps] costs a little accuracy.
      const tol = 5e-4 + 0.03 * Math.abs(analytic);
      assert.ok(Math.abs(numeric - analytic) < tol, `${s.name}: finite difference ${numeric} vs gradient ${analytic}`);
    }
    m.dispose();
    ref.dispose();
  });

  it('at the sampling temperature: log-probs of softmax(logits / T), and the loss and its gradient follow them', () => {
    const T = 0.8;
    const weights = bigWeights(11);
    const m = StackModel.fromWeights(MICRO, weights);
    const ref = StackModel.fromWeights(MICRO, bigWeights(12));
    const b = pgBatch(3, 10, 13);
    // Independently, in float64, from the full logits.
    const logits = m.logits(b.inputIds, b.batch, b.seq);
    const atT = m.tokenLogprobs(b, T).logp;
    const at1 = m.tokenLogprobs(b).logp;
    let differs = 0;
    for (let i = 0; i < b.labels.length; i++) {
      if (b.labels[i] === IGNORE) continue;
      const row = Array.from(logits.subarray(i * MICRO.vocab, (i + 1) * MICRO.vocab), (x) => x / T);
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
      const expected = row[b.labels[i]!]! - lse;
      assert.ok(Math.abs(atT[i]! - expected) < 1e-4, `position ${i}: ${atT[i]} vs ${expected}`);
      if (Math.abs(atT[i]! - at1[i]!) > 1e-3) differs++;
    }
    assert.ok(differs > 0, 'T = 0.8 changes the log-probs');
    const advantages = new Float32Array(b.labels.length).map((_, i) => (Math.floor(i / b.seq) === 0 ? 1.1 : -0.7));
    const pg: PolicyGradient = { advantages, refLogp: ref.tokenLogprobs(b, T).logp, clip: 0.2, beta: 0.3, temperature: T };
    const out = m.lossAndGrads({ ...b, pg });
    const expected = referencePgLoss(m, b, pg);
    assert.ok(Math.abs(out.loss - expected.loss) < 1e-5, `loss ${out.loss} vs ${expected.loss}`);
    const grads = gradsToArrays(out.grads);
    const name = 'tok_embeddings';
    const n = weights[name]!.length;
    const dir = makeRng(5);
    const u = Float32Array.from({ length: n }, () => dir.normal());
    const norm = Math.sqrt(u.reduce((a, x) => a + x * x, 0));
    let analytic = 0;
    for (let i = 0; i < n; i++) analytic += (u[i] = u[i]! / norm) * grads[name]![i]!;
    const at = (sign: number): number => {
      const w = new Float32Array(weights[name]!);
      for (let i = 0; i < n; i++) w[i] = w[i]! + sign * 1e-2 * u[i]!;
      m.setWeights({ [name]: w });
      return referencePgLoss(m, b, pg).loss;
    };
    const numeric = (at(1) - at(-1)) / 2e-2;
    m.setWeights({ [name]: weights[name]! });
    assert.ok(Math.abs(numeric - analytic) < 5e-4 + 0.03 * Math.abs(analytic), `finite difference ${numeric} vs gradient ${analytic}`);
    m.dispose();
    ref.dispose();
  });

  it('one pass (no old log-probs): ratio 1; zero advantages at the reference give zero loss and zero gradient', () => {
    const m = StackModel.fromWeights(MICRO, bigWeights(6));
    const b = pgBatch(2, 8, 7);
    const refLogp = m.tokenLogprobs(b).logp;
    const out = m.lossAndGrads({ ...b, pg: { advantages: new Float32Array(b.labels.length), refLogp, clip: 0.2, beta: 0.02 } });
    assert.ok(Math.abs(out.loss) < 1e-6, `loss ${out.loss}`);
    assert.ok(out.pg!.klSum < 1e-5);
    for (const [name, g] of Object.entries(gradsToArrays(out.grads))) {
      assert.ok(g.every((x) => Math.abs(x) < 1e-6), `${name} has a non-zero gradient`);
    }
    // A positive advantage raises the sampled tokens' log-probs after one small step.
    const adv = new Float32Array(b.labels.length).fill(1);
    const before = m.tokenLogprobs(b).logp;
    const r = m.lossAndGrads({ ...b, pg: { advantages: adv, refLogp, clip: 0.2, beta: 0.02 } });
    const g = gradsToArrays(r.grads);
    const next: Record<string, Float32Array> = {};
    for (const [k, w] of m.weights()) next[k] = Float32Array.from(w.dataSync() as Float32Array, (x, i) => x - 0.05 * g[k]![i]!);
    m.setWeights(next);
    const after = m.tokenLogprobs(b).logp;
    let gain = 0;
    for (let i = 0; i < after.length; i++) if (b.labels[i] !== IGNORE) gain += after[i]! - before[i]!;
    assert.ok(gain > 0, `sum of sampled log-probs moved by ${gain}`);
    m.dispose();
  });

  it('data-parallel shards combine to the single-batch loss, gradient and statistics', () => {
    const m = StackModel.fromWeights(MICRO, bigWeights(9));
    const ref = StackModel.fromWeights(MICRO, bigWeights(10));
    const b = pgBatch(4, 9, 11);
    const advantages = Float32Array.from({ length: b.labels.length }, (_, i) => [1.2, -0.4, 0.3, -1][Math.floor(i / b.seq)]!);
    const full = { ...b, pg: { advantages, refLogp: ref.tokenLogprobs(b).logp, clip: 0.2, beta: 0.05 } };
    const whole = m.lossAndGrads(full);
    const wholeFlat = Float32Array.from(paramSpecs(MICRO).flatMap((s) => Array.from(whole.grads.get(s.name)!.dataSync() as Float32Array)));
    for (const g of whole.grads.values()) g.dispose();
    const shards = splitBatch(full, 2);
    assert.equal(shards.length, 2);
    assert.ok(shards.every((s) => s.pg && s.pg.advantages.length === s.batch * s.seq));
    const parts = shards.map((s) => {
      const r = m.lossAndGrads(s);
      const flat = Float32Array.from(paramSpecs(MICRO).flatMap((p) => Array.from(r.grads.get(p.name)!.dataSync() as Float32Array)));
      for (const g of r.grads.values()) g.dispose();
      return { stats: r, flat };
    });
    const combined = combineFlat(parts[0]!, parts.slice(1));
    assert.ok(Math.abs(combined.stats.lossSum / combined.stats.weightSum - whole.loss) < 1e-6);
    assert.ok(Math.abs(combined.stats.pg!.klSum - whole.pg!.klSum) < 1e-5);
    let maxDiff = 0;
    let scale = 0;
    for (let i = 0; i < wholeFlat.length; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(wholeFlat[i]! - combined.flat[i]!));
      scale = Math.max(scale, Math.abs(wholeFlat[i]!));
    }
    // float32 rounding: the BLAS's products (fused multiply-adds, their own summation order) over a whole
    // batch's rows against two shards' sums combined differ by a few units in the last place
    assert.ok(maxDiff < 4e-6 * Math.max(1, scale), `max gradient difference ${maxDiff} (largest entry ${scale})`);
    m.dispose();
    ref.dispose();
  });

  it('micro-batches (gradient accumulation) take the same optimiser step as the whole batch', () => {
    const w = bigWeights(13);
    const b = pgBatch(4, 9, 14);
    const advantages = Float32Array.from({ length: b.labels.length }, (_, i) => [0.7, -1.1, 0.2, 1.5][Math.floor(i / b.seq)]!);
    const ref = StackModel.fromWeights(MICRO, bigWeights(15));
    const pg = { advantages, refLogp: ref.tokenLogprobs(b).logp, clip: 0.2, beta: 0.05 };
    const rowsOf = (from: number, to: number): Batch => {
      const S = b.seq;
      const cut = <T extends Int32Array | Float32Array>(a: T) => a.slice(from * S, to * S) as T;
      return { inputIds: cut(b.inputIds), labels: cut(b.labels), batch: to - from, seq: S, pg: { ...pg, advantages: cut(pg.advantages), refLogp: cut(pg.refLogp) } };
    };
    const results = [[{ ...b, pg }], [rowsOf(0, 1), rowsOf(1, 4)]].map((batches) => {
      const m = StackModel.fromWeights(MICRO, w);
      // eps 1: Adam's step is ~lr * g for these small gradients, so the weights show the gradient.
      const t = new Trainer(m, { lr: 1e-2, weightDecay: 0, eps: 1 });
      const r = t.step(batches);
      const after = m.exportWeights();
      t.dispose();
      m.dispose();
      return { r, after };
    });
    const [whole, micro] = results as [(typeof results)[0], (typeof results)[0]];
    assert.ok(Math.abs(whole.r.loss - micro.r.loss) < 1e-6, `loss ${whole.r.loss} vs ${micro.r.loss}`);
    assert.ok(Math.abs(whole.r.gradNorm - micro.r.gradNorm) < 1e-5 * Math.max(1, whole.r.gradNorm));
    assert.equal(whole.r.supervised, micro.r.supervised);
    for (const k of Object.keys(whole.after)) {
      let d = 0;
      whole.after[k]!.forEach((x, i) => (d = Math.max(d, Math.abs(x - micro.after[k]![i]!))));
      assert.ok(d < 1e-7, `${k}: weights differ by ${d}`);
    }
    ref.dispose();
  });

  it("an RFT update is cross-entropy on the correct rollout's sampled tokens: its loss is evaluate()'s, and their log-probs rise", () => {
    const rng = makeRng(21);
    const rollouts: Rollout[] = [9, 12].map((n) => {
      const ids = Array.from({ length: n }, () => Math.floor(rng.uniform() * MICRO.vocab));
      return { episode: { ids, generated: ids.map((_, i) => (i >= 4 ? 1 : 0)) } as unknown as Episode, correct: true, reward: 1, advantage: 0 };
    });
    const batches = rftBatches(rollouts, 8);
    const m = StackModel.fromWeights(MICRO, bigWeights(22));
    const logpOf = () => batches.reduce((a, b) => a + m.tokenLogprobs(b).logp.reduce((x, y) => (Number.isNaN(y) ? x : x + y), 0), 0);
    const supervised = batches.reduce((a, b) => a + b.labels.filter((l) => l !== IGNORE).length, 0);
    const ce = batches.reduce((a, b) => a + m.evaluate(b).ceSum, 0) / supervised;
    const before = logpOf();
    const t = new Trainer(m, { lr: 1e-2, weightDecay: 0 });
    const first = t.step(batches);
    assert.ok(Math.abs(first.loss - ce) < 1e-4, `step loss ${first.loss} vs evaluate ${ce}`);
    assert.equal(first.supervised, supervised);
    for (let i = 0; i < 4; i++) t.step(batches);
    const after = logpOf();
    assert.ok(after > before + 0.5, `log-prob of the sampled tokens ${before.toFixed(3)} -> ${after.toFixed(3)}`);
    t.dispose();
    m.dispose();
  });

  it('refuses weights on a policy-gradient batch (its loss is one token mean)', () => {
    const m = StackModel.create(MICRO, 1);
    const b = pgBatch(1, 6, 2);
    const pg = { advantages: new Float32Array(6), refLogp: new Float32Array(6), clip: 0.2, beta: 0 };
    assert.throws(() => m.lossAndGrads({ ...b, weights: new Float32Array(6).fill(1), pg }), /takes no weights/);
    assert.throws(() => m.lossAndGrads({ ...b, pg: { ...pg, refLogp: new Float32Array(3) } }), /pg\.refLogp must have batch\*seq entries/);
    m.dispose();
  });
});

describe('GRPO: rollouts to a batch', () => {
  it('labels exactly the tokens the policy generated, each with its rollout advantage; harness text never', () => {
    const ep = (ids: number[], generated: number[]) => ({ ids, generated }) as unknown as Episode;
    // prompt(3) <|assistant|>(harness) 2 tokens + policy <|end|>, observation(2), forced text(2), 1 token, harness <|end|>
    const a = ep([10, 11, 12, 6, 20, 21, 3, 8, 30, 3, 6, 40, 41, 22, 3], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0]);
    const b = ep([10, 11, 6, 20, 3], [0, 0, 0, 1, 1]);
    const { batch, advantages } = rolloutBatch([
      { episode: a, advantage: 0.5 },
      { episode: b, advantage: -2 },
    ]);
    assert.equal(batch.seq, 15);
    const labelled = (row: number) => [...Array(batch.seq).keys()].filter((t) => batch.labels[row * batch.seq + t] !== IGNORE);
    // Position t predicts ids[t+1]: labelled where generated[t+1] is 1.
    assert.deepEqual(labelled(0), [3, 4, 5, 12]);
    assert.deepEqual(labelled(1), [2, 3]);
    assert.equal(batch.labels[3], 20);
    assert.equal(batch.labels[12], 22);
    assert.equal(batch.labels[14], IGNORE, "the harness's closing <|end|> is not a target");
    assert.equal(advantages[3], 0.5);
    assert.equal(advantages[batch.seq + 2], -2);
    assert.equal(advantages[0], 0);
  });
});

describe('GRPO: micro-batches of rollouts', () => {
  it('keep every rollout once with its advantage, at most `rows` per batch, shortest first', () => {
    const ep = (n: number) => ({ ids: Array.from({ length: n }, (_, i) => 10 + i), generated: Array.from({ length: n }, (_, i) => (i > 2 ? 1 : 0)) }) as unknown as Episode;
    const rollouts = [9, 4, 7, 12, 5].map((n, i) => ({ episode: ep(n), advantage: i - 2 }));
    const mb = microBatches(rollouts, 2);
    assert.deepEqual(mb.map((m) => m.batch.batch), [2, 2, 1]);
    assert.deepEqual(mb.map((m) => m.batch.seq), [5, 9, 12]);
    const labelled = mb.reduce((n, m) => n + m.batch.labels.filter((l) => l !== IGNORE).length, 0);
    assert.equal(labelled, rollouts.reduce((n, r) => n + r.episode.ids.length - 3, 0));
    const advs = mb.flatMap((m) => [...new Set(Array.from(m.advantages).filter((_, i) => m.batch.labels[i] !== IGNORE))]).sort();
    assert.deepEqual(advs, [-1, -2, 0, 1, 2].sort());
  });
});

describe('RFT (rejection-sampling fine-tuning): targets and batches', () => {
  it('a pool naming an entity of the fresh-entities split is refused, naming it; a disjoint one is counted', () => {
    const pool = rlTaskPool('fresh-entities', '/nonexistent', makeTaskPool(0).heldout);
    const evaluation = evaluationEntityNames();
    assert.deepEqual(poolEvaluationNames(pool, evaluation).shared, 0);
    const leaked = [...evaluation][0]!;
    const bad = { task: { ...pool[0]!.task, hints: { ...pool[0]!.task.hints, facts: [[leaked, 'capital']] as [string, string][] } }, world: pool[0]!.world };
    assert.throws(() => poolEvaluationNames([...pool, bad], evaluation), new RegExp(`names 1 entities of the fresh-entities evaluation split \\(e\\.g\\. "${leaked}"\\)`));
  });

  it('keeps only verified-correct rollouts, whatever their reward; a group with none gives nothing', () => {
    const ep = (n: number) => ({ ids: Array.from({ length: n }, (_, i) => 10 + i), generated: Array.from({ length: n }, (_, i) => (i > 1 ? 1 : 0)) }) as unknown as Episode;
    const r = (n: number, correct: boolean, reward: number): Rollout => ({ episode: ep(n), correct, reward, advantage: 0 });
    const right = r(5, true, 0.95);
    const wrongButShort = r(4, false, -0.01); // a wrong answer with the best step count
    const slowRight = r(9, true, 0.7);
    const targets = rftTargets([{ members: [right, wrongButShort, slowRight] }, { members: [r(6, false, 0), r(7, false, 0)] }]);
    assert.deepEqual(targets, [right, slowRight]);
  });

  it("trains on the sampled ids themselves (never re-tokenized), labelled where the policy generated, with no policy-gradient fields", () => {
    const tok = trainDefaultTokenizer();
    // A name sampled one character at a time: its text re-tokenized would give other (merged) ids.
    const sampled = [...'Nioxnem capital'].flatMap((c) => tok.encode(c));
    assert.notDeepEqual(tok.encode(tok.decode(sampled)), sampled, 'precondition: re-tokenizing changes the ids');
    const prompt = tok.encode('Question: what is it?');
    const ids = [...prompt, ...sampled];
    const generated = [...prompt.map(() => 0), ...sampled.map(() => 1)];
    const rollout: Rollout = { episode: { ids, generated } as unknown as Episode, correct: true, reward: 1, advantage: 0 };
    const [batch, ...rest] = rftBatches([rollout], 8);
    assert.equal(rest.length, 0);
    assert.equal(batch!.pg, undefined, 'plain cross-entropy: no advantages, no reference');
    assert.deepEqual([...batch!.inputIds.slice(0, ids.length)], ids);
    const targets = [...batch!.labels].filter((l) => l !== IGNORE);
    assert.deepEqual(targets, sampled, 'every sampled token a target, in order; no prompt token');
  });
});

describe('GRPO: rewards, advantages and the audit', () => {
  const pool = makeTaskPool(0);
  const env = new ToolEnv(buildCorpus());
  const task = pool.train.find((t) => t.kind === 'sum')!;
  const solved = rollout(task, makeStubTeacher([task]), env).transcript;

  it("the default reward is the seed's: exact match - 0.05 * steps / max_steps", () => {
    for (const [t, steps, ok] of [
      [solved, 4, true],
      [solved.replace(/Answer: \d+/, 'Answer: 1'), 4, false],
    ] as const) {
      const c = completionFromTranscript(t);
      assert.equal(c.steps, steps);
      const r = scoreCompletion(c, task.gold, DEFAULT_REWARD, 6);
      assert.equal(r.correct, ok);
      assert.ok(Math.abs(r.total - evalReward(ok, steps, 6)) < 1e-12);
    }
  });

  it('parses reward descriptions and names what is wrong', () => {
    assert.deepEqual(parseRewardSpec('exact,step=0.05'), DEFAULT_REWARD);
    assert.deepEqual(parseRewardSpec('exact=2, format=0.1, cap=0, gate=answer-tag'), { exact: 2, stepPenalty: 0, formatBonus: 0.1, wrongCap: 0, gate: 'answer-tag' });
    assert.throws(() => parseRewardSpec('exact,bonus=1'), /unknown part 'bonus'/);
    assert.throws(() => parseRewardSpec('step=abc'), /'step=abc' needs a number/);
    assert.throws(() => parseRewardSpec('gate=tags'), /unknown gate 'tags'/);
    assert.throws(() => parseRewardSpec(''), /empty/);
  });

  it('scale-rewards: group std, batch std (a step-count spread stays small), or none', () => {
    const groups = [
      [1, 1, 0, 0],
      [-0.01, -0.015, -0.01, -0.01],
    ];
    const byGroup = scaleAdvantages(groups, 'group');
    assert.ok(Math.abs(byGroup[1]![1]!) > 1, 'group std blows a 0.005 spread up to a full advantage');
    const byBatch = scaleAdvantages(groups, 'batch');
    assert.ok(Math.abs(byBatch[1]![1]!) < 0.05, `batch std keeps it small: ${byBatch[1]![1]}`);
    assert.ok(Math.abs(byBatch[0]![0]!) > 0.9);
    const none = scaleAdvantages(groups, 'none');
    assert.deepEqual(none[0], [0.5, 0.5, -0.5, -0.5]);
    for (const g of [...byBatch, ...none]) assert.ok(Math.abs(g.reduce((a, b) => a + b, 0)) < 1e-9, 'advantages are centred per group');
  });

  it('advantages use the population std; a flat group has all-zero advantages', () => {
    const { advantages, std, mean } = groupAdvantages([1, 0, 1, 0]);
    assert.equal(mean, 0.5);
    assert.equal(std, 0.5);
    assert.ok(Math.abs(advantages[0]! - 1) < 1e-5 && Math.abs(advantages[1]! + 1) < 1e-5);
    assert.ok(groupAdvantages([0.9, 0.9, 0.9]).advantages.every((a) => a === 0));
  });

  it('the audit passes the default reward and an additive capped format bonus, with the orderings', () => {
    for (const text of ['exact,step=0.05', 'exact,step=0.05,format=0.1,cap=0']) {
      const a = auditReward(parseRewardSpec(text));
      assert.ok(a.ok, text);
      assert.ok(a.std >= 0.1);
      const r = Object.fromEntries(a.rows.map((x) => [x.member, x.reward]));
      assert.ok(r['correct']! > r['wrong']! && r['correct']! > r['correct but wasteful']!);
      assert.deepEqual(a.rows.map((x) => x.member), ['correct', 'correct but wasteful', 'wrong', 'malformed call', 'no answer', 'empty answer', 'format-only spam']);
      const byMember = Object.fromEntries(a.rows.map((x) => [x.member, x]));
      assert.equal(byMember['no answer']!.answer, null);
      assert.equal(byMember['malformed call']!.wellFormed, false);
      assert.equal(byMember['correct but wasteful']!.steps, 6);
    }
    // With the cap, formatting alone never pays: spam scores no more than 0.
    const capped = auditReward(parseRewardSpec('exact,step=0.05,format=0.1,cap=0'));
    assert.ok(capped.rows.find((x) => x.member === 'format-only spam')!.reward <= 0);
  });

  it('the audit fails a multiplicative gate that zeroes the group, and a reward without exact match', () => {
    const gated = auditReward(parseRewardSpec('exact,step=0.05,gate=answer-tag'));
    assert.equal(gated.ok, false);
    assert.ok(gated.std < 0.1);
    assert.ok(gated.warnings.some((w) => /multiplicative gate/.test(w)));
    const stepOnly = auditReward(parseRewardSpec('step=0.05'));
    assert.equal(stepOnly.ok, false);
    assert.ok(stepOnly.checks.find((c) => c.name === 'correct > wrong')!.ok === false);
  });

  it('the flat-line message names the likely cause from what was measured', () => {
    assert.match(flatlineMessage(5, 1, 0, 0.8, 'exact'), /too easy/);
    assert.match(flatlineMessage(5, 0, 0, 0.8, 'exact'), /too hard/);
    assert.match(flatlineMessage(5, 0.5, 0, 0.1, 'exact'), /temperature \(0\.1\) is too low/);
    assert.match(flatlineMessage(5, 0, 0, 0.8, 'exact,gate=answer-tag'), /audit-reward --reward "exact,gate=answer-tag"/);
  });
});

describe('GRPO: pre-flight checks', () => {
  const tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-preflight-'));
  const pool = makeTaskPool(0);
  const env = new ToolEnv(buildCorpus());
  const rows = pool.train.slice(0, 5).map((t) => ({ task: t.question, text: rollout(t, makeStubTeacher([t]), env).transcript, kind: t.kind }));
  const file = path.join(tmp, 'train.traces.jsonl');
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');

  it('prompt drift: the same prompt passes; one changed character fails with both prefixes and the first differing byte', () => {
    assert.ok(checkPromptDrift(file, undefined).ok);
    assert.ok(checkPromptDrift(file, SYSTEM_PROMPT).ok);
    const drifted = SYSTEM_PROMPT.replace('Think,', 'Think;');
    const c = checkPromptDrift(file, drifted);
    assert.equal(c.ok, false);
    const byte = firstDifferingByte(renderPrompt(rows[0]!.task, drifted), renderPrompt(rows[0]!.task));
    assert.equal(byte, '<|system|>'.length + SYSTEM_PROMPT.indexOf('Think,') + 'Think'.length);
    assert.match(c.detail, new RegExp(`at byte ${byte}`));
    assert.match(c.evidence!, /RL prefix/);
    assert.match(c.evidence!, /SFT prefix/);
    assert.match(c.evidence!, /Think;/);
    assert.match(c.evidence!, new RegExp(`first differing byte: ${byte}`));
    // A trailing space is drift too (invisible in a terminal, visible in the evidence).
    assert.equal(checkPromptDrift(file, SYSTEM_PROMPT + ' ').ok, false);
    assert.equal(checkPromptDrift(path.join(tmp, 'missing.jsonl'), undefined).ok, false);
  });

  it('special tokens are single ids in the run tokenizer; another tokenizer hash is refused', () => {
    const tok = trainDefaultTokenizer();
    assert.ok(checkSpecialTokens(tok).ok);
    const c = checkSpecialTokens(tok, 'aaaa', 'bbbb');
    assert.equal(c.ok, false);
    assert.match(c.evidence!, /aaaa[^]*bbbb/);
  });

  it('greedy rollouts are refused with the reason', () => {
    const c = checkSampling(0, 8);
    assert.equal(c.ok, false);
    assert.match(c.detail, /identical/);
    assert.match(c.detail, /no gradient/);
    assert.equal(checkSampling(0.8, 1).ok, false);
    assert.ok(checkSampling(0.8, 8).ok);
  });
});

describe('GRPO rollouts on both cores', () => {
  it('a worker thread samples the same episodes as the calling thread for the same items (each rollout its own random stream)', async function () {
    this.timeout(120000);
    await initBackend('wasm');
    const tokenizer = trainDefaultTokenizer();
    const cfg: ModelConfig = { vocab: tokenizer.vocabSize, dModel: 32, layers: 2, heads: 4, kvHeads: 2, mlp: 48, maxSeq: 512, ropeBase: 10000 };
    const model = StackModel.create(cfg, 3);
    const tasks = makeTaskPool(0).train.slice(0, 2);
    const items: RolloutItem[] = tasks.flatMap((task, t) =>
      [0, 1, 2].map((k) => ({
        task,
        world: SEED_WORLD,
        options: { maxSteps: 2, temperature: 1, constrained: true, maxTurnTokens: 24 },
        randomSeed: 1000 + 10 * t + k,
      })),
    );
    const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, new ToolEnv(buildCorpus()), tokenizerCallMask(tokenizer));
    const single = await runtime.runBatchAsync(items.map((it) => ({ task: it.task, options: rolloutOptions(it) })));
    // An untrained model at temperature 1: the rollouts differ, so equal episodes mean equal streams.
    assert.ok(new Set(single.map((e) => e.text)).size > 1, 'the sampled rollouts differ from one another');
    const pool = GradientPool.create(cfg, { threads: 1 });
    assert.ok(pool, 'a worker thread is available under tsx');
    try {
      const odd = items.filter((_, i) => i % 2 === 1);
      pool.startRollouts(model, canonicalTokenizerJson(tokenizer), [odd]);
      const [remote] = pool.finishRollouts();
      assert.deepEqual(
        remote!.map((e) => e.ids),
        single.filter((_, i) => i % 2 === 1).map((e) => e.ids),
      );
      assert.deepEqual(
        remote!.map((e) => e.generated),
        single.filter((_, i) => i % 2 === 1).map((e) => e.generated),
      );
    } finally {
      pool.dispose();
      model.dispose();
    }
  });
});

describe("GRPO rollouts in a user's world on a worker thread", () => {
  it('the worker is sent the world once and samples in it what the calling thread samples (its own tool list and prompt)', async function () {
    this.timeout(120000);
    await initBackend('wasm');
    const tokenizer = trainDefaultTokenizer();
    const cfg: ModelConfig = { vocab: tokenizer.vocabSize, dModel: 32, layers: 2, heads: 4, kvHeads: 2, mlp: 48, maxSeq: 512, ropeBase: 10000 };
    const model = StackModel.create(cfg, 5);
    // Other values than the seed's, and a tool list without calc: the prompt differs from the seed world's.
    const facts = worldFacts({ kind: 'values', seed: 11 });
    const pool3 = makeTaskPool(11, 4, 2, facts);
    const tools = AGENT_TOOLS.filter((t) => t.name === 'search');
    const world = loadedWorldId({ corpus: buildCorpus(11, 40, facts), train: pool3.train, heldout: pool3.heldout, dev: [], tools });
    const items: RolloutItem[] = pool3.train.slice(0, 4).map((task, k) => ({
      task,
      world,
      options: { maxSteps: 2, temperature: 1, constrained: true, maxTurnTokens: 24 },
      randomSeed: 500 + k,
    }));
    const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, worldEnv(world), tokenizerCallMask(tokenizer));
    const single = await runtime.runBatchAsync(items.map((it) => ({ task: it.task, env: worldEnv(it.world), options: rolloutOptions(it) })));
    assert.ok(single.every((e) => e.text.includes('Tools: search(query,k).<|end|>')), "the world's own prompt");
    const pool = GradientPool.create(cfg, { threads: 1 });
    assert.ok(pool, 'a worker thread is available under tsx');
    try {
      // The second batch names the world without carrying it: the worker kept it from the first.
      for (const part of [items.slice(0, 2), items.slice(2)]) {
        pool.startRollouts(model, canonicalTokenizerJson(tokenizer), [part]);
        const [remote] = pool.finishRollouts();
        const local = single.slice(items.indexOf(part[0]!), items.indexOf(part[0]!) + part.length);
        assert.deepEqual(remote!.map((e) => e.text), local.map((e) => e.text));
      }
    } finally {
      pool.dispose();
      model.dispose();
    }
  });
});

describe('GRPO: the pass-rate pre-screen', () => {
  it("estimates a group's spread without bias: the U-statistic equals 1 - p^G - (1-p)^G in expectation over binomial draws", () => {
    for (const [p, group, samples] of [
      [0.3, 8, 8],
      [0.3, 8, 12],
      [0.9, 4, 6],
      [0.05, 8, 16],
    ] as const) {
      let expected = 0;
      // E over c ~ Binomial(samples, p) of the estimate from c correct.
      let choose = 1;
      for (let c = 0; c <= samples; c++) {
        if (c > 0) choose = (choose * (samples - c + 1)) / c;
        expected += choose * p ** c * (1 - p) ** (samples - c) * informativeShareOf(c, samples, group);
      }
      assert.ok(Math.abs(expected - informativeShareAt(p, group)) < 1e-12, `p ${p} G ${group} S ${samples}: ${expected} vs ${informativeShareAt(p, group)}`);
    }
    // Plugging the observed rate into the formula is biased (why the U-statistic is used).
    assert.ok(informativeShareAt(4 / 8, 8) < 1 && informativeShareOf(4, 8, 8) === 1);
    assert.equal(informativeShareOf(0, 8, 8), 0);
    assert.equal(informativeShareOf(8, 8, 8), 0);
    assert.throws(() => allOfGroup(3, 4, 8), /group <= samples/);
  });

  it('summarises by shape and says what a step will need under dynamic sampling', () => {
    const s = summarisePrescreen(
      [
        { kind: 'sum', correct: 0 },
        { kind: 'sum', correct: 4 },
        { kind: 'compare', correct: 8 },
        { kind: 'compare', correct: 2 },
      ],
      8,
      8,
    );
    assert.equal(s.tasks, 4);
    assert.equal(s.passRate, 14 / 32);
    assert.equal(s.informativeShare, 0.5);
    assert.equal(s.drawsPerGroup, 2);
    assert.deepEqual(Object.keys(s.byKind), ['compare', 'sum']);
    assert.equal(s.byKind.sum!.passRate, 4 / 16);
    assert.equal(s.byKind.compare!.informativeShare, 0.5);
    assert.match(formatPrescreen(s, 4, 12), /predicted informative groups 50% at G = 8.*about 8\.0 tasks drawn per step for 4 informative groups \(cap 12\)/);
    assert.match(formatPrescreen(s, 4, 6), /above the cap of 6/);
    assert.match(formatPrescreen(s, 4, null), /about 2\.0 of the 4 groups per step will train \(dynamic sampling off\)/);
    const flat = summarisePrescreen([{ kind: 'sum', correct: 0 }], 8, 8);
    assert.equal(flat.drawsPerGroup, null);
    assert.match(formatPrescreen(flat, 4, 12), /RL has nothing to learn from this student on this pool/);
  });
});
