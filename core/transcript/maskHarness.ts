// Which supervised tokens of an eval or RL row the harness wrote (docs/architecture.md, "What
// supervised means": where a trace carries generated flags, text the harness wrote is shown
// as harness text, not as supervised). Pure: no vscode, no Node.
import type { LossMaskResult } from '../protocol/lsp';
import { ASST, FORCED_ANSWER_TEXT } from '../wire';
import { isObj } from '../protocol/isObj';


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
  const needle = ASST + FORCED_ANSWER_TEXT;
  for (let k = mask.text.indexOf(needle); k >= 0; k = mask.text.indexOf(needle, k + 1)) {
    regions.push([k + ASST.length, k + needle.length]);
  }
  return mask.offsets.map(([s, e], i) => mask.supervised[i]! && regions.some(([a, b]) => s < b && e > a));
}
