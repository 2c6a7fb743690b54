// The tour: issue 35's flow again, as a new user, in code-server with the packed .vsix, with a
// screenshot of each stop in the dark and the light theme. On demand (`npm run tour`), never
// in `npm test`: a benchmark-like script, not a test tier.
//
//   npm run tour        (after scripts/setup-vscode-test.sh; commit first: it packs HEAD)
//
// It packs the .vsix from a clean clone of HEAD and installs it as the vsix tier does
// (test/vsix/common.ts), opens an EMPTY workspace and drives code-server through the driver
// (test/ui/driver.ts): New World from the Runs view's title bar → a 12-river fact table typed
// into the template and saved (a decimal first: its hint) → Build World → Distill → Train (SFT)
// 300 steps → the finish message → the Runs view and its tooltip → Evaluate's one chooser and
// its result → the Trajectory Inspector → Ask the Student → Train (GRPO) 5 steps (pre-flight,
// progress, finish) → Training Curves (GRPO's pre-flight card, SFT's phase mark and held-out
// loss note) → Compare Runs → the details page → the walkthrough. Each stop is asserted (a
// failed assertion stops the tour with the driver's evidence in test-results/tour/failures/);
// what the issue asked and the product does not do yet is written down as a finding, not
// hidden. Shots: test-results/tour/NN-name-dark.png and -light.png; the list, with the issue
// item each one shows and the findings: test-results/tour/index.md.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Frame, Locator, Page } from 'playwright-core';
import { CannotRun, type CodeServer, checkTools, repoRoot, resultsDir, sleep, tail } from '../vscode/codeServer';
import { click, closeTransients, fill, hover, hoverUntil, idle, press, reset, saveFailure, select, settled, type } from '../ui/driver';
import { type UiContext, focusEditor, panelFrame, pickExact, quickOpen, runCommand, setTheme, squiggles, waitFor } from '../ui/harness';
import { clickButton, installVsix, openWorkbench, packFromCleanClone, toast, vsixScratch } from './common';

// Browser globals used inside page.evaluate callbacks (the Node tsconfig has no DOM library).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;

