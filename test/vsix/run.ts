// The packed-extension tier: the .vsix as a user gets it.
//
//   npx tsx test/vsix/run.ts        (scripts/test-vsix.sh, after scripts/setup-vscode-test.sh)
//
// 1. packs from a clean clone of the repository's HEAD (git clone + node_modules as hard
//    links), with junk a working tree may hold (runs/, test-results/, a stale source map)
//    planted first: `npm run package` (vscode:prepublish: the production build);
// 2. lists the .vsix (its zip directory): no test/, test-results/, runs/, bench/, scripts/,
//    TypeScript sources or source maps; prints its size and file count;
// 3. installs it with code-server's own --install-extension into a fresh extensions folder,
//    copies the installed extension's samples/ as the workspace and deletes the clone: no path
//    leads to a source tree;
// 4. starts code-server on that workspace and drives it with Playwright as a person would:
//    activation, a diagnostic and a hover; Build World → Distill → Train on These
//    Trajectories (4 steps) → the finish message → Evaluate → the Runs view with the figure →
//    Ask the Student in the inspector; the walkthrough and the details page. Screenshots
//    (light and dark) in test-results/vsix/.
// Prints mocha-style "N passing" / "N failing" for scripts/test-all.sh. A step that fails
// stops the later ones (they build on it); they count as failing, never as passed.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { overlapKey } from '../../core/overlap';
import { makeTaskPool } from '../../core/world';
import { CannotRun, type CodeServer, checkTools, repoRoot, resultsDir, tail } from '../vscode/codeServer';
import { click, closeTransients, fill, hoverUntil, idle, neutralMouse, press, reset, saveFailure, settled } from '../ui/driver';
import { clickButton, installVsix, openWorkbench, packFromCleanClone, toast, vsixScratch, zipEntries } from './common';
import { type UiContext, panelFrame, pickExact, quickOpen, runCommand, setTheme, waitFor } from '../ui/harness';

// Browser globals used inside page.evaluate callbacks (the Node tsconfig has no DOM library).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;

