// One build script, one entry point per target. Node targets are CommonJS bundles;
// webviews (added later) are browser ESM bundles, one per panel.
import * as esbuild from 'esbuild';
import { mkdirSync } from 'node:fs';

const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');

const nodeTargets = [
  { entryPoints: { cli: 'cli/main.ts' } },
  { entryPoints: { extension: 'extension/extension.ts' }, external: ['vscode'] },
];

// ---- VS Code integration tests (test/vscode tier) -------------------------------------
// dist/test/vscode/suite/index.js (the extension-tests entry, `run()` contract) and one
// bundle per suite/*.test.ts. `vscode` comes from the extension host; mocha is resolved at
// run time from the repository's node_modules (dist/ sits inside the repository).
import { readdirSync } from 'node:fs';
nodeTargets.push({
  entryPoints: readdirSync('test/vscode/suite')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `test/vscode/suite/${f}`),
  outbase: '.',
  external: ['vscode', 'mocha'],
});
// ---- end of the VS Code integration tests block ---------------------------------------

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  sourcemap: !production,
  minify: production,
  outdir: 'dist',
  logLevel: 'warning',
};

mkdirSync('dist', { recursive: true });
const contexts = await Promise.all(nodeTargets.map((t) => esbuild.context({ ...common, ...t })));
if (watch) {
  await Promise.all(contexts.map((c) => c.watch()));
  console.log('[build] watching');
} else {
  await Promise.all(contexts.map((c) => c.rebuild()));
  await Promise.all(contexts.map((c) => c.dispose()));
}
