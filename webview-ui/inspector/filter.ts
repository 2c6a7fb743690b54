// The inspector's list logic, without a browser: facets (shapes, failures, guards, with
// counts), the search text of each row, and the filter. 10,000 rows filter in a few ms:
// the search texts are built once per load, lower-cased.
import type { InspectorFilter, TrajectorySummary } from '../../core/protocol/panels';

export interface Facet {
  value: string;
  count: number;
}
export interface Facets {
  kinds: Facet[];
  failures: Facet[];
  guards: Facet[];
  solved: number;
  failed: number;
  unknown: number;
}

function counted(values: Iterable<string>): Facet[] {
  const m = new Map<string, number>();
  for (const v of values) m.set(v, (m.get(v) ?? 0) + 1);
  return [...m].map(([value, count]) => ({ value, count })).sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
}

export function facetsOf(rows: readonly TrajectorySummary[]): Facets {
  let solved = 0;
  let failed = 0;
  let unknown = 0;
  for (const r of rows) {
    if (r.solved === true) solved++;
    else if (r.solved === false) failed++;
    else unknown++;
  }
  return {
    kinds: counted(rows.map((r) => r.kind).filter((k) => k !== '')),
    failures: counted(rows.flatMap((r) => (r.failure ? [r.failure] : []))),
    guards: counted(rows.flatMap((r) => r.guards)),
    solved,
    failed,
    unknown,
  };
}

/** What the text search looks in: question, answer, gold, shape, failure, guards, tool calls. */
export function searchTextOf(r: TrajectorySummary): string {
  return [r.question, r.answer ?? '', r.gold ?? '', r.kind, r.failure ?? '', ...r.guards, ...r.calls].join('\n').toLowerCase();
}

/** Whitespace-separated terms, all of which must occur (case-insensitive); quotes keep a phrase. */
export function searchTerms(text: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|(\S+)/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const t = (m[1] ?? m[2] ?? '').toLowerCase();
    if (t !== '') out.push(t);
  }
  return out;
}

export function matches(r: TrajectorySummary, haystack: string, f: InspectorFilter, terms: readonly string[]): boolean {
  if (f.outcome === 'solved' && r.solved !== true) return false;
  if (f.outcome === 'failed' && r.solved !== false) return false;
  if (f.kind !== '' && r.kind !== f.kind) return false;
  if (f.failure === 'none' && r.failure !== null) return false;
  if (f.failure !== '' && f.failure !== 'none' && r.failure !== f.failure) return false;
  if (f.guard !== '' && !r.guards.includes(f.guard as TrajectorySummary['guards'][number])) return false;
  for (const t of terms) if (!haystack.includes(t)) return false;
  return true;
}

/** Positions (into `rows`) of the rows that pass the filter, in order. */
export function filterRows(rows: readonly TrajectorySummary[], haystacks: readonly string[], f: InspectorFilter): number[] {
  const terms = searchTerms(f.text);
  const out: number[] = [];
  for (let i = 0; i < rows.length; i++) if (matches(rows[i]!, haystacks[i]!, f, terms)) out.push(i);
  return out;
}

/** The reward as the list shows it (2 decimals, or a dash). */
export function formatReward(r: number | null): string {
  return r === null ? '—' : r.toFixed(2);
}

/** `solved`, `failed: format`, `failed`, or `—` (rows that carry no verdict). */
export function outcomeLabel(r: Pick<TrajectorySummary, 'solved' | 'failure'>): string {
  if (r.solved === true) return 'solved';
  if (r.solved === false) return r.failure ? `failed: ${r.failure}` : 'failed';
  return '—';
}
