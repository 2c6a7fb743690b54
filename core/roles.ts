// The seed's role split (roles.py `split_roles`): one distilled transcript becomes
// role-specific SFT pairs, so each role's adapter sees only the decisions it makes at serve
// time. The prefix carries the FULL history (observations included); the target is one
// assistant turn with its <|end|>. A turn that calls search is the query writer's; every
// other turn (calc calls, answers) is the synthesizer's — as the seed decides, by the text
// '"tool": "search"' in the turn. docs/worlds.md describes `distill --roles`.
import { ASST, END } from './wire';

export interface RolePair {
  prefix: string;
  target: string;
}

export class RoleSplitError extends Error {}

export function splitRoles(transcript: string): { queryWriter: RolePair[]; synthesizer: RolePair[] } {
  const queryWriter: RolePair[] = [];
  const synthesizer: RolePair[] = [];
  let prefix = '';
  for (const chunk of transcript.split(ASST)) {
    if (!prefix) {
      // The system+user preamble.
      prefix = chunk;
      continue;
    }
    const at = chunk.indexOf(END);
    // Python's `target, rest = chunk.split(END, 1)` raises here; we say which turn.
    if (at < 0) throw new RoleSplitError(`an assistant turn without ${END}: ${JSON.stringify(chunk.slice(0, 60))}`);
    const target = chunk.slice(0, at);
    const rest = chunk.slice(at + END.length);
    (target.includes('"tool": "search"') ? queryWriter : synthesizer).push({ prefix: prefix + ASST, target: target + END });
    prefix += ASST + target + END + rest;
  }
  return { queryWriter, synthesizer };
}
