// What the packed-extension tier (test/vsix/run.ts) and the on-demand tour (test/vsix/tour.ts)
// share: the .vsix packed from a clean clone of HEAD, installed with code-server's own
// --install-extension, its zip directory read, and the notification toasts found and acted on.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { BASE_SETTINGS, type CodeServer, type ScratchDirs, copyLogs, launchChromium, makeScratch, repoRoot, sleep, startCodeServer, writeUserSettings } from '../vscode/codeServer';
import { attachDriver, click, note } from '../ui/driver';
import { type UiContext, waitFor } from '../ui/harness';

/** The names in a zip's central directory (the .vsix is a zip; no unzip tool needed). */
export function zipEntries(file: string): { name: string; size: number }[] {
  const buf = fs.readFileSync(file);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 65_557); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error(`${file} is not a zip (no end-of-central-directory record)`);
  const count = buf.readUInt16LE(eocd + 10);
  let at = buf.readUInt32LE(eocd + 16);
  const out: { name: string; size: number }[] = [];
  for (let n = 0; n < count; n++) {
    if (buf.readUInt32LE(at) !== 0x02014b50) throw new Error(`${file}: bad central directory entry ${n}`);
    const size = buf.readUInt32LE(at + 24);
    const nameLen = buf.readUInt16LE(at + 28);
    const extraLen = buf.readUInt16LE(at + 30);
    const commentLen = buf.readUInt16LE(at + 32);
    out.push({ name: buf.subarray(at + 46, at + 46 + nameLen).toString('utf8'), size });
    at += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

/**
 * Packs the .vsix from a clean clone of the repository's HEAD (git clone + node_modules as hard
 * links), with junk a working tree may hold (runs/, test-results/, a stale source map) planted
 * first: `npm run package` (vscode:prepublish: the production build). Returns the seconds it took.
 */
export function packFromCleanClone(clone: string, vsix: string): number {
  execFileSync('git', ['clone', '--quiet', '--no-hardlinks', repoRoot, clone], { stdio: 'inherit' });
  try {
    execFileSync('cp', ['-al', path.join(repoRoot, 'node_modules'), path.join(clone, 'node_modules')]);
  } catch {
    fs.symlinkSync(path.join(repoRoot, 'node_modules'), path.join(clone, 'node_modules'));
  }
  // What a working tree may hold: none of it may ship.
  fs.mkdirSync(path.join(clone, 'runs', 'demo'), { recursive: true });
  fs.writeFileSync(path.join(clone, 'runs', 'demo', 'metrics.jsonl'), '{"phase":"sft","step":1,"time":0}\n');
  fs.mkdirSync(path.join(clone, 'test-results'), { recursive: true });
  fs.writeFileSync(path.join(clone, 'test-results', 'log.txt'), `${repoRoot}\n`);
  fs.mkdirSync(path.join(clone, 'dist'), { recursive: true });
  fs.writeFileSync(path.join(clone, 'dist', 'stale.js.map'), '{}');
  const t = Date.now();
  execFileSync('npm', ['run', '--silent', 'package', '--', '--out', vsix], { cwd: clone, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, CI: '1' } });
  return (Date.now() - t) / 1000;
}

/** Installs the .vsix with code-server's own --install-extension into `dirs.extensions`; returns the installed folder's name. */
export function installVsix(entry: string, dirs: ScratchDirs, vsix: string): string {
  execFileSync(process.execPath, [entry, '--extensions-dir', dirs.extensions, '--user-data-dir', dirs.userData, '--install-extension', vsix], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, HOME: dirs.home },
  });
  const installed = fs.readdirSync(dirs.extensions).find((d) => d.startsWith('agent-lab.agent-lab-'));
  if (!installed) throw new Error(`nothing installed in ${dirs.extensions}: ${fs.readdirSync(dirs.extensions).join(', ')}`);
  return installed;
}

/** The notification toast whose text matches `re` (waits for it). */
export async function toast(page: Page, re: RegExp, timeoutMs = 30_000): Promise<Locator> {
  const toasts = page.locator('.notification-toast');
  const i = await waitFor(
    `a notification saying ${re}`,
    async () => {
      const n = await toasts.count();
      for (let k = n - 1; k >= 0; k--) {
        const text = (await toasts.nth(k).textContent({ timeout: 500 }).catch(() => '')) ?? '';
        if (re.test(text)) return k + 1;
      }
      return undefined;
    },
    timeoutMs,
    300,
  );
  return toasts.nth(i - 1);
}

/**
 * Clicks a toast's button and waits for its effect: a notification closes when one of its
 * actions runs. A click that lands while the toast is still being laid out can focus the
 * button without running it (seen once in 20 loaded runs: Distill focused, no quick pick), so
 * a toast still showing after 3 s is clicked again; three tries.
 */
