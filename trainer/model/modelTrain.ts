// The Stack transformer's backward pass and losses (trainer/model/model.ts has the whole story):
// one block backward, the supervised cross-entropy and GRPO's clipped policy-gradient
// surrogate at the supervised rows of the tied head, loss and gradients for a batch, and
// the no-gradient readings (evaluate, token log-probabilities, full logits), each in a sync
// form and an *Async form that defers every read to one flush (webgpu).
import * as tf from '@tensorflow/tfjs-core';
import type { Batch, EvalResult, Grads, LossStats, PolicyGradient, PolicyStats } from './modelBatch';
import { IGNORE, paramSpecs } from './modelConfig';
import { canReadSync } from './backend';
import { blasAttentionBackward } from './blasAttention';
import { activeSgemm } from './blasMatMul';
import { HeadStats, LayerSave, ModelCore, Prepared, Readback, RopeTables, floatOneHot, readNow, useJs } from './modelCore';
import { mark } from './stepClock';

/** Training on top of the forward pass; StackModel (trainer/model/model.ts) is the class to use. */
export abstract class ModelTraining extends ModelCore {
  /**
   * dW = x^T dy. XNNPACK repacks a matMul's right operand whenever it is a new tensor (cost
   * ~K*N), so the narrower of x and dy is made the right operand: dW = (dy^T x)^T when x has
   * fewer columns. `dyT`, when the caller has it, saves a transpose.
   */
  private weightGrad(x: tf.Tensor2D, dy: tf.Tensor2D, dyT?: tf.Tensor2D): tf.Tensor2D {
    // The BLAS reads a transposed operand in place and packs every operand anyway.
    if (activeSgemm()) return tf.matMul(x, dy, true, false) as tf.Tensor2D;
    if (x.shape[1] <= dy.shape[1]) return tf.transpose(tf.matMul(dyT ?? tf.transpose(dy), x)) as tf.Tensor2D;
    return tf.matMul(tf.transpose(x), dy) as tf.Tensor2D;
  }

  /** Backward of one block: dx2 -> dx, putting weight gradients into `grads`. */
  private blockBack(i: number, dx2: tf.Tensor2D, rows: number, T: number, tb: RopeTables, s: LayerSave, grads: Grads, want: (name: string) => boolean): tf.Tensor2D {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const pre = `layers.${i}.`;
    // MLP
    const dact = this.mulWT(dx2, pre + 'w_down');
    if (want(pre + 'w_down')) grads.set(pre + 'w_down', this.weightGrad(s.act, dx2));
    const dup = tf.mul(dact, s.silu) as tf.Tensor2D;
    // silu'(g) = sig + silu * (1 - sig)
    const dgate = tf.mul(tf.mul(dact, s.up), tf.add(s.sig, tf.mul(s.silu, tf.sub(1, s.sig)))) as tf.Tensor2D;
    if (want(pre + 'w_gate')) grads.set(pre + 'w_gate', this.weightGrad(s.h2, dgate));
    if (want(pre + 'w_up')) grads.set(pre + 'w_up', this.weightGrad(s.h2, dup)); // same right operand: XNNPACK's packing is reused
    const dh2 = tf.add(this.mulWT(dgate, pre + 'w_gate'), this.mulWT(dup, pre + 'w_up')) as tf.Tensor2D;
    const nb2 = this.rmsNormBack(dh2, this.p1(pre + 'mlp_norm'), s.n2);
    if (want(pre + 'mlp_norm')) grads.set(pre + 'mlp_norm', nb2.dg);
    const dx1 = tf.add(dx2, nb2.dx) as tf.Tensor2D;
    // attention
    const dO = this.mulWT(dx1, pre + 'wo');
    if (want(pre + 'wo')) grads.set(pre + 'wo', this.weightGrad(s.o, dx1));
    const sgemm = activeSgemm();
    const { dqkv, dqkvT } =
      s.blas && sgemm ? { dqkv: blasAttentionBackward(sgemm, { heads: H, kvHeads: K, headDim: hd }, dO, s.blas, tb.arrays(), this.stepBufs, readNow), dqkvT: undefined } : this.attentionBack(dO, rows, T, tb, s);
    if (want(pre + 'wqkv')) grads.set(pre + 'wqkv', this.weightGrad(s.h1, dqkv, dqkvT));
    if (this.config.qkvBias && want(pre + 'bqkv')) grads.set(pre + 'bqkv', tf.sum(dqkv, 0) as tf.Tensor1D);
    const dh1 = this.mulWT(dqkv, pre + 'wqkv');
    const nb1 = this.rmsNormBack(dh1, this.p1(pre + 'attn_norm'), s.n1);
    if (want(pre + 'attn_norm')) grads.set(pre + 'attn_norm', nb1.dg);
    return tf.add(dx1, nb1.dx) as tf.Tensor2D;
  }

