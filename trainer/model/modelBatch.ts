// What one training step hands the Stack model and what it gets back: the batch (inputs,
// shifted labels, weights; GRPO's per-token policy-gradient terms), the loss statistics
// summed over labelled positions (added over data-parallel shards), the gradients.
// (Split out of trainer/model/model.ts, which re-exports all of it.)
import type * as tf from '@tensorflow/tfjs-core';

/**
 * A batch of `batch` rows of `seq` positions, row-major. labels[t] is the target token for
 * the input at t (already shifted), IGNORE (-100) where masked. weights (optional) is a
 * per-position loss weight (default 1). Positions after the last supervised one of every
 * row are not computed (causality makes them irrelevant to the loss).
 */
export interface Batch {
  inputIds: Int32Array;
  labels: Int32Array;
  weights?: Float32Array | undefined;
  batch: number;
  seq: number;
  /** When present, the loss is GRPO's clipped surrogate with a k3 KL term instead of CE. */
  pg?: PolicyGradient | undefined;
}

/**
 * GRPO's per-token loss on the labelled positions (the policy's sampled tokens):
 *   -(min(r*A, clip(r, 1-eps, 1+eps)*A) - beta*k3(ref, new)),  r = exp(new - old),
 * averaged over labelled positions (weights must be absent: one token, one vote). The arrays
 * are per position (batch*seq) like the labels.
 */
export interface PolicyGradient {
  /** The advantage of the sequence each position belongs to. */
  advantages: Float32Array;
  /** Log-prob of the label under the policy that sampled it; absent: the current policy (r = 1). */
  oldLogp?: Float32Array | undefined;
  /** Log-prob of the label under the frozen reference (the KL anchor). */
  refLogp: Float32Array;
  clip: number;
  beta: number;
  /**
   * The sampling temperature: log-probs are those of softmax(logits / T), the distribution
   * the rollouts were drawn from (as TRL does); old and ref log-probs must use the same T.
   * Default 1.
   */
  temperature?: number | undefined;
}

/** Sums over labelled positions of a policy-gradient batch (add over shards). */
export interface PolicyStats {
  /** k3 KL estimate exp(ref-new) - (ref-new) - 1. */
  klSum: number;
  /** Positions where the clipped term was the smaller one (no gradient through the ratio). */
  clipped: number;
  /** Entropy of the policy's next-token distribution (at the sampling temperature). */
  entropySum: number;
}

export interface LossStats {
  /** sum(w * CE) / sum(w) over supervised positions (0 when there are none). */
  loss: number;
  /** sum(w * CE): add these over shards, then divide by the summed weightSum. */
  lossSum: number;
  /** sum(w) over supervised positions. */
  weightSum: number;
  /** Unweighted sum of CE over supervised positions (a plain token loss: ceSum / supervised). */
  ceSum: number;
  /** Supervised positions whose argmax equals the label. */
  correct: number;
  /** Positions with a label (label != -100). */
  supervised: number;
  /** Policy-gradient batches only. */
  pg?: PolicyStats;
}

/** Gradients by parameter name (same shapes as the weights). The caller disposes them. */
export type Grads = Map<string, tf.Tensor>;

export interface EvalResult extends LossStats {
  /** argmax token at every position (batch*seq), when asked. */
  argmax?: Int32Array;
}
