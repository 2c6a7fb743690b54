// Phase marks of a training step for `agent-lab bench train --profile` (bench/trainProfile.ts):
// the trainer and the model call mark() where a step moves from one phase to the next
// (forward, loss head, backward, gradient exchange, optimiser). Off (one null check per
// mark, a dozen per step) unless a profiler installs a listener; nothing else reads it.

/** The listener: called with the phase that starts now, or null when the step ends. */
export type PhaseListener = (phase: string | null) => void;

let listener: PhaseListener | null = null;

/** Install (or, with null, remove) the listener. */
export function setPhaseListener(l: PhaseListener | null): void {
  listener = l;
}

/** The step enters `phase` (null: it ended). */
export function mark(phase: string | null): void {
  if (listener) listener(phase);
}
