// Glob patterns as settings write them (`**/*.traces.jsonl`, `data/*.jsonl`,
// `{eval,data}/**`): `**` crosses folders, `*` and `?` stay inside one, `{a,b}` picks.
// A pattern without '/' matches the file name alone (as VS Code's filenamePatterns).
import * as path from 'node:path';

const cache = new Map<string, RegExp>();

export function globToRegExp(glob: string): RegExp {
  const hit = cache.get(glob);
  if (hit) return hit;
  let re = '';
  let depth = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const slashAfter = glob[i + 2] === '/';
        re += slashAfter ? '(?:.*/)?' : '.*';
        i += slashAfter ? 2 : 1;
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '{') {
      re += '(?:';
      depth++;
    } else if (c === '}' && depth > 0) {
      re += ')';
      depth--;
    } else if (c === ',' && depth > 0) re += '|';
    else re += c.replace(/[.+^$()|[\]\\]/g, '\\$&');
  }
  const out = new RegExp(`^${re}$`);
  cache.set(glob, out);
  return out;
}

/** Whether a file matches any glob, relative to a workspace root or anywhere below `/`. */
export function matchesAnyGlob(fsPath: string, globs: readonly string[], roots: readonly string[]): boolean {
  const abs = fsPath.split(path.sep).join('/');
  const base = path.basename(fsPath);
  const candidates = [abs.replace(/^\/+/, '')];
  for (const root of roots) {
    const rel = path.relative(root, fsPath);
    if (rel && !rel.startsWith('..') && !path.isAbsolute(rel)) candidates.push(rel.split(path.sep).join('/'));
  }
  return globs.some((g) => {
    const re = globToRegExp(g.replace(/^\.\//, ''));
    if (!g.includes('/')) return re.test(base);
    return candidates.some((c) => re.test(c));
  });
}
