// The Trajectory Inspector on 10,000 trajectories, measured in a real VS Code (code-server
// 4.100.3 + headless Chromium, as the UI tier runs it):
//
//   npm run build && npx tsx bench/inspector.ts [--rows N] [--json]
//
// 1. Data: N synthetic eval rows (test/ui/fixtures.ts: the default world's tasks through the
//    real tools with scripted departures; ~3 KB a row with its generated flags, so 10,000
//    rows are ~30 MB) written to big/eval/heldout.jsonl in a scratch workspace.
// 2. Node side, no browser: the extension's parse (parseSource) and the payload it posts.
// 3. Open: "Agent Lab: Inspect Trajectories" from the palette, the file picked in its quick
//    pick (no editor holds the 30 MB file); the clock runs from the pick to the webview
//    showing the list (body[data-loaded] = N and row elements laid out), polled every 10 ms.
//    The extension is activated first (a small transcript), so activation is not counted.
// 4. Scroll: inside the webview, 3 s of scripted scrolling at 1,200 px per frame (a fast
//    fling, ~26 rows a frame) and a jump through the whole list, frame times from
//    requestAnimationFrame, long tasks from a PerformanceObserver; afterwards the rows in
//    view are checked against the scroll position (the virtual list drew the right rows).
// 5. A search keystroke on N rows: the time until the count updates.
// Prints the figures; the last line is JSON. Not run by CI (a benchmark: docs/architecture.md).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame, Page } from 'playwright-core';
import { parseSource } from '../core/transcript/trajectories';
import { syntheticEvalRows, writeJsonl } from '../test/ui/fixtures';
import { quickOpen, runCommand } from '../test/ui/harness';
import { BASE_SETTINGS, checkTools, launchChromium, makeScratch, repoRoot, resultsDir, sleep, startCodeServer, writeUserSettings } from '../test/vscode/codeServer';
import { EVAL_DIR, evalRowsFile } from '../core/protocol/folders';

// Browser globals used inside evaluate callbacks (the Node tsconfig has no DOM library).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const performance: any;

const argv = process.argv.slice(2);
const N = Number(argv[argv.indexOf('--rows') + 1] || 10_000) || 10_000;
const say = (m: string) => console.log(`[bench inspector] ${m}`);

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number, everyMs = 10): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

async function frameOf(page: Page, panel: string): Promise<Frame> {
  return waitFor(
    `the ${panel} webview`,
    async () => {
      for (const f of page.frames()) {
        if ((await f.evaluate(() => document.body?.dataset?.panel ?? null).catch(() => null)) === panel) return f;
      }
      return null;
    },
    60_000,
    10,
  );
}

/** Runs in the inspector's webview: 3 s of fast scrolling, then 40 jumps through the list. */
const SCROLL_SCRIPT = `(async () => {
  const list = document.getElementById('list');
  const longTasks = [];
  let obs = null;
  try {
    obs = new PerformanceObserver((l) => { for (const e of l.getEntries()) longTasks.push(e.duration); });
    obs.observe({ type: 'longtask', buffered: false });
  } catch (e) { obs = null; }
  const frames = [];
  await new Promise((resolve) => {
    let last = 0;
    const start = performance.now();
    const tick = (now) => {
      if (last) frames.push(now - last);
      last = now;
      list.scrollTop = (list.scrollTop + 1200) % (list.scrollHeight - list.clientHeight);
      if (now - start < 3000) requestAnimationFrame(tick); else resolve();
    };
    requestAnimationFrame(tick);
  });
  const jumps = [];
  for (let i = 0; i <= 40; i++) {
    const t0 = performance.now();
    list.scrollTop = ((list.scrollHeight - list.clientHeight) * i) / 40;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    jumps.push(performance.now() - t0);
  }
  if (obs) obs.disconnect();
  const top = Math.floor(list.scrollTop / 46);
  const shown = [...document.querySelectorAll('.row:not([hidden])')].map((r) => Number(r.dataset.index));
  return { frames, jumps, longTasks, top, shown: shown.length, drawnTop: shown.includes(top), domRows: document.querySelectorAll('.row').length };
})()`;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : 0;
};

