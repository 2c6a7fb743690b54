// The worker's progress messages (core/protocol/worker.ts: phase, done, total, message) in
// units a person reads: "step 120 of 720", "2.1 of 3 min trained, about 0.9 min left",
// "step 5 of 60: updating the policy". Pure (no vscode), so the unit tests read it directly.
import { RL_POOLS, type RlPool } from '../core/protocol/grpoOptions';

export interface ProgressEvent {
  phase: string;
  done: number;
  total: number;
  message?: string;
}

export interface ProgressView {
  /** The notification's text. */
  text: string;
  /** The status bar's shorter text. */
  short: string;
  /** Overall fraction 0..1 of the job, or null when this event says nothing about it. */
  fraction: number | null;
}

const minutes = (seconds: number): string => (seconds / 60).toFixed(1);

/** What a job's progress remembers between events: the last GRPO step's figures, shown while the next one rolls out. */
export interface ProgressMemo {
  lastStep?: { step: number; figures: string };
}

/**
 * A GRPO step's figures from the trainer's message ("step 3: reward 0.420, solved 40%, flat
 * groups 3/4 (zero-spread 75%)") as a reader wants them: "reward 0.42 · solved 40% · 1 of 4
 * groups with a spread (25%)"; the message itself when it has another form.
 */
export function grpoFigures(message: string): string {
  const detail = message.replace(/^step \d+:\s*/, '');
  const reward = /reward (-?[\d.]+)/.exec(detail)?.[1];
  const solved = /solved (\d+)%/.exec(detail)?.[1];
  const flat = /flat groups (\d+)\/(\d+)/.exec(detail);
  if (reward === undefined || !flat) return detail;
  const groups = Number(flat[2]);
  const spread = groups - Number(flat[1]);
  const share = groups > 0 ? Math.round((100 * spread) / groups) : 0;
  const keptText = /trained on (\d+)/.exec(detail)?.[1];
  const kept = keptText !== undefined ? Number(keptText) : spread;
  const s = groups === 1 ? '' : 's';
  // Dynamic sampling keeps only groups whose rollouts differ in correctness: a spread of step
  // counts alone is dropped, so "with a spread" and "trained on" can differ.
  const groupsText =
    kept === spread
      ? `${spread} of ${groups} group${s} with a spread (${share}%)`
      : `${kept} of ${groups} group${s} trained on (${spread} with a reward spread, kept only where correctness differed)`;
  return [`reward ${Number(reward).toFixed(2)}`, ...(solved !== undefined ? [`solved ${solved}%`] : []), `${groupsText}${kept === 0 ? ': no update' : ''}`].join(' · ');
}

/** "about 3.2 min left" from the fraction done and the wall time it took; '' before it can tell. */
export function etaText(fraction: number, elapsedSeconds: number): string {
  if (!(fraction > 0.02) || fraction >= 1 || !(elapsedSeconds > 5)) return '';
  const left = (elapsedSeconds * (1 - fraction)) / fraction;
  return left < 60 ? `about ${Math.max(1, Math.round(left))} s left` : `about ${minutes(left)} min left`;
}

/**
 * One progress event as text. `kind` is the job's kind; `wallSeconds` the time since the
 * job started (for the time left of a step budget); `lastFraction` the last overall
 * fraction, kept while an event cannot give one (the rollouts inside a GRPO step).
 */
