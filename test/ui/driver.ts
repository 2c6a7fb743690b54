// The one driver layer of the editor tiers (the UI tier, test/ui/*.ui.ts, and the vsix tier,
// test/vsix/run.ts): every click and key press of a test goes through here (issue 34).
//
// Before it acts, the driver
//   1. closes transient widgets: a hover (editor or workbench: `.monaco-hover`,
//      `.context-view .hover-contents`), a context menu, the suggest widget, and — before a
//      command, Quick Open or Go to Line — a quick pick left open; toasts are cleared when one
//      lies over a click target (and at the start of a test, `reset`);
//   2. waits for the workbench to be idle: no progress bar running in the part it acts on, and
//      the layout (the parts and the target's box) the same over two animation-frame samples;
//   3. acts by keyboard where the mouse is not the point of the test (a quick pick row is
//      focused with the arrow keys and taken with Enter, never clicked), and after a click
//      moves the mouse to a neutral spot, so that no hover grows under it over the next widget.
// A click that Playwright finds covered is retried after the cover is removed, within the
// step's own deadline. On a failure `saveFailure` writes a screenshot, the DOM around the last
// target (and what lay over it), the driver's action log and the code-server logs into
// <tier output>/failures/<test>/ and prints that path.
//
// No fixed sleeps: every wait here is on a state (a widget gone, a box still, a row focused).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame, Locator, Page } from 'playwright-core';

// Callbacks of page.evaluate run in the browser; the Node tsconfig has no DOM library.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
declare function requestAnimationFrame(cb: () => void): number;

/** Where a tier keeps its output and logs; given once per page by the tier's launcher. */
export interface DriverOptions {
  /** The tier's output folder (test-results/ui or test-results/vsix). */
  outDir: string;
  /** code-server's own log (its stdout and stderr). */
  serverLog?: string;
  /** code-server's user-data logs folder (the extension host's and the window's logs). */
  logsDir?: string;
  say(msg: string): void;
}

interface DriverState extends DriverOptions {
  actions: string[];
  /** The last element the driver acted on (for the DOM dump of a failure). */
  target?: { what: string; locator?: Locator };
  t0: number;
}

const states = new WeakMap<Page, DriverState>();

export function attachDriver(page: Page, opts: DriverOptions): void {
  states.set(page, { ...opts, actions: [], t0: Date.now() });
}

function state(page: Page): DriverState {
  const s = states.get(page);
  if (!s) throw new Error('the driver is not attached to this page (the tier launcher calls attachDriver)');
  return s;
}

/** One line in the action log (kept for a failure's report; the last 400 lines). */
export function note(page: Page, msg: string): void {
  const s = states.get(page);
  if (!s) return;
  s.actions.push(`${((Date.now() - s.t0) / 1000).toFixed(2)}s ${msg}`);
  if (s.actions.length > 400) s.actions.splice(0, s.actions.length - 400);
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
    // A polling interval, not a synchronisation: the loop waits on `probe`'s state.
    await pause(everyMs);
  }
}

/**
 * Asserts that `probe` keeps returning true for `ms` (a check that something does NOT happen
 * needs a window of time; it is sampled throughout, not looked at once at the end).
 */
export async function holdsFor(what: string, probe: () => Promise<boolean>, ms: number, everyMs = 100): Promise<void> {
  const end = Date.now() + ms;
  do {
    if (!(await probe())) throw new Error(`${what} stopped holding after ${ms - (end - Date.now())} ms`);
    await pause(everyMs);
  } while (Date.now() < end);
}

// ---- what lies on the page -------------------------------------------------------------------

const HOVERS = '.monaco-hover:visible, .context-view .hover-contents:visible, .workbench-hover:visible';
const MENUS = '.context-view .monaco-menu-container:visible';
const SUGGEST = '.editor-widget.suggest-widget.visible';
const QUICK_INPUT = '.quick-input-widget';
const QUICK_INPUT_BOX = '.quick-input-widget .quick-input-box input';
const TOASTS = '.notification-toast-container:visible';

async function visible(page: Page, selector: string): Promise<boolean> {
  return (await page.locator(selector).count().catch(() => 0)) > 0 && (await page.locator(selector).first().isVisible().catch(() => false));
}

