// The UI tier: Playwright drives a real VS Code (code-server 4.100.3 in headless Chromium)
// as a person would — the command palette, Quick Open, the editor, the panels' webviews —
// on a workspace made of samples/ plus generated data, and keeps screenshots.
//
//   npm run build && npx tsx test/ui/run.ts        (scripts/test-ui.sh does both, after
//                                                  scripts/setup-vscode-test.sh)
//
// What it does: copies samples/ into a scratch workspace and adds a short real run (the CLI:
// `train sft --steps 20 --eval-limit 2`, then `eval --limit 5`), synthetic eval rows and a
// synthetic GRPO run (test/ui/fixtures.ts, labelled synthetic); starts code-server with the
// extension (extensionDevelopmentPath, no test runner inside: the workbench stays as a user
// sees it); runs the mocha suites test/ui/*.ui.ts against the page; prints mocha's report
// ("N passing", "N failing"); keeps screenshots and logs in test-results/ui/; kills the
// whole process group.
//
// Environment: AGENT_LAB_UI_TIMEOUT_S (hard timeout, default 480), AGENT_LAB_UI_GREP (mocha
// grep), AGENT_LAB_KEEP_SCRATCH=1, plus the launcher's (AGENT_LAB_TOOLS, AGENT_LAB_CODE_SERVER,
// AGENT_LAB_CHROMIUM; see test/vscode/codeServer.ts).
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Mocha from 'mocha';
import type { BrowserContext } from 'playwright-core';
import { BASE_SETTINGS, CannotRun, type CodeServer, checkTools, copyLogs, launchChromium, makeScratch, repoRoot, resultsDir, sleep, startCodeServer, tail, writeUserSettings } from '../vscode/codeServer';
import { attachDriver, reset, saveFailure } from './driver';
import type { UiContext } from './harness';
import { syntheticEvalRows, writeJsonl, writeSyntheticGrpoRun } from './fixtures';

const timeoutS = Number(process.env['AGENT_LAB_UI_TIMEOUT_S'] || 480);
const outDir = path.join(resultsDir, 'ui');
const t0 = Date.now();
const say = (msg: string) => console.log(`[ui-tests ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

/** Runs the CLI (bin/agent-lab, which runs dist/cli.js); resolves with its exit code. */
function cli(args: string[], log: string): Promise<number> {
  return new Promise((resolve) => {
    const fd = fs.openSync(log, 'a');
    const child = spawn(process.execPath, [path.join(repoRoot, 'bin', 'agent-lab'), ...args], { stdio: ['ignore', fd, fd] });
    child.on('exit', (code) => {
      fs.closeSync(fd);
      resolve(code ?? 1);
    });
    child.on('error', () => resolve(1));
  });
}

/** The workspace: samples/ + a short real run + generated fixtures. */
async function buildWorkspace(ws: string): Promise<void> {
  fs.cpSync(path.join(repoRoot, 'samples'), ws, { recursive: true });
  const shortRun = path.join(ws, 'runs', 'short');
  const log = path.join(outDir, 'cli.log');
  const training = (async () => {
    const t = Date.now();
    if ((await cli(['train', 'sft', '--steps', '20', '--eval-limit', '2', '--run', shortRun], log)) !== 0) {
      throw new Error(`agent-lab train sft failed; log:\n${tail(log)}`);
    }
    if ((await cli(['eval', '--run', shortRun, '--limit', '5'], log)) !== 0) throw new Error(`agent-lab eval failed; log:\n${tail(log)}`);
    say(`short real run: runs/short (20 SFT steps + eval on 5 held-out tasks) in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  })();
  writeJsonl(path.join(ws, 'synthetic', 'eval', 'heldout.jsonl'), syntheticEvalRows(90));
  writeSyntheticGrpoRun(path.join(ws, 'runs', 'synthetic-grpo'));
  fs.mkdirSync(path.join(ws, 'checks'), { recursive: true });
  const prompt = fs.readFileSync(path.join(repoRoot, 'samples', 'lookup.transcript'), 'utf8').split('<|assistant|>')[0]!;
  fs.writeFileSync(path.join(ws, 'checks', 'no-assistant.transcript'), `${prompt}\n`);
  await training;
}

