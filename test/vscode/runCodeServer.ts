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
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

const CODE_SERVER_VERSION = '4.100.3';
const repoRoot = path.resolve(__dirname, '..', '..');
const resultsDir = path.join(repoRoot, 'test-results');
const tools = process.env['AGENT_LAB_TOOLS'] || path.join(os.homedir(), '.cache', 'agent-lab');
const codeServerRoot = process.env['AGENT_LAB_CODE_SERVER'] || path.join(tools, `code-server-${CODE_SERVER_VERSION}`);
const chromiumPath = process.env['AGENT_LAB_CHROMIUM'] || '/usr/bin/chromium';
const timeoutS = Number(process.env['AGENT_LAB_VSCODE_TIMEOUT_S'] || 300);
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const t0 = Date.now();
const say = (msg: string) => console.log(`[vscode-tests ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

class CannotRun extends Error {}

/**
 * Runs as the leader of code-server's process group: starts code-server, then waits
 * until code-server or the launcher ($1) is gone, and kills the whole group (removing the
 * scratch folder $2 when the launcher died without cleaning up).
 */
const SUPERVISOR = `
launcher="$1"; scratch="$2"; shift 2
"$@" &
child=$!
(
  while kill -0 "$launcher" 2>/dev/null; do sleep 1; done
  trap '' TERM
  echo "[supervisor] the launcher is gone: stopping code-server" >&2
  kill -s TERM -- -$$ 2>/dev/null; sleep 3
  case "$scratch" in */agent-lab-vscode-*) rm -rf "$scratch" ;; esac
  kill -s KILL -- -$$ 2>/dev/null
) &
wait "$child"
rc=$?
trap '' TERM
kill -s TERM -- -$$ 2>/dev/null
exit "$rc"
`;

// A closed stdout (e.g. piped into head) must not kill the launcher before it cleans up.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tail(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Copies every *.log under `dir` into `dest`, keeping relative paths. */
function copyLogs(dir: string, dest: string): void {
  if (!fs.existsSync(dir)) return;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.log')) continue;
    const src = path.join(entry.parentPath, entry.name);
    const out = path.join(dest, path.relative(dir, src));
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.copyFileSync(src, out);
  }
}

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
  const entry = path.join(codeServerRoot, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
  if (!fs.existsSync(path.join(codeServerRoot, '.agent-lab-installed')) || !fs.existsSync(entry)) {
    throw new CannotRun(`code-server ${CODE_SERVER_VERSION} is not installed in ${codeServerRoot}: run scripts/setup-vscode-test.sh`);
  }
  if (!fs.existsSync(chromiumPath)) throw new CannotRun(`${chromiumPath} not found: run scripts/setup-vscode-test.sh (Debian package chromium)`);

  // ---- scratch folders ------------------------------------------------------------------
  fs.mkdirSync(resultsDir, { recursive: true });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-vscode-'));
  const dirs = {
    userData: path.join(scratch, 'user-data'),
    extensions: path.join(scratch, 'extensions'),
    home: path.join(scratch, 'home'),
    chromeProfile: path.join(scratch, 'chromium-profile'),
    workspace: path.join(scratch, 'workspace'),
  };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  // The tests write runs/ into the workspace: they get a copy, never the repository's fixture.
  fs.cpSync(path.join(repoRoot, 'test', 'fixtures', 'workspace'), dirs.workspace, { recursive: true });
  fs.mkdirSync(path.join(dirs.userData, 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(dirs.userData, 'User', 'settings.json'),
    JSON.stringify(
      {
        'workbench.startupEditor': 'none',
        'editor.wordWrap': 'on', // the whole transcript shows in the screenshot
        'security.workspace.trust.enabled': false,
        'telemetry.telemetryLevel': 'off',
        'update.mode': 'none',
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'workbench.enableExperiments': false,
        'workbench.tips.enabled': false,
        'git.enabled': false,
      },
      null,
      2,
    ),
  );
  const reportFile = path.join(resultsDir, 'vscode-mocha.txt');
  const serverLog = path.join(resultsDir, 'vscode-code-server.log');
  const consoleLog = path.join(resultsDir, 'vscode-browser-console.log');
  const screenshot = path.join(resultsDir, 'vscode-integration.png');
  const logsDir = path.join(resultsDir, 'vscode-logs');
  for (const f of [reportFile, serverLog, consoleLog, screenshot]) fs.rmSync(f, { force: true });
  fs.rmSync(logsDir, { recursive: true, force: true });
  fs.writeFileSync(reportFile, '');

  let server: ChildProcess | undefined;
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
    if (server?.pid) {
      const pgid = server.pid; // detached: the child called setsid(), so its pid is the group id
      const alive = () => {
        try {
          process.kill(-pgid, 0);
          return true;
        } catch {
          return false;
        }
      };
      try {
        process.kill(-pgid, 'SIGTERM');
      } catch {
        /* already gone */
      }
      for (let i = 0; i < 50 && alive(); i++) await sleep(100);
      if (alive()) {
        say(`code-server process group ${pgid} ignored SIGTERM; sending SIGKILL`);
        try {
          process.kill(-pgid, 'SIGKILL');
        } catch {
          /* gone */
        }
        for (let i = 0; i < 30 && alive(); i++) await sleep(100);
      }
      if (alive()) say(`WARNING: process group ${pgid} is still alive`);
    }
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
    const port = await freePort();
    const host = `127.0.0.1:${port}`;
    const logFd = fs.openSync(serverLog, 'a');
    say(`starting code-server ${CODE_SERVER_VERSION} on ${host}`);
    const serverArgs = [
      entry,
      '--bind-addr',
      host,
      '--auth',
      'none',
      '--user-data-dir',
      dirs.userData,
      '--extensions-dir',
      dirs.extensions,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      '--ignore-last-opened',
      '--log',
      'info',
    ];
    server = spawn('sh', ['-c', SUPERVISOR, 'agent-lab-code-server', String(process.pid), scratch, process.execPath, ...serverArgs], {
      cwd: scratch,
      // detached = setsid(2): the supervisor, code-server and everything code-server forks
      // (extension host, pty host, file watcher) share one new process group, killed at the
      // end with kill(-pgid). The supervisor also kills the group when this launcher dies
      // without cleaning up (SIGKILL, a closed terminal).
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: {
        ...process.env,
        HOME: dirs.home,
        XDG_CONFIG_HOME: path.join(dirs.home, '.config'),
        XDG_DATA_HOME: path.join(dirs.home, '.local', 'share'),
        XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
        AGENT_LAB_TEST_REPORT: reportFile,
      },
    });
    fs.closeSync(logFd);
    let serverExit: string | undefined;
    server.on('exit', (code, signal) => (serverExit = `code-server exited (${signal ?? code})`));

    const deadline = Date.now() + 60_000;
    while ((await httpStatus(`http://${host}/healthz`)) !== 200) {
      if (serverExit) throw new Error(`${serverExit} before it listened; log:\n${tail(serverLog)}`);
      if (Date.now() > deadline) throw new Error(`code-server did not answer /healthz within 60 s; log:\n${tail(serverLog)}`);
      await sleep(250);
    }
    say('code-server is up');

    // ---- Chromium --------------------------------------------------------------------------
    context = await chromium.launchPersistentContext(dirs.chromeProfile, {
      executablePath: chromiumPath,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1440, height: 900 },
      timeout: 60_000,
    });
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
        if (serverExit) {
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
      say(`${serverExit} during the tests; log tail:\n${tail(serverLog)}`);
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