/**
 * Puts the keyboard focus in the quick input's box when something else holds it: a webview
 * (an iframe) can take the focus while a quick pick opens, and a key pressed then goes to it.
 * Enter in the box takes the list's focused row, as Enter in the list does.
 */
async function focusQuickInput(page: Page): Promise<void> {
  const inside = await page.evaluate(() => document.activeElement?.closest('.quick-input-widget') != null).catch(() => false);
  if (inside) return;
  const holder = await page.evaluate(() => document.activeElement?.tagName ?? 'nothing').catch(() => '?');
  note(page, `the keyboard focus is on ${holder}, not the quick input: focus its box`);
  await page
    .locator(QUICK_INPUT_BOX)
    .focus({ timeout: 2_000 })
    .catch(() => undefined);
}

export async function quickInputOpen(page: Page): Promise<boolean> {
  return page
    .locator(QUICK_INPUT)
    .first()
    .isVisible()
    .catch(() => false);
}

/**
 * A spot where the mouse hovers nothing: the empty middle of the activity bar or of the status
 * bar (checked with elementFromPoint, so a layout change cannot put a button there).
 */
async function neutralSpot(page: Page): Promise<{ x: number; y: number }> {
  const vp = page.viewportSize() ?? { width: 1440, height: 900 };
  const spot = await page
    .evaluate(
      ({ w, h }) => {
        const candidates: [number, number][] = [
          [5, Math.round(h / 2)],
          [5, Math.round(h * 0.6)],
          [Math.round(w / 2), h - 4],
          [Math.round(w * 0.6), h - 4],
        ];
        for (const [x, y] of candidates) {
          const el = document.elementFromPoint(x, y);
          if (!el) continue;
          // Nothing that shows a hover or reacts to the pointer.
          if (el.closest('.action-item, .monaco-list-row, a, button, .statusbar-item, [title], iframe, .monaco-editor, .monaco-sash')) continue;
          return { x, y };
        }
        return null;
      },
      { w: vp.width, h: vp.height },
    )
    .catch(() => null);
  return spot ?? { x: 5, y: Math.round(vp.height / 2) };
}

/** Moves the mouse where it hovers nothing. */
export async function neutralMouse(page: Page): Promise<void> {
  const { x, y } = await neutralSpot(page);
  await page.mouse.move(x, y);
}

/** Whether an Escape would close a widget the test is using (a quick pick, the quick-fix list, suggestions). */
async function escapeWouldCloseSomethingElse(page: Page): Promise<boolean> {
  return (await quickInputOpen(page)) || (await visible(page, '.action-widget:visible')) || (await visible(page, SUGGEST));
}

/**
 * Closes the transient widgets: hovers (mouse away, then Escape if one stays and no quick pick
 * would take the Escape), context menus, the suggest widget; with `quickInput`, a quick pick
 * left open too.
 */
export async function closeTransients(page: Page, opts: { quickInput?: boolean } = {}): Promise<void> {
  if (await visible(page, HOVERS)) {
    note(page, 'a hover is open: mouse to a neutral spot');
    await neutralMouse(page);
    const gone = await waitFor('the hover to close', async () => !(await visible(page, HOVERS)), 2_000, 100).catch(() => false);
    if (!gone && !(await escapeWouldCloseSomethingElse(page))) {
      note(page, 'the hover stayed: Escape');
      await page.keyboard.press('Escape');
      await waitFor('the hover to close after Escape', async () => !(await visible(page, HOVERS)), 2_000, 100).catch(() => note(page, 'a hover is still open'));
    }
  }
  if (await visible(page, MENUS)) {
    note(page, 'a context menu is open: Escape');
    await page.keyboard.press('Escape');
    await waitFor('the context menu to close', async () => !(await visible(page, MENUS)), 3_000, 100).catch(() => note(page, 'a context menu is still open'));
  }
  if (!(await quickInputOpen(page)) && (await visible(page, SUGGEST))) {
    note(page, 'the suggest widget is open: Escape');
    await page.keyboard.press('Escape');
    await waitFor('the suggest widget to close', async () => !(await visible(page, SUGGEST)), 3_000, 100).catch(() => note(page, 'the suggest widget is still open'));
  }
  if (opts.quickInput && (await quickInputOpen(page))) {
    note(page, 'a quick pick was left open: Escape');
    await waitFor(
      'the quick pick left open to close',
      async () => {
        if (!(await quickInputOpen(page))) return true;
        await page.keyboard.press('Escape');
        return false;
      },
      5_000,
      200,
    );
  }
}

