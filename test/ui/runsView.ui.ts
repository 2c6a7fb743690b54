// The Runs view keeps up (issue 35): a world folder appears, and a traces file distilled
// into it (written from outside the editor, as Distill's child process or the CLI does)
// shows under it with its count, and the world stops saying "not distilled yet", without
// pressing Refresh. Files other than the view's (a world's train.jsonl) change nothing.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { holdsFor } from './driver';
import { closeSideBar, runCommand, shot, ui, waitFor } from './harness';

/** The text of the Runs view's row whose label is `label` ('' when there is none). */
async function rowText(page: Page, label: string): Promise<string> {
  const rows = page.locator('.pane-body .monaco-list-row', { has: page.locator('.label-name', { hasText: label }) });
  if ((await rows.count()) === 0) return '';
  return ((await rows.first().textContent({ timeout: 1000 }).catch(() => '')) ?? '').replace(/\s+/g, ' ').trim();
}

const row = (question: string): string =>
  JSON.stringify({ task: question, text: `<|system|>s<|end|><|user|>${question}<|end|><|assistant|>Thought: t\nAnswer: 1<|end|>`, kind: 'lookup' });

describe('the Runs view refreshes on the files its items come from (UI, code-server + Chromium)', function () {
  this.timeout(120_000);

  after(async () => {
    await closeSideBar(ui().page).catch(() => undefined);
  });

  it('a new traces file shows under its world, and the world says it is distilled, without Refresh', async () => {
    const { page, workspace } = ui();
    const world = path.join(workspace, 'runs', 'world-ui-refresh');
    fs.mkdirSync(world, { recursive: true });
    for (const f of ['corpus.jsonl', 'train.jsonl', 'heldout.jsonl']) fs.writeFileSync(path.join(world, f), '');
    await runCommand(page, 'Agent Lab: Focus on Runs View');
    await waitFor('the new world in the Runs view', async () => /not distilled yet/.test(await rowText(page, 'world-ui-refresh')), 30_000);

    // Written from outside the editor (Distill's student teacher and the CLI write the file this way).
    fs.writeFileSync(path.join(world, 'train.traces.jsonl'), `${row('q1')}\n${row('q2')}\n`);
    const t0 = Date.now();
    await waitFor('"1 distilled" on the world', async () => /1 distilled/.test(await rowText(page, 'world-ui-refresh')), 15_000);
    await waitFor('the traces file under it, with its count', async () => /2 trajectories/.test(await rowText(page, 'train.traces.jsonl')), 10_000);
    ui().say(`Runs view: the new traces file showed ${Date.now() - t0} ms after it was written`);

    fs.writeFileSync(path.join(world, 'train-2.traces.jsonl'), `${row('q3')}\n`);
    await waitFor('"2 distilled" after a second file', async () => /2 distilled/.test(await rowText(page, 'world-ui-refresh')), 15_000);
    assert.match(await rowText(page, 'train-2.traces.jsonl'), /1 trajectory\b/);
    await shot(ui(), 'runs-view-refreshed');

    // A file the view shows nothing of: no row changes. A check that something does not happen
    // needs a window (the view's refresh is quicker than this one, see the figure printed above);
    // the row is read throughout it, not once at its end.
    fs.writeFileSync(path.join(world, 'train.jsonl'), '{}\n');
    await holdsFor('the world row saying "2 distilled"', async () => /2 distilled/.test(await rowText(page, 'world-ui-refresh')), 1500);
    assert.match(await rowText(page, 'world-ui-refresh'), /2 distilled/);
  });
});
