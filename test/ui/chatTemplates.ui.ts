// A TRL conversational dataset under a model's chat template (issue 30), as a person sees it in
// a real VS Code (code-server + Chromium): "Agent Lab: Choose Chat Template…" picks Llama
// 3.1's template (test/fixtures/chat-templates/llama3.1: published, no {% generation %}
// blocks) and writes agentLab.chatTemplate; the dataset's rows get the all-zero diagnostic
// (a squiggle on the row); a hover on the assistant's text names the token and both rules'
// verdicts; the Loss Mask panel colours the row by rule and counts the supervised tokens of
// the row and the file. Screenshots: test-results/ui/chat-*.png, light and dark.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame } from 'playwright-core';
import { click, closeTransients, hoverUntil } from './driver';
import { charBox, frameText, goToLine, hoverText, panelFrame, pickExact, quickOpen, runCommand, setTheme, shot, squiggles, ui, waitFor } from './harness';
import { repoRoot } from '../vscode/codeServer';

// Callbacks of frame.evaluate run in the browser; the Node tsconfig has no DOM library.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
declare const document: any;
declare function getComputedStyle(el: unknown): { backgroundColor: string };
declare function requestAnimationFrame(cb: () => void): number;

const bodyData = (f: Frame, key: string) => f.evaluate((k) => document.body.dataset[k] ?? null, key).catch(() => null);

const FIRST = {
  messages: [
    { role: 'user', content: 'What is the capital of France?' },
    { role: 'assistant', content: 'The capital of France is Paris.' },
    { role: 'user', content: 'And of Italy?' },
    { role: 'assistant', content: 'Rome.' },
  ],
};
const ROWS = [
  FIRST,
  {
    messages: [
      { role: 'system', content: 'You answer in one word.' },
      { role: 'user', content: 'Largest planet?' },
      { role: 'assistant', content: 'Jupiter.' },
    ],
  },
  { prompt: [{ role: 'user', content: 'Two plus two?' }], completion: [{ role: 'assistant', content: 'Four.' }] },
];

