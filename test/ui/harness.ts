// What the UI tests drive, as a person would: the command palette, Quick Open, Go to Line,
// the editor, the status bar, and the panels' webviews (nested iframes, found through
// page.frames() by the panel their body names). The launcher (run.ts) puts the page and the
// scratch workspace on globalThis before mocha loads the tests.
import * as path from 'node:path';
import type { Frame, Page } from 'playwright-core';
import type { PanelKind } from '../../core/protocol/panels';
import { type Box, closeTransients, idle, openQuickInput, pickExact as driverPickExact, press, pressUntil, runCommand as driverRunCommand, settled, waitFor } from './driver';

// Callbacks of page.evaluate/frame.evaluate run in the browser; the Node tsconfig has no DOM
// library, so the browser globals they use are declared here, loosely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const window: any;

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

export { waitFor } from './driver';
export type { Box } from './driver';

/** The few members of a DOM element the page functions read. */
export interface PageElement {
  textContent: string | null;
  getBoundingClientRect(): { left: number; top: number; width: number; height: number };
  getAttribute(name: string): string | null;
}

/** Runs a command from the palette (F1), by its title (an exact match): the driver's, keyboard only. */
export const runCommand = driverRunCommand;
/** Takes the quick-pick row labelled exactly `label` (keyboard: arrows, then Enter). */
export const pickExact = driverPickExact;

/**
 * Developer: Reload Window, then waits for the new workbench: the old page is marked first,
 * since its status bar stays visible for a moment and a wait on it alone returns at once (the
 * next step then ran in the page being torn down).
 */
export async function reloadWindow(page: Page): Promise<void> {
  await page.evaluate(() => {
    window.__agentLabBeforeReload = true;
  });
  await driverRunCommand(page, 'Developer: Reload Window');
  await waitFor(
    'the reloaded workbench',
    async () =>
      (await page.evaluate(() => window.__agentLabBeforeReload !== true).catch(() => false)) &&
      (await page.locator('.monaco-workbench .part.statusbar').isVisible().catch(() => false)),
    60_000,
    250,
  );
}

/** The first editor group (the text editors; the panels open beside it) holds the focus. */
async function firstGroupActive(page: Page): Promise<boolean> {
  return page.evaluate(() => {
    const groups = document.querySelectorAll('.editor-group-container');
    return groups.length > 0 && groups[0].classList.contains('active');
  });
}

/** Opens a workspace file with Quick Open (Ctrl+P), by its path relative to the workspace. */
export async function quickOpen(page: Page, relPath: string): Promise<void> {
  const base = path.basename(relPath);
  // Files open in the first group (the text editors), never among the panels. Ctrl+1 sent from
  // inside a webview can be lost: pressed again until group 1 is the active one.
  await closeTransients(page, { quickInput: true });
  await pressUntil(page, 'Control+1', 'the first editor group active', () => firstGroupActive(page), 10_000);
  const input = await openQuickInput(page, 'Control+P', `Quick Open (for ${relPath})`);
  await input.fill(relPath);
  // The row says the name and the folder (two files may share a name).
  const folder = relPath.split('/').slice(0, -1).join(path.sep === '/' ? '/' : path.sep);
  await waitFor(
    `the file ${relPath} in the list`,
    async () => {
      const label = await page.locator('.quick-input-list .monaco-list-row.focused').first().textContent({ timeout: 500 }).catch(() => null);
      return label !== null && label.includes(base) && label.includes(folder);
    },
    15_000,
  );
  await press(page, 'Enter', { what: `open ${relPath}` });
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
  const input = await openQuickInput(page, 'Control+G', `Go to Line ${line}`);
  // Go to Line is Quick Open with ':' (the rest would search files).
  const value = column === undefined ? `:${line}` : `:${line}:${column}`;
  await input.fill(value);
  // Enter acts on what the picker has read: wait until its row speaks of this line.
  await waitFor(
    `Go to Line to read ${value}`,
    async () => {
      const text = (await page.locator('.quick-input-list .monaco-list-row').first().textContent({ timeout: 500 }).catch(() => '')) ?? '';
      const aria = (await page.locator('.quick-input-list .monaco-list-row').first().getAttribute('aria-label', { timeout: 500 }).catch(() => '')) ?? '';
      return new RegExp(`\\b${line}\\b`).test(`${text} ${aria}`);
    },
    10_000,
    100,
  );
  await press(page, 'Enter', { what: `go to line ${line}` });
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
  await pressUntil(page, 'Control+1', 'the keyboard focus in a text editor of group 1', () =>
    page.evaluate(() => {
      const a = document.activeElement;
      const group = a?.closest?.('.editor-group-container');
      return !!a?.closest?.('.monaco-editor') && !!group && group === document.querySelector('.editor-group-container');
    }),
  );
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
    // The issue-34 flake: a hover lay over this list and took the click. The row is taken with the keyboard.
    await pickExact(page, t.name);
  }
  await waitFor(
    `the ${theme} theme`,
    async () => page.evaluate((cls) => document.querySelector('.monaco-workbench')?.classList.contains(cls) ?? false, t.cls),
    20_000,
  );
  // The whole workbench repainted in the new colours (layout still, fonts loaded).
  await settled(page);
}

