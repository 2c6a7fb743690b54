// One build script, one entry point per target. Node targets are CommonJS bundles;
// webviews are browser ESM bundles, one per panel.
//   node scripts/build.mjs               development: source maps beside the bundles
//   node scripts/build.mjs --production  the packaged extension (vscode:prepublish): dist/ is
//                                        emptied first, bundles minified, no source maps
import * as esbuild from 'esbuild';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';

const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');
// A production build starts from an empty dist/, so no map or stale bundle of an earlier
// development build lies beside what is packed.
// Except dist/webgpu/ and dist/koffi/ when scripts/package-vsix.sh staged them for the
// per-platform .vsix (vsce runs this build as vscode:prepublish after the script has copied
// dawn.node and koffi.node there).
if (production) {
  if (process.env.AGENT_LAB_KEEP_WEBGPU === '1') {
    for (const entry of existsSync('dist') ? readdirSync('dist') : []) if (entry !== 'webgpu' && entry !== 'koffi') rmSync(`dist/${entry}`, { recursive: true, force: true });
  } else rmSync('dist', { recursive: true, force: true });
}

const nodeTargets = [
  { entryPoints: { cli: 'cli/main.ts' } },
  { entryPoints: { extension: 'extension/extension.ts' }, external: ['vscode'] },
  // The language server (language-server/server.ts), started by the extension.
  { entryPoints: { server: 'language-server/server.ts' } },
  // The training worker process (trainer/run/worker.ts), forked by the extension by path.
  { entryPoints: { worker: 'trainer/run/worker.ts' } },
  // The data-parallel gradient thread (trainer/model/parallel.ts), started by the Trainer.
  { entryPoints: { 'parallel-worker': 'trainer/model/parallel.ts' } },
  // The evaluation thread (trainer/agent/evalWorker.ts): the second core's share of an eval.
  { entryPoints: { 'eval-worker': 'trainer/agent/evalWorker.ts' } },
];

// tfjs-backend-wasm's binaries beside the bundles (dist/wasm/), so a packaged extension
// without node_modules still trains on wasm (trainer/model/backend.ts looks there).
import { copyFileSync } from 'node:fs';
mkdirSync('dist/wasm', { recursive: true });
for (const f of ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm', 'tfjs-backend-wasm-threaded-simd.wasm']) {
  copyFileSync(`node_modules/@tensorflow/tfjs-backend-wasm/dist/${f}`, `dist/wasm/${f}`);
}

// ---- VS Code integration tests (test/vscode tier) -------------------------------------
// dist/test/vscode/suite/index.js (the extension-tests entry, `run()` contract) and one
// bundle per suite/*.test.ts. `vscode` comes from the extension host; mocha is resolved at
// run time from the repository's node_modules (dist/ sits inside the repository).

nodeTargets.push({
  entryPoints: readdirSync('test/vscode/suite')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `test/vscode/suite/${f}`),
  outbase: '.',
  external: ['vscode', 'mocha'],
});
// ---- end of the VS Code integration tests block ---------------------------------------

// ---- the benchmarks (development builds only) ---------------------------------------------
// dist/bench.js: `agent-lab bench` runs it (cli/bench.ts) so the figures are the bundled
// code's, beside the bundled worker threads (dist/parallel-worker.js). Never shipped:
// .vscodeignore lets in named bundles only, and a production build does not make it.
if (!production) nodeTargets.push({ entryPoints: { bench: 'bench/main.ts' } });
// ---- end of the benchmarks block ----------------------------------------------------------

// The code version every run folder records: package version + commit (when in git).
import { readFileSync } from 'node:fs';
import { execSync } from 'node:child_process';
const pkgVersion = JSON.parse(readFileSync('package.json', 'utf8')).version;
let commit = 'unknown';
try {
  commit = execSync('git rev-parse --short HEAD', { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
} catch {
  /* not a git checkout */
}

const common = {
  define: { __AGENT_LAB_VERSION__: JSON.stringify(`${pkgVersion}+${commit}`) },
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  sourcemap: !production,
  minify: production,
  // Error messages and logs name classes (UserError ...); minifying keeps the names.
  keepNames: production,
  outdir: 'dist',
  logLevel: 'warning',
  // jsonc-parser's "main" is a UMD build whose require('./impl/...') calls esbuild cannot
  // follow; its ESM build bundles cleanly (the language server uses it).
  alias: { 'jsonc-parser': 'jsonc-parser/lib/esm/main.js' },
};

mkdirSync('dist', { recursive: true });
const contexts = await Promise.all(nodeTargets.map((t) => esbuild.context({ ...common, ...t })));

// ---- Webview panels (webview-ui/) ---------------------------------------------------------
// One browser ESM bundle per panel: dist/webview/<panel>.js and its <panel>.css (the CSS the
// entry imports). The extension's webviews load exactly these files (localResourceRoots is
// dist/webview/); they import core/protocol/ and chart.js only, never vscode or Node.
const webviewPanels = ['inspector', 'lossMask', 'curves', 'grammar', 'compare'];
contexts.push(
  await esbuild.context({
    entryPoints: Object.fromEntries(webviewPanels.map((p) => [p, `webview-ui/${p}/main.ts`])),
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome120',
    sourcemap: production ? false : 'linked',
    minify: production,
    keepNames: production,
    outdir: 'dist/webview',
    logLevel: 'warning',
    // Node built-ins are not available in a webview: importing one is a build error.
    external: [],
  }),
);
// ---- end of the webview panels block ------------------------------------------------------
if (watch) {
  await Promise.all(contexts.map((c) => c.watch()));
  console.log('[build] watching');
} else {
  await Promise.all(contexts.map((c) => c.rebuild()));
  await Promise.all(contexts.map((c) => c.dispose()));
}
