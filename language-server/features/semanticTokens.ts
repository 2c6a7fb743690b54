// Semantic tokens that show the loss mask in the editor: `supervised` text, `masked` text
// and `specialToken`s (modifier `lossTarget` on the special tokens the loss supervises:
// `<|tool_call|>` and the `<|end|>` closing an assistant turn). A theme colours them through
// package.json's semanticTokenScopes.
import { SemanticTokensBuilder, SemanticTokensLegend } from 'vscode-languageserver';
import type { Unit } from '../documents';

export const TOKEN_TYPES = ['supervised', 'masked', 'specialToken'] as const;
export const TOKEN_MODIFIERS = ['lossTarget'] as const;
export const LEGEND: SemanticTokensLegend = { tokenTypes: [...TOKEN_TYPES], tokenModifiers: [...TOKEN_MODIFIERS] };

const SUPERVISED = 0;
const MASKED = 1;
const SPECIAL = 2;

/** Pieces of a transcript in order: [start, end, type, modifiers]. */
function pieces(unit: Unit, from = 0, to = Infinity): [number, number, number, number][] {
  const a = unit.analysis;
  const out: [number, number, number, number][] = [];
  const specials = a.specials.filter((s) => s.token !== null);
  let si = 0;
  for (const span of a.spans) {
    if (span.end <= from) continue;
    if (span.start >= to) break;
    let at = span.start;
    while (si < specials.length && specials[si]!.end <= span.start) si++;
    let k = si;
    while (k < specials.length && specials[k]!.start < span.end) {
      const s = specials[k]!;
      if (s.start > at) out.push([at, s.start, span.supervised ? SUPERVISED : MASKED, 0]);
      out.push([s.start, s.end, SPECIAL, span.supervised ? 1 : 0]);
      at = s.end;
      k++;
    }
    if (at < span.end) out.push([at, span.end, span.supervised ? SUPERVISED : MASKED, 0]);
  }
  return out;
}

/** Adds a unit's tokens to the builder, split per line (tokens may not span lines). */
export function pushUnitTokens(b: SemanticTokensBuilder, unit: Unit, from = 0, to = Infinity): void {
  const text = unit.analysis.text;
  for (const [start, end, type, mods] of pieces(unit, from, to)) {
    if (unit.row !== null) {
      // A dataset row is one line: map the whole piece.
      const s = unit.toPosition(start);
      const e = unit.toPosition(end);
      if (e.character > s.character) b.push(s.line, s.character, e.character - s.character, type, mods);
      continue;
    }
    let a = start;
    while (a < end) {
      let nl = text.indexOf('\n', a);
      if (nl === -1 || nl >= end) nl = end;
      if (nl > a) {
        const p = unit.toPosition(a);
        b.push(p.line, p.character, nl - a, type, mods);
      }
      a = nl + 1;
    }
  }
}