const timeoutS = Number(process.env['AGENT_LAB_TOUR_TIMEOUT_S'] || 1200);
const SFT_STEPS = Number(process.env['AGENT_LAB_TOUR_SFT_STEPS'] || 300);
const outDir = path.join(resultsDir, 'tour');
const t0 = Date.now();
const say = (msg: string) => console.log(`[tour ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

// Twelve rivers, two attributes each: the table a new user writes (lengths in km, rounded).
const RIVERS: [string, number, string][] = [
  ['Nile', 6650, 'Burundi'],
  ['Amazon', 6400, 'Peru'],
  ['Yangtze', 6300, 'China'],
  ['Mississippi', 3730, 'USA'],
  ['Yenisei', 3487, 'Mongolia'],
  ['Ob', 3650, 'Russia'],
  ['Congo', 4700, 'Zambia'],
  ['Amur', 2824, 'Mongolia'],
  ['Mekong', 4350, 'China'],
  ['Niger', 4180, 'Guinea'],
  ['Volga', 3530, 'Russia'],
  ['Danube', 2850, 'Germany'],
];
const table = (volga: string) =>
  'entity,attribute,value\n' + RIVERS.map(([r, km, c]) => `${r},length in km,${r === 'Volga' ? volga : km}\n${r},source country,${c}\n`).join('');
// What only the textbook's story says (core/world.ts's seed templates).
const TEXTBOOK = /Stack-100M|Reference note|capstone|project notes|RoPE/;

interface Shot {
  name: string;
  items: string;
  what: string;
  /** Set when the shot could not be taken: why. */
  skipped?: string;
}
interface Finding {
  item: string;
  text: string;
}

async function main(): Promise<number> {
  const entry = checkTools();
  let server: CodeServer | undefined;
  let context: BrowserContext | undefined;
  const { scratch, dirs, clone, vsix, cleanup } = vsixScratch(outDir, 'the tour', timeoutS, say, () => ({ server, context }));

  const shots: Shot[] = [];
  const findings: Finding[] = [];
  const checks: string[] = [];
  const finding = (item: string, text: string) => {
    findings.push({ item, text });
    say(`FINDING (item ${item}): ${text}`);
  };
  const checked = (text: string) => {
    checks.push(text);
    say(`checked: ${text}`);
  };
  let page: Page | undefined;
  let ctx: UiContext | undefined;
  let failed: string | undefined;
  let current = '';

  const file = (name: string, theme: 'dark' | 'light') => path.join(outDir, `${name}-${theme}.png`);
  const snap = async (name: string, theme: 'dark' | 'light') => {
    await idle(page!);
    await page!.screenshot({ path: file(name, theme) });
    say(`screenshot: ${path.relative(repoRoot, file(name, theme))}`);
  };
  /**
   * A stop in both themes: `show` puts on screen what the shot is of (called once per theme:
   * a quick pick closes when the theme is switched, so it is opened again). Dark first (the
   * tour's theme), then light, then back to dark.
   */
  const both = async (name: string, items: string, what: string, show: (theme: 'dark' | 'light') => Promise<void> = async () => undefined) => {
    await show('dark');
    await snap(name, 'dark');
    await closeTransients(page!, { quickInput: true });
    await setTheme(ctx!, 'light');
    await show('light');
    await snap(name, 'light');
    await closeTransients(page!, { quickInput: true });
    await setTheme(ctx!, 'dark');
    shots.push({ name, items, what });
  };
  const skip = (name: string, items: string, what: string, why: string) => {
    shots.push({ name, items, what, skipped: why });
    say(`SKIPPED ${name}: ${why}`);
  };
  /**
   * A message in both themes. The dark shot is taken at once; the mouse then rests on the toast
   * (a toast under the mouse does not hide) for the light one. A toast that hid meanwhile (they
   * do after a few seconds: issue 35 item 10) is shot in the notification centre instead.
   */
  const messageShots = async (name: string, items: string, what: string, re: RegExp) => {
    const t = await toast(page!, re, 5_000);
    await snap(name, 'dark');
    await hover(t.locator('.notification-list-item-icon').first(), { what: 'the message (it stays while the mouse is on it)' }).catch(() => undefined);
    await setTheme(ctx!, 'light');
    const still = await toast(page!, re, 1_000).then(
      () => true,
      () => false,
    );
    if (still) await snap(name, 'light');
    else {
      await runCommand(page!, 'Notifications: Show Notifications');
      await waitFor('the message in the notification centre', async () => re.test((await page!.locator('.notifications-center').first().textContent({ timeout: 500 }).catch(() => '')) ?? ''), 10_000);
      await snap(name, 'light');
      shots.push({ name: `${name}`, items, what: `${what} (light: in the notification centre; the toast had hidden)` });
      await runCommand(page!, 'Notifications: Hide Notifications');
      await setTheme(ctx!, 'dark');
      return false;
    }
    await setTheme(ctx!, 'dark');
    shots.push({ name, items, what });
    return true;
  };
  /** Runs a message's button: on its toast, or (the toast hid) in the notification centre. */
  const messageButton = async (re: RegExp, label: string) => {
    const t = await toast(page!, re, 2_000).catch(() => undefined);
    if (t) return clickButton(t, label);
    await runCommand(page!, 'Notifications: Show Notifications');
    const item = page!.locator('.notifications-center .notification-list-item').filter({ hasText: re }).first();
    await item.waitFor({ timeout: 10_000 });
    const button = item.locator('.monaco-button', { hasText: label }).first();
    if (!(await button.isVisible().catch(() => false))) await click(item, { what: 'the message in the notification centre (expands it)' });
    await click(button, { what: `the "${label}" button of the message in the notification centre` });
  };
  const bodyText = async (f: Frame) => (await f.evaluate(() => document.body?.innerText ?? '').catch(() => '')) as string;
  const runsRow = (text: string): Locator => page!.locator('.part.sidebar .monaco-list-row', { hasText: text }).first();
  const rowText = async (l: Locator) => ((await l.textContent({ timeout: 500 }).catch(() => '')) ?? '').replace(/\u00a0/g, ' ');
  const hoverShown = async () => ((await page!.locator('.workbench-hover:visible, .monaco-hover:visible').first().textContent({ timeout: 500 }).catch(() => '')) ?? '').replace(/\u00a0/g, ' ');
  const boxOf = async (l: Locator) => (await l.boundingBox().catch(() => null)) ?? null;

  const stop = async (name: string, run: () => Promise<void>) => {
    if (failed) return;
    current = name;
    const t = Date.now();
    try {
      if (page) await reset(page);
      await run();
      console.log(`    ✔ ${name} (${Date.now() - t}ms)`);
    } catch (err) {
      failed = `${name}: ${(err as Error).stack ?? String(err)}`;
      console.log(`    ✗ ${name}`);
      if (page) await saveFailure(page, name);
    }
  };

  let worldDir = '';
  let sftName = '';
  let grpoName = '';
  try {
    console.log('\n  The tour (issue 35, as a user, with the packed .vsix)');
    await stop('pack the .vsix from a clean clone of HEAD and install it with code-server', async () => {
      say(`packed in ${packFromCleanClone(clone, vsix).toFixed(1)} s`);
      const installed = installVsix(entry, dirs, vsix);
      fs.rmSync(clone, { recursive: true, force: true });
      say(`installed ${installed}; the workspace is an empty folder`);
      if (fs.readdirSync(dirs.workspace).length !== 0) throw new Error(`the workspace is not empty: ${fs.readdirSync(dirs.workspace).join(', ')}`);
    });

    await stop('code-server on an empty workspace, dark theme; the Runs view', async () => {
      ({ page, ctx } = await openWorkbench({
        entry,
        scratch,
        dirs,
        outDir,
        say,
        settings: {
          // Typing the table: no suggestion may take an Enter.
          'editor.quickSuggestions': { other: false, comments: false, strings: false },
          'editor.suggestOnTriggerCharacters': false,
          'editor.acceptSuggestionOnEnter': 'off',
          'editor.wordBasedSuggestions': 'off',
          // A short tour: held-out points on 12 tasks while training, Evaluate on 20, GRPO 5 small steps.
          'agentLab.sft.heldoutTasks': 12,
          'agentLab.evaluate.tasks': 20,
          'agentLab.grpo.steps': 5,
          'agentLab.grpo.groupSize': 4,
          'agentLab.grpo.tasksPerStep': 2,
        },
        started: (live) => ({ server, context } = live),
      }));
      // The extensions are registered (a loaded machine takes a minute): Agent Lab's activity bar icon.
      await page.locator('.part.activitybar .action-label[aria-label*="Agent Lab"]').first().waitFor({ timeout: 180_000 });
      await runCommand(page, 'Agent Lab: Focus on Runs View');
      await page.locator('.part.sidebar .action-label[aria-label*="New World"]').first().waitFor({ timeout: 30_000 });
      // The themes are listed once the extensions are scanned (the Runs view's buttons say they are).
      await setTheme(ctx, 'dark');
    });

    await stop('New World is the first button of the Runs view (item 6); a fact table template opens', async () => {
      const p = page!;
      const button = p.locator('.part.sidebar .action-label[aria-label*="New World"]').first();
      await both('01-runs-view-new-world', '6', "An empty workspace's Runs view: New World… is the first button of its title bar (and an inline action on Worlds and datasets).", async () => {
        await hoverUntil(p, 'the New World button', () => boxOf(button), async () => (/New World/.test(await hoverShown()) ? true : undefined)).catch(() => undefined);
      });
      await click(button, { what: 'New World… in the Runs view title bar' });
      await pickExact(p, 'A fact table');
      const input = p.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await fill(input, 'worlds/rivers');
      await press(p, 'Enter', { what: 'the folder worlds/rivers' });
      await toast(p, /a new fact table world in worlds\/rivers; agentLab\.world names it/, 20_000);
      await p.locator('.editor-group-container.active .tab.active[data-resource-name="facts.csv"]').waitFor({ timeout: 20_000 });
      const mode = ((await p.locator('[id="status.editor.mode"]').first().textContent({ timeout: 5_000 }).catch(() => '')) ?? '').trim();
      if (/plain ?text/i.test(mode)) finding('6', `facts.csv opens with the language mode "${mode}" (the issue: "facts.csv opens as Plain Text"; not changed)`);
      else checked(`facts.csv opens in the language mode "${mode}"`);
      await both('02-new-world-template', '6', `New World's fact-table template (worlds/rivers/facts.csv) open in the editor; the message says agentLab.world names it; language mode "${mode}".`);
    });

    await stop('the 12-river table typed into the template, a decimal first: its hint speaks of the row (item 6)', async () => {
      const p = page!;
      const factsFile = path.join(dirs.workspace, 'worlds', 'rivers', 'facts.csv');
      await focusEditor(p);
      await press(p, 'Control+A', { what: 'select the template' });
      await type(p, table('3530.5'));
      await press(p, 'Control+S', { what: 'save facts.csv' });
      await waitFor('facts.csv saved with the typed table', () => fs.readFileSync(factsFile, 'utf8') === table('3530.5'), 20_000);
      const squiggleBox = async () => (await squiggles(p, 'error'))[0] ?? (await squiggles(p, 'warning'))[0] ?? null;
      await waitFor('a squiggle on the decimal value', squiggleBox, 60_000);
      let hint = '';
      await both('03-fact-table-decimal-hint', '6', 'The language server squiggles a decimal value; the hover explains it in the row\'s own terms (the length in km in tenths), not "a mass in units of 10^21 kg".', async () => {
        hint = await hoverUntil(p, 'the hover over the decimal value', squiggleBox, async () => {
          const t = await hoverShown();
          return /3530\.5|decimal|integer/.test(t) ? t : undefined;
        });
      });
      if (/10\^21|mass/.test(hint)) throw new Error(`the decimal's hint still speaks of another domain: ${hint}`);
      if (!/length in km/.test(hint)) throw new Error(`the decimal's hint does not speak of the row's attribute (length in km): ${hint}`);
      checked(`the decimal's hint: ${hint.replace(/\s+/g, ' ').slice(0, 200)}`);
      // Item 6's dead references: what the hint cites must ship in the installed extension (the code's link opens it).
      const cited = /docs\/[\w.-]+\.md|CONTRIBUTING\.md/.exec(hint);
      const extDir = fs.readdirSync(dirs.extensions).find((d) => d.startsWith('agent-lab.agent-lab-'));
      if (cited && !(extDir && fs.existsSync(path.join(dirs.extensions, extDir, cited[0])))) finding('6', `the diagnostic's hint cites ${cited[0]}, which the .vsix does not ship`);
      else if (cited) checked(`the hint cites ${cited[0]}, shipped in the extension (the diagnostic's code links it; "Agent Lab: Open the World Format Guide" opens it)`);
      await closeTransients(p);
      await focusEditor(p);
      await press(p, 'Control+A', { what: 'select the table' });
      await type(p, table('3530'));
      await press(p, 'Control+S', { what: 'save facts.csv' });
      await waitFor('facts.csv saved with the 12 rivers', () => fs.readFileSync(factsFile, 'utf8') === table('3530'), 20_000);
      await waitFor('no squiggle left in facts.csv', async () => (await squiggles(p, 'error')).length === 0 && (await squiggles(p, 'warning')).length === 0, 30_000);
      await both('04-fact-table', '-', 'The 12-river table (length in km, source country), saved, with no diagnostic left.');
    });

    await stop('Build World from the Runs view; the corpus speaks in the table\'s words (item 2); Distill; the Runs view keeps up (item 1)', async () => {
      const p = page!;
      await click(p.locator('.part.sidebar .action-label[aria-label*="Build World"]').first(), { what: 'Build World in the Runs view title bar' });
      const built = await toast(p, /world built in (\S+): (\d+) passages, (\d+) train \+ (\d+) held-out tasks/, 60_000);
      const m = /world built in (\S+): (\d+) passages, (\d+) train \+ (\d+) held-out tasks/.exec((await built.textContent()) ?? '')!;
      worldDir = path.join(dirs.workspace, m[1]!);
      say(`world ${m[1]}: ${m[2]} passages, ${m[3]} train + ${m[4]} held-out tasks`);
      const corpus = fs.readFileSync(path.join(worldDir, 'corpus.jsonl'), 'utf8');
      if (TEXTBOOK.test(corpus)) throw new Error(`the world's corpus speaks of the textbook: ${TEXTBOOK.exec(corpus)![0]}`);
      if (!corpus.includes('the length in km of Volga is 3530')) throw new Error("the world's corpus lacks the canonical clause of the Volga's length");
      checked("the world's corpus holds the table's clauses and no word of the textbook's story");
      await clickButton(built, 'Distill');
      await pickExact(p, 'train');
      const distilled = await toast(p, /trajectories from \d+ train tasks written to/, 120_000);
      const rel = /written to (\S+?\.traces\.jsonl)/.exec((await distilled.textContent()) ?? '')![1]!;
      await clickButton(distilled, 'Train on These Trajectories');
      await pickExact(p, 'tiny');
      await pickExact(p, 'A number of steps…');
      const input = p.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await fill(input, String(SFT_STEPS));
      await press(p, 'Enter', { what: `train for ${SFT_STEPS} steps` });
      // The Runs view, never refreshed by hand: the dataset under its world, the world distilled.
      const world = runsRow(path.basename(worldDir));
      await waitFor(`${path.basename(rel)} in the Runs view without Refresh`, async () => (await runsRow(path.basename(rel)).count()) > 0, 30_000);
      await waitFor('the world no longer "not distilled yet"', async () => /distilled/.test(await rowText(world)) && !/not distilled yet/.test(await rowText(world)), 30_000);
      checked(`the Runs view lists ${path.basename(rel)} and the world as "${(await rowText(world)).slice(0, 80)}" without Refresh`);
      await quickOpen(p, `${path.relative(dirs.workspace, worldDir).split(path.sep).join('/')}/corpus.jsonl`);
      await both('05-corpus-and-runs-view', '1, 2', "The built world's corpus.jsonl in the table's own words (\"the length in km of Volga is 3530\", no textbook story); the Runs view lists the world (distilled) and its train.traces.jsonl without Refresh while the SFT run starts.");
    });

    await stop(`Train (SFT) ${SFT_STEPS} steps: the finish message names the figure's split, task count, checkpoint and accuracy per shape (items 3, 4)`, async () => {
      const p = page!;
      // The progress line while it trains (steps and minutes).
      const progress = await toast(p, /Training \(SFT\)|step \d+ of \d+/, 120_000).catch(() => undefined);
      if (progress) await both('06-sft-progress', '9', 'Train (SFT) running: the progress notification in steps and minutes.').catch((e: Error) => skip('06-sft-progress', '9', 'SFT progress', `the progress notification went before both shots: ${e.message.split('\n')[0]}`));
      else skip('06-sft-progress', '9', 'SFT progress', 'no progress notification was seen within 2 minutes');
      // Item 1: the run that trains is listed while it trains (its folder is written at its start).
      const listed = await waitFor('the training run in the Runs view', async () => (await runsRow('sft-').count()) > 0, 30_000).catch(() => false);
      if (listed) checked(`the Runs view lists the SFT run while it trains: "${(await rowText(runsRow('sft-'))).slice(0, 80)}"`);
      else finding('1', 'the Runs view does not list the SFT run while it trains (30 s after its progress began; "No run yet: Train (SFT)")');
      const re = new RegExp(`SFT (sft-\\S+) finished: ${SFT_STEPS} steps in [^]*?Held-out exact match [\\d.]+% on \\d+ of the \\d+ held-out tasks at step-${SFT_STEPS} \\(([^)]*)\\)`);
      const done = await toast(p, re, 900_000);
      const text = (await done.textContent()) ?? '';
      const m = re.exec(text)!;
      sftName = m[1]!;
      if (!/\w+ \d+\/\d+/.test(m[2]!)) throw new Error(`the finish message gives no accuracy per shape: ${text}`);
      checked(`the SFT finish message: ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
      await messageShots('07-sft-finish', '3, 4, 9', 'The SFT finish message: steps and minutes, the held-out figure on N of the split\'s M tasks at step-N, accuracy per shape, and next-step buttons.', re);
    });

    await stop('the Runs view: the run\'s figure and its tooltip (items 1, 3, 4)', async () => {
      const p = page!;
      await runCommand(p, 'Agent Lab: Focus on Runs View');
      const row = runsRow(sftName);
      await waitFor('the run\'s held-out figure in the Runs view', async () => /held-out [\d.]+%/.test(await rowText(row)), 30_000);
      let tip = '';
      await both('08-runs-view-tooltip', '1, 3, 4', "The Runs view's run with its held-out figure; its tooltip names the figure's task count, checkpoint and the accuracy per shape.", async () => {
        tip = await hoverUntil(p, "the run's tooltip", () => boxOf(row), async () => {
          const t = await hoverShown();
          return /held-out/.test(t) ? t : undefined;
        });
      });
      if (!/of the \d+ held-out tasks|\d+ of \d+/.test(tip)) throw new Error(`the tooltip does not name the figure's task count: ${tip}`);
      checked(`the run's tooltip: ${tip.replace(/\s+/g, ' ').slice(0, 300)}`);
      // Item 10: a dataset row's hover.
      const ds = runsRow('train.traces.jsonl');
      if ((await ds.count()) > 0) {
        const dsTip = await hoverUntil(p, "the dataset row's hover", () => boxOf(ds), async () => {
          const t = await hoverShown();
          return t.trim() !== '' ? t : undefined;
        }, 8_000).catch(() => '');
        if (dsTip.trim() === '' || /^\s*\S*train\.traces\.jsonl\s*$/.test(dsTip)) finding('10', `a dataset row in the Runs view has no hover of its own (only its path: ${JSON.stringify(dsTip.trim().slice(-60))}); not changed`);
        else checked(`the dataset row's hover: ${dsTip.replace(/\s+/g, ' ').slice(0, 160)}`);
        await closeTransients(p);
      }
    });

    await stop('Evaluate asks one question (item 7); its result names the figure (items 3, 4)', async () => {
      const p = page!;
      const openChooser = async () => {
        await runCommand(p, 'Agent Lab: Evaluate');
        // The chooser, not the palette it was run from: its placeholder, and a row of it focused.
        await waitFor('the Evaluate chooser', async () => {
          const ph = (await p.locator('.quick-input-widget .quick-input-box input').getAttribute('placeholder', { timeout: 500 }).catch(() => '')) ?? '';
          const row = (await p.locator('.quick-input-list .monaco-list-row.focused').first().getAttribute('aria-label', { timeout: 500 }).catch(() => '')) ?? '';
          return ph.includes('What to evaluate') && row.includes(sftName);
        }, 30_000);
      };
      await both('09-evaluate-chooser', '7', "Evaluate's one chooser: runs and splits in one list, the newest run's held-out split first, each with its task count.", openChooser);
      await openChooser();
      const first = ((await p.locator('.quick-input-list .monaco-list-row.focused').first().getAttribute('aria-label', { timeout: 2_000 })) ?? '').replace(/\u00a0/g, ' ');
      if (!first.includes(sftName) && !/held-out/.test(first)) throw new Error(`the chooser's first row is not the newest run's held-out split: ${first}`);
      checked(`Evaluate's first row: ${first}`);
      // The run's own world offered again as "another world" (agentLab.world names the table it was built from).
      const rows = await p.locator('.quick-input-list .monaco-list-row').evaluateAll((els) => els.map((e) => (e as { getAttribute(n: string): string | null }).getAttribute('aria-label') ?? ''));
      const again = rows.find((r) => r.includes(`held-out of ${path.basename(worldDir)}`) && /another world/.test(r));
      if (again) finding('7', `Evaluate's chooser offers the run's own world again as "another world": ${again.replace(/\s+/g, ' ').slice(0, 160)}`);
      await press(p, 'Enter', { what: 'evaluate the first row' });
      // Nothing more is asked: the evaluation starts.
      const re = new RegExp(`${sftName}: held-out exact match [\\d.]+% on 20 of the \\d+ held-out tasks[^]*?per shape`);
      await toast(p, re, 600_000);
      await messageShots('10-evaluate-result', '3, 4, 7', "Evaluate's result: held-out exact match on 20 of the split's tasks, the checkpoint, accuracy per shape and the failures by first mistake.", re);
      await messageButton(re, 'Inspect Evaluation');
    });

    await stop('the Trajectory Inspector: failure labels with their meanings; what Inspect Evaluation opens (items 4, 10)', async () => {
      const p = page!;
      const f = await panelFrame(p, 'inspector', 30_000);
      await waitFor('the evaluation rows in the inspector', async () => (await f.locator('.row').count()) > 0, 30_000);
      const outcome = await f.locator('#outcome').inputValue({ timeout: 5_000 });
      if (outcome !== 'failed') finding('10', `"Inspect Evaluation" opens the inspector on every outcome (the filter reads "${outcome}"), though the README says the failures open; the tour chooses "failed" itself`);
      else checked('Inspect Evaluation opens the failures');
      const failedCount = await f.locator('#outcome option[value="failed"]').textContent({ timeout: 2_000 }).catch(() => null);
      if (failedCount && !/\(0\)/.test(failedCount)) {
        await select(f.locator('#outcome'), 'failed', { what: 'the outcome filter: failed' });
        await click(f.locator('.row').first(), { what: 'the first failed row' });
        const badge = await waitFor('the failure badge of the selected row', async () => {
          const t = (await f.locator('.badge.bad').first().textContent({ timeout: 500 }).catch(() => '')) ?? '';
          return t.includes('failed') ? t : undefined;
        }, 15_000);
        checked(`the inspector's badge: ${badge}`);
      } else say('no failed row in the evaluation: the inspector shows the solved ones');
      await both('11-inspector', '4, 10', "The Trajectory Inspector on the evaluation's rows, filtered to the failures: each row's first mistake (the failure label; its meaning in the badge's tooltip), the transcript beside.");
    });

    await stop("Ask the Student: pre-filled from the world's own held-out tasks, checked against its gold (item 5)", async () => {
      const p = page!;
      const input = p.locator('.quick-input-widget .quick-input-box input');
      let question = '';
      const ask = async () => {
        await runCommand(p, 'Agent Lab: Ask the Student');
        await input.waitFor({ state: 'visible', timeout: 20_000 });
        question = await waitFor('the pre-filled question', async () => (await input.inputValue()).trim() || undefined, 10_000);
      };
      await both('12-ask-prefilled', '5', "Ask the Student's question box, pre-filled with a held-out question of the rivers world (not the textbook's).", ask);
      if (TEXTBOOK.test(question)) throw new Error(`Ask the Student pre-fills a textbook question: ${question}`);
      if (!RIVERS.some(([r]) => question.includes(r))) throw new Error(`the pre-filled question names no river of the table: ${question}`);
      checked(`Ask the Student pre-fills: ${question}`);
      await ask();
      await press(p, 'Enter', { what: 'ask the pre-filled question' });
      const re = /the student answered [^]*? in \d+ steps\. (Correct \(a held-out task\)|Wrong: the gold answer is "[^"]*" \(a held-out task\))/;
      const t = await toast(p, re, 180_000);
      checked(`Ask's message: ${((await t.textContent()) ?? '').replace(/\s+/g, ' ').slice(0, 200)}`);
      await panelFrame(p, 'inspector', 30_000);
      await messageShots('13-ask-answer', '5', "The student's answer in the inspector, and the message checking it against the task's gold.", re);
    });

    await stop('Train (GRPO) 5 steps: the pre-flight, the progress line, the finish message (item 9)', async () => {
      const p = page!;
      await runCommand(p, 'Agent Lab: Train (GRPO)');
      await pickExact(p, sftName);
      // What comes, in whatever order it comes: the pre-flight message (or a refusal), a progress
      // line with the last step's reward, the finish message. Each is shot once, when seen.
      const preflightRe = /before step 1:/;
      const refusedRe = /Train Anyway/;
      const progressRe = /GRPO step \d+ of \d+[^\n]*?reward -?[\d.]+/;
      const finishRe = /GRPO (grpo-\S+) finished: \d+ steps in /;
      let sawPreflight = false;
      let sawProgress = false;
      let refused = false;
      const seen = async (re: RegExp) => toast(p, re, 300).then((t) => t, () => undefined);
      const deadline = Date.now() + 900_000;
      for (;;) {
        if (Date.now() > deadline) throw new Error('no GRPO finish message within 15 minutes');
        if (await seen(finishRe)) break;
        if (!refused && (await seen(refusedRe))) {
          refused = true;
          const t = await seen(refusedRe);
          checked(`GRPO's pre-screen refused the run: ${(((await t?.textContent().catch(() => '')) ?? '')).replace(/\s+/g, ' ').slice(0, 300)}`);
          await messageShots('14-grpo-preflight', '9', "GRPO's pre-screen refused the run before step 1: its prediction, cause and next steps as buttons, Train Anyway, Show Pre-flight.", refusedRe);
          sawPreflight = true;
          await messageButton(refusedRe, 'Train Anyway');
          continue;
        }
        if (!sawPreflight) {
          const t = await seen(preflightRe);
          if (t) {
            sawPreflight = true;
            checked(`GRPO's pre-flight message: ${(((await t.textContent().catch(() => '')) ?? '')).replace(/\s+/g, ' ').slice(0, 300)}`);
            await messageShots('14-grpo-preflight', '9', "GRPO's pre-flight before step 1 in a message: the pre-screen's prediction and verdict, with Show Pre-flight.", preflightRe);
            continue;
          }
        }
        if (!sawProgress) {
          const t = await seen(progressRe);
          if (t) {
            sawProgress = true;
            checked(`GRPO's progress line: ${(((await t.textContent().catch(() => '')) ?? '')).replace(/\s+/g, ' ').replace(/\.monaco-list[^]*$/, '').slice(0, 250)}`);
            await snap('15-grpo-progress', 'dark');
            await setTheme(ctx!, 'light');
            if (await seen(progressRe)) {
              await snap('15-grpo-progress', 'light');
              shots.push({ name: '15-grpo-progress', items: '9', what: 'GRPO running: "GRPO step N of M · reward · solved · groups with a spread" in its progress notification.' });
            } else {
              fs.rmSync(file('15-grpo-progress', 'dark'), { force: true });
              skip('15-grpo-progress', '9', 'the GRPO progress line', 'the run ended while the theme was switched (5 short steps): the dark shot alone is not kept');
            }
            await setTheme(ctx!, 'dark');
            continue;
          }
        }
        await sleep(300); // a polling interval: the loop waits on the messages above
      }
      if (!sawPreflight) skip('14-grpo-preflight', '9', 'the GRPO pre-flight message', 'no "before step 1" message came: a run this short has no pre-screen (the default screen needs 16 tasks); the curves card, shot 17, says so');
      if (!sawProgress) skip('15-grpo-progress', '9', 'the GRPO progress line', 'no "GRPO step N of M · reward" line was seen before the run finished');
      const done = await toast(p, finishRe, 5_000);
      const text = ((await done.textContent()) ?? '').replace(/\s+/g, ' ');
      grpoName = finishRe.exec(text)![1]!;
      checked(`GRPO's finish message: ${text.slice(0, 400)}`);
      await messageShots('16-grpo-finish', '3, 9', "GRPO's finish message: the budget's minutes apart from the wall minutes, the held-out figure before → after, and why it did not move when it did not.", finishRe);
    });

    await stop("Training Curves: GRPO's pre-flight card, SFT's phase mark and held-out loss note (items 8, 9)", async () => {
      const p = page!;
      await runCommand(p, 'Agent Lab: Show Training Curves');
      const f = await panelFrame(p, 'curves', 30_000);
      await waitFor('the GRPO run in the curves', async () => (await bodyText(f)).includes(grpoName), 30_000);
      const card = await waitFor("the GRPO run's pre-flight card", async () => {
        const t = await bodyText(f);
        return /Before step 1/.test(t) && /groups with a spread|No pre-screen ran/.test(t) ? t : undefined;
      }, 30_000);
      checked(`the curves show the GRPO run's pre-flight card (${/No pre-screen ran/.test(card) ? 'its checks; no pre-screen ran: "a run too short to judge skips it"' : 'the pre-screen per shape'})`);
      const screened = !/No pre-screen ran/.test(card);
      await both(
        '17-curves-grpo-preflight',
        '8, 9',
        `Training Curves of the GRPO run: the pre-flight card (${screened ? 'per shape: tasks screened, pass rate, predicted groups with a spread and its interval; the verdict' : 'the checks before step 1, and "No pre-screen ran (a run too short to judge skips it)"'}) and GRPO's charts on GRPO steps.`,
      );
      // The SFT run: from the Runs view's inline action (a user's way to a run's curves).
      await runCommand(p, 'Agent Lab: Focus on Runs View');
      const row = runsRow(sftName);
      await click(row, { what: 'the SFT run in the Runs view' });
      await click(row.locator('.action-label[aria-label*="Show Curves"]').first(), { what: "the SFT run's Show Curves" });
      const g = await waitFor('the curves of the SFT run', async () => {
        const fr = await panelFrame(p, 'curves', 2_000).catch(() => undefined);
        // The mark itself is drawn on the chart; its note below the chart says what it is.
        const all = fr ? ((await fr.evaluate(() => document.body?.textContent ?? '').catch(() => '')) as string) : '';
        return fr && all.includes(sftName) && /Dotted verticals: the recipe.s curriculum moved to its next phase/.test(all) ? fr : undefined;
      }, 30_000);
      const body = await bodyText(g);
      if (!/held-out loss is measured every \d+ steps/.test(body)) finding('8', 'the SFT curves carry no note of how often the held-out loss is measured');
      else checked('the SFT curves: a phase mark and the held-out loss note');
      await both('18-curves-sft', '8', "Training Curves of the SFT run: the dotted phase mark (\"phase 2 of 2: …\"), the held-out loss line with its note, the run's chip.");
    });

    await stop('Compare Runs: the results table of both runs', async () => {
      const p = page!;
      await runCommand(p, 'Agent Lab: Compare Runs');
      const f = await panelFrame(p, 'compare', 30_000);
      await waitFor('both runs in the results table', async () => {
        const t = await bodyText(f);
        return t.includes(sftName) && t.includes(grpoName);
      }, 30_000);
      checked('Compare Runs lists the SFT and the GRPO run');
      await both('19-compare-runs', '3, 4', 'Compare Runs: the runs as one results table (kind, recipe or SFT start, steps, minutes, held-out with counts, per shape) and the two-runs task diff.');
    });

    await stop('the details page: the README with its images (item 6)', async () => {
      const p = page!;
      await runCommand(p, 'View: Close All Editors');
      await runCommand(p, 'Extensions: Show Enabled Extensions');
      const item = p.locator('.extension-list-item', { hasText: 'Agent Lab' }).first();
      await item.waitFor({ timeout: 20_000 });
      await click(item, { what: 'Agent Lab in the extensions list' });
      await p.locator('.extension-editor').first().waitFor({ timeout: 20_000 });
      const readme = await waitFor('the README in the details page', async () => {
        for (const fr of p.frames()) if ((await bodyText(fr)).includes('Train small tool-using ReAct agents')) return fr;
        return undefined;
      }, 30_000);
      // The README's own images (not the header's icon): every frame's <img> whose alt is not the icon's, settled.
      void readme;
      const imgs = await waitFor('the README images settled (loaded or broken)', async () => {
        const all: { src: string; complete: boolean; ok: boolean }[] = [];
        for (const fr of p.frames()) {
          if (!(await bodyText(fr)).includes('Getting started')) continue;
          const l = (await fr
            .evaluate(() => (Array.from(document.querySelectorAll('img')) as { complete: boolean; naturalWidth: number; getAttribute(n: string): string | null; closest(s: string): unknown }[]).filter((i) => !i.closest('.header')).map((i) => ({ src: i.getAttribute('src') ?? '', complete: i.complete, ok: i.naturalWidth > 0 })))
            .catch(() => [])) as { src: string; complete: boolean; ok: boolean }[];
          all.push(...l);
        }
        return all.length > 0 && all.every((i) => i.complete) ? all : undefined;
      }, 20_000).catch(() => [] as { src: string; complete: boolean; ok: boolean }[]);
      const broken = imgs.filter((i) => !i.ok);
      if (imgs.length === 0) finding('6', 'the details page shows no image of the README');
      else if (broken.length) finding('6', `the details page's README images are broken: ${broken.length} of ${imgs.length} (${broken.map((b) => b.src).join(', ')})`);
      else checked(`the details page's README images render (${imgs.length})`);
      await settled(p);
      await both('20-details-page', '6', `The extension's details page (the README${broken.length ? `; ${broken.length} of ${imgs.length} images broken` : ', its images rendered'}).`);
    });

    await stop('the walkthrough: "Your own world" is a step; no literal backticks (items 6, 10)', async () => {
      const p = page!;
      await runCommand(p, 'View: Close All Editors');
      await runCommand(p, 'View: Close Primary Side Bar');
      const open = async () => {
        await runCommand(p, 'Welcome: Open Walkthrough...');
        const input = p.locator('.quick-input-widget .quick-input-box input');
        await input.waitFor({ state: 'visible', timeout: 10_000 });
        await fill(input, 'Agent Lab');
        await pickExact(p, 'Get started with Agent Lab');
        await waitFor('the walkthrough page', async () => /Your own world/.test((await p.locator('.gettingStartedContainer').first().textContent({ timeout: 500 }).catch(() => '')) ?? ''), 20_000);
      };
      await open();
      const step = p.locator('.gettingStartedContainer .getting-started-step', { hasText: 'Your own world' }).first();
      await click(step, { what: 'the walkthrough step "Your own world"' });
      await waitFor('the step "Your own world" expanded', async () => /expanded/.test((await step.getAttribute('class', { timeout: 500 }).catch(() => '')) ?? ''), 10_000);
      const text = (await p.locator('.gettingStartedContainer').first().textContent({ timeout: 2_000 })) ?? '';
      if (text.includes('`')) throw new Error('the walkthrough shows a literal backtick');
      checked('the walkthrough has a "Your own world" step and no literal backticks');
      await waitFor('the walkthrough images loaded', () => p.evaluate(() => (Array.from(document.querySelectorAll('.gettingStartedContainer img')) as { complete: boolean }[]).every((i) => i.complete)), 20_000);
      await settled(p);
      await both('21-walkthrough', '6, 10', 'The walkthrough with its step "Your own world" (New World) open; the step descriptions show no literal backticks.');
    });
  } finally {
    await cleanup();
  }

  // What a shot cannot show: the issue's items the tour checked outside the pictures.
  // Explained, not fixed: VS Code makes only error notifications with buttons sticky and the API
  // has no say, so the finish message says where its steps stay (the run's row in the Runs view).
  checked('explained (item 10): an information message with buttons hides into the notification centre after a few seconds (VS Code makes only errors with buttons sticky); the finish message says its steps stay on the run in the Runs view, whose row has them');
  const lines = [
    '# The tour: issue 35 as a user, with the packed .vsix',
    '',
    `Run: ${new Date().toISOString()}, ${((Date.now() - t0) / 1000).toFixed(0)} s; ${failed ? `**FAILED** at "${current}"` : 'passed end to end'}. Dark and light shots of each stop; the issue's items (1-10) each one shows.`,
    '',
    '| shot | items | what it shows |',
    '|---|---|---|',
    ...shots.map((s) => (s.skipped ? `| ${s.name} (skipped) | ${s.items} | ${s.what}: **not taken**: ${s.skipped} |` : `| [dark](${s.name}-dark.png) · [light](${s.name}-light.png) ${s.name} | ${s.items} | ${s.what} |`)),
    '',
    '## Checked',
    '',
    ...checks.map((c) => `- ${c}`),
    '',
    '## Findings (what the issue asked and the product does not do yet)',
    '',
    ...(findings.length ? findings.map((f) => `- item ${f.item}: ${f.text}`) : ['- none']),
    '',
  ];
  fs.writeFileSync(path.join(outDir, 'index.md'), lines.join('\n'));
  say(`index: ${path.relative(repoRoot, path.join(outDir, 'index.md'))}`);
  if (failed) {
    console.log(`\n  the tour FAILED: ${failed}\n`);
    if (server?.exitReason()) say(`${server.exitReason()}; log tail:\n${tail(path.join(outDir, 'code-server.log'))}`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => {
    say(code === 0 ? 'the tour passed; shots and index.md in test-results/tour/' : 'the tour FAILED; shots, index.md, failures/ and logs in test-results/tour/');
    process.exit(code);
  },
  (err: Error) => {
    if (err instanceof CannotRun) say(`CANNOT RUN: ${err.message}`);
    else say(`ERROR: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