/** Clears the notification toasts (Notifications: Clear All Notifications) when any is showing. */
export async function clearNotifications(page: Page): Promise<void> {
  if (!(await visible(page, TOASTS)) || (await page.locator('.notification-toast').count()) === 0) return;
  note(page, 'toasts are showing: Notifications: Clear All Notifications');
  await runCommand(page, 'Notifications: Clear All Notifications');
  await waitFor('the toasts to go', async () => (await page.locator('.notification-toast').count()) === 0, 5_000, 150).catch(() => note(page, 'toasts are still showing (a running progress cannot be cleared)'));
}

/** The start of a test: no quick pick, hover, menu or toast left over from the one before. */
export async function reset(page: Page): Promise<void> {
  note(page, '--- reset');
  await closeTransients(page, { quickInput: true });
  await clearNotifications(page);
  await neutralMouse(page);
}

// ---- idle --------------------------------------------------------------------------------------

/**
 * One sample of the layout: the workbench parts' boxes, the quick input's, the target's, and
 * whether a progress bar runs in the target's part (or, without a target, in the quick input or
 * the active editor group). Taken in the browser after two animation frames.
 */
async function layoutSample(page: Page, frameSel: string | null): Promise<{ sig: string; busy: string | null }> {
  return page.evaluate(async (frameSel) => {
    await new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())));
    // (No named helper functions in here: the test transpiler would wrap them in a Node-only helper.)
    const marked = frameSel ? document.querySelector(frameSel) : null;
    const boxes = (Array.from(document.querySelectorAll('.monaco-workbench .part, .quick-input-widget')) as unknown[]).concat(marked ? [marked] : []);
    const sig = boxes
      .map((el) => {
        const r = (el as { getBoundingClientRect(): { left: number; top: number; width: number; height: number } }).getBoundingClientRect();
        return `${Math.round(r.left)},${Math.round(r.top)},${Math.round(r.width)},${Math.round(r.height)}`;
      })
      .join(';');
    const quick = document.querySelector('.quick-input-widget');
    const scope = marked?.closest('.part, .quick-input-widget, .notification-toast') ?? (quick && quick.offsetParent !== null ? quick : document.querySelector('.editor-group-container.active'));
    let busy: string | null = null;
    if (scope) {
      for (const bar of Array.from(scope.querySelectorAll('.monaco-progress-container.active')) as { offsetParent: unknown; closest(s: string): { className?: string } | null }[]) {
        if (bar.offsetParent !== null) {
          busy = String(bar.closest('.part, .quick-input-widget, .pane, .notification-toast')?.className ?? 'a progress bar').slice(0, 80);
          break;
        }
      }
    }
    return { sig, busy };
  }, frameSel);
}

const MARK = 'data-agent-lab-target';

/** Marks the target element (main-frame element, or the iframe holding it) so the layout sample can find it. */
async function markTarget(target: Locator | undefined): Promise<string | null> {
  if (!target) return null;
  const handle = await target
    .first()
    .elementHandle({ timeout: 2_000 })
    .catch(() => null);
  if (!handle) return null;
  try {
    const frame: Frame | null = await handle.ownerFrame();
    let el = handle;
    // A webview's element: mark the outermost iframe that holds it (the layout that moves is the workbench's).
    let f = frame;
    while (f && f.parentFrame()) {
      const fe = await f.frameElement().catch(() => null);
      if (!fe) break;
      el = fe;
      f = f.parentFrame();
    }
    await el.evaluate((e: { setAttribute(n: string, v: string): void }, mark: string) => e.setAttribute(mark, ''), MARK).catch(() => undefined);
    return `[${MARK}]`;
  } finally {
    await handle.dispose().catch(() => undefined);
  }
}

async function unmark(page: Page): Promise<void> {
  await page.evaluate((mark) => document.querySelectorAll(`[${mark}]`).forEach((e: { removeAttribute(n: string): void }) => e.removeAttribute(mark)), MARK).catch(() => undefined);
}

