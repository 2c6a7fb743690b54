// The four panels as a person uses them, in a real VS Code (code-server + Chromium): each
// opens from the command palette on the samples and on a short real run; what the webview
// shows is asserted inside its frame; clicks go through (a step card reveals its source
// line); a training started from the palette draws its curve live; the panels come back
// after a reload; screenshots of all four in light, dark and high contrast.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame } from 'playwright-core';
import { click, fill, focus, hover, press, select, type } from './driver';
import { closeSideBar, focusEditor, frameText, goToLine, panelFrame, pickExact, quickOpen, reloadWindow, runCommand, setTheme, shot, statusLine, statusPosition, ui, waitFor } from './harness';

// Callbacks of page.evaluate/frame.evaluate run in the browser; the Node tsconfig has no DOM
// library, so the browser globals they use are declared here, loosely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
declare function getComputedStyle(el: unknown): { backgroundColor: string; color: string };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const window: any;
declare const MessagePort: { prototype: unknown };
declare function requestAnimationFrame(cb: () => void): number;

const attr = (f: Frame, selector: string, name: string) => f.locator(selector).first().getAttribute(name, { timeout: 2000 }).catch(() => null);
const bodyData = (f: Frame, key: string) => f.evaluate((k) => document.body.dataset[k] ?? null, key).catch(() => null);

/** Two animation frames in a webview: what changed before has been painted. */
async function painted(f: Frame): Promise<void> {
  await f.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
}

/**
 * Records the states a webview saves (vscode.setState): its host page (the parent frame) posts
 * each to the workbench as a `do-update-state` message on a MessagePort; the recorder wraps
 * MessagePort.prototype.postMessage in that page, so the test can wait for a save.
 */
async function recordSavedStates(f: Frame): Promise<void> {
  const host = f.parentFrame();
  if (!host) throw new Error('the webview has no host frame');
  await host.evaluate(() => {
    const w = window as unknown as { __agentLabStates?: string[] };
    if (w.__agentLabStates) return;
    w.__agentLabStates = [];
    const proto = MessagePort.prototype as unknown as { postMessage(this: unknown, m: unknown, t?: unknown): void };
    const original = proto.postMessage;
    proto.postMessage = function (this: unknown, m: unknown, t?: unknown) {
      const msg = m as { channel?: string; data?: unknown } | null;
      if (msg && msg.channel === 'do-update-state' && typeof msg.data === 'string') w.__agentLabStates!.push(msg.data);
      return original.call(this, m, t);
    };
  });
}

async function lastSavedState(f: Frame): Promise<{ filter?: { kind?: string }; selected?: unknown } | null> {
  const last = await f.parentFrame()!.evaluate(() => {
    const states = (window as unknown as { __agentLabStates?: string[] }).__agentLabStates ?? [];
    return states[states.length - 1] ?? null;
  });
  return last ? (JSON.parse(last) as { filter?: { kind?: string }; selected?: unknown }) : null;
}

/** Add run… in the curves panel, every run the quick pick offers (not Browse…). */
async function addAllRuns(f: Frame): Promise<void> {
  const { page } = ui();
  await click(f.locator('#add-run'), { what: 'Add run…' });
  const rows = page.locator('.quick-input-list .monaco-list-row');
  await waitFor('the runs to pick', async () => (await rows.count()) > 1);
  for (let i = 0; i < (await rows.count()); i++) {
    const row = rows.nth(i);
    if (/Browse/.test((await row.textContent()) ?? '')) continue;
    await click(row.locator('.monaco-checkbox, input[type=checkbox], .quick-input-list-checkbox').first(), { what: `the checkbox of run ${i + 1}` });
  }
  await press(page, 'Enter', { what: 'add the ticked runs' });
}