/** A screenshot of the whole workbench into test-results/ui/<name>.png. */
export async function shot(ctx: UiContext, name: string): Promise<string> {
  const file = path.join(ctx.outDir, `${name}.png`);
  // What the picture shows has stopped moving (transient widgets are left: a hover may be its subject).
  await idle(ctx.page);
  await ctx.page.screenshot({ path: file });
  ctx.say(`screenshot: ${path.relative(process.cwd(), file)}`);
  return file;
}

/** Text of the first element matching `selector` in a frame ('' when none). */
export async function frameText(frame: Frame, selector: string): Promise<string> {
  return (await frame.locator(selector).first().textContent({ timeout: 2000 }).catch(() => '')) ?? '';
}

// ---- the text editor as rendered (squiggles, characters, the hover widget) ----------------------

/**
 * The screen box of the `index`-th character of `needle` as the active editor renders it: the
 * view-line whose text contains `needle`, a DOM range over that one character of its spans.
 */
export async function charBox(page: Page, needle: string, index: number): Promise<Box | null> {
  return page.evaluate(
    ({ needle, index }) => {
      const editor = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
      if (!editor) return null;
      for (const line of Array.from(editor.querySelectorAll('.view-line')) as PageElement[]) {
        // Monaco renders spaces as U+00A0.
        const text = (line.textContent ?? '').replace(/\u00a0/g, ' ');
        const at = text.indexOf(needle);
        if (at < 0) continue;
        let want = at + index;
        const walker = document.createTreeWalker(line, 4 /* NodeFilter.SHOW_TEXT */);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const len = node.textContent.length;
          if (want < len) {
            const range = document.createRange();
            range.setStart(node, want);
            range.setEnd(node, want + 1);
            const r = range.getBoundingClientRect();
            return { x: r.left, y: r.top, width: r.width, height: r.height };
          }
          want -= len;
        }
      }
      return null;
    },
    { needle, index },
  );
}

/** The screen boxes of the squiggles of one kind ('error', 'warning', 'info') in the active editor. */
export async function squiggles(page: Page, kind: 'error' | 'warning' | 'info'): Promise<Box[]> {
  return page.evaluate((kind) => {
    const editor = document.querySelector('.editor-group-container.active .monaco-editor');
    if (!editor) return [];
    return (Array.from(editor.querySelectorAll(`.squiggly-${kind}`)) as PageElement[]).map((el) => {
      const r = el.getBoundingClientRect();
      return { x: r.left, y: r.top, width: r.width, height: r.height };
    });
  }, kind);
}

/** The visible hover widget's text ('' when none). */
export async function hoverText(page: Page): Promise<string> {
  const hover = page.locator('.monaco-hover:visible');
  if ((await hover.count()) === 0) return '';
  return ((await hover.first().textContent({ timeout: 1000 }).catch(() => '')) ?? '').replace(/\u00a0/g, ' ');
}