/**
 * Waits for the workbench to be idle around `target`: no progress bar running in its part and
 * the layout the same in two samples in a row. Soft: after `timeoutMs` it notes why and goes on
 * (a training's progress may run for minutes; the step's own checks still hold it to account).
 */
export async function idle(page: Page, target?: Locator, timeoutMs = 10_000): Promise<void> {
  const sel = await markTarget(target);
  try {
    const deadline = Date.now() + timeoutMs;
    let previous = '';
    let why = '';
    for (;;) {
      const s = await layoutSample(page, sel).catch(() => ({ sig: 'error', busy: null }));
      const still = s.sig === previous;
      previous = s.sig;
      if (still && !s.busy) return;
      why = s.busy ? `a progress bar runs in ${s.busy}` : 'the layout is still moving';
      if (Date.now() > deadline) {
        note(page, `not idle after ${timeoutMs} ms (${why}); acting anyway`);
        return;
      }
    }
  } finally {
    if (sel) await unmark(page);
  }
}

// ---- acting ----------------------------------------------------------------------------------

function describe(target: Locator): string {
  return String(target).replace(/^Locator@/, '');
}

/**
 * Clicks `target` (a locator in the page or in a webview's frame): transients closed, the
 * workbench idle, then Playwright's click with a short timeout; if something lies over the
 * target the cover is removed (a hover: mouse away; toasts: cleared) and the click retried,
 * until `timeoutMs`. Afterwards the mouse goes to a neutral spot (`keepMouse` leaves it).
 */
export async function click(target: Locator, opts: { what?: string; timeoutMs?: number; keepMouse?: boolean; position?: { x: number; y: number } } = {}): Promise<void> {
  const page = target.page();
  const s = state(page);
  const what = opts.what ?? describe(target);
  s.target = { what, locator: target };
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let lastErr: Error | undefined;
  for (let attempt = 1; ; attempt++) {
    await closeTransients(page);
    await idle(page, target);
    note(page, `click ${what}${attempt > 1 ? ` (attempt ${attempt})` : ''}`);
    try {
      await target.first().click({ timeout: Math.max(1_000, Math.min(5_000, deadline - Date.now())), position: opts.position });
      break;
    } catch (err) {
      lastErr = err as Error;
      const first = lastErr.message.split('\n').find((l) => /intercepts pointer events|not visible|not stable|outside of the viewport|detached/.test(l)) ?? lastErr.message.split('\n')[0]!;
      note(page, `click ${what} did not land: ${first.trim()}`);
      if (/intercepts pointer events/.test(lastErr.message) && /notification/.test(lastErr.message)) await clearNotifications(page);
      if (Date.now() > deadline) throw new Error(`could not click ${what}: ${first.trim()}`);
    }
  }
  if (!opts.keepMouse) await neutralMouse(page);
}

/** Moves the mouse onto `target` where hovering is the point (a token's tooltip): transients closed, the workbench idle first. */
export async function hover(target: Locator, opts: { what?: string } = {}): Promise<void> {
  const page = target.page();
  const what = opts.what ?? describe(target);
  state(page).target = { what, locator: target };
  await closeTransients(page);
  await idle(page, target);
  note(page, `hover ${what}`);
  await target.first().hover({ timeout: 10_000 });
}

/** Presses a key (or chord) once the transients are closed and the workbench is idle. */
export async function press(page: Page, key: string, opts: { what?: string } = {}): Promise<void> {
  await closeTransients(page);
  await idle(page);
  note(page, `press ${key}${opts.what ? ` (${opts.what})` : ''}`);
  await page.keyboard.press(key);
}

/** Types text into whatever has the keyboard focus. */
export async function type(page: Page, text: string): Promise<void> {
  await closeTransients(page);
  await idle(page);
  note(page, `type ${JSON.stringify(text)}`);
  await page.keyboard.type(text);
}

/**
 * Presses an idempotent key until `probe` holds (a key press sent from inside a webview is
 * forwarded to the workbench asynchronously and can be lost; pressing Ctrl+1 again only focuses
 * the same group).
 */
export async function pressUntil(page: Page, key: string, what: string, probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  await waitFor(
    what,
    async () => {
      if (await probe()) return true;
      await press(page, key, { what });
      return probe();
    },
    timeoutMs,
    250,
  );
}

