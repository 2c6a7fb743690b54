// What ships carries no development code: no module of test/ or bench/ is in a bundle the
// .vsix lets in (.vscodeignore's allow-list; read from the development build's source maps,
// which list every bundled module). The benchmarks have their own development bundle,
// dist/bench.js, which the allow-list leaves out; a packaged layout without bench/ refuses
// `bench` in one line. Needs `node scripts/build.mjs` first.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..', '..');
const dist = path.join(root, 'dist');

/** The `!dist/....js` lines of .vscodeignore: what the .vsix lets in (`*` within one folder). */
function allowedBundlePatterns(): RegExp[] {
  return fs
    .readFileSync(path.join(root, '.vscodeignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('!dist/') && l.endsWith('.js'))
    .map((l) => new RegExp(`^${l.slice(1).replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}$`));
}

/** The shipped bundles: the files of dist/ (and dist/webview/) the allow-list lets in. */
function shippedBundles(): string[] {
  const patterns = allowedBundlePatterns();
  const all = [...fs.readdirSync(dist).map((f) => `dist/${f}`), ...fs.readdirSync(path.join(dist, 'webview')).map((f) => `dist/webview/${f}`)];
  return all.filter((f) => patterns.some((p) => p.test(f))).map((f) => path.join(root, f));
}

/** The repository-relative source files a bundle was built from (its source map's `sources`). */
function bundledSources(bundle: string): string[] {
  const mapFile = `${bundle}.map`;
  assert.ok(fs.existsSync(mapFile), `${path.relative(root, mapFile)} is missing: run node scripts/build.mjs (the development build keeps the maps)`);
  const map = JSON.parse(fs.readFileSync(mapFile, 'utf8')) as { sources: string[] };
  return map.sources.map((s) => path.relative(root, path.resolve(path.dirname(bundle), s)));
}

describe('the shipped bundles', () => {
  it('are the six Node entry points and the five panels', () => {
    const names = shippedBundles().map((b) => path.relative(dist, b)).sort();
    for (const want of ['cli.js', 'extension.js', 'server.js', 'worker.js', 'parallel-worker.js', 'eval-worker.js', 'webview/inspector.js', 'webview/lossMask.js', 'webview/curves.js', 'webview/grammar.js', 'webview/compare.js']) {
      assert.ok(names.includes(want), `dist/${want} is missing (have: ${names.join(', ')})`);
    }
  });

  it('contain no module of test/ or bench/', () => {
    for (const bundle of shippedBundles()) {
      const sources = bundledSources(bundle);
      assert.ok(sources.some((s) => !s.startsWith('node_modules')), `${bundle}: the map names none of our files`);
      const dev = sources.filter((s) => s.startsWith(`test${path.sep}`) || s.startsWith(`bench${path.sep}`));
      assert.deepEqual(dev, [], `${path.relative(root, bundle)} bundles development code`);
    }
  });

  it('the benchmarks bundle (dist/bench.js) is a development build the .vsix leaves out', () => {
    const bench = path.join(dist, 'bench.js');
    assert.ok(fs.existsSync(bench), 'a development build makes dist/bench.js');
    assert.ok(bundledSources(bench).includes(path.join('bench', 'main.ts')));
    // Even the development bundle borrows no test code (the LSP client lives in bench/).
    assert.deepEqual(bundledSources(bench).filter((s) => s.startsWith(`test${path.sep}`)), [], 'dist/bench.js bundles test/ code');
    assert.ok(!shippedBundles().includes(bench), '.vscodeignore must not let dist/bench.js in');
  });

  it('the CLI carries the harness-free bench dispatch: cli/bench.ts, not bench/*.ts', () => {
    const sources = bundledSources(path.join(dist, 'cli.js'));
    assert.ok(sources.includes(path.join('cli', 'bench.ts')));
    assert.ok(!sources.some((s) => s.includes(`lsp${path.sep}client.ts`)));
  });

  it('`bench` from a layout without bench/ (a packaged install) says it needs a checkout, exit 1', () => {
    const tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-packaged-'));
    try {
      fs.mkdirSync(path.join(tmp, 'dist'));
      fs.copyFileSync(path.join(dist, 'cli.js'), path.join(tmp, 'dist', 'cli.js'));
      const script = `require(${JSON.stringify(path.join(tmp, 'dist', 'cli.js'))}).runCli(['bench', 'lsp', '--json'])`;
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', cwd: tmp });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /^agent-lab bench: the benchmarks run from a source checkout/);
      assert.equal(r.stderr.trim().split('\n').length, 1);
      // Bad usage is still bad usage there (exit 2), checked before anything is looked for.
      const bad = spawnSync(process.execPath, ['-e', script.replace("'lsp'", "'nothing'")], { encoding: 'utf8', cwd: tmp });
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /unknown bench 'nothing'/);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