export function describeProgress(kind: 'sft' | 'grpo' | 'eval', e: ProgressEvent, wallSeconds: number, lastFraction = 0, memo?: ProgressMemo): ProgressView {
  const total = Math.max(0, e.total);
  const done = Math.min(Math.max(0, e.done), total || e.done);
  const msg = e.message ?? '';
  if (e.phase.startsWith('eval')) {
    const split = e.phase.slice('eval'.length).trim() || 'held-out';
    const name = split === 'heldout' ? 'held-out' : split;
    const text = `evaluating on ${name}: ${done} of ${total} tasks`;
    // An eval inside a training run does not move the run's own bar.
    return { text, short: `eval ${done}/${total}`, fraction: kind === 'eval' && total > 0 ? done / total : null };
  }
  if (kind === 'sft' && e.phase === 'sft') {
    const step = /step (\d+)/.exec(msg)?.[1];
    const loss = /loss ([\d.]+)/.exec(msg)?.[1];
    const lossText = loss ? `, loss ${loss}` : '';
    const fraction = total > 0 ? done / total : 0;
    if (step !== undefined) {
      // A minutes budget: done and total are seconds of training.
      const left = Math.max(0, total - done);
      const text = `step ${step}: ${minutes(done)} of ${minutes(total)} min trained, about ${minutes(left)} min left${lossText}`;
      return { text, short: `step ${step}, ${minutes(left)} min left`, fraction };
    }
    const eta = etaText(fraction, wallSeconds);
    return { text: `step ${done} of ${total}${lossText}${eta ? `, ${eta}` : ''}`, short: `step ${done}/${total}`, fraction };
  }
  if (kind === 'grpo') {
    if (e.phase === 'grpo pre-screen') {
      const text = `pre-screen before step 1: ${done} of ${total} tasks sampled to predict the groups with a spread (not counted in the budget)`;
      return { text, short: `pre-screen ${done}/${total}`, fraction: null };
    }
    if (e.phase === 'grpo rollouts') {
      const m = /step (\d+)(?: of (\d+))?/.exec(msg);
      const step = m?.[1] ?? '?';
      const of = m?.[2] ? ` of ${m[2]}` : '';
      const doing = done < total ? `rolling out ${total} episodes` : `scoring the ${total} episodes and updating the policy`;
      // The last step's figures stay in view while the next one rolls out.
      const prev = memo?.lastStep ? ` · step ${memo.lastStep.step}: ${memo.lastStep.figures}` : '';
      return { text: `GRPO step ${step}${of}: ${doing}${prev}`, short: `step ${step}${m?.[2] ? `/${m[2]}` : ''}`, fraction: null };
    }
    if (e.phase === 'grpo') {
      const fraction = total > 0 ? done / total : lastFraction;
      const step = /^step (\d+)/.exec(msg)?.[1];
      const figures = grpoFigures(msg);
      const stepNo = step !== undefined ? Number(step) : done;
      if (memo) memo.lastStep = { step: stepNo, figures };
      if (step !== undefined && Number(step) !== e.done) {
        // A minutes budget: done and total are seconds.
        const text = `GRPO step ${step} · ${minutes(done)} of ${minutes(total)} min trained, about ${minutes(Math.max(0, total - done))} min left${figures ? ` · ${figures}` : ''}`;
        return { text, short: `step ${step}`, fraction };
      }
      const eta = etaText(fraction, wallSeconds);
      return {
        text: `GRPO step ${done} of ${total}${figures ? ` · ${figures}` : ''}${eta ? ` · ${eta}` : ''}`,
        short: `step ${done}/${total}`,
        fraction,
      };
    }
  }
  // Anything else (preparation, a phase added later): said as it came.
  return { text: `${e.phase} ${done}/${total}${msg ? ` (${msg})` : ''}`, short: e.phase, fraction: null };
}

/**
 * The pre-screen's refusal in a failed GRPO job's error (trainer/grpo/prescreen.ts formatVerdict):
 * its verdict, cause and next step on one line, or null when the job failed for another reason.
 */
export function prescreenRefusal(error: string): string | null {
  const m = /^pre-screen verdict: FAIL[^\n]*\n {2}cause[^\n]*\n {2}next: [^\n]*/m.exec(error);
  return m ? m[0].replace(/\n\s*/g, ' ') : null;
}

/** The pool a refusal's next step suggests (`--pool fresh-entities`), for a button that runs with it; null if none. */
export function suggestedPool(refusal: string): RlPool | null {
  const m = /next: .*?`--pool ([a-z-]+)`/.exec(refusal);
  return m && (RL_POOLS as readonly string[]).includes(m[1]!) ? (m[1] as RlPool) : null;
}