describe('Agent Lab panels (UI, code-server + Chromium)', function () {
  this.timeout(120_000);

  before(async () => {
    // Hide the side bar: the editor and the panel side by side get the width.
    await closeSideBar(ui().page);
  });

  it('activates on the samples: a transcript shows the code lenses (Loss mask, Inspect, Debug tool call)', async () => {
    const { page } = ui();
    await quickOpen(page, 'compare.transcript');
    await waitFor('the "Loss mask" code lens', async () => (await page.locator('.codelens-decoration', { hasText: 'Loss mask' }).count()) > 0, 45_000);
    assert.ok((await page.locator('.codelens-decoration', { hasText: 'Debug tool call' }).count()) >= 1, 'a Debug tool call lens on a call line');
  });

  describe('Trajectory Inspector', () => {
    it('opens on a transcript: the question, one card per step, the call with its arguments', async () => {
      const { page } = ui();
      await runCommand(page, 'Agent Lab: Inspect Trajectories');
      const f = await panelFrame(page, 'inspector');
      await waitFor('the trajectory loaded', () => bodyData(f, 'loaded'));
      assert.equal(await frameText(f, '#count'), '1 trajectory');
      await waitFor('the step cards', async () => (await f.locator('.card').count()) === 4);
      assert.match(await frameText(f, '.detail .question'), /Which is larger, the publication year of STaR/);
      assert.equal(await frameText(f, '.card[data-step="1"] .call'), 'search {"query": "STaR publication year", "k": 2}');
      assert.match(await frameText(f, '.card[data-step="3"] .call'), /calc \{"expr": "2022-2048"\}/);
      assert.match(await frameText(f, '.card[data-step="4"] .final'), /Answer\s*Stack-100M/);
    });

    it('a click on a step card reveals its source line in the editor', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'inspector');
      await click(f.locator('.card[data-step="2"]'));
      // Step 2 (<|assistant|> of the second search) starts on line 2 of compare.transcript.
      await waitFor('the cursor on line 2', async () => (await statusLine(page)) === 2);
      await click(f.locator('.card[data-step="4"]'));
      await waitFor('the cursor on line 4', async () => (await statusLine(page)) === 4);
    });

    it('lists eval rows with filters (outcome, shape, failure, guard, text) and step cards with guards', async () => {
      const { page } = ui();
      await quickOpen(page, 'synthetic/eval/heldout.jsonl');
      await runCommand(page, 'Agent Lab: Inspect Trajectories');
      const f = await panelFrame(page, 'inspector');
      await waitFor('90 rows', async () => (await frameText(f, '#count')) === '90 trajectories');
      await select(f.locator('#outcome'), 'failed');
      const failed = Number(/^(\d+) of 90/.exec(await frameText(f, '#count'))?.[1]);
      assert.ok(failed > 20 && failed < 70, `failed rows: ${failed}`);
      await select(f.locator('#guard'), 'RepeatedCall');
      await select(f.locator('#outcome'), 'all');
      const repeated = Number(/^(\d+) of 90/.exec(await frameText(f, '#count'))?.[1]);
      assert.ok(repeated >= 5, `rows with a RepeatedCall: ${repeated}`);
      await click(f.locator('.row').first());
      await waitFor('a card with the RepeatedCall guard', async () => (await f.locator('.card .guard', { hasText: 'RepeatedCall' }).count()) > 0);
      // Text search narrows further; the count says so.
      await select(f.locator('#guard'), '');
      await fill(f.locator('#q'), '"out_of_steps"');
      await waitFor('the out_of_steps rows', async () => /^\d+ of 90/.test(await frameText(f, '#count')));
      await click(f.locator('.row').first());
      await waitFor('the harness card (forced answer)', async () => (await f.locator('.card.harness .badge.harness').count()) === 1);
      assert.match(await frameText(f, '.detail .verdict'), /Answer\s*unknown/);
    });

    it('is keyboard-driven: / searches, ↓ selects the next row, Enter goes to the cards, Enter reveals', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'inspector');
      await fill(f.locator('#q'), '');
      await select(f.locator('#outcome'), 'all');
      await waitFor('all rows', async () => (await frameText(f, '#count')) === '90 trajectories');
      await focus(f.locator('#list'));
      await press(page, 'Home');
      await waitFor('row 1 selected', async () => (await attr(f, '.row[aria-selected="true"]', 'data-index')) === '0');
      await press(page, 'ArrowDown');
      await press(page, 'ArrowDown');
      await waitFor('row 3 selected', async () => (await attr(f, '.row[aria-selected="true"]', 'data-index')) === '2');
      await waitFor('its cards', async () => (await f.locator('.detail[data-index="2"] .card').count()) > 0);
      await press(page, 'Enter');
      await waitFor('the first card focused', () => f.evaluate(() => document.activeElement?.getAttribute('data-step') === '1'));
      await press(page, 'Enter');
      // Row 3 sits on line 3 of the file: the editor shows it.
      await waitFor('the cursor on line 3', async () => (await statusLine(page)) === 3);
    });

    it('opens on the short real run’s eval rows (5 held-out tasks)', async () => {
      const { page } = ui();
      await quickOpen(page, 'runs/short/eval/heldout.jsonl');
      await runCommand(page, 'Agent Lab: Inspect Trajectories');
      const f = await panelFrame(page, 'inspector');
      await waitFor('5 rows', async () => (await frameText(f, '#count')) === '5 trajectories');
      assert.match(await frameText(f, '#source'), /runs\/short\/eval\/heldout\.jsonl/);
      await click(f.locator('.row').first());
      await waitFor('the detail', async () => (await f.locator('.detail .question').count()) === 1);
    });

    it('serves its page with CSP default-src none, a script nonce, and only bundle resources', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'inspector');
      const csp = await f.evaluate(() => document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute('content') ?? '');
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'nonce-[A-Za-z0-9_-]{16,}'/);
      // Ours: one module script from dist/webview/ with the nonce (VS Code adds its own host script, without a src).
      const scripts: { src: string; nonce: boolean }[] = await f.evaluate(() => [...document.scripts].map((s: { src: string; nonce: string }) => ({ src: s.src, nonce: s.nonce !== '' })));
      const withSrc = scripts.filter((s) => s.src !== '');
      assert.equal(withSrc.length, 1, JSON.stringify(scripts));
      assert.ok(withSrc[0]!.nonce && /\/dist\/webview\/inspector\.js/.test(withSrc[0]!.src), JSON.stringify(scripts));
      const links: string[] = await f.evaluate(() => [...document.querySelectorAll('link[rel=stylesheet]')].map((l: { href: string }) => l.href));
      assert.ok(links.length === 1 && /\/dist\/webview\/inspector\.css/.test(links[0]!), JSON.stringify(links));
      assert.deepEqual(
        ui().console.filter((l) => /Content Security Policy|Refused to/i.test(l)),
        [],
        'no CSP violation in the console',
      );
    });
  });

  describe('Loss Mask', () => {
    it('shows a transcript as tokens: supervised and masked in two colours, counts and the share', async () => {
      const { page } = ui();
      await quickOpen(page, 'compare.transcript');
      await runCommand(page, 'Agent Lab: Show Loss Mask');
      const f = await panelFrame(page, 'lossMask');
      await waitFor('the tokens', async () => Number(await bodyData(f, 'tokens')) > 50, 45_000);
      const first = f.locator('.tok[data-i="0"]');
      assert.equal(await first.textContent(), '<|system|>');
      assert.match((await first.getAttribute('class')) ?? '', /\bmask\b.*\bspecial\b/);
      const thought = f.locator('.tok.sup', { hasText: 'Thought' }).first();
      assert.ok(await thought.count(), 'a supervised "Thought" token');
      // (No helper functions inside evaluate: the test transpiler would wrap them in a Node helper.)
      const colours = await f.evaluate(() => ({
        supBg: getComputedStyle(document.querySelector('.tokens .tok.sup')).backgroundColor,
        maskBg: getComputedStyle(document.querySelector('.tokens .tok.mask')).backgroundColor,
        supFg: getComputedStyle(document.querySelector('.tokens .tok.sup')).color,
        maskFg: getComputedStyle(document.querySelector('.tokens .tok.mask')).color,
      }));
      assert.notEqual(colours.supBg, colours.maskBg, `backgrounds ${JSON.stringify(colours)}`);
      assert.notEqual(colours.supFg, colours.maskFg, `foregrounds ${JSON.stringify(colours)}`);
      const tokens = Number(await bodyData(f, 'tokens'));
      const sup = Number(await bodyData(f, 'supervised'));
      assert.equal(await f.locator('.tokens .tok').count(), tokens);
      assert.equal(await f.locator('.tokens .tok.sup').count(), sup);
      assert.match(await frameText(f, '[data-stat="share"]'), new RegExp(`${((100 * sup) / tokens).toFixed(1)}%`));
      // Hover a token: its id and offsets.
      await hover(thought, { what: 'a supervised "Thought" token' });
      // The panel writes #info on mouseover: wait for it to have done so, then the same assertion.
      await waitFor('the token info', async () => /supervised/.test(await frameText(f, '#info')), 10_000).catch(() => undefined);
      assert.match(await frameText(f, '#info'), /token \d+ · id \d+ · offset \d+–\d+ · supervised/);
    });

    it('updates as the user types (through the language server)', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'lossMask');
      const before = Number(await bodyData(f, 'tokens'));
      await focusEditor(page);
      await goToLine(page, 2, 1);
      await type(page, 'Noted. ');
      await waitFor('more tokens', async () => Number(await bodyData((await panelFrame(page, 'lossMask')), 'tokens')) > before, 15_000);
      for (let i = 0; i < 'Noted. '.length; i++) await press(page, 'Backspace');
      await waitFor('the tokens back', async () => Number(await bodyData(await panelFrame(page, 'lossMask'), 'tokens')) === before, 15_000);
    });

    it('follows the active editor and warns when an example supervises nothing', async () => {
      const { page } = ui();
      await quickOpen(page, 'checks/no-assistant.transcript');
      const f = await panelFrame(page, 'lossMask');
      await waitFor('the banner', async () => /supervises nothing/.test(await frameText(f, '#banners')), 15_000);
      assert.equal(await f.locator('.tokens .tok.sup').count(), 0);
      assert.match(await frameText(f, '#label'), /no-assistant\.transcript/);
    });

    it('shows a dataset row, and harness text apart from supervised text', async () => {
      const { page } = ui();
      await quickOpen(page, 'synthetic/eval/heldout.jsonl');
      // Row 7 is an out-of-steps episode: the harness forced its answer.
      await goToLine(page, 7);
      const f = await panelFrame(page, 'lossMask');
      await waitFor('row 7', async () => /line 7/.test(await frameText(f, '#label')), 20_000);
      await waitFor('harness tokens', async () => (await f.locator('.tokens .tok.harness').count()) > 0, 10_000);
      assert.match(await frameText(f, '[data-stat="harness"]'), /\d+ harness/);
    });
  });

  describe('Grammar Debugger', () => {
    it('steps through the call under the cursor and says where and why it was rejected', async () => {
      const { page } = ui();
      await quickOpen(page, 'broken-call.transcript');
      await goToLine(page, 2, 5);
      await runCommand(page, 'Agent Lab: Debug Tool Call');
      const f = await panelFrame(page, 'grammar');
      await waitFor('the verdict', async () => (await bodyData(f, 'verdict')) === 'rejected');
      const at = Number(await bodyData(f, 'rejectedAt'));
      assert.equal(await frameText(f, `#ch-${at}`), '0');
      assert.match(await frameText(f, '#verdict'), /rejected at character \d+/);
      assert.match(await frameText(f, '#verdict'), /search: k, 0 chars \(exactly 1\).*allows 1-9/);
      assert.match(await frameText(f, '#source'), /broken-call\.transcript:2/);
      await focus(f.locator('#strip'));
      await press(page, 'End');
      // The step's position and its text render in turn: wait for both (under load they were read in between).
      await waitFor('the rejection step', async () => (await bodyData(f, 'pos')) === String(at) && (await frameText(f, '#step .chips')) === '1-9');
      assert.match(await frameText(f, '#step'), /Rejected/);
      await press(page, 'ArrowLeft');
      await waitFor('one step back', async () => (await bodyData(f, 'pos')) === String(at - 1) && (await frameText(f, '#step .chips')) === 'space');
      // In editor mode the editor's cursor follows the step: line 2, after `<|tool_call|>` (13 columns) and `at - 1` characters.
      // Ctrl+1 from inside a webview is forwarded to the workbench asynchronously and can be
      // lost; pressing it again only focuses the editor group (the cursor stays where it is).
      await waitFor('the editor cursor on the step', async () => {
        await focusEditor(page);
        const p = await statusPosition(page);
        return p?.line === 2 && p.col === 13 + at;
      });
    });

    it('checks a call typed in the panel', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'grammar');
      await fill(f.locator('#body'), '{"tool": "calc", "args": {"expr": "2048*2"}}');
      await waitFor('complete', async () => (await bodyData(f, 'verdict')) === 'complete');
      assert.match(await frameText(f, '#source'), /typed in the panel/);
      await fill(f.locator('#body'), '{"tool": "calc", "args": {"expr": "2048*2');
      await waitFor('incomplete', async () => (await bodyData(f, 'verdict')) === 'incomplete');
      assert.match(await frameText(f, '#verdict'), /incomplete/);
    });
  });

  describe('Training Curves', () => {
    it('charts the short real run (SFT loss, supervised-token accuracy, held-out accuracy)', async () => {
      const { page } = ui();
      await quickOpen(page, 'runs/short/metrics.jsonl');
      await runCommand(page, 'Agent Lab: Show Training Curves');
      const f = await panelFrame(page, 'curves');
      await waitFor('the SFT loss chart', async () => (await attr(f, '.chart[data-chart="sft-loss"]', 'data-points')) === '20');
      assert.equal(await attr(f, '.chart[data-chart="sft-loss"]', 'data-series'), '1');
      assert.equal(await attr(f, '.chart[data-chart="sft-acc"]', 'data-series'), '1');
      // Two accuracy points (half way, the end), each on held-out and on the first dev world.
      assert.equal(await attr(f, '.chart[data-chart="heldout-acc"]', 'data-points'), '4');
      assert.equal(await attr(f, '.chart[data-chart="heldout-acc"]', 'data-series'), '2', 'held-out and dev');
      assert.equal(await f.locator('.chart[data-chart^="grpo"]').count(), 0);
    });

    it('overlays a second run picked with Add run… (GRPO: reward band, no-gradient region)', async () => {
      const { page } = ui();
      const f = await panelFrame(page, 'curves');
      await click(f.locator('#add-run'));
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await fill(input, 'synthetic-grpo');
      // Tick the run's checkbox until the picker counts it: on a loaded machine a click can land
      // while the row's hover tooltip appears and be lost (seen once in CI: "0 Selected").
      const checkbox = page
        .locator('.quick-input-list .monaco-list-row', { hasText: 'synthetic-grpo' })
        .first()
        .locator('.monaco-checkbox, input[type=checkbox], .quick-input-list-checkbox')
        .first();
      await waitFor('the run ticked in the picker', async () => {
        if (/\b1 Selected\b/.test(await page.locator('.quick-input-widget').innerText())) return true;
        await click(checkbox, { what: 'the checkbox of synthetic-grpo', timeoutMs: 10_000 });
        return false;
      }, 30_000, 700);
      await press(page, 'Enter');
      await waitFor('the GRPO charts', async () => (await attr(f, '.chart[data-chart="grpo-zero-std"]', 'data-regions')) === '1', 15_000);
      assert.equal(await attr(f, '.chart[data-chart="grpo-reward"]', 'data-series'), '1');
      // The SFT run's held-out and dev lines on the SFT axis; the GRPO run's held-out line on its own (GRPO steps).
      assert.equal(await attr(f, '.chart[data-chart="heldout-acc"]', 'data-series'), '2', 'the SFT run');
      assert.equal(await attr(f, '.chart[data-chart="grpo-heldout-acc"]', 'data-series'), '1', 'the GRPO run, on GRPO steps');
      assert.equal(await f.locator('.run').count(), 2);
    });

    it('saves a chart as PNG', async () => {
      const { page, workspace } = ui();
      const f = await panelFrame(page, 'curves');
      await click(f.locator('.chart[data-chart="sft-loss"] .save'));
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await waitFor('the default file name', async () => /sft-loss\.png$/.test(await input.inputValue()));
      await press(page, 'Enter');
      const file = path.join(workspace, 'runs', 'short', 'sft-loss.png');
      await waitFor('the PNG file', () => fs.existsSync(file) && fs.statSync(file).size > 1000, 15_000);
      assert.equal(fs.readFileSync(file).subarray(0, 8).toString('hex'), '89504e470d0a1a0a');
    });

    it('draws a training started from the palette live (at least two updates before it ends)', async function () {
      this.timeout(180_000);
      const { page, workspace } = ui();
      const f = await panelFrame(page, 'curves');
      const runsBefore = await f.locator('.run').count();
      await runCommand(page, 'Agent Lab: Train (SFT)');
      // The three questions of the palette's Train (SFT): the trajectories, the model (a preset or a Hugging Face folder), the budget.
      await pickExact(page, 'train.traces.jsonl');
      await pickExact(page, 'tiny');
      await pickExact(page, '3 minutes');
      await waitFor('the new run in the panel', async () => (await f.locator('.run').count()) === runsBefore + 1, 60_000);
      await waitFor('the run marked live', async () => (await f.locator('.run .live').count()) === 1, 30_000);
      const seen: number[] = [];
      await waitFor(
        'two live updates of the loss chart',
        async () => {
          const series = Number(await attr(f, '.chart[data-chart="sft-loss"]', 'data-series'));
          const points = Number(await attr(f, '.chart[data-chart="sft-loss"]', 'data-points'));
          if (series === 2 && !seen.includes(points)) seen.push(points);
          return seen.length >= 3;
        },
        120_000,
        200,
      );
      assert.ok(seen[2]! > seen[0]!, `points grew: ${seen.join(' → ')}`);
      await shot(ui(), 'curves-live-light');
      await runCommand(page, 'Agent Lab: Cancel Training');
      await waitFor('the run no longer live', async () => (await f.locator('.run .live').count()) === 0, 90_000);
      const runs = fs.readdirSync(path.join(workspace, 'runs')).filter((d) => d.startsWith('sft-'));
      assert.equal(runs.length, 1, `a run folder: ${runs.join(', ')}`);
    });
  });

  describe('Compare Runs', () => {
    it('tables the runs folder: the short real run with its held-out figure of 5 tasks and its recipe', async () => {
      const { page } = ui();
      await runCommand(page, 'Agent Lab: Compare Runs');
      const f = await panelFrame(page, 'compare');
      await waitFor('the table with the short run', async () => Number(await bodyData(f, 'rows')) >= 1 && (await f.locator('tr[data-run="short"]').count()) === 1);
      const cells = await f.locator('tr[data-run="short"] td').allTextContents();
      assert.equal(cells[0], 'sft', 'the kind');
      assert.ok(cells.some((c) => /^\d+\.\d% \(\d\/5 of \d+\)$/.test(c)), `held-out: its Evaluate on 5 tasks, of the split (${cells.join(' | ')})`);
      assert.match(await frameText(f, 'table.results thead'), /held-out/);
      // One run against itself: nothing to compare.
      assert.equal(await f.locator('#diff').isDisabled(), true);
    });
  });

  describe('State after a reload (webview serializer)', () => {
    it('brings the inspector back with its filter and selection', async () => {
      const { page } = ui();
      await quickOpen(page, 'synthetic/eval/heldout.jsonl');
      await runCommand(page, 'Agent Lab: Inspect Trajectories');
      let f = await panelFrame(page, 'inspector');
      await waitFor('90 rows', async () => /90/.test(await frameText(f, '#count')));
      await recordSavedStates(f);
      await select(f.locator('#kind'), 'compare');
      await click(f.locator('.row').nth(2));
      const selected = await waitFor('a selected row', () => attr(f, '.row[aria-selected="true"]', 'data-index'));
      await waitFor('the detail', async () => (await f.locator('.card').count()) > 0);
      const count = await frameText(f, '#count');
      // The panel saves its state 150 ms after a change: wait for the save that carries both.
      await waitFor('the filter and the selection saved', async () => {
        const saved = await lastSavedState(f);
        return saved?.filter?.kind === 'compare' && String(saved.selected) === selected;
      }, 10_000);
      await reloadWindow(page);
      f = await panelFrame(page, 'inspector', 60_000);
      await waitFor('the rows again', async () => (await frameText(f, '#count')) === count, 30_000);
      assert.equal(await f.locator('#kind').inputValue(), 'compare');
      assert.equal(await attr(f, '.row[aria-selected="true"]', 'data-index'), selected);
      await waitFor('the detail again', async () => (await f.locator('.card').count()) > 0, 15_000);
    });
  });

  describe('Screenshots (light, dark, high contrast)', () => {
    const show: [string, string, string][] = [
      ['inspector', 'synthetic/eval/heldout.jsonl', 'Agent Lab: Inspect Trajectories'],
      ['lossMask', 'compare.transcript', 'Agent Lab: Show Loss Mask'],
      ['grammar', 'broken-call.transcript', 'Agent Lab: Debug Tool Call'],
      ['curves', 'runs/short/metrics.jsonl', 'Agent Lab: Show Training Curves'],
    ];
    for (const theme of ['light', 'dark', 'hc'] as const) {
      it(`all four panels in the ${theme} theme`, async () => {
        const ctx = ui();
        const { page } = ctx;
        await setTheme(ctx, theme);
        for (const [kind, file, command] of show) {
          await quickOpen(page, file);
          if (kind === 'grammar') await goToLine(page, 2, 5);
          await runCommand(page, command);
          const f = await panelFrame(page, kind as 'inspector');
          if (kind === 'inspector') {
            await waitFor('rows', async () => Number(await bodyData(f, 'rows')) > 0);
            if ((await f.locator('.row[aria-selected="true"]').count()) === 0) await click(f.locator('.row').nth(3));
            await waitFor('cards', async () => (await f.locator('.card').count()) > 0);
          }
          if (kind === 'lossMask') await waitFor('tokens', async () => Number(await bodyData(f, 'tokens')) > 0, 20_000);
          if (kind === 'grammar') await waitFor('verdict', () => bodyData(f, 'verdict'));
          if (kind === 'curves') {
            await waitFor('charts', async () => Number(await bodyData(f, 'charts')) > 0);
            if ((await f.locator('.run').count()) < 3) await addAllRuns(f);
            await waitFor('three runs overlaid', async () => (await f.locator('.run').count()) >= 3);
          }
          // One tab per panel, also after the reload (a tab VS Code had not revived yet is replaced).
          const title = { lossMask: 'Loss Mask', grammar: 'Grammar Debugger', curves: 'Training Curves' }[kind as 'lossMask'];
          if (title) {
            await waitFor(`one "${title}" tab`, async () => (await page.locator('.tabs-container .tab .label-name', { hasText: new RegExp(`^${title}$`) }).count()) === 1, 10_000);
          }
          // The theme reached the webview (VS Code sets the body class).
          const cls = theme === 'light' ? 'vscode-light' : theme === 'dark' ? 'vscode-dark' : 'vscode-high-contrast';
          await waitFor(`the webview in ${theme}`, () => f.evaluate((c) => document.body.classList.contains(c), cls));
          // The webview has painted since the class changed (its charts redraw on the next frames).
          await painted(f);
          await shot(ctx, `${kind}-${theme}`);
        }
      });
    }
  });
});