const timeoutS = Number(process.env['AGENT_LAB_VSIX_TIMEOUT_S'] || 600);
const outDir = path.join(resultsDir, 'vsix');
const t0 = Date.now();
const say = (msg: string) => console.log(`[vsix-tests ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
// docs/: only the world formats' guide, which the diagnostics and templates cite.
const FORBIDDEN = /^extension\/docs\/(?!worlds\.md$)|^extension\/(test|test-results|runs|bench|scripts|\.ci|core|trainer|cli|language-server|extension|webview-ui|node_modules)\/|\.map$|\.ts$/;

const rowsOf = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { task: string });

async function shot(ctx: UiContext, name: string): Promise<string> {
  const file = path.join(ctx.outDir, `${name}.png`);
  await idle(ctx.page);
  await ctx.page.screenshot({ path: file });
  say(`screenshot: ${path.relative(repoRoot, file)}`);
  return file;
}

interface Step {
  name: string;
  run: () => Promise<void>;
}

async function main(): Promise<number> {
  const entry = checkTools();
  let server: CodeServer | undefined;
  let context: BrowserContext | undefined;
  const { scratch, dirs, clone, vsix, cleanup } = vsixScratch(outDir, 'the vsix tests', timeoutS, say, () => ({ server, context }));

  let passed = 0;
  let failed = 0;
  // One line per step (title, state, duration) for scripts/flake-check.sh: test-results/vsix/tests.json.
  const results: { title: string; state: string; ms: number }[] = [];
  let stop = false;
  const failures: string[] = [];
  const step = async (s: Step) => {
    if (stop) {
      failed++;
      failures.push(`${s.name}: not run (an earlier step failed)`);
      results.push({ title: s.name, state: 'not run', ms: 0 });
      console.log(`    - ${s.name} (not run)`);
      return;
    }
    const t = Date.now();
    try {
      // The driver: no quick pick, hover, menu or toast left by the step before.
      if (page) await reset(page);
      await s.run();
      passed++;
      results.push({ title: s.name, state: 'passed', ms: Date.now() - t });
      console.log(`    ✔ ${s.name} (${Date.now() - t}ms)`);
    } catch (err) {
      failed++;
      stop = true;
      results.push({ title: s.name, state: 'failed', ms: Date.now() - t });
      failures.push(`${s.name}: ${(err as Error).stack ?? String(err)}`);
      console.log(`    ${failed}) ${s.name}`);
      // The driver's evidence: screenshot, DOM around the last target, actions, code-server logs.
      if (page) await saveFailure(page, s.name);
    }
  };

  let page: Page | undefined;
  let ctx: UiContext | undefined;
  const files: { name: string; size: number }[] = [];
  try {
    console.log('\n  The packed extension (.vsix)');
    await step({
      name: 'packs from a clean clone, whatever lies in the working tree',
      run: async () => {
        const secs = packFromCleanClone(clone, vsix);
        say(`packed in ${secs.toFixed(1)} s`);
      },
    });
    await step({
      name: 'ships the bundles, not the sources: no test/, test-results/, runs/, bench/, scripts/, .ts or .map',
      run: async () => {
        files.push(...zipEntries(vsix));
        const bad = files.map((f) => f.name).filter((n) => FORBIDDEN.test(n));
        if (bad.length) throw new Error(`the .vsix ships ${bad.join(', ')}`);
        for (const need of ['extension/dist/extension.js', 'extension/dist/worker.js', 'extension/dist/cli.js', 'extension/dist/wasm/tfjs-backend-wasm.wasm', 'extension/README.md', 'extension/LICENSE.txt', 'extension/CHANGELOG.md', 'extension/media/icon.png', 'extension/docs/worlds.md', 'extension/syntaxes/agent-facts.tmLanguage.json']) {
          if (!files.some((f) => f.name.toLowerCase() === need.toLowerCase())) throw new Error(`the .vsix lacks ${need}`);
        }
        const size = fs.statSync(vsix).size;
        say(`.vsix: ${(size / 1024 / 1024).toFixed(2)} MB, ${files.length} files (${(files.reduce((a, f) => a + f.size, 0) / 1024 / 1024).toFixed(2)} MB unpacked)`);
        fs.writeFileSync(path.join(outDir, 'vsix-files.txt'), files.map((f) => `${f.size}\t${f.name}`).join('\n') + '\n');
      },
    });
    await step({
      name: "installs with code-server's own --install-extension into a fresh extensions folder",
      run: async () => {
        const installed = installVsix(entry, dirs, vsix);
        // The workspace: the installed extension's own samples; then the clone goes.
        fs.cpSync(path.join(dirs.extensions, installed, 'samples'), dirs.workspace, { recursive: true });
        fs.rmSync(clone, { recursive: true, force: true });
        say(`installed ${installed}; workspace from its samples/; the clone is deleted`);
      },
    });

    await step({
      name: 'starts code-server on the samples workspace; the extension activates on a transcript: a diagnostic and a 1-based hover',
      run: async () => {
        ({ page, ctx } = await openWorkbench({
          entry,
          scratch,
          dirs,
          outDir,
          say,
          // A quick flow: few held-out tasks per accuracy point and per evaluation.
          settings: { 'agentLab.sft.heldoutTasks': 2, 'agentLab.evaluate.tasks': 5 },
          started: (live) => ({ server, context } = live),
        }));
        await quickOpen(page, 'broken-call.transcript');
        const squiggleBox = () =>
          page!.evaluate(() => {
            const el = document.querySelector('.editor-group-container.active .monaco-editor .squiggly-error');
            if (!el) return null;
            const r = el.getBoundingClientRect();
            return { x: r.left, y: r.top, width: r.width, height: r.height };
          });
        await waitFor('the squiggle of the grammar rejection', squiggleBox, 60_000);
        // The driver hovers the squiggle once its box is still, and again if Monaco dropped the
        // hover (its line moved under the mouse: a toast, the layout settling after start-up).
        const hover = await hoverUntil(page, 'the hover over the rejected character', squiggleBox, async () => {
          const t = ((await page!.locator('.monaco-hover:visible').first().textContent({ timeout: 500 }).catch(() => '')) ?? '').replace(/\u00a0/g, ' ');
          return /rejected at character \d+/.test(t) ? t : undefined;
        });
        const at = Number(/rejected at character (\d+)/.exec(hover)![1]);
        const body = fs.readFileSync(path.join(dirs.workspace, 'broken-call.transcript'), 'utf8').split('<|tool_call|>')[1]!.split('<|end|>')[0]!;
        // The rejected byte is the 0 of "k": 0 (the body is ASCII: code points are characters).
        const zero = body.indexOf('"k": 0') + '"k": '.length + 1;
        if (zero !== at) throw new Error(`the hover says character ${at}; the 0 is character ${zero} (1-based)`);
        await closeTransients(page);
      },
    });

    let tracesFile = '';
    let runDir = '';
    await step({
      name: 'Build World → Distill → Train on These Trajectories (4 steps): the run trains on exactly the distilled rows; the finish message',
      run: async () => {
        const p = page!;
        await runCommand(p, 'Agent Lab: Build World');
        // The samples hold two world sources of their own, so Build World asks which (saved to agentLab.world).
        await pickExact(p, 'The textbook world');
        await clickButton(await toast(p, /world built in runs\/world-/), 'Distill');
        await pickExact(p, 'train');
        const distilled = await toast(p, /trajectories from 200 train tasks written to/, 60_000);
        const rel = /written to (\S+?\.traces\.jsonl)/.exec((await distilled.textContent()) ?? '')![1]!;
        tracesFile = path.join(dirs.workspace, rel);
        await clickButton(distilled, 'Train on These Trajectories');
        // The model (a preset or a Hugging Face folder), then the budget.
        await pickExact(p, 'tiny');
        await pickExact(p, 'A number of steps…');
        const input = p.locator('.quick-input-widget .quick-input-box input');
        await input.waitFor({ state: 'visible', timeout: 10_000 });
        await fill(input, '4');
        await press(p, 'Enter', { what: 'train for 4 steps' });
        const done = await toast(p, /SFT sft-\S+ finished: 4 steps/, 240_000);
        await shot(ctx!, 'finish-message');
        const name = /SFT (sft-\S+) finished/.exec((await done.textContent()) ?? '')![1]!;
        runDir = path.join(dirs.workspace, 'runs', name);
        const held = new Set(makeTaskPool(0).heldout.map(overlapKey));
        const byQ = new Map(makeTaskPool(0).train.map((t) => [t.question, t]));
        const want = rowsOf(tracesFile).filter((r) => !held.has(overlapKey(byQ.get(r.task)!)));
        const got = fs.readFileSync(path.join(runDir, 'data', 'train.traces.jsonl'), 'utf8');
        if (got !== want.map((r) => JSON.stringify(r)).join('\n') + '\n') throw new Error(`${runDir}/data/train.traces.jsonl is not the distilled rows less the held-out overlaps`);
        say(`the run trains on ${want.length} of the ${rowsOf(tracesFile).length} distilled rows (the rest overlap the held-out split)`);
        await clickButton(done, 'Evaluate');
        await toast(p, new RegExp(`${name}: held-out exact match [\\d.]+% on 5 of the \\d+ held-out tasks`), 180_000);
      },
    });

    await step({
      name: 'the Runs view shows the world, its dataset and the run with its held-out figure (light and dark)',
      run: async () => {
        const p = page!;
        await runCommand(p, 'Agent Lab: Focus on Runs View');
        const row = p.locator('.monaco-list-row', { hasText: path.basename(runDir) });
        await waitFor('the run in the Runs view', async () => /held-out [\d.]+%/.test((await row.first().textContent({ timeout: 500 }).catch(() => '')) ?? ''), 30_000);
        await p.locator('.monaco-list-row', { hasText: 'train.traces.jsonl' }).first().waitFor({ timeout: 10_000 });
        // A wider side bar for the screenshots: the run's description (status, figure) in full.
        // (The mouse is the point here: a person drags the sash; the driver first closes what could lie over it.)
        await closeTransients(p);
        await idle(p, p.locator('.part.sidebar').first());
        const bar = await p.locator('.part.sidebar').first().boundingBox();
        if (bar) {
          await p.mouse.move(bar.x + bar.width + 1, bar.y + 300);
          await p.mouse.down();
          await p.mouse.move(bar.x + 560, bar.y + 300, { steps: 8 });
          await p.mouse.up();
          await neutralMouse(p);
        }
        await click(row.first(), { what: 'the run in the Runs view' });
        await press(p, 'ArrowRight', { what: 'expand the run' });
        await settled(p);
        await shot(ctx!, 'runs-view-light');
        await setTheme(ctx!, 'dark');
        await shot(ctx!, 'runs-view-dark');
        await setTheme(ctx!, 'light');
      },
    });

    await step({
      name: "Ask the Student answers in the Trajectory Inspector",
      run: async () => {
        const p = page!;
        await runCommand(p, 'Agent Lab: Ask the Student');
        const input = p.locator('.quick-input-widget .quick-input-box input');
        await input.waitFor({ state: 'visible', timeout: 10_000 });
        await press(p, 'Enter', { what: 'ask the suggested question' });
        await toast(p, /the student answered/, 120_000);
        const frame = await panelFrame(p, 'inspector', 30_000);
        await waitFor('a trajectory in the inspector', async () => ((await frame.locator('body').textContent({ timeout: 500 }).catch(() => '')) ?? '').length > 50, 20_000);
        const asked = fs.readdirSync(path.join(runDir, 'asked'));
        // The trajectory as a .transcript, and (a question with a gold: the textbook's) as an eval
        // row the inspector marks right or wrong.
        const transcripts = asked.filter((f) => f.endsWith('.transcript'));
        const rows = asked.filter((f) => f.endsWith('.jsonl'));
        if (asked.length !== 2 || transcripts.length !== 1 || rows.length !== 1) throw new Error(`asked/: ${asked.join(', ')}`);
        const row = JSON.parse(fs.readFileSync(path.join(runDir, 'asked', rows[0]!), 'utf8')) as { solved?: unknown; gold?: unknown };
        if (typeof row.solved !== 'boolean' || row.gold !== '10000') throw new Error(`the asked row: ${JSON.stringify(row).slice(0, 200)}`);
        await shot(ctx!, 'ask-student');
      },
    });

    await step({
      name: 'the walkthrough opens with its eight steps (light and dark)',
      run: async () => {
        const p = page!;
        // The whole window for the walkthrough (its pages beside the steps).
        await runCommand(p, 'View: Close All Editors');
        await runCommand(p, 'View: Close Primary Side Bar');
        await runCommand(p, 'Welcome: Open Walkthrough...');
        const input = p.locator('.quick-input-widget .quick-input-box input');
        await input.waitFor({ state: 'visible', timeout: 10_000 });
        await fill(input, 'Agent Lab');
        await pickExact(p, 'Get started with Agent Lab');
        await waitFor('the walkthrough page', async () => /Open the samples/.test((await p.locator('.gettingStartedContainer').first().textContent({ timeout: 500 }).catch(() => '')) ?? ''), 20_000);
        // Its pictures loaded and its layout still: what the screenshot shows is finished.
        await waitFor('the walkthrough images loaded', () => p.evaluate(() => (Array.from(document.querySelectorAll('.gettingStartedContainer img')) as { complete: boolean }[]).every((i) => i.complete)), 20_000);
        await settled(p);
        await shot(ctx!, 'walkthrough-light');
        await setTheme(ctx!, 'dark');
        await shot(ctx!, 'walkthrough-dark');
        await setTheme(ctx!, 'light');
      },
    });

    await step({
      name: 'the details page is the user-facing README, with the icon (light and dark)',
      run: async () => {
        const p = page!;
        await runCommand(p, 'Extensions: Show Enabled Extensions');
        const item = p.locator('.extension-list-item', { hasText: 'Agent Lab' }).first();
        await item.waitFor({ timeout: 20_000 });
        // The driver moves the mouse off the list after the click: the extension's hover, which
        // grew under the resting mouse and lay over the theme picker (issue 34), has no cause.
        await click(item, { what: 'Agent Lab in the extensions list' });
        await p.locator('.extension-editor').first().waitFor({ timeout: 20_000 });
        await waitFor(
          'the README in the details page',
          async () => {
            for (const f of p.frames()) {
              const t = (await f.evaluate(() => document.body?.innerText ?? '').catch(() => '')) as string;
              if (t.includes('Train small tool-using ReAct agents') && t.includes('Getting started')) return true;
            }
            return false;
          },
          30_000,
        );
        // The README's own screenshots render: the page allows only https: and data: images, so
        // they ship inlined (scripts/vsix-readme.mjs); a relative path here would be broken.
        const images = await waitFor(
          "the README's images settled (loaded or broken)",
          async () => {
            const all: { src: string; complete: boolean; ok: boolean }[] = [];
            for (const f of p.frames()) {
              const t = (await f.evaluate(() => document.body?.innerText ?? '').catch(() => '')) as string;
              if (!t.includes('Getting started')) continue;
              const l = (await f
                .evaluate(() => (Array.from(document.querySelectorAll('img')) as { complete: boolean; naturalWidth: number; getAttribute(n: string): string | null; closest(s: string): unknown }[]).filter((i) => !i.closest('.header')).map((i) => ({ src: (i.getAttribute('src') ?? '').slice(0, 40), complete: i.complete, ok: i.naturalWidth > 0 })))
                .catch(() => [])) as { src: string; complete: boolean; ok: boolean }[];
              all.push(...l);
            }
            return all.length > 0 && all.every((i) => i.complete) ? all : undefined;
          },
          20_000,
        );
        const broken = images.filter((i) => !i.ok);
        if (images.length < 2 || broken.length) throw new Error(`the details page's README images: ${images.length} found, ${broken.length} broken (${broken.map((b) => b.src).join(', ')})`);
        say(`the README's ${images.length} images render on the details page`);
        // The icon in the page's header has loaded (instead of a second's sleep before the picture).
        await waitFor(
          'the icon in the details page',
          () => p.evaluate(() => (Array.from(document.querySelectorAll('.extension-editor .header img.icon')) as { complete: boolean; naturalWidth: number }[]).some((i) => i.complete && i.naturalWidth > 0)),
          20_000,
        );
        await settled(p);
        await shot(ctx!, 'details-light');
        await setTheme(ctx!, 'dark');
        await shot(ctx!, 'details-dark');
      },
    });
  } finally {
    await cleanup();
    fs.writeFileSync(path.join(outDir, 'tests.json'), JSON.stringify(results, null, 1) + '\n');
  }
  console.log(`\n  ${passed} passing`);
  if (failed) {
    console.log(`  ${failed} failing\n`);
    failures.forEach((f, i) => console.log(`  ${i + 1}) ${f}\n`));
    if (server?.exitReason()) say(`${server.exitReason()}; log tail:\n${tail(path.join(outDir, 'code-server.log'))}`);
  }
  return failed ? 1 : 0;
}

main().then(
  (code) => {
    say(code === 0 ? 'vsix tests passed' : `vsix tests FAILED; screenshots and logs in test-results/vsix/`);
    process.exit(code);
  },
  (err: Error) => {
    if (err instanceof CannotRun) say(`CANNOT RUN: ${err.message}`);
    else say(`ERROR: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
