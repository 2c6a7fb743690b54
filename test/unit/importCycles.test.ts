// No module of ours imports itself back through others (issue 31: trainer/sft/prepare.ts and
// store/worldFolder.ts imported each other, so did language-server/datasetPass.ts and
// lspServer.ts). Every relative import of the shipped folders and bench/, type-only ones
// included, is a graph edge; a strongly connected component of more than one file is a cycle.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..', '..');
const FOLDERS = ['core', 'store', 'trainer', 'extension', 'language-server', 'cli', 'bench', 'webview-ui'];

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) sourceFiles(p, out);
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Each file's relative imports (`from '...'`, `import('...')`, `require('...')`) resolved to files. */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const src = fs.readFileSync(f, 'utf8');
    const out = new Set<string>();
    for (const m of src.matchAll(/(?:\bfrom|\bimport\(|\brequire\()\s*'(\.[^']+)'/g)) {
      const t = path.resolve(path.dirname(f), m[1]!);
      const hit = [t, `${t}.ts`, path.join(t, 'index.ts')].find((c) => c.endsWith('.ts') && fs.existsSync(c));
      if (hit) out.add(hit);
    }
    graph.set(f, [...out]);
  }
  return graph;
}

/** The strongly connected components of more than one file (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('import cycles', () => {
  it('finds a cycle where there is one (the check can fail)', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    assert.deepEqual(cycles(g), [['a', 'b', 'c']]);
    assert.deepEqual(cycles(new Map([['a', ['b']], ['b', []]])), []);
  });

  it('no module of core/, trainer/, extension/, language-server/, cli/, bench/ or webview-ui/ imports itself back', () => {
    const files = FOLDERS.flatMap((d) => sourceFiles(path.join(root, d)));
    assert.ok(files.length > 100, `${files.length} files read`);
    const graph = importGraph(files);
    const edges = [...graph.values()].reduce((n, e) => n + e.length, 0);
    assert.ok(edges > 500, `${edges} imports resolved`);
    const found = cycles(graph).map((c) => `one cycle among ${c.map((f) => path.relative(root, f)).join(', ')}`);
    assert.deepEqual(found, [], `import cycles (move the shared piece where both can import it):\n${found.join('\n')}`);
  });
});