  /** The tensor path's attention backward: dO -> dqkv, [rows*T, (H+2K)*hd] (and its transpose with one row). */
  private attentionBack(dO: tf.Tensor2D, rows: number, T: number, tb: RopeTables, s: LayerSave): { dqkv: tf.Tensor2D; dqkvT?: tf.Tensor2D } {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const tt = tb.tensors();
    const dqkvTRows: tf.Tensor2D[] = [];
    for (let r = 0; r < rows; r++) {
      const rs = s.rows[r]!;
      const dOT = tf.transpose(rows === 1 ? dO : tf.slice(dO, [r * T, 0], [T, dO.shape[1]]));
      const dQT: tf.Tensor2D[] = [];
      const dKT: tf.Tensor2D[] = [];
      const dVT: tf.Tensor2D[] = [];
      const nb = tb.blocks.length;
      for (let g = 0; g < K; g++) {
        const dOTg = tf.slice(dOT, [g * rep * hd, 0], [rep * hd, T]);
        const vTg = tf.slice(rs.vT, [g * hd, 0], [hd, T]);
        const k = tf.transpose(tf.slice(rs.qkT, [(H + g) * hd, 0], [hd, T])) as tf.Tensor2D;
        const dQTs: tf.Tensor2D[] = [];
        let dK: tf.Tensor2D | null = null;
        let dV: tf.Tensor2D | null = null;
        tb.blocks.forEach(([b0, b1], j) => {
          const p = rs.probs[g]![j]!;
          const q = rs.q[g]![j]!;
          const dOg = this.headsToRows(nb === 1 ? dOTg : tf.slice(dOTg, [0, b0], [rep * hd, b1 - b0]), rep);
          const dP = tf.matMul(dOg, b1 === T ? vTg : tf.slice(vTg, [0, 0], [hd, b1]));
          // softmax backward: dS = p * (dP - rowsum(dP * p)), and rowsum(dP * p) = rowsum(dO * o)
          // (a [rows, hd] product instead of a [rows, keys] one)
          const dS = tf.mul(p, tf.sub(dP, tf.sum(tf.mul(dOg, rs.outs[g]![j]!), -1, true))) as tf.Tensor2D;
          dQTs.push(this.rowsToHeads(tf.matMul(dS, b1 === T ? k : tf.slice(k, [0, 0], [b1, hd])) as tf.Tensor2D, rep));
          // dK = dS^T q and dV = p^T dO: explicit transposes keep the right operands narrow
          const pad = (x: tf.Tensor2D): tf.Tensor2D => (b1 === T ? x : (tf.concat([x, tf.zeros([T - b1, hd])], 0) as tf.Tensor2D));
          const dKj = pad(tf.matMul(tf.transpose(dS), q) as tf.Tensor2D);
          const dVj = pad(tf.matMul(tf.transpose(p), dOg) as tf.Tensor2D);
          dK = dK ? (tf.add(dK, dKj) as tf.Tensor2D) : dKj;
          dV = dV ? (tf.add(dV, dVj) as tf.Tensor2D) : dVj;
        });
        dQT.push(nb === 1 ? dQTs[0]! : (tf.concat(dQTs, 1) as tf.Tensor2D));
        dKT.push(tf.transpose(dK!) as tf.Tensor2D);
        dVT.push(tf.transpose(dV!) as tf.Tensor2D);
      }
      const dqkT = tf.concat([...dQT, ...dKT], 0) as tf.Tensor2D;
      const dqkRawT = tf.add(tf.mul(dqkT, tt.cosT), this.swapHalves(tf.mul(dqkT, tt.sinT) as tf.Tensor2D));
      dqkvTRows.push(tf.concat([dqkRawT, ...dVT], 0) as tf.Tensor2D);
    }
    if (rows === 1) return { dqkv: tf.transpose(dqkvTRows[0]!) as tf.Tensor2D, dqkvT: dqkvTRows[0]! };
    return {
      dqkv: tf.concat(
        dqkvTRows.map((t) => tf.transpose(t)),
        0,
      ) as tf.Tensor2D,
    };
  }

