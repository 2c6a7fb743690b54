// What the UI tests drive, as a person would: the command palette, Quick Open, Go to Line,
// the editor, the status bar, and the panels' webviews (nested iframes, found through
// page.frames() by the panel their body names). The launcher (run.ts) puts the page and the
// scratch workspace on globalThis before mocha loads the tests.
import * as path from 'node:path';
import type { Frame, Page } from 'playwright-core';
import type { PanelKind } from '../../core/protocol/panels';

// Callbacks of page.evaluate/frame.evaluate run in the browser; the Node tsconfig has no DOM
// library, so the browser globals they use are declared here, loosely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;

export interface UiContext {
  page: Page;
  /** The scratch workspace code-server opened (a copy of samples/ plus generated runs). */
  workspace: string;
  /** test-results/ui: screenshots and logs. */
  outDir: string;
  say(msg: string): void;
  /** Messages the browser console printed (CSP violations would show here). */
  console: string[];
}

export function ui(): UiContext {
  const ctx = (globalThis as { __agentLabUi?: UiContext }).__agentLabUi;
  if (!ctx) throw new Error('the UI tests run inside test/ui/run.ts (scripts/test-ui.sh)');
  return ctx;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it returns something other than undefined/false/null. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 20_000, everyMs = 150): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${String(lastErr)})` : ''}`);
    }
    await sleep(everyMs);
  }
}

async function quickInput(page: Page, open: () => Promise<void>, text: string, pick: (label: string) => boolean, what: string): Promise<void> {
  await open();
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(text);
  await waitFor(
    `${what} in the list`,
    async () => {
      const label = await page.locator('.quick-input-list .monaco-list-row.focused').first().textContent({ timeout: 500 }).catch(() => null);
      return label !== null && pick(label);
    },
    15_000,
  );
  await page.keyboard.press('Enter');
}

/** Runs a command from the palette (F1), by its title as the palette shows it (an exact match). */
export async function runCommand(page: Page, title: string): Promise<void> {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(`>${title}`);
  await pickExact(page, title);
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 }).catch(() => undefined);
}