/** Fills a text field (focus and value set by Playwright: no pointer, no key events lost). */
export async function fill(target: Locator, value: string, opts: { what?: string } = {}): Promise<void> {
  const page = target.page();
  const s = state(page);
  const what = opts.what ?? describe(target);
  s.target = { what, locator: target };
  await closeTransients(page);
  note(page, `fill ${what} with ${JSON.stringify(value)}`);
  await target.first().fill(value, { timeout: 10_000 });
}

/** Chooses an option of a <select> (no pointer). */
export async function select(target: Locator, value: string, opts: { what?: string } = {}): Promise<void> {
  const page = target.page();
  state(page).target = { what: opts.what ?? describe(target), locator: target };
  await closeTransients(page);
  note(page, `select ${value} in ${opts.what ?? describe(target)}`);
  await target.first().selectOption(value, { timeout: 10_000 });
}

/** Focuses an element (keyboard focus; no pointer). */
export async function focus(target: Locator, opts: { what?: string } = {}): Promise<void> {
  const page = target.page();
  state(page).target = { what: opts.what ?? describe(target), locator: target };
  await closeTransients(page);
  note(page, `focus ${opts.what ?? describe(target)}`);
  await target.first().focus({ timeout: 10_000 });
}

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * Hovers where the mouse is the point (a squiggle, a token): waits for the box to be still,
 * moves onto its centre (a small move first: Monaco hovers on mousemove), and waits for
 * `want` to accept the hover. Monaco drops a hover whose line moved under the mouse: when the
 * box moved, or no hover shows after 3 s (then 6, 12), the box is measured again and hovered
 * again. A hover that shows but does not say `want` yet (still loading) is waited for.
 */
export async function hoverUntil<T>(page: Page, what: string, box: () => Promise<Box | null>, want: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const s = state(page);
  s.target = { what };
  let hoveredAt: string | null = null;
  let movedAt = 0;
  let interval = 3_000;
  let previous = '';
  return waitFor(
    what,
    async () => {
      const got = await want();
      if (got !== undefined) return got;
      const b = await box();
      if (!b) return undefined;
      const sig = JSON.stringify(b);
      const shown = await visible(page, HOVERS);
      if (hoveredAt === sig && (shown || Date.now() - movedAt < interval)) return undefined;
      // Hover only a box that two samples agree on: a box still moving would be hovered at its old place.
      if (sig !== previous) {
        previous = sig;
        return undefined;
      }
      if (shown) await closeTransients(page);
      const cx = b.x + b.width / 2;
      const cy = b.y + b.height / 2;
      note(page, `hover ${what} at ${cx.toFixed(0)},${cy.toFixed(0)}${hoveredAt ? ` (again: ${hoveredAt === sig ? 'no hover came' : 'the box moved'})` : ''}`);
      await page.mouse.move(cx - 3, cy);
      await page.mouse.move(cx, cy, { steps: 3 });
      if (hoveredAt !== null) interval = Math.min(interval * 2, 12_000);
      hoveredAt = sig;
      movedAt = Date.now();
      return undefined;
    },
    timeoutMs,
    150,
  );
}

// ---- quick input (keyboard) ----------------------------------------------------------------------

/** Opens a quick input with a key (F1, Ctrl+P, Ctrl+G), a quick pick left open closed first. */
export async function openQuickInput(page: Page, key: string, what: string): Promise<Locator> {
  await closeTransients(page, { quickInput: true });
  await idle(page);
  const input = page.locator(QUICK_INPUT_BOX);
  state(page).target = { what, locator: input };
  // A key press can be lost while the workbench takes the focus back from a webview: press
  // again while no quick input shows (the key only opens it).
  await waitFor(
    `${what} to open`,
    async () => {
      if (await input.isVisible().catch(() => false)) return true;
      note(page, `press ${key} (${what})`);
      await page.keyboard.press(key);
      return input.waitFor({ state: 'visible', timeout: 2_500 }).then(
        () => true,
        () => false,
      );
    },
    15_000,
    100,
  );
  return input;
}

/** The label of a quick-pick row as the tests name it: its .label-name, or its aria-label. */
async function rowLabel(row: Locator): Promise<{ name: string; aria: string }> {
  const name = ((await row.locator('.label-name').first().textContent({ timeout: 300 }).catch(() => '')) ?? '').trim();
  const aria = (await row.getAttribute('aria-label', { timeout: 300 }).catch(() => '')) ?? '';
  return { name, aria };
}