  /** Softmax cross-entropy of logits [S, V] against labels: stats, dlogits (normalised by weightSum). */
  private crossEntropy(
    logits: tf.Tensor2D,
    labels: Int32Array,
    w: Float32Array,
    weightSum: number,
    wantGrad: boolean,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D | null {
    const [S, V] = logits.shape;
    if (useJs()) {
      const probs = tf.softmax(logits);
      const p = probs.dataSync() as Float32Array; // a copy: logits may be read below
      let ceSum = 0;
      let lossSum = 0;
      let correct = 0;
      let logitData: Float32Array | null = null;
      const grad = wantGrad ? p : null; // p is our own copy: the gradient is built in it
      for (let i = 0; i < S; i++) {
        const base = i * V;
        const y = labels[i]!;
        let best = 0;
        let bestV = p[base]!;
        for (let j = 1; j < V; j++) {
          const pv = p[base + j]!;
          if (pv > bestV) {
            bestV = pv;
            best = j;
          }
        }
        if (best === y) correct++;
        let ce: number;
        const py = p[base + y]!;
        if (py > 1e-30) ce = -Math.log(py);
        else {
          // Underflow: recompute log-softmax for this row from the logits.
          logitData ??= logits.dataSync() as Float32Array;
          let mx = -Infinity;
          for (let j = 0; j < V; j++) mx = Math.max(mx, logitData[base + j]!);
          let z = 0;
          for (let j = 0; j < V; j++) z += Math.exp(logitData[base + j]! - mx);
          ce = mx + Math.log(z) - logitData[base + y]!;
        }
        ceSum += ce;
        lossSum += w[i]! * ce;
        if (grad) {
          const k = weightSum > 0 ? w[i]! / weightSum : 0;
          grad[base + y]! -= 1;
          for (let j = 0; j < V; j++) grad[base + j]! *= k;
        }
      }
      probs.dispose();
      into.ceSum = ceSum;
      into.lossSum = lossSum;
      into.correct = correct;
      return grad ? tf.tensor2d(grad, [S, V]) : null;
    }
    // The gradient tensor is the tidy's result, so it belongs to the caller's scope.
    const dlogits = tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(logits);
      const ce = tf.neg(tf.sum(tf.mul(logp, onehot), 1));
      const wt = tf.tensor1d(w);
      reads.read(tf.sum(ce), (d) => (into.ceSum = d[0]!));
      reads.read(tf.sum(tf.mul(ce, wt)), (d) => (into.lossSum = d[0]!));
      reads.read(tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')), (d) => (into.correct = d[0]!));
      if (!wantGrad) return tf.zeros([0]);
      const k = weightSum > 0 ? tf.div(wt, weightSum) : tf.zerosLike(wt);
      return tf.mul(tf.sub(tf.exp(logp), onehot), tf.reshape(k, [S, 1])) as tf.Tensor2D;
    });
    if (wantGrad) return dlogits as tf.Tensor2D;
    dlogits.dispose();
    return null;
  }

