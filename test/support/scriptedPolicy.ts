// Scripted students for the runtime and evaluation tests: a Policy whose every next token is
// chosen by the script (one logit at +10, the rest at -10), so a test decides what the
// "model" writes, token by token, through the real AgentRuntime.
import type { DecodeSession, Policy } from '../../trainer/agent/agentRuntime';

/** A policy writing `next(history)` after each append (history: every id the session has seen). */
export function scriptedPolicy(vocab: number, next: (history: readonly number[]) => number): Policy {
  return {
    vocab,
    maxContext: 4096,
    newSession(): DecodeSession {
      const history: number[] = [];
      return {
        append(ids) {
          history.push(...ids);
          const l = new Float32Array(vocab).fill(-10);
          l[next(history)] = 10;
          return l;
        },
        dispose() {},
      };
    },
  };
}

/** A student that replays one script of token ids (the prompt's ids included); past its end, id 3. */
export function replayPolicy(vocab: number, script: readonly number[]): Policy {
  return scriptedPolicy(vocab, (history) => script[history.length] ?? 3);
}
