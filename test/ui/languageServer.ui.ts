// The language server as a person sees it, in a real VS Code (code-server + Chromium): the
// squiggle on the character the grammar rejects, the hover widget over it (the diagnostic's
// message and the loss's `supervised`) and over the question (`masked`), the Problems panel
// (its row, its count, a click that moves the cursor), and a quick fix (Ctrl+.) that makes a
// warning go away. Screenshots: test-results/ui/lsp-*.png.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { click, closeTransients, hoverUntil, press, settled } from './driver';
import { type Box, type PageElement, charBox, goToLine, hoverText, quickOpen, runCommand, shot, squiggles, ui, waitFor } from './harness';

// Callbacks of page.evaluate run in the browser; the Node tsconfig has no DOM library, so the
// browser globals they use are declared here, loosely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
const BROKEN = 'broken-call.transcript';
const NONCANONICAL = 'diagnostics/noncanonical-call.transcript';
const REJECTED_MESSAGE = "tool call rejected by the grammar: expected a digit 1-9 for k, got '0'";

/** Line and column (1-based) of `offset` in `text`. */
function lineCol(text: string, offset: number): { line: number; col: number } {
  const before = text.slice(0, offset);
  return { line: before.split('\n').length, col: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

/** Moves the mouse off the editor and waits for any hover to go (the driver: mouse to a neutral spot, Escape if one stays). */
async function dismissHover(page: Page): Promise<void> {
  await closeTransients(page);
  await waitFor('the hover to close', async () => (await hoverText(page)) === '', 5_000).catch(() => undefined);
}

/**
 * Hovers the mouse over the centre of a box (the driver's hoverUntil: measured until still, a
 * small move first, moved again if Monaco dropped the hover) and waits for the widget to say `want`.
 */
async function hoverOver(page: Page, box: () => Promise<Box | null>, want: RegExp, what: string): Promise<string> {
  return hoverUntil(page, `the hover over ${what} to say ${want}`, box, async () => {
    const text = await hoverText(page);
    return want.test(text) ? text : undefined;
  }, 20_000);
}

/** The rows of the Problems panel (each row's aria-label, which carries the severity, message and position). */
async function problemRows(page: Page): Promise<{ text: string; aria: string }[]> {
  return page.evaluate(() => {
    const panel = document.querySelector('.markers-panel');
    if (!panel) return [];
    return (Array.from(panel.querySelectorAll('.monaco-list-row')) as PageElement[]).map((r) => ({
      text: (r.textContent ?? '').replace(/\u00a0/g, ' ').trim(),
      aria: r.getAttribute('aria-label') ?? '',
    }));
  });
}

describe('Language server (UI, code-server + Chromium)', function () {
  this.timeout(120_000);

  after(async () => {
    // Leave the workbench as the next suite expects it: no bottom panel, no editors, nothing dirty.
    const { page, say } = ui();
    const step = async (what: string, run: () => Promise<void>) => run().catch((e: Error) => say(`after: ${what}: ${e.message.split('\n')[0]}`));
    await dismissHover(page);
    await closeTransients(page, { quickInput: true });
    await step('revert', () => runCommand(page, 'File: Revert File'));
    await step('close editors', () => runCommand(page, 'View: Close All Editors'));
    await step('hide the panel', async () => {
      if ((await page.locator('.part.panel.bottom:visible').count()) > 0) await runCommand(page, 'View: Hide Panel');
    });
  });

  it('squiggles the rejected character; the hover says why and what the loss does with it', async () => {
    const ctx = ui();
    const { page } = ctx;
    await quickOpen(page, BROKEN);
    // The squiggle comes when the server has analysed the document (it may still be starting).
    // The squiggle and the character are measured in one pass, and only once two passes agree:
    // the workbench may still move the editor (a notification, the breadcrumbs), and boxes
    // measured at different moments would disagree by that shift, not by the diagnostic.
    let previous = '';
    const { errs, zero, space } = await waitFor('an error squiggle and the `0` of "k": 0, laid out and still', async () => {
      const errs = await squiggles(page, 'error');
      // The rejected character is the `0` of `"k": 0}}` on line 2; the box before it is the space.
      const zero = await charBox(page, '"k": 0}}', 5);
      const space = await charBox(page, '"k": 0}}', 4);
      if (errs.length === 0 || !zero || !space) return undefined;
      const snapshot = JSON.stringify([errs, zero, space]);
      const still = snapshot === previous;
      previous = snapshot;
      return still ? { errs, zero, space } : undefined;
    }, 45_000, 250);
    assert.equal(errs.length, 1, `one error squiggle, got ${JSON.stringify(errs)}`);
    const squiggle = errs[0]!;
    assert.ok(space.x + space.width <= zero.x + 0.5, 'the box is the character after the space');
    const slack = 1.5;
    assert.ok(squiggle.x <= zero.x + slack && squiggle.x + squiggle.width >= zero.x + zero.width - slack, `the squiggle ${JSON.stringify(squiggle)} covers the 0 ${JSON.stringify(zero)}`);
    assert.ok(squiggle.width <= zero.width * 2 + slack, `the squiggle covers one character, not more: ${squiggle.width} px for a ${zero.width} px character`);
    // Same rendered line: the squiggle's box overlaps the character's vertically.
    assert.ok(squiggle.y < zero.y + zero.height && squiggle.y + squiggle.height > zero.y, `same line: ${JSON.stringify(squiggle)} vs ${JSON.stringify(zero)}`);

    // Hover over the 0: the diagnostic, and (the call is assistant text) `supervised`.
    // The hover fills in parts (the diagnostic first, the language server's hover after it): wait for both.
    const onCall = await hoverOver(page, () => charBox(page, '"k": 0}}', 5), /expected a digit 1-9 for k[\s\S]*assistant · step 1/, 'the 0');
    assert.ok(onCall.includes(REJECTED_MESSAGE), `the hover shows the diagnostic: ${onCall}`);
    assert.match(onCall, /assistant · step 1 · supervised/);
    assert.match(onCall, /grammar:/);
    await shot(ctx, 'lsp-squiggle-hover');

    // Hover over the question: `masked`, and no diagnostic there.
    await dismissHover(page);
    await waitFor('the question in the rendered text', () => charBox(page, 'multiplied by 2', 3));
    const onQuestion = await hoverOver(page, () => charBox(page, 'multiplied by 2', 3), /masked/, 'the question');
    assert.match(onQuestion, /user question · masked/);
    assert.match(onQuestion, /the user's question: masked \(context, never a target\)/);
    assert.ok(!onQuestion.includes('supervised ·') && !onQuestion.includes('rejected by the grammar'), `no diagnostic over the question: ${onQuestion}`);
    await shot(ctx, 'lsp-hover-masked');
    await dismissHover(page);
  });

  it('lists the problems in the Problems panel; a click moves the cursor to the rejected character', async () => {
    const ctx = ui();
    const { page, workspace } = ctx;
    const text = fs.readFileSync(path.join(workspace, BROKEN), 'utf8');
    const want = lineCol(text, text.indexOf('"k": 0}}') + 5);
    assert.deepEqual(want, { line: 2, col: 98 });
    // The cursor elsewhere first, so that the click has somewhere to move it.
    await goToLine(page, 1, 1);
    await press(page, 'Control+Shift+M', { what: 'the Problems panel' });
    await page.locator('.markers-panel').waitFor({ state: 'visible', timeout: 10_000 });
    // broken-call.transcript shows one problem: the rejection (the file's trailing newline, which
    // editors add, is not "whitespace between turns").
    const rows = await waitFor('the problem of broken-call.transcript', async () => {
      const r = await problemRows(page);
      return r.some((x) => x.text.includes(BROKEN)) && r.some((x) => x.text.includes(REJECTED_MESSAGE)) ? r : undefined;
    }, 15_000, 250);
    assert.equal(rows.length, 2, `a file row and one problem row: ${JSON.stringify(rows)}`);
    const [file, rejected] = rows as [{ text: string; aria: string }, { text: string; aria: string }];
    assert.match(file.text, new RegExp(`^${BROKEN.replace('.', '\\.')}\\s*1$`), `the file row counts 1 problem: ${file.text}`);
    assert.ok(rejected.text.includes(REJECTED_MESSAGE), `the problem row says the message: ${rejected.text}`);
    // (The parentheses around the code are CSS.)
    assert.match(rejected.text, /agent-lab\(?grammar-rejected\)?/, `the row names the source and the code: ${JSON.stringify(rejected.text)}`);
    assert.match(rejected.text, new RegExp(`\\[Ln ${want.line}, Col ${want.col}\\]$`), `the row says where: ${rejected.text}`);
    assert.match(rejected.aria, /^Error/, `an error: ${rejected.aria}`);
    // The Problems tab's badge and the status bar count it too.
    const badge = (await page.locator('.part.panel .composite-bar .action-item.checked .badge-content').first().textContent({ timeout: 2000 }).catch(() => null))?.trim();
    assert.equal(badge, '1', `the Problems badge: ${badge}`);
    const status = (await page.locator('[id="status.problems"]').first().getAttribute('aria-label', { timeout: 2000 }).catch(() => null)) ?? '';
    assert.match(status, /\b1 Errors?\b|Errors?: 1\b/i, `the status bar: ${status}`);
    await shot(ctx, 'lsp-problems');

    // A click on the problem: the editor (the focus stays in the panel) selects the rejected character
    // (the `0` at Col 98; the cursor ends after it).
    await click(page.locator('.markers-panel .monaco-list-row', { hasText: REJECTED_MESSAGE }).first(), { what: 'the problem row' });
    const where = `Ln ${want.line}, Col ${want.col + 1} (1 selected)`;
    await waitFor(`the status bar to say "${where}"`, async () => {
      const t = await page.locator('[id="status.editor.selection"]').first().textContent({ timeout: 1000 }).catch(() => null);
      return t?.trim() === where;
    }, 10_000);
    await shot(ctx, 'lsp-problems-click');
  });

  it('a quick fix (Ctrl+.) canonicalises a call, and its warning goes away', async () => {
    const ctx = ui();
    const { page } = ctx;
    await quickOpen(page, NONCANONICAL);
    await waitFor('a warning squiggle', async () => (await squiggles(page, 'warning')).length === 1, 30_000, 250);
    await waitFor('the warning in the Problems panel', async () => (await problemRows(page)).some((r) => /not in the canonical form/.test(r.text)), 15_000, 250);
    // The call body with `args` first is on line 4, after `<|tool_call|>` (13 columns).
    await goToLine(page, 4, 20);
    await press(page, 'Control+.', { what: 'the quick fixes' });
    const action = page.locator('.action-widget .monaco-list-row', { hasText: /canonical/i });
    await action.first().waitFor({ state: 'visible', timeout: 10_000 });
    assert.match((await action.first().textContent()) ?? '', /Canonicalise the tool call/);
    await shot(ctx, 'lsp-quickfix');
    // The list blocks the pointer while it opens: pick with the keyboard, as a person may.
    await waitFor('the canonical action focused', async () => {
      if (/Canonicalise/.test((await page.locator('.action-widget .monaco-list-row.focused').first().getAttribute('aria-label', { timeout: 500 }).catch(() => '')) ?? '')) return true;
      await press(page, 'ArrowDown', { what: 'towards the canonical action' });
      return false;
    }, 5_000, 200);
    await press(page, 'Enter', { what: 'apply the quick fix' });
    await waitFor('the canonical call in the editor', async () => (await charBox(page, '{"tool": "calc", "args": {"expr": "2019+10000"}}', 0)) !== null, 10_000);
    await waitFor('the warning squiggle to go', async () => (await squiggles(page, 'warning')).length === 0, 15_000, 250);
    await waitFor('the warning to leave the Problems panel', async () => !(await problemRows(page)).some((r) => /not in the canonical form/.test(r.text)), 15_000, 250);
    assert.equal((await squiggles(page, 'error')).length, 0, 'and no error instead');
    await settled(page);
    await shot(ctx, 'lsp-quickfix-applied');
  });
});