export async function clickButton(t: Locator, label: string): Promise<void> {
  const page = t.page();
  const text = ((await t.textContent({ timeout: 5_000 })) ?? '').trim();
  const same = page.locator('.notification-toast', { hasText: text.slice(0, 60) });
  for (let attempt = 1; ; attempt++) {
    await click(same.locator('.monaco-button', { hasText: label }).first(), { what: `the toast's "${label}" button${attempt > 1 ? ` (attempt ${attempt})` : ''}` });
    const closed = await waitFor(`the toast to close after "${label}"`, async () => (await same.count()) === 0, 3_000, 150).catch(() => false);
    if (closed) return;
    if (attempt === 3) throw new Error(`the toast's "${label}" button was clicked ${attempt} times and its notification did not close: the action did not run`);
    note(page, `the toast's "${label}" button did not run its action: clicking again`);
  }
}

/**
 * One run's scratch folders (the clone, the .vsix, code-server's folders) under a fresh
 * `outDir`, and their end: the browser and code-server closed, the logs copied, the scratch
 * removed (kept with AGENT_LAB_KEEP_SCRATCH=1), at the end or when the watchdog fires.
 * `live` reads the server and the browser the caller started.
 */
export function vsixScratch(
  outDir: string,
  what: string,
  timeoutS: number,
  say: (msg: string) => void,
  live: () => { server?: CodeServer; context?: BrowserContext },
): { scratch: string; dirs: ScratchDirs; clone: string; vsix: string; cleanup: () => Promise<void> } {
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir, { recursive: true });
  const { scratch, dirs } = makeScratch('agent-lab-vsix-');
  const close = async (): Promise<void> => {
    const { server, context } = live();
    if (context) await Promise.race([context.close().catch(() => undefined), sleep(10_000)]);
    await server?.stop(say);
    copyLogs(path.join(dirs.userData, 'logs'), path.join(outDir, 'logs'));
    if (process.env['AGENT_LAB_KEEP_SCRATCH'] === '1') say(`scratch kept: ${scratch}`);
    else fs.rmSync(scratch, { recursive: true, force: true });
  };
  const watchdog = setTimeout(() => {
    say(`HARD TIMEOUT: ${what} exceeded ${timeoutS} s`);
    void close().finally(() => process.exit(1));
  }, timeoutS * 1000);
  watchdog.unref();
  const cleanup = async (): Promise<void> => {
    clearTimeout(watchdog);
    await close();
  };
  return { scratch, dirs, clone: path.join(scratch, 'clone'), vsix: path.join(scratch, 'agent-lab.vsix'), cleanup };
}

/**
 * code-server on `dirs.workspace` with the tiers' quiet workbench settings and `settings` on top,
 * Chromium on it with the driver attached (its console in browser-console.log), until the
 * workbench's status bar shows. `started` hears of the server and the browser as each starts,
 * so the caller's cleanup closes them even when a later step fails.
 */
export async function openWorkbench(o: {
  entry: string;
  scratch: string;
  dirs: ScratchDirs;
  outDir: string;
  say: (msg: string) => void;
  settings: Record<string, unknown>;
  started: (live: { server?: CodeServer; context?: BrowserContext }) => void;
}): Promise<{ page: Page; ctx: UiContext }> {
  const { entry, scratch, dirs, outDir, say } = o;
  writeUserSettings(dirs.userData, {
    ...BASE_SETTINGS,
    'workbench.colorTheme': 'Default Light Modern',
    'workbench.editor.enablePreview': false,
    'editor.minimap.enabled': false,
    'chat.commandCenter.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'window.commandCenter': false,
    ...o.settings,
  });
  const serverLog = path.join(outDir, 'code-server.log');
  const server = await startCodeServer({ entry, scratch, dirs, serverLog, say });
  o.started({ server });
  const context = await launchChromium(dirs.chromeProfile, { width: 1500, height: 950 });
  o.started({ server, context });
  const page = context.pages()[0] ?? (await context.newPage());
  attachDriver(page, { outDir, serverLog, logsDir: path.join(dirs.userData, 'logs'), say });
  const consoleLog = fs.createWriteStream(path.join(outDir, 'browser-console.log'));
  page.on('console', (m) => consoleLog.write(`[${m.type()}] ${m.text()}\n`));
  const ctx: UiContext = { page, workspace: dirs.workspace, outDir, say, console: [] };
  await page.goto(`http://${server.host}/?folder=${encodeURIComponent(dirs.workspace)}`, { waitUntil: 'domcontentloaded', timeout: 60_000 });
  await page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 60_000 });
  return { page, ctx };
}
