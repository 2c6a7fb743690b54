// Runs the extension's integration tests (dist/test/vscode/suite) in a real VS Code:
// code-server 4.100.3 (VS Code 1.100.3 in a browser) driven by Debian's Chromium through
// playwright-core. Desktop VS Code cannot be downloaded here; see runElectron.ts for the
// launcher that uses it where it can.
//
//   npm run build && npx tsx test/vscode/runCodeServer.ts     (scripts/test-vscode.sh does both,
//                                                             after scripts/setup-vscode-test.sh)
//
// What it does: copies the fixture workspace into a scratch folder; starts code-server in
// its own process group (setsid) on a free port with scratch user-data, extensions and
// HOME folders; opens the workbench in headless Chromium with the extension-development
// and extension-tests payload; streams the mocha report (which the suite appends to
// $AGENT_LAB_TEST_REPORT, since the extension host's console goes to the browser) to
// stdout; saves a screenshot in test-results/; kills the whole process group; exits with
// the tests' exit code (1 on timeout or on any failure to run).
//
// Environment: AGENT_LAB_TOOLS (cache folder, default ~/.cache/agent-lab),
// AGENT_LAB_CODE_SERVER (code-server install folder), AGENT_LAB_CHROMIUM (default
// /usr/bin/chromium), AGENT_LAB_VSCODE_TIMEOUT_S (hard timeout, default 300),
// AGENT_LAB_TEST_GREP (mocha grep), AGENT_LAB_KEEP_SCRATCH=1 (keep the scratch folder).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import {
  BASE_SETTINGS,
  CannotRun,
  type CodeServer,
  checkTools,
  copyLogs,
  launchChromium,
  makeScratch,
  repoRoot,
  resultsDir,
  sleep,
  startCodeServer,
  tail,
  writeUserSettings,
} from './codeServer';

const timeoutS = Number(process.env['AGENT_LAB_VSCODE_TIMEOUT_S'] || 300);