const matches = (l: { name: string; aria: string }, label: string) => l.name === label || l.aria === label || l.aria.startsWith(`${label},`);

/**
 * Takes the quick-pick row labelled exactly `label` with the keyboard: waits for it in the list,
 * moves the focus onto it with the arrow keys, then Enter; then waits for the pick to be taken
 * (the quick input hidden, or showing something else).
 */
export async function pickExact(page: Page, label: string): Promise<void> {
  const rows = page.locator('.quick-input-list .monaco-list-row');
  const focused = page.locator('.quick-input-list .monaco-list-row.focused');
  state(page).target = { what: `the quick-pick row "${label}"`, locator: rows };
  await closeTransients(page);
  let seen: string[] = [];
  await waitFor(
    `"${label}" in the list`,
    async () => {
      seen = [];
      const n = await rows.count();
      for (let i = 0; i < n; i++) {
        const l = await rowLabel(rows.nth(i));
        seen.push(l.name || l.aria);
        if (matches(l, label)) return true;
      }
      return undefined;
    },
    15_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; the list shows: ${JSON.stringify(seen)}`);
  });
  // Focus it: the direction from the focused row's index to the wanted row's (data-index).
  let steps = 0;
  await waitFor(
    `"${label}" focused in the list`,
    async () => {
      if ((await focused.count()) > 0 && matches(await rowLabel(focused.first()), label)) return true;
      const at = Number((await focused.first().getAttribute('data-index', { timeout: 300 }).catch(() => null)) ?? -1);
      let want = -1;
      const n = await rows.count();
      for (let i = 0; i < n; i++) {
        if (matches(await rowLabel(rows.nth(i)), label)) {
          want = Number((await rows.nth(i).getAttribute('data-index', { timeout: 300 }).catch(() => null)) ?? -1);
          break;
        }
      }
      const key = at < 0 || want < 0 || want > at ? 'ArrowDown' : 'ArrowUp';
      if (++steps > 200) throw new Error(`the focus did not reach "${label}" in 200 key presses`);
      await focusQuickInput(page);
      note(page, `press ${key} (towards "${label}": focused ${at}, wanted ${want})`);
      await page.keyboard.press(key);
      return false;
    },
    20_000,
    60,
  );
  const before = await page
    .locator(QUICK_INPUT_BOX)
    .inputValue({ timeout: 500 })
    .catch(() => '');
  await focusQuickInput(page);
  note(page, `press Enter (pick "${label}")`);
  await page.keyboard.press('Enter');
  let pressedAt = Date.now();
  await waitFor(
    `the pick "${label}" taken`,
    async () => {
      if (!(await quickInputOpen(page))) return true;
      // The same widget may show the next question: taken once the value or the rows changed.
      const value = await page
        .locator(QUICK_INPUT_BOX)
        .inputValue({ timeout: 300 })
        .catch(() => '');
      if (value !== before) return true;
      if (!(await focused.count()) || !matches(await rowLabel(focused.first()), label)) return true;
      // Still the same list on the same row, and the focus went elsewhere: that Enter never
      // reached the quick input, so pressing it again cannot take a second pick.
      const inside = await page.evaluate(() => document.activeElement?.closest('.quick-input-widget') != null).catch(() => true);
      if (!inside && Date.now() - pressedAt > 1_500) {
        await focusQuickInput(page);
        note(page, `press Enter again (pick "${label}": the first went outside the quick input)`);
        await page.keyboard.press('Enter');
        pressedAt = Date.now();
      }
      return false;
    },
    10_000,
    100,
  );
}

/** Runs a command from the palette (F1), by its title as the palette shows it (an exact match), with the keyboard. */
export async function runCommand(page: Page, title: string): Promise<void> {
  const input = await openQuickInput(page, 'F1', `the command palette (for "${title}")`);
  await input.fill(`>${title}`);
  await pickExact(page, title);
}

// ---- failures --------------------------------------------------------------------------------------

export function slug(name: string): string {
  return name.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 80) || 'unnamed';
}

/**
 * Saves what a failure needs for its diagnosis into <outDir>/failures/<test>/: screenshot.png,
 * dom.html (the last target's surroundings, what lay over its centre, the open transient
 * widgets, the focused element), actions.log (the driver's last actions) and the code-server
 * logs (code-server.log, logs/). Returns the folder (printed too); never throws.
 */
export async function saveFailure(page: Page, testName: string): Promise<string> {
  const s = state(page);
  const dir = path.join(s.outDir, 'failures', slug(testName));
  try {
    fs.mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: path.join(dir, 'screenshot.png'), timeout: 10_000 }).catch((e: Error) => fs.writeFileSync(path.join(dir, 'screenshot-failed.txt'), e.message));
    const parts: string[] = [`<!-- test: ${testName} -->`, `<!-- last target: ${s.target?.what ?? '(none)'} -->`];
    if (s.target?.locator) {
      const around = await s.target.locator
        .first()
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        .evaluate((el: any) => {
          let up = el;
          for (let i = 0; i < 3 && up.parentElement; i++) up = up.parentElement;
          const r = el.getBoundingClientRect();
          const cover = el.ownerDocument?.elementFromPoint?.(r.left + r.width / 2, r.top + r.height / 2) ?? null;
          return {
            box: `${r.left},${r.top},${r.width}x${r.height}`,
            around: String(up.outerHTML).slice(0, 200_000),
            cover: cover && cover !== el && !el.contains(cover) ? String(cover.outerHTML).slice(0, 20_000) : '(the target itself)',
          };
        }, undefined, { timeout: 3_000 })
        .catch((e: Error) => ({ box: '?', around: `(the target could not be read: ${e.message.split('\n')[0]})`, cover: '?' }));
      parts.push(`<!-- target box: ${around.box} -->`, '<!-- around the target (3 levels up) -->', around.around, '<!-- what lies over its centre -->', around.cover);
    }
    const page_ = await page
      .evaluate(() => {
        const a = document.activeElement;
        return {
          transients: (Array.from(document.querySelectorAll('.monaco-hover, .context-view, .quick-input-widget, .notifications-toasts, .editor-widget.suggest-widget.visible')) as { outerHTML: string }[]).map((e) =>
            e.outerHTML.slice(0, 50_000),
          ),
          active: a ? `${a.tagName}.${String(a.className)} ${a.getAttribute?.('aria-label') ?? ''}` : '(none)',
          progress: document.querySelectorAll('.monaco-progress-container.active').length,
        };
      })
      .catch((e: Error) => ({ transients: [`(the page could not be read: ${e.message.split('\n')[0]})`], active: '?', progress: -1 }));
    parts.push(`<!-- focused element: ${page_.active} -->`, `<!-- progress bars running: ${page_.progress} -->`, '<!-- transient widgets, quick input, toasts -->', ...page_.transients);
    fs.writeFileSync(path.join(dir, 'dom.html'), parts.join('\n') + '\n');
    fs.writeFileSync(path.join(dir, 'actions.log'), s.actions.join('\n') + '\n');
    if (s.serverLog && fs.existsSync(s.serverLog)) fs.copyFileSync(s.serverLog, path.join(dir, 'code-server.log'));
    if (s.logsDir && fs.existsSync(s.logsDir)) {
      for (const e of fs.readdirSync(s.logsDir, { withFileTypes: true, recursive: true })) {
        if (!e.isFile() || !e.name.endsWith('.log')) continue;
        const src = path.join(e.parentPath, e.name);
        const out = path.join(dir, 'logs', path.relative(s.logsDir, src));
        fs.mkdirSync(path.dirname(out), { recursive: true });
        fs.copyFileSync(src, out);
      }
    }
  } catch (err) {
    s.say(`could not save all of the failure's evidence: ${(err as Error).message}`);
  }
  s.say(`failure evidence (screenshot, DOM, actions, code-server log): ${path.relative(process.cwd(), dir) || dir}`);
  return dir;
}

/**
 * Waits for the workbench to look finished before a screenshot: transients closed, no progress
 * in the active part, the layout still, and the fonts loaded.
 */
export async function settled(page: Page): Promise<void> {
  await closeTransients(page);
  await page.evaluate(() => document.fonts?.ready).catch(() => undefined);
  await idle(page);
}
