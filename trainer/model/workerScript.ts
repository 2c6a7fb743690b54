// Where a worker thread's script is: the esbuild entry beside the running bundle
// (dist/NAME.js), or — under tsx (tests, `tsx bench/...`) or from a bundle in a source
// checkout — the TypeScript source, compiled in the thread by tsx. Null when neither exists.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

export function findWorkerScript(bundleName: string, sourceRelative: string, callerFile: string, callerDir: string): { file: string; evalCode?: string } | null {
  const sibling = path.join(callerDir, `${bundleName}.js`);
  if (fs.existsSync(sibling)) return { file: sibling };
  const source = callerFile.endsWith('.ts') ? callerFile : path.resolve(callerDir, '..', sourceRelative);
  if (fs.existsSync(source)) {
    try {
      const tsx = createRequire(source).resolve('tsx/cjs');
      return { file: source, evalCode: `require(${JSON.stringify(tsx)}); require(${JSON.stringify(source)});` };
    } catch {
      /* no tsx: not a development checkout */
    }
  }
  return null;
}