async function main(): Promise<number> {
  for (const f of ['extension.js', 'cli.js', 'server.js', 'worker.js', 'webview/inspector.js', 'webview/lossMask.js', 'webview/curves.js', 'webview/grammar.js', 'webview/compare.js']) {
    if (!fs.existsSync(path.join(repoRoot, 'dist', f))) throw new CannotRun(`dist/${f} is missing: run \`npm run build\` first`);
  }
  const entry = checkTools();
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir, { recursive: true });
  const { scratch, dirs } = makeScratch('agent-lab-ui-');
  const serverLog = path.join(outDir, 'code-server.log');
  const consoleLog = path.join(outDir, 'browser-console.log');
  const settings: Record<string, unknown> = {
    ...BASE_SETTINGS,
    'workbench.colorTheme': 'Default Light Modern',
    'workbench.editor.enablePreview': false,
    'editor.wordWrap': 'on',
    'editor.minimap.enabled': false,
    'files.autoSave': 'off',
    'chat.commandCenter.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'window.commandCenter': false,
  };
  writeUserSettings(dirs.userData, settings);

  let server: CodeServer | undefined;
  let context: BrowserContext | undefined;
  let cleaned = false;
  const cleanup = async (): Promise<void> => {
    if (cleaned) return;
    cleaned = true;
    if (context) await Promise.race([context.close().catch(() => undefined), sleep(10_000)]);
    await server?.stop(say);
    copyLogs(path.join(dirs.userData, 'logs'), path.join(outDir, 'logs'));
    if (process.env['AGENT_LAB_KEEP_SCRATCH'] === '1') say(`scratch kept: ${scratch}`);
    else fs.rmSync(scratch, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals) => {
    say(`${sig}: stopping`);
    void cleanup().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const watchdog = setTimeout(() => {
    say(`HARD TIMEOUT: the UI tests exceeded ${timeoutS} s; killing everything`);
    setTimeout(() => process.exit(1), 20_000).unref();
    cleaned = false;
    void cleanup().finally(() => process.exit(1));
  }, timeoutS * 1000);
  watchdog.unref();

  try {
    const ws = buildWorkspace(dirs.workspace);
    server = await startCodeServer({ entry, scratch, dirs, serverLog, say });
    await ws;
    context = await launchChromium(dirs.chromeProfile, { width: 1600, height: 1000 });
    const page = context.pages()[0] ?? (await context.newPage());
    const consoleLines: string[] = [];
    const consoleStream = fs.createWriteStream(consoleLog);
    page.on('console', (m) => {
      const line = `[${m.type()}] ${m.text()}`;
      consoleLines.push(line);
      consoleStream.write(`${line}\n`);
    });
    page.on('pageerror', (e) => consoleStream.write(`[pageerror] ${e.stack ?? e.message}\n`));
    const payload = [['extensionDevelopmentPath', `vscode-remote://${server.host}${repoRoot}`]];
    const url = `http://${server.host}/?folder=${encodeURIComponent(dirs.workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;
    say('opening the workbench');
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });
    await page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 60_000 });
    say('the workbench is up');

    const ctx: UiContext = { page, workspace: dirs.workspace, outDir, say, console: consoleLines };
    (globalThis as { __agentLabUi?: UiContext }).__agentLabUi = ctx;
    attachDriver(page, { outDir, serverLog, logsDir: path.join(dirs.userData, 'logs'), say });

    const mocha = new Mocha({ ui: 'bdd', reporter: 'spec', timeout: 90_000, slow: 10_000, color: false, bail: false });
    // Every test starts with no quick pick, hover, menu or toast left by the one before, and a
    // failing test leaves its evidence in test-results/ui/failures/<test>/ (the driver's).
    mocha.suite.beforeEach('driver: close what the test before left open', async () => reset(page));
    mocha.suite.afterEach('driver: save the evidence of a failure', async function () {
      if (this.currentTest?.state === 'failed') await saveFailure(page, this.currentTest.fullTitle());
    });
    const grep = process.env['AGENT_LAB_UI_GREP'];
    if (grep) mocha.grep(grep);
    for (const f of fs.readdirSync(__dirname).filter((f) => f.endsWith('.ui.ts')).sort()) mocha.addFile(path.join(__dirname, f));
    await mocha.loadFilesAsync();
    // One line per test (title, state, duration) for scripts/flake-check.sh: test-results/ui/tests.json.
    const results: { title: string; state: string; ms: number }[] = [];
    const failures = await new Promise<number>((resolve) => {
      const runner = mocha.run(resolve);
      runner.on('test end', (t) => results.push({ title: t.fullTitle(), state: t.state ?? 'pending', ms: t.duration ?? 0 }));
      // A hook that fails (before/after) fails the tests it stood for: recorded under the hook's title.
      runner.on('fail', (r) => {
        if ((r as { type?: string }).type === 'hook') results.push({ title: r.fullTitle(), state: 'failed', ms: 0 });
      });
    });
    fs.writeFileSync(path.join(outDir, 'tests.json'), JSON.stringify(results, null, 1) + '\n');
    await page.screenshot({ path: path.join(outDir, 'final.png') }).catch(() => undefined);
    consoleStream.end();
    if (server.exitReason()) say(`${server.exitReason()} during the tests; log tail:\n${tail(serverLog)}`);
    return failures > 0 ? 1 : 0;
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
}

main().then(
  (code) => {
    say(code === 0 ? 'UI tests passed' : `UI tests FAILED (exit ${code}); screenshots and logs in test-results/ui/`);
    process.exit(code);
  },
  (err: Error) => {
    if (err instanceof CannotRun) say(`CANNOT RUN: ${err.message}`);
    else say(`ERROR: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