const t0 = Date.now();
const say = (msg: string) => console.log(`[vscode-tests ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

// A closed stdout (e.g. piped into head) must not kill the launcher before it cleans up.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

/** Streams what is appended to `file` to stdout. */
function follow(file: string): { flush: () => void; stop: () => void } {
  let offset = 0;
  const flush = () => {
    let fd: number;
    try {
      fd = fs.openSync(file, 'r');
    } catch {
      return;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size > offset) {
        const buf = Buffer.alloc(size - offset);
        fs.readSync(fd, buf, 0, buf.length, offset);
        offset = size;
        process.stdout.write(buf);
      }
    } finally {
      fs.closeSync(fd);
    }
  };
  const timer = setInterval(flush, 200);
  return { flush, stop: () => (clearInterval(timer), flush()) };
}

async function main(): Promise<number> {
  // ---- preconditions (each says what to do) ------------------------------------------
  const extensionBundle = path.join(repoRoot, 'dist', 'extension.js');
  const testsEntry = path.join(repoRoot, 'dist', 'test', 'vscode', 'suite', 'index.js');
  for (const f of [extensionBundle, testsEntry]) {
    if (!fs.existsSync(f)) throw new CannotRun(`${path.relative(repoRoot, f)} is missing: run \`npm run build\` first`);
  }
  const entry = checkTools();

  // ---- scratch folders ------------------------------------------------------------------
  fs.mkdirSync(resultsDir, { recursive: true });
  const { scratch, dirs } = makeScratch('agent-lab-vscode-');
  // The tests write runs/ into the workspace: they get a copy, never the repository's fixture.
  fs.cpSync(path.join(repoRoot, 'test', 'fixtures', 'workspace'), dirs.workspace, { recursive: true });
  writeUserSettings(dirs.userData, {
    ...BASE_SETTINGS,
    'editor.wordWrap': 'on', // the whole transcript shows in the screenshot
  });
  const reportFile = path.join(resultsDir, 'vscode-mocha.txt');
  const serverLog = path.join(resultsDir, 'vscode-code-server.log');
  const consoleLog = path.join(resultsDir, 'vscode-browser-console.log');
  const screenshot = path.join(resultsDir, 'vscode-integration.png');
  const logsDir = path.join(resultsDir, 'vscode-logs');
  for (const f of [reportFile, serverLog, consoleLog, screenshot]) fs.rmSync(f, { force: true });
  fs.rmSync(logsDir, { recursive: true, force: true });
  fs.writeFileSync(reportFile, '');

  let server: CodeServer | undefined;
  let context: BrowserContext | undefined;
  let page: Page | undefined;
  let follower: ReturnType<typeof follow> | undefined;
  let hardTimer: NodeJS.Timeout | undefined;
  let cleaned = false;

  const cleanup = async (): Promise<void> => {
    if (cleaned) return;
    cleaned = true;
    if (hardTimer) clearTimeout(hardTimer);
    follower?.stop();
    if (context) {
      await Promise.race([context.close().catch(() => undefined), sleep(10_000)]);
    }
    await server?.stop(say);
    copyLogs(path.join(dirs.userData, 'logs'), logsDir);
    if (process.env['AGENT_LAB_KEEP_SCRATCH'] === '1') say(`scratch kept: ${scratch}`);
    else fs.rmSync(scratch, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals) => {
    say(`${sig}: stopping`);
    void cleanup().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // The last resort: whatever hangs (a launch, a screenshot, the cleanup itself).
  const watchdog = setTimeout(() => {
    say(`HARD TIMEOUT: the run exceeded ${timeoutS + 60} s; killing everything`);
    const kill = setTimeout(() => process.exit(1), 20_000);
    kill.unref();
    cleaned = false; // let cleanup run even if it started and hung
    void cleanup().finally(() => process.exit(1));
  }, (timeoutS + 60) * 1000);
  watchdog.unref();

  try {
    // ---- code-server ---------------------------------------------------------------------
    server = await startCodeServer({ entry, scratch, dirs, serverLog, env: { AGENT_LAB_TEST_REPORT: reportFile }, say });
    const host = server.host;
    const serverExit = server.exitReason;

    // ---- Chromium --------------------------------------------------------------------------
    context = await launchChromium(dirs.chromeProfile);
    page = context.pages()[0] ?? (await context.newPage());
    const consoleStream = fs.createWriteStream(consoleLog);
    page.on('console', (m) => consoleStream.write(`[${m.type()}] ${m.text()}\n`));
    page.on('pageerror', (e) => consoleStream.write(`[pageerror] ${e.stack ?? e.message}\n`));

    let resolveExit!: (code: number) => void;
    const exited = new Promise<number>((r) => (resolveExit = r));
    await page.exposeFunction('codeAutomationExit', (code: unknown) => {
      resolveExit(typeof code === 'number' ? code : Number(code) || 0);
    });

    const payload = [
      ['extensionDevelopmentPath', `vscode-remote://${host}${repoRoot}`],
      ['extensionTestsPath', `vscode-remote://${host}${testsEntry}`],
    ];
    const url = `http://${host}/?folder=${encodeURIComponent(dirs.workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;
    say(`opening the workbench; tests: ${path.relative(repoRoot, testsEntry)}`);
    follower = follow(reportFile);
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });

    // ---- wait for the tests --------------------------------------------------------------
    const remaining = Math.max(10, timeoutS - (Date.now() - t0) / 1000);
    const timedOut = new Promise<'timeout'>((r) => (hardTimer = setTimeout(() => r('timeout'), remaining * 1000)));
    const died = new Promise<'died'>((r) => {
      const iv = setInterval(() => {
        if (serverExit()) {
          clearInterval(iv);
          r('died');
        }
      }, 500);
      iv.unref();
    });
    const outcome = await Promise.race([exited, timedOut, died]);
    follower.stop();
    await page.screenshot({ path: screenshot, timeout: 15_000 }).then(
      () => say(`screenshot: ${path.relative(repoRoot, screenshot)}`),
      (e: Error) => say(`screenshot failed: ${e.message}`),
    );
    consoleStream.end();

    if (outcome === 'timeout') {
      say(`TIMEOUT: the extension tests did not finish within ${timeoutS} s (AGENT_LAB_VSCODE_TIMEOUT_S).`);
      say(`see ${path.relative(repoRoot, consoleLog)}, ${path.relative(repoRoot, serverLog)} and ${path.relative(repoRoot, logsDir)}/`);
      return 1;
    }
    if (outcome === 'died') {
      say(`${serverExit()} during the tests; log tail:\n${tail(serverLog)}`);
      return 1;
    }
    const report = fs.readFileSync(reportFile, 'utf8');
    if (outcome === 0 && !/^\s*\d+ passing/m.test(report)) {
      say('the workbench reported success, but no mocha report arrived: counting this run as FAILED');
      return 1;
    }
    if (outcome !== 0) {
      say(`the extension tests failed (exit code ${outcome}); browser console: ${path.relative(repoRoot, consoleLog)}`);
      if (!report.trim()) say(`no mocha output arrived; console tail:\n${tail(consoleLog, 40)}`);
    }
    return outcome;
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => {
    say(code === 0 ? 'VS Code integration tests passed' : `VS Code integration tests FAILED (exit ${code})`);
    process.exit(code);
  },
  (err: Error) => {
    if (err instanceof CannotRun) say(`CANNOT RUN: ${err.message}`);
    else say(`ERROR: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