/** Clicks the quick-pick row labelled exactly `label` (its label, or the start of its aria-label). */
export async function pickExact(page: Page, label: string): Promise<void> {
  const rows = page.locator('.quick-input-list .monaco-list-row');
  let seen: string[] = [];
  const index = await waitFor(
    `"${label}" in the list`,
    async () => {
      seen = [];
      const n = await rows.count();
      for (let i = 0; i < n; i++) {
        const row = rows.nth(i);
        const name = ((await row.locator('.label-name').first().textContent({ timeout: 300 }).catch(() => '')) ?? '').trim();
        const aria = (await row.getAttribute('aria-label', { timeout: 300 }).catch(() => '')) ?? '';
        seen.push(name || aria);
        if (name === label || aria === label || aria.startsWith(`${label},`)) return i + 1;
      }
      return undefined;
    },
    15_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; the list shows: ${JSON.stringify(seen)}`);
  });
  await rows.nth(index - 1).click();
}

/** Opens a workspace file with Quick Open (Ctrl+P), by its path relative to the workspace. */
export async function quickOpen(page: Page, relPath: string): Promise<void> {
  const base = path.basename(relPath);
  // Files open in the first group (the text editors), never among the panels.
  await page.keyboard.press('Control+1');
  await sleep(150);
  await quickInput(
    page,
    () => page.keyboard.press('Control+P'),
    relPath,
    // The row says the name and the folder (two files may share a name).
    (label) => label.includes(base) && label.includes(relPath.split('/').slice(0, -1).join(path.sep === '/' ? '/' : path.sep)),
    `the file ${relPath}`,
  );
  // The active group's tab names the file; its breadcrumbs show the folders (two files may share a name).
  const dirs = relPath.split('/').slice(0, -1);
  await waitFor(
    `the editor of ${relPath}`,
    async () => {
      if ((await page.locator(`.editor-group-container.active .tab.active[data-resource-name="${base}"]`).count()) === 0) return false;
      if (dirs.length === 0) return true;
      const crumbs = (await page.locator('.editor-group-container.active .breadcrumbs-control').first().textContent({ timeout: 500 }).catch(() => '')) ?? '';
      let at = 0;
      for (const d of dirs) {
        const k = crumbs.indexOf(d, at);
        if (k < 0) return false;
        at = k + d.length;
      }
      return true;
    },
    10_000,
  );
}

/** Moves the editor's cursor to a line (Ctrl+G). */
export async function goToLine(page: Page, line: number, column?: number): Promise<void> {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  // Go to Line is Quick Open with ':' (the rest would search files).
  await input.fill(column === undefined ? `:${line}` : `:${line}:${column}`);
  await sleep(150);
  await page.keyboard.press('Enter');
  await waitFor(`the cursor on line ${line}`, async () => (await statusLine(page)) === line, 10_000);
}

/** The cursor the status bar shows for the active editor ("Ln 12, Col 3"), or null (no text editor focused). */
export async function statusPosition(page: Page): Promise<{ line: number; col: number } | null> {
  const text = await page
    .locator('[id="status.editor.selection"]')
    .first()
    .textContent({ timeout: 1000 })
    .catch(() => null);
  const m = text ? /Ln (\d+), Col (\d+)/.exec(text) : null;
  return m ? { line: Number(m[1]), col: Number(m[2]) } : null;
}

export async function statusLine(page: Page): Promise<number | null> {
  return (await statusPosition(page))?.line ?? null;
}

/** The frame of a panel's webview (the inner iframe whose body says data-panel=kind). */
export async function panelFrame(page: Page, kind: PanelKind, timeoutMs = 20_000): Promise<Frame> {
  return waitFor(
    `the ${kind} panel's webview`,
    async () => {
      for (const f of page.frames()) {
        const panel = await f.evaluate(() => document.body?.dataset?.['panel'] ?? null).catch(() => null);
        // A hidden webview's frame may linger: take the one that is laid out.
        if (panel === kind && (await f.evaluate(() => document.body.clientWidth > 0).catch(() => false))) return f;
      }
      return undefined;
    },
    timeoutMs,
    250,
  );
}

/** Hides the side bar (the editor and the panels get the width). */
export async function closeSideBar(page: Page): Promise<void> {
  await runCommand(page, 'View: Close Primary Side Bar');
}

/** Focuses the editor group that holds text editors (group 1). */
export async function focusEditor(page: Page): Promise<void> {
  await page.keyboard.press('Control+1');
  await sleep(200);
}

export type Theme = 'light' | 'dark' | 'hc';
const THEMES: Record<Theme, { name: string; cls: string }> = {
  light: { name: 'Light Modern', cls: 'vs' },
  dark: { name: 'Dark Modern', cls: 'vs-dark' },
  hc: { name: 'Dark High Contrast', cls: 'hc-black' },
};

/** Switches the colour theme as a person does: Preferences: Color Theme, then the theme's name. */
export async function setTheme(ctx: UiContext, theme: Theme): Promise<void> {
  const t = THEMES[theme];
  const { page } = ctx;
  const already = await page.evaluate((cls) => document.querySelector('.monaco-workbench')?.classList.contains(cls) ?? false, t.cls);
  if (!already) {
    await runCommand(page, 'Preferences: Color Theme');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await input.fill(t.name);
    await pickExact(page, t.name);
  }
  await waitFor(
    `the ${theme} theme`,
    async () => page.evaluate((cls) => document.querySelector('.monaco-workbench')?.classList.contains(cls) ?? false, t.cls),
    20_000,
  );
  await sleep(400);
}

/** A screenshot of the whole workbench into test-results/ui/<name>.png. */
export async function shot(ctx: UiContext, name: string): Promise<string> {
  const file = path.join(ctx.outDir, `${name}.png`);
  await ctx.page.screenshot({ path: file });
  ctx.say(`screenshot: ${path.relative(process.cwd(), file)}`);
  return file;
}

/** Text of the first element matching `selector` in a frame ('' when none). */
export async function frameText(frame: Frame, selector: string): Promise<string> {
  return (await frame.locator(selector).first().textContent({ timeout: 2000 }).catch(() => '')) ?? '';
}
