// What the launchers of a real VS Code share (test/vscode/runCodeServer.ts: the extension
// tests; test/ui/run.ts: the UI tests): code-server 4.100.3 started in its own process
// group (setsid) on a free port with scratch user-data, extensions and HOME folders, a
// supervisor that kills the group when the launcher dies, and Debian's Chromium through
// playwright-core. See docs/architecture.md, "Testing tiers".
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CODE_SERVER_VERSION = '4.100.3';
export const repoRoot = path.resolve(__dirname, '..', '..');
export const resultsDir = path.join(repoRoot, 'test-results');
export const tools = process.env['AGENT_LAB_TOOLS'] || path.join(os.homedir(), '.cache', 'agent-lab');
export const codeServerRoot = process.env['AGENT_LAB_CODE_SERVER'] || path.join(tools, `code-server-${CODE_SERVER_VERSION}`);
export const chromiumPath = process.env['AGENT_LAB_CHROMIUM'] || '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A precondition is missing (the message says what to do). */
export class CannotRun extends Error {}

/**
 * Runs as the leader of code-server's process group: starts code-server, then waits
 * until code-server or the launcher ($1) is gone, and kills the whole group (removing the
 * scratch folder $2 when the launcher died without cleaning up).
 */
export const SUPERVISOR = `
launcher="$1"; scratch="$2"; shift 2
"$@" &
child=$!
(
  while kill -0 "$launcher" 2>/dev/null; do sleep 1; done
  trap '' TERM
  echo "[supervisor] the launcher is gone: stopping code-server" >&2
  kill -s TERM -- -$$ 2>/dev/null; sleep 3
  case "$scratch" in */agent-lab-vscode-*|*/agent-lab-ui-*) rm -rf "$scratch" ;; esac
  kill -s KILL -- -$$ 2>/dev/null
) &
wait "$child"
rc=$?
trap '' TERM
kill -s TERM -- -$$ 2>/dev/null
exit "$rc"
`;

export function freePort(): Promise<number> {
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

export function httpStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function tail(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Copies every *.log under `dir` into `dest`, keeping relative paths. */
export function copyLogs(dir: string, dest: string): void {
  if (!fs.existsSync(dir)) return;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.log')) continue;
    const src = path.join(entry.parentPath, entry.name);
    const out = path.join(dest, path.relative(dir, src));
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.copyFileSync(src, out);
  }
}

/** code-server's entry script; throws CannotRun when code-server or Chromium is not installed. */
export function checkTools(): string {
  const entry = path.join(codeServerRoot, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
  if (!fs.existsSync(path.join(codeServerRoot, '.agent-lab-installed')) || !fs.existsSync(entry)) {
    throw new CannotRun(`code-server ${CODE_SERVER_VERSION} is not installed in ${codeServerRoot}: run scripts/setup-vscode-test.sh`);
  }
  if (!fs.existsSync(chromiumPath)) throw new CannotRun(`${chromiumPath} not found: run scripts/setup-vscode-test.sh (Debian package chromium)`);
  return entry;
}

export interface ScratchDirs {
  userData: string;
  extensions: string;
  home: string;
  chromeProfile: string;
  workspace: string;
}

/** A scratch folder (prefix `agent-lab-vscode-` or `agent-lab-ui-`) with the folders code-server and Chromium use. */
export function makeScratch(prefix: 'agent-lab-vscode-' | 'agent-lab-ui-' | 'agent-lab-vsix-'): { scratch: string; dirs: ScratchDirs } {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const dirs: ScratchDirs = {
    userData: path.join(scratch, 'user-data'),
    extensions: path.join(scratch, 'extensions'),
    home: path.join(scratch, 'home'),
    chromeProfile: path.join(scratch, 'chromium-profile'),
    workspace: path.join(scratch, 'workspace'),
  };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  return { scratch, dirs };
}

/** The user settings every launcher starts from (quiet, no trust prompt, no updates). */
export const BASE_SETTINGS: Record<string, unknown> = {
  'workbench.startupEditor': 'none',
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'workbench.enableExperiments': false,
  'workbench.tips.enabled': false,
  'git.enabled': false,
};

export function writeUserSettings(userData: string, settings: Record<string, unknown>): string {
  const file = path.join(userData, 'User', 'settings.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(settings, null, 2));
  return file;
}

export interface CodeServer {
  host: string;
  process: ChildProcess;
  /** Why code-server exited, once it has. */
  exitReason(): string | undefined;
  /** Kills the whole process group (SIGTERM, then SIGKILL). */
  stop(say: (msg: string) => void): Promise<void>;
}

/** Starts code-server (as the leader of its own process group) and waits for /healthz. */
export async function startCodeServer(opts: {
  entry: string;
  scratch: string;
  dirs: ScratchDirs;
  serverLog: string;
  env?: Record<string, string>;
  say: (msg: string) => void;
}): Promise<CodeServer> {
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const logFd = fs.openSync(opts.serverLog, 'a');
  opts.say(`starting code-server ${CODE_SERVER_VERSION} on ${host}`);
  const serverArgs = [
    opts.entry,
    '--bind-addr',
    host,
    '--auth',
    'none',
    '--user-data-dir',
    opts.dirs.userData,
    '--extensions-dir',
    opts.dirs.extensions,
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-workspace-trust',
    '--disable-getting-started-override',
    '--ignore-last-opened',
    '--log',
    'info',
  ];
  const server = spawn('sh', ['-c', SUPERVISOR, 'agent-lab-code-server', String(process.pid), opts.scratch, process.execPath, ...serverArgs], {
    cwd: opts.scratch,
    // detached = setsid(2): the supervisor, code-server and everything code-server forks
    // (extension host, pty host, file watcher) share one new process group, killed at the
    // end with kill(-pgid). The supervisor also kills the group when this launcher dies
    // without cleaning up (SIGKILL, a closed terminal).
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: {
      ...process.env,
      HOME: opts.dirs.home,
      XDG_CONFIG_HOME: path.join(opts.dirs.home, '.config'),
      XDG_DATA_HOME: path.join(opts.dirs.home, '.local', 'share'),
      XDG_CACHE_HOME: path.join(opts.dirs.home, '.cache'),
      ...opts.env,
    },
  });
  fs.closeSync(logFd);
  let serverExit: string | undefined;
  server.on('exit', (code, signal) => (serverExit = `code-server exited (${signal ?? code})`));

  const stop = async (say: (msg: string) => void): Promise<void> => {
    if (!server.pid) return;
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
  };

  const deadline = Date.now() + 60_000;
  while ((await httpStatus(`http://${host}/healthz`)) !== 200) {
    if (serverExit) throw new Error(`${serverExit} before it listened; log:\n${tail(opts.serverLog)}`);
    if (Date.now() > deadline) {
      await stop(opts.say);
      throw new Error(`code-server did not answer /healthz within 60 s; log:\n${tail(opts.serverLog)}`);
    }
    await sleep(250);
  }
  opts.say('code-server is up');
  return { host, process: server, exitReason: () => serverExit, stop };
}

/** Headless Chromium with a fresh profile (the flags docs/architecture.md lists). */
export function launchChromium(profileDir: string, viewport = { width: 1440, height: 900 }): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profileDir, {
    executablePath: chromiumPath,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport,
    timeout: 60_000,
  });
}
