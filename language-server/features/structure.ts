// Document symbols (one per step, the prompt turns beside them) and folding per step.
import { DocumentSymbol, FoldingRange, FoldingRangeKind, SymbolKind } from 'vscode-languageserver';
import { END } from '../../core/wire';
import type { Step, Turn } from '../analysis/transcript';
import type { Unit } from '../documents';

const clip = (s: string, n = 60): string => {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
};

function thoughtOf(unit: Unit, t: Turn): string {
  const content = unit.analysis.text.slice(t.contentStart, t.call ? t.call.start : t.contentEnd);
  const m = /Thought:\s*([^\n]*)/.exec(content);
  return clip(m ? m[1]! : content);
}

function stepName(unit: Unit, step: Step): { name: string; kind: SymbolKind } {
  const call = step.assistant.call;
  const a = unit.analysis;
  if (call) {
    if (call.parsed) {
      const args = Object.entries(call.parsed.args)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? JSON.stringify(v) : typeof v === 'bigint' ? v.toString() : JSON.stringify(v)}`)
        .join(' ');
      return { name: `Step ${step.index}: ${call.parsed.tool} ${clip(args, 70)}`, kind: SymbolKind.Function };
    }
    return { name: `Step ${step.index}: malformed call`, kind: SymbolKind.Function };
  }
  const fa = a.finalAnswer;
  if (fa && fa.start >= step.assistant.contentStart && fa.end <= step.assistant.contentEnd) {
    return { name: `Step ${step.index}: Answer: ${clip(fa.answer, 40)}`, kind: SymbolKind.Event };
  }
  return { name: `Step ${step.index}: ${clip(a.text.slice(step.assistant.contentStart, step.assistant.contentEnd), 50)}`, kind: SymbolKind.Event };
}

export function unitSymbols(unit: Unit): DocumentSymbol[] {
  const a = unit.analysis;
  const out: DocumentSymbol[] = [];
  const inStep = new Set<Turn>();
  for (const s of a.steps) {
    inStep.add(s.assistant);
    if (s.result) inStep.add(s.result);
  }
  const items: { start: number; sym: DocumentSymbol }[] = [];
  for (const t of a.turns) {
    if (inStep.has(t)) continue;
    const content = a.text.slice(t.contentStart, t.contentEnd);
    items.push({
      start: t.start,
      sym: {
        name: t.role === 'user' ? `User: ${clip(content)}` : t.role === 'system' ? 'System prompt' : `${t.role}: ${clip(content)}`,
        kind: t.role === 'user' ? SymbolKind.String : SymbolKind.Namespace,
        range: unit.toRange(t.start, t.end),
        selectionRange: unit.toRange(t.start, t.contentStart),
      },
    });
  }
  for (const s of a.steps) {
    const { name, kind } = stepName(unit, s);
    const children: DocumentSymbol[] = [];
    const call = s.assistant.call;
    if (call) {
      const callEnd = call.endMarker !== null ? call.endMarker + END.length : call.bodyEnd;
      children.push({ name: 'call', detail: clip(call.body, 80), kind: SymbolKind.Function, range: unit.toRange(call.start, callEnd), selectionRange: unit.toRange(call.start, call.bodyStart) });
    }
    if (s.result) {
      const r = s.result;
      children.push({
        name: 'result',
        detail: clip(a.text.slice(r.contentStart, r.contentEnd), 80),
        kind: SymbolKind.Constant,
        range: unit.toRange(r.start, r.end),
        selectionRange: unit.toRange(r.start, r.contentStart),
      });
    }
    items.push({
      start: s.start,
      sym: {
        name,
        detail: thoughtOf(unit, s.assistant),
        kind,
        range: unit.toRange(s.start, s.end),
        selectionRange: unit.toRange(s.assistant.start, s.assistant.contentStart),
        children,
      },
    });
  }
  items.sort((x, y) => x.start - y.start);
  for (const it of items) out.push(it.sym);
  return out;
}

export function rowSymbol(unit: Unit, lineLength: number): DocumentSymbol {
  const line = unit.row ?? 0;
  const label = unit.fields['task'] ?? unit.fields['question'] ?? clip(unit.analysis.text, 60);
  const kind = unit.fields['kind'];
  return {
    name: `Row ${line + 1}: ${clip(label)}`,
    ...(kind ? { detail: kind } : {}),
    kind: SymbolKind.Object,
    range: { start: { line, character: 0 }, end: { line, character: lineLength } },
    selectionRange: { start: { line, character: 0 }, end: { line, character: Math.min(1, lineLength) } },
    children: unitSymbols(unit),
  };
}

/** One fold per multi-line step and per multi-line prompt turn. */
export function unitFolds(unit: Unit): FoldingRange[] {
  const a = unit.analysis;
  const out: FoldingRange[] = [];
  const add = (start: number, end: number): void => {
    const s = unit.toPosition(start).line;
    // A range ending right after a newline ends on the line before.
    const e = unit.toPosition(Math.max(start, end - 1)).line;
    if (e > s) out.push({ startLine: s, endLine: e, kind: FoldingRangeKind.Region });
  };
  for (const t of a.turns) if (t.role === 'system' || t.role === 'user') add(t.start, t.end);
  for (const s of a.steps) add(s.start, s.end);
  return out;
}
