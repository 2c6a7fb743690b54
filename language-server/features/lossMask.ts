// agentLab/lossMask: the token-level loss mask of one transcript, for the mask panel.
import type { LossMaskResult, SpanRole } from '../../core/protocol/lsp';
import { roleAt } from '../analysis/transcript';
import type { Unit } from '../documents';

export function lossMaskOf(uri: string, unit: Unit): LossMaskResult {
  const a = unit.analysis;
  const t = unit.tokens();
  const n = t.ids.length;
  const offsets: [number, number][] = new Array(n);
  const supervised: boolean[] = new Array(n);
  const special: boolean[] = new Array(n);
  for (let i = 0; i < n; i++) {
    offsets[i] = [t.starts[i]!, t.ends[i]!];
    supervised[i] = t.supervised[i] === 1;
    special[i] = t.special[i] === 1;
  }
  return {
    uri,
    row: unit.row,
    text: a.text,
    tokenizer: unit.tokenizer.info,
    ids: Array.from(t.ids),
    offsets,
    supervised,
    special,
    spans: a.spans.map((s) => ({ start: s.start, end: s.end, supervised: s.supervised, role: roleAt(a, s.start).role as SpanRole })),
    maxLen: unit.tokenizer.maxLen,
    overLength: n > unit.tokenizer.maxLen,
  };
}