describe('TRL chat datasets under a chat template (UI, code-server + Chromium)', function () {
  this.timeout(120_000);

  before(() => {
    // The workspace gets a tokenizer folder (Llama 3.1's published template, a stand-in
    // tokenizer) and a dataset in another folder, so only the setting can join them.
    const { workspace } = ui();
    fs.cpSync(path.join(repoRoot, 'test', 'fixtures', 'chat-templates', 'llama3.1'), path.join(workspace, 'models', 'llama3.1'), { recursive: true });
    fs.mkdirSync(path.join(workspace, 'chat'), { recursive: true });
    fs.writeFileSync(path.join(workspace, 'chat', 'train.jsonl'), ROWS.map((r) => JSON.stringify(r)).join('\n') + '\n');
  });

  after(async () => {
    // Leave the workbench as the next suite expects it: the light theme, no editors.
    const ctx = ui();
    const step = async (what: string, run: () => Promise<void>) => run().catch((e: Error) => ctx.say(`after: ${what}: ${e.message.split('\n')[0]}`));
    await step('close transients', () => closeTransients(ctx.page, { quickInput: true }));
    await step('light theme', () => setTheme(ctx, 'light'));
    await step('close editors', () => runCommand(ctx.page, 'View: Close All Editors'));
    // The next suite counts problems (the Problems badge): the closed dataset's must be gone.
    await step("the dataset's problems cleared", async () => {
      const t0 = Date.now();
      await waitFor(
        'no errors or warnings in the status bar',
        async () => {
          const label =
            (await ctx.page
              .locator('[id="status.problems"]')
              .first()
              .getAttribute('aria-label', { timeout: 1000 })
              .catch(() => null)) ?? '';
          return label !== '' && !/[1-9]\d*\s+(errors?|warnings?)|(errors?|warnings?):?\s+[1-9]/i.test(label);
        },
        20_000,
        250,
      );
      ctx.say(`the closed dataset's problems cleared after ${Date.now() - t0} ms`);
    });
  });

  it('Choose Chat Template… writes the setting; the rows get the all-zero diagnostic; the hover names the token and both rules', async () => {
    const ctx = ui();
    const { page } = ctx;
    // Before a template is chosen, the dataset says how to choose one (an information
    // diagnostic on the first row): the extension and its server are up.
    await quickOpen(page, 'chat/train.jsonl');
    await waitFor('the "no chat template" note on the first row', async () => (await squiggles(page, 'info')).length > 0, 45_000, 250);
    await runCommand(page, 'Agent Lab: Choose Chat Template…');
    await pickExact(page, 'llama3.1');
    const settingsFile = path.join(ctx.workspace, '.vscode', 'settings.json');
    await waitFor(
      'agentLab.chatTemplate in the workspace settings',
      () => fs.existsSync(settingsFile) && /"agentLab\.chatTemplate":\s*"models\/llama3\.1"/.test(fs.readFileSync(settingsFile, 'utf8')),
      10_000,
    );

    // Rows 1 and 2 (messages) are errors: assistant_only_loss would train nothing; row 3
    // (prompt-completion, trained by completion_only_loss anyway) is a warning.
    await waitFor(
      'error and warning squiggles on the rows',
      async () => (await squiggles(page, 'error')).length > 0 && (await squiggles(page, 'warning')).length > 0,
      45_000,
      250,
    );

    const hover = await hoverUntil(
      page,
      'the hover over "Paris" to name the token and both rules',
      () => charBox(page, 'Paris.', 1),
      async () => {
        const text = await hoverText(page);
        return /prefix difference \(completion_only_loss\): supervised/.test(text) ? text : undefined;
      },
    );
    assert.match(hover, /Agent Lab: token "[^"]*" · id \d+ · assistant \(message 1\)/);
    assert.match(hover, /generation blocks \(assistant_only_loss\): masked/);
    assert.match(hover, /the assistant mask is all zero: the chat template has no \{% generation %\} blocks/);
    await shot(ctx, 'chat-hover-light');
    await closeTransients(page);
  });

  it('the Loss Mask panel colours the row by rule and counts the supervised tokens of the row and the file; light and dark', async () => {
    const ctx = ui();
    const { page } = ctx;
    await quickOpen(page, 'chat/train.jsonl');
    await goToLine(page, 1);
    await runCommand(page, 'Agent Lab: Show Loss Mask');
    const f = await panelFrame(page, 'lossMask');
    await waitFor(
      'the chat row in the panel',
      async () => (await bodyData(f, 'chat')) === '1' && /chat\/train\.jsonl, row on line 1/.test(await frameText(f, '#label')),
      45_000,
    );
    await waitFor('the file totals complete', async () => (await bodyData(f, 'fileComplete')) === 'true', 30_000);

    // No generation blocks: nothing by that rule; the prefix rule supervises the assistant turns.
    assert.equal(await bodyData(f, 'generation'), '0');
    const prefix = Number(await bodyData(f, 'prefix'));
    assert.ok(prefix > 0);
    assert.equal(await f.locator('.tokens .tok.prefix').count(), prefix);
    assert.equal(await f.locator('.tokens .tok.gen').count(), 0);
    assert.equal(await f.locator('.tokens .tok.sup').count(), 0);
    const supervisedText = await f.evaluate(() =>
      Array.from(document.querySelectorAll('.tokens .tok.prefix') as ArrayLike<{ textContent: string }>, (e) => e.textContent).join(''),
    );
    assert.equal(supervisedText, 'The capital of France is Paris.<|eot_id|>Rome.<|eot_id|>');
    assert.equal(await bodyData(f, 'disagree'), String(prefix));
    assert.match(await frameText(f, '#banners'), /all-zero-generation-mask: the assistant mask is all zero/);
    // The file: three rows, every rule's total; more than this row's.
    const filePrefix = Number(await bodyData(f, 'filePrefix'));
    assert.ok(filePrefix > prefix, `file ${filePrefix} > row ${prefix}`);
    assert.match(
      await frameText(f, '#file'),
      new RegExp(`^file: 0 supervised by the generation blocks, ${filePrefix} by the prefix difference, of \\d+ tokens in 3 rows$`),
    );
    const colours = await f.evaluate(() => ({
      prefix: getComputedStyle(document.querySelector('.tokens .tok.prefix')).backgroundColor,
      mask: getComputedStyle(document.querySelector('.tokens .tok.mask')).backgroundColor,
    }));
    assert.notEqual(colours.prefix, colours.mask, JSON.stringify(colours));

    // A click on a token selects its message on the row's line (the rendering is not in the file).
    const message1 = JSON.stringify(FIRST.messages[1]);
    await click(f.locator('.tokens .tok.prefix').first(), { what: 'the first supervised token ("The" of message 1)' });
    await waitFor(
      `message 1 selected in the editor (${message1.length} characters)`,
      async () => {
        const text = await page
          .locator('[id="status.editor.selection"]')
          .first()
          .textContent({ timeout: 1000 })
          .catch(() => '');
        return new RegExp(`^Ln 1, Col \\d+ \\(${message1.length} selected\\)$`).test((text ?? '').trim());
      },
      15_000,
    );

    for (const theme of ['light', 'dark'] as const) {
      await setTheme(ctx, theme);
      const cls = theme === 'light' ? 'vscode-light' : 'vscode-dark';
      const frame = await panelFrame(page, 'lossMask');
      await waitFor(`the webview in ${theme}`, () => frame.evaluate((c) => document.body.classList.contains(c), cls));
      // Painted since the class changed: two animation frames.
      await frame.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
      await shot(ctx, `chat-mask-${theme}`);
    }
  });
});