async function main(): Promise<void> {
  const entry = checkTools();
  if (!fs.existsSync(path.join(repoRoot, 'dist', 'webview', 'inspector.js'))) throw new Error('dist/ is not built: npm run build');
  const { scratch, dirs } = makeScratch('agent-lab-ui-');
  try {
    // ---- data and the Node-side parse -----------------------------------------------------
    const t = Date.now();
    const rows = syntheticEvalRows(N);
    const file = path.join(dirs.workspace, 'big', EVAL_DIR, evalRowsFile('heldout'));
    writeJsonl(file, rows);
    fs.copyFileSync(path.join(repoRoot, 'samples', 'lookup.transcript'), path.join(dirs.workspace, 'lookup.transcript'));
    const fileMB = fs.statSync(file).size / 1e6;
    say(`${N} rows, ${fileMB.toFixed(1)} MB, generated in ${Date.now() - t} ms`);
    const text = fs.readFileSync(file, 'utf8');
    const parseRuns: number[] = [];
    let payloadMB = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const src = parseSource(text, false);
      parseRuns.push(performance.now() - t0);
      payloadMB = JSON.stringify(src.rows.map((r) => r.summary)).length / 1e6;
    }
    say(`extension parse (Node, no VS Code): ${parseRuns.map((x) => x.toFixed(0)).join(' / ')} ms; payload ${payloadMB.toFixed(2)} MB`);

    // ---- VS Code ----------------------------------------------------------------------------
    writeUserSettings(dirs.userData, { ...BASE_SETTINGS, 'workbench.colorTheme': 'Default Dark Modern', 'editor.minimap.enabled': false });
    const server = await startCodeServer({ entry, scratch, dirs, serverLog: path.join(scratch, 'code-server.log'), say: () => undefined });
    const context = await launchChromium(dirs.chromeProfile, { width: 1600, height: 1000 });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      const payload = [['extensionDevelopmentPath', `vscode-remote://${server.host}${repoRoot}`]];
      await page.goto(`http://${server.host}/?folder=${encodeURIComponent(dirs.workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`);
      await page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 60_000 });
      // Activate the extension (its code lens on a transcript says it is up), then close the editor.
      await quickOpen(page, 'lookup.transcript');
      await page.locator('.codelens-decoration', { hasText: 'Loss mask' }).first().waitFor({ timeout: 60_000 });
      await runCommand(page, 'View: Close All Editors');
      await sleep(1000);

      // ---- open ------------------------------------------------------------------------------
      await runCommand(page, 'Agent Lab: Inspect Trajectories');
      const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: `big/${EVAL_DIR}/${evalRowsFile('heldout')}` }).first();
      await pick.waitFor({ state: 'visible', timeout: 15_000 });
      const t0 = Date.now();
      await pick.click();
      const frame = await frameOf(page, 'inspector');
      const tFrame = Date.now();
      await waitFor('the list', () => frame.evaluate((n: number) => document.body.dataset.loaded === String(n) && document.querySelectorAll('.row:not([hidden])').length > 5, N), 60_000, 10);
      const openMs = Date.now() - t0;
      const webviewMs = Number(await frame.evaluate(() => document.body.dataset.loadMs));
      say(`open: ${openMs} ms from the pick to the list of ${N} (webview frame after ${tFrame - t0} ms; script start to list ${webviewMs} ms)`);
      await sleep(500);
      await page.screenshot({ path: path.join(resultsDir, 'bench-inspector-10k.png') }).catch(() => undefined);

      // ---- scroll ----------------------------------------------------------------------------
      // A string, not a function: the test transpiler would wrap inner functions in a Node helper.
      const scroll = (await frame.evaluate(SCROLL_SCRIPT)) as {
        frames: number[];
        jumps: number[];
        longTasks: number[];
        top: number;
        shown: number;
        drawnTop: boolean;
        domRows: number;
      };
      const renderMax = Number(await frame.evaluate(() => document.body.dataset.renderMaxMs ?? 0));
      const mean = scroll.frames.reduce((a, b) => a + b, 0) / scroll.frames.length;
      const figures = {
        rows: N,
        file_mb: Number(fileMB.toFixed(1)),
        payload_mb: Number(payloadMB.toFixed(2)),
        parse_ms_node: Math.round(Math.min(...parseRuns)),
        open_ms: openMs,
        webview_script_to_list_ms: webviewMs,
        scroll_frames: scroll.frames.length,
        scroll_fps: Number((1000 / mean).toFixed(1)),
        scroll_frame_ms_p50: Number(pct(scroll.frames, 50).toFixed(1)),
        scroll_frame_ms_p95: Number(pct(scroll.frames, 95).toFixed(1)),
        scroll_frame_ms_max: Number(Math.max(...scroll.frames).toFixed(1)),
        scroll_frames_over_50ms: scroll.frames.filter((f) => f > 50).length,
        jump_ms_p95: Number(pct(scroll.jumps, 95).toFixed(1)),
        long_tasks: scroll.longTasks.length,
        dom_rows: scroll.domRows,
        list_render_ms_max: renderMax,
        rows_drawn_match_scroll: scroll.drawnTop,
        search_ms: 0,
      };
      say(`slow frames (index:ms): ${scroll.frames.map((f, i) => [i, f] as const).filter(([, f]) => f > 34).map(([i, f]) => `${i}:${f.toFixed(0)}`).join(" ")}; long tasks: ${scroll.longTasks.map((d) => d.toFixed(0)).join(" ")} ms`);
      say(`scroll: ${figures.scroll_frames} frames in 3 s (${figures.scroll_fps} fps), frame p50 ${figures.scroll_frame_ms_p50} ms, p95 ${figures.scroll_frame_ms_p95} ms, max ${figures.scroll_frame_ms_max} ms, ${figures.scroll_frames_over_50ms} over 50 ms, ${figures.long_tasks} long tasks; slowest list render ${renderMax} ms; ${figures.dom_rows} row elements in the DOM for ${N} rows`);

      // ---- a search keystroke ----------------------------------------------------------------
      const before = await frame.evaluate(() => document.getElementById('count').textContent);
      const s0 = Date.now();
      await frame.locator('#q').fill('stack-100m');
      await waitFor('the filtered count', async () => (await frame.evaluate(() => document.getElementById('count').textContent)) !== before, 10_000, 5);
      figures.search_ms = Date.now() - s0;
      say(`search: ${figures.search_ms} ms from typing to the filtered count (${await frame.evaluate(() => document.getElementById('count').textContent)}; includes the 120 ms typing debounce)`);
      fs.mkdirSync(resultsDir, { recursive: true });
      fs.writeFileSync(path.join(resultsDir, 'bench-inspector.json'), JSON.stringify(figures, null, 2));
      console.log(JSON.stringify(figures));
    } finally {
      await context.close().catch(() => undefined);
      await server.stop(() => undefined);
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err: Error) => {
  console.error(`[bench inspector] FAILED: ${err.stack ?? err.message}`);
  process.exit(1);
});