  /**
   * GRPO's head: per labelled position the clipped surrogate and the k3 KL, their token mean
   * over the batch's weightSum (the count of labelled positions), and its gradient w.r.t. the
   * logits. d(loss)/d(logits) = -(dl/dlogp) * (softmax - onehot), so the CE form below with
   * k = -(dl/dlogp) / W serves both (dl/dlogp = -A*r on unclipped tokens + beta*(1 - e^(ref-new))).
   */
  private policyGradient(
    logits: tf.Tensor2D,
    labels: Int32Array,
    inputs: NonNullable<Prepared['supPg']>,
    pg: PolicyGradient,
    W: number,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D {
    if (!reads.sync) return this.policyGradientTensors(logits, labels, inputs, pg, W, reads, into);
    const [S, V] = logits.shape;
    const out = { ceSum: 0, lossSum: 0, correct: 0, pg: { klSum: 0, clipped: 0, entropySum: 0 } };
    // logp = logSoftmax(logits / T), so d/dlogits carries a 1/T beside the (softmax - onehot).
    const temperature = pg.temperature ?? 1;
    const dlogits = tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const probs = tf.exp(logp);
      const newLp = tf.sum(tf.mul(logp, onehot), 1).dataSync() as Float32Array;
      out.pg.entropySum = tf.neg(tf.sum(tf.mul(probs, logp))).dataSync()[0]!;
      out.correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')).dataSync()[0]!;
      const k = new Float32Array(S);
      const lo = 1 - pg.clip;
      const hi = 1 + pg.clip;
      for (let i = 0; i < S; i++) {
        const lp = newLp[i]!;
        const a = inputs.adv[i]!;
        const ratio = inputs.old ? Math.exp(lp - inputs.old[i]!) : 1;
        const clippedRatio = Math.min(hi, Math.max(lo, ratio));
        const unclippedTerm = ratio * a;
        const clippedTerm = clippedRatio * a;
        const isClipped = clippedTerm < unclippedTerm;
        const surr = isClipped ? clippedTerm : unclippedTerm;
        const d = inputs.ref[i]! - lp;
        const ed = Math.exp(d);
        const kl = ed - d - 1;
        out.ceSum -= lp;
        out.lossSum += -(surr - pg.beta * kl);
        out.pg.klSum += kl;
        if (isClipped) out.pg.clipped++;
        const dLdLogp = -(isClipped ? 0 : a * ratio) + pg.beta * (1 - ed);
        k[i] = W > 0 ? -dLdLogp / (W * temperature) : 0;
      }
      return tf.mul(tf.sub(probs, onehot), tf.reshape(tf.tensor1d(k), [S, 1])) as tf.Tensor2D;
    });
    Object.assign(into, out);
    return dlogits;
  }

  /**
   * policyGradient as tensor ops (backends without synchronous reads: the per-token terms
   * cannot come back to JS mid-step). The same formulas in float32; the sums are read after.
   */
  private policyGradientTensors(
    logits: tf.Tensor2D,
    labels: Int32Array,
    inputs: NonNullable<Prepared['supPg']>,
    pg: PolicyGradient,
    W: number,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D {
    const [S, V] = logits.shape;
    const stats: PolicyStats = { klSum: 0, clipped: 0, entropySum: 0 };
    into.pg = stats;
    const temperature = pg.temperature ?? 1;
    return tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const probs = tf.exp(logp);
      const lp = tf.sum(tf.mul(logp, onehot), 1);
      const adv = tf.tensor1d(inputs.adv);
      const ratio = inputs.old ? tf.exp(tf.sub(lp, tf.tensor1d(inputs.old))) : tf.onesLike(lp);
      const unclippedTerm = tf.mul(ratio, adv);
      const clippedTerm = tf.mul(tf.clipByValue(ratio, 1 - pg.clip, 1 + pg.clip), adv);
      const isClipped = tf.less(clippedTerm, unclippedTerm);
      const surr = tf.where(isClipped, clippedTerm, unclippedTerm);
      const d = tf.sub(tf.tensor1d(inputs.ref), lp);
      const ed = tf.exp(d);
      const kl = tf.sub(tf.sub(ed, d), 1);
      reads.read(tf.neg(tf.sum(lp)), (x) => (into.ceSum = x[0]!));
      reads.read(tf.neg(tf.sum(tf.sub(surr, tf.mul(kl, pg.beta)))), (x) => (into.lossSum = x[0]!));
      reads.read(tf.sum(kl), (x) => (stats.klSum = x[0]!));
      reads.read(tf.sum(tf.cast(isClipped, 'int32')), (x) => (stats.clipped = x[0]!));
      reads.read(tf.neg(tf.sum(tf.mul(probs, logp))), (x) => (stats.entropySum = x[0]!));
      reads.read(tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')), (x) => (into.correct = x[0]!));
      const dLdLogp = tf.add(tf.neg(tf.where(isClipped, tf.zerosLike(adv), tf.mul(adv, ratio))), tf.mul(tf.sub(1, ed), pg.beta));
      const k = W > 0 ? tf.div(tf.neg(dLdLogp), W * temperature) : tf.zerosLike(dLdLogp);
      return tf.mul(tf.sub(probs, onehot), tf.reshape(k, [S, 1])) as tf.Tensor2D;
    });
  }

  // ---- public API ---------------------------------------------------------------------

  /**
   * One training step's forward and backward. Loss = sum(w*CE)/sum(w) over positions with a
   * label. Returns the statistics and the gradients of that loss (a Map the caller
   * disposes; every parameter has an entry).
   */
  lossAndGrads(b: Batch, only?: ReadonlySet<string>): LossStats & { grads: Grads } {
    return this.lossAndGradsWith(b, new Readback(true), only);
  }

  /** lossAndGrads on any backend (webgpu included): the statistics are read back asynchronously. */
  async lossAndGradsAsync(b: Batch, only?: ReadonlySet<string>): Promise<LossStats & { grads: Grads }> {
    const reads = new Readback(canReadSync());
    const r = this.lossAndGradsWith(b, reads, only);
    try {
      await reads.flush();
    } catch (err) {
      for (const g of r.grads.values()) g.dispose();
      throw err;
    }
    r.loss = r.weightSum > 0 ? r.lossSum / r.weightSum : 0;
    return r;
  }

  /**
   * `only`: the parameters whose gradients are wanted (absent: all). The others are not
   * computed (LoRA, trainer/model/lora.ts, needs only the adapted weights': not the embedding's
   * scatter-add, the head's [vocab, d] product or a frozen layer's weight gradients).
   */
  private lossAndGradsWith(b: Batch, reads: Readback, only?: ReadonlySet<string>): LossStats & { grads: Grads } {
    const want = (name: string): boolean => !only || only.has(name);
    const wanted = paramSpecs(this.config).filter((s) => want(s.name));
    mark('forward');
    const prep = this.prepare(b, true);
    const { rows, T } = prep;
    const N = rows * T;
    const L = this.config.layers;
    const stats: LossStats = { loss: 0, lossSum: 0, weightSum: prep.weightSum, ceSum: 0, correct: 0, supervised: prep.supIdx.length };
    if (prep.supPg) stats.pg = { klSum: 0, clipped: 0, entropySum: 0 };
    const gradList = tf.tidy(() => {
      const grads: Grads = new Map();
      const tb = this.tables(T);
      const prevIds = this.prevIdsOfRows(prep.ids, rows, T);
      const x0 = this.embed(prep.ids, prevIds);
      const saves: LayerSave[] = [];
      let x = x0;
      for (let i = 0; i < L; i++) x = this.block(i, x, rows, T, tb, saves);
      mark('loss head');
      const nf = this.rmsNorm(x, this.p1('final_norm'));
      const E = this.p2(this.headWeight);
      const S = prep.supIdx.length;
      let dxf: tf.Tensor2D;
      let dEhead: tf.Tensor2D | null = null;
      if (S > 0) {
        const hs = this.gatherRows(nf.y, prep.supIdx);
        const logits = this.headLogits(hs) as tf.Tensor2D;
        const dl = prep.supPg
          ? this.policyGradient(logits, prep.supLabels, prep.supPg, b.pg!, prep.weightSum, reads, stats)
          : this.crossEntropy(logits, prep.supLabels, prep.supW, prep.weightSum, true, reads, stats)!;
        const dhs = tf.matMul(dl, E) as tf.Tensor2D;
        if (want(this.headWeight)) dEhead = (activeSgemm() ? tf.matMul(dl, hs, true, false) : tf.matMul(tf.transpose(dl), hs)) as tf.Tensor2D; // right operand hs: narrow
        dxf = this.scatterRows(dhs, prep.supIdx, N);
      } else {
        dxf = tf.zeros([N, this.config.dModel]);
      }
      const nbf = this.rmsNormBack(dxf, this.p1('final_norm'), nf.save);
      if (want('final_norm')) grads.set('final_norm', nbf.dg);
      let dx = nbf.dx;
      mark('backward');
      for (let i = L - 1; i >= 0; i--) dx = this.blockBack(i, dx, rows, T, tb, saves[i]!, grads, want);
      mark('embedding grad');
      // Embedding gradient: scatter-add the input gradient rows onto their tokens.
      // x0 is a sum: each previous-token table gets the same input gradient at its own ids.
      const V = this.config.vocab;
      if (want('tok_embeddings') || prevIds.length > 0) {
        const [dEin, ...dPrev] = this.embedGrads([{ ids: prep.ids, rows: V }, ...prevIds.map((ids) => ({ ids, rows: V + 1 }))], dx);
        if (this.headWeight === 'lm_head') grads.set('tok_embeddings', dEin!);
        else grads.set('tok_embeddings', dEhead ? tf.add(dEhead, dEin!) : dEin!);
        dPrev.forEach((g, k) => grads.set(`prev_embeddings.${k + 1}`, g));
      }
      if (this.headWeight === 'lm_head' && want('lm_head')) grads.set('lm_head', dEhead ?? tf.zeros([V, this.config.dModel]));
      mark('free intermediates');
      return wanted.map((s) => grads.get(s.name)!);
    });
    mark('stats');
    stats.loss = prep.weightSum > 0 ? stats.lossSum / prep.weightSum : 0;
    const grads: Grads = new Map();
    wanted.forEach((s, k) => grads.set(s.name, gradList[k]!));
    // `stats` itself, not a copy: deferred reads (webgpu) fill it at flush.
    return Object.assign(stats, { grads });
  }

  /** For each table, the rows of dx scatter-added onto its ids ([rows, d]); dx is read back once. */
  private embedGrads(tables: readonly { ids: Int32Array; rows: number }[], dx: tf.Tensor2D): tf.Tensor2D[] {
    const d = this.config.dModel;
    if (useJs()) {
      // dx read in place (readNow): every sum is made before the first tensor is
      const g = readNow(dx);
      const outs = tables.map(({ ids, rows }, k) => {
        const out = this.stepBufs.zeros(`embedGrad${k}`, rows * d);
        for (let i = 0; i < ids.length; i++) {
          const o = ids[i]! * d;
          const s = i * d;
          for (let j = 0; j < d; j++) out[o + j]! += g[s + j]!;
        }
        return out;
      });
      return outs.map((out, k) => tf.tensor2d(out, [tables[k]!.rows, d]));
    }
    return tables.map(({ ids, rows }) => tf.unsortedSegmentSum(dx, tf.tensor1d(ids, 'int32'), rows) as tf.Tensor2D);
  }

  /** Hidden states after the final norm for a batch (no gradients): [rows*T, d]. */
  private hidden(prep: Prepared): tf.Tensor2D {
    const tb = this.tables(prep.T);
    let x = this.embed(prep.ids, this.prevIdsOfRows(prep.ids, prep.rows, prep.T));
    for (let i = 0; i < this.config.layers; i++) x = this.block(i, x, prep.rows, prep.T, tb, null);
    return this.rmsNorm(x, this.p1('final_norm')).y;
  }

  /**
   * Loss and accuracy without gradients; with `argmax`, the argmax token at every position
   * (batch*seq, row-major; every position is computed then).
   */
  evaluate(b: Batch, opts: { argmax?: boolean } = {}): EvalResult {
    return this.evaluateWith(b, opts, new Readback(true));
  }

  /** evaluate on any backend (webgpu included), read back asynchronously. */
  async evaluateAsync(b: Batch, opts: { argmax?: boolean } = {}): Promise<EvalResult> {
    const reads = new Readback(canReadSync());
    const r = this.evaluateWith(b, opts, reads);
    await reads.flush();
    r.loss = r.weightSum > 0 ? r.lossSum / r.weightSum : 0;
    return r;
  }

  private evaluateWith(b: Batch, opts: { argmax?: boolean }, reads: Readback): EvalResult {
    const prep = this.prepare(b, !opts.argmax);
    const stats: EvalResult = { loss: 0, lossSum: 0, weightSum: prep.weightSum, ceSum: 0, correct: 0, supervised: prep.supIdx.length };
    tf.tidy(() => {
      const hf = this.hidden(prep);
      if (prep.supIdx.length > 0) {
        const hs = this.gatherRows(hf, prep.supIdx);
        const logits = this.headLogits(hs) as tf.Tensor2D;
        this.crossEntropy(logits, prep.supLabels, prep.supW, prep.weightSum, false, reads, stats);
      }
      if (opts.argmax) {
        // prep.T === b.seq here (no trimming)
        reads.read(tf.argMax(this.headLogits(hf), 1), (am) => (stats.argmax = Int32Array.from(am)));
      }
    });
    stats.loss = prep.weightSum > 0 ? stats.lossSum / prep.weightSum : 0;
    return stats;
  }

  /**
   * Log-prob of every label under this model (no gradients), per position (batch*seq; NaN
   * where there is no label), and the summed entropy over labelled positions, of
   * softmax(logits / temperature). GRPO's reference and old-policy log-probs.
   */
  tokenLogprobs(b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>, temperature = 1): { logp: Float32Array; entropySum: number } {
    return this.tokenLogprobsWith(b, new Readback(true), temperature);
  }

  /** tokenLogprobs on any backend (webgpu included), read back asynchronously. */
  async tokenLogprobsAsync(b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>, temperature = 1): Promise<{ logp: Float32Array; entropySum: number }> {
    const reads = new Readback(canReadSync());
    const r = this.tokenLogprobsWith(b, reads, temperature);
    await reads.flush();
    return { logp: r.logp, entropySum: r.entropy.sum };
  }

  private tokenLogprobsWith(
    b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>,
    reads: Readback,
    temperature: number,
  ): { logp: Float32Array; entropySum: number; entropy: { sum: number } } {
    const prep = this.prepare({ inputIds: b.inputIds, labels: b.labels, batch: b.batch, seq: b.seq }, true);
    const out = new Float32Array(b.batch * b.seq).fill(NaN);
    const entropy = { sum: 0 };
    if (prep.supIdx.length === 0) return { logp: out, entropySum: 0, entropy };
    tf.tidy(() => {
      const hs = this.gatherRows(this.hidden(prep), prep.supIdx);
      const logits = this.headLogits(hs) as tf.Tensor2D;
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const onehot = floatOneHot(tf.tensor1d(prep.supLabels, 'int32'), logits.shape[1]);
      reads.read(tf.sum(tf.mul(logp, onehot), 1), (lp) => {
        // supIdx is in rows*T (trimmed); map back to rows*seq.
        for (let i = 0; i < prep.supIdx.length; i++) {
          const f = prep.supIdx[i]!;
          const r = Math.floor(f / prep.T);
          out[r * b.seq + (f % prep.T)] = lp[i]!;
        }
      });
      reads.read(tf.neg(tf.sum(tf.mul(tf.exp(logp), logp))), (e) => (entropy.sum = e[0]!));
    });
    // (sync reads have filled `entropy` by now; async ones fill it at flush)
    return { logp: out, entropySum: entropy.sum, entropy };
  }

  /** Full-sequence logits, [batch*seq*vocab] row-major (for tests and analysis). */
  logits(inputIds: Int32Array, batch: number, seq: number): Float32Array {
    const labels = new Int32Array(batch * seq).fill(IGNORE);
    const prep = this.prepare({ inputIds, labels, batch, seq }, false);
    return tf.tidy(() => this.headLogits(this.hidden(prep)).dataSync() as Float32Array);
  }

  /** logits on any backend (webgpu included), read back asynchronously. */
  async logitsAsync(inputIds: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    const labels = new Int32Array(batch * seq).fill(IGNORE);
    const prep = this.prepare({ inputIds, labels, batch, seq }, false);
    const t = tf.tidy(() => this.headLogits(this.hidden(prep)));
    try {
      return (await t.data()) as Float32Array;
    } finally {
      t.dispose();
    }
  }
}
