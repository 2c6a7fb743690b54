// Which supervised tokens of an eval or RL row the harness wrote (DESIGN.md, "What
// supervised means": where a trace carries generated flags, text the harness wrote is shown
// as harness text, not as supervised). Pure: no vscode, no Node.
import type { LossMaskResult } from '../../core/protocol/lsp';
import { ASST } from '../../core/wire';
import { FORCED_ANSWER_PREFIX } from './trajectories';

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Per token, or null when the row carries no generated flags. When the row's flags line up
 * with the tokens (same count: the row was tokenized as the server tokenizes it), a
 * supervised token with flag 0 is harness text; otherwise the harness's forcing text
 * (`<|assistant|>Thought: I must answer now.\nAnswer:`) is located in the text.
 */
export function harnessFlags(mask: Pick<LossMaskResult, 'ids' | 'offsets' | 'supervised' | 'text'>, row: unknown): boolean[] | null {
  if (!isObj(row) || !('generated' in row)) return null;
  const n = mask.ids.length;
  const gen = row['generated'];
  if (Array.isArray(gen) && gen.length === n && gen.every((g) => g === 0 || g === 1)) {
    return mask.supervised.map((s, i) => s && gen[i] === 0);
  }
  const regions: [number, number][] = [];
  const needle = ASST + FORCED_ANSWER_PREFIX;
  for (let k = mask.text.indexOf(needle); k >= 0; k = mask.text.indexOf(needle, k + 1)) {
    regions.push([k + ASST.length, k + needle.length]);
  }
  return mask.offsets.map(([s, e], i) => mask.supervised[i]! && regions.some(([a, b]) => s < b && e > a));
}
