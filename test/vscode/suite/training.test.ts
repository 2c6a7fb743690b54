// Training from the command palette's commands in a real VS Code: a short SFT run in the
// worker process reports progress and a checkpoint; a second run is cancelled; both run
// folders stay readable (every metrics line parses, `latest` names a complete checkpoint).
// GRPO from the short SFT student: a two-step run writes its grpo metrics and a checkpoint;
// a drifted system prompt and a multiplicative-gate reward are refused before any rollout.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { SYSTEM_PROMPT } from '../../../core/env';
import { SYS } from '../../../core/wire';

interface JobResult {
  ok: boolean;
  cancelled: boolean;
  runDir: string;
  summary: Record<string, unknown>;
  checkpoints: number[];
  progressEvents: number;
  error?: string;
  message?: string;
  actions?: string[];
}

async function text(uri: vscode.Uri): Promise<string> {
  return new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
}

async function assertReadableRun(runDir: string): Promise<{ metricLines: number }> {
  const root = vscode.Uri.file(runDir);
  const config = JSON.parse(await text(vscode.Uri.joinPath(root, 'config.json')));
  assert.equal(config.kind, 'sft');
  assert.ok(config.model && config.tokenizer.sha256, 'config records the model and tokenizer');
  const metrics = (await text(vscode.Uri.joinPath(root, 'metrics.jsonl'))).split('\n').filter((l) => l !== '');
  for (const line of metrics) JSON.parse(line); // every line parses
  const latest = (await text(vscode.Uri.joinPath(root, 'checkpoints', 'latest'))).trim();
  assert.match(latest, /^step-\d+$/);
  const ck = JSON.parse(await text(vscode.Uri.joinPath(root, 'checkpoints', latest, 'checkpoint.json')));
  assert.equal(`step-${ck.step}`, latest);
  const weights = await vscode.workspace.fs.stat(vscode.Uri.joinPath(root, 'checkpoints', latest, 'model.safetensors'));
  assert.ok(weights.size > 100_000, 'the weights are there');
  return { metricLines: metrics.length };
}

async function missing(uri: vscode.Uri): Promise<boolean> {
  return vscode.workspace.fs.stat(uri).then(
    () => false,
    () => true,
  );
}

describe('Training from the commands (integration)', function () {
  this.timeout(240_000);

  /** The short SFT run of the first test: the student the GRPO tests start from. */
  let sftRunDir: string | undefined;
  /** The run the cancel test stopped (Resume continues it). */
  let cancelledRun: { dir: string; step: number } | undefined;

  it('Train (SFT) runs a short training in the worker: progress, a checkpoint, a readable run', async () => {
    const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainSft', { steps: 6, runName: 'it-short', evalLimit: 2 });
    assert.ok(result, 'the command returned its result');
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.ok(result.ok && !result.cancelled);
    assert.ok(result.progressEvents >= 6, `progress seen: ${result.progressEvents}`);
    assert.ok(result.checkpoints.includes(6), `checkpoints: ${result.checkpoints.join(', ')}`);
    assert.equal(result.summary['steps'], 6);
    const { metricLines } = await assertReadableRun(result.runDir);
    assert.ok(metricLines >= 6);
    sftRunDir = result.runDir;
  });

  it('Cancel Training stops a long run after its current step, with a checkpoint', async () => {
    const running = vscode.commands.executeCommand<JobResult>('agentLab.trainSft', { steps: 100000, runName: 'it-cancel', evalLimit: 2 });
    // Wait until the run has trained a few steps (its metrics file grows), then cancel.
    const metricsUri = vscode.Uri.joinPath(vscode.workspace.workspaceFolders![0]!.uri, 'runs', 'it-cancel', 'metrics.jsonl');
    const deadline = Date.now() + 120_000;
    for (;;) {
      const lines = await text(metricsUri).then(
        (t) => t.split('\n').filter((l) => l.includes('"phase":"sft"')).length,
        () => 0,
      );
      if (lines >= 3) break;
      assert.ok(Date.now() < deadline, 'the run never started training');
      await new Promise((r) => setTimeout(r, 200));
    }
    await vscode.commands.executeCommand('agentLab.cancelTraining');
    const result = await running;
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.ok(result.cancelled, 'the run reports it was cancelled');
    assert.ok(result.checkpoints.length >= 1, 'a checkpoint on the way out');
    const steps = Number(result.summary['steps']);
    assert.ok(steps >= 3 && steps < 100000, `stopped at step ${steps}`);
    await assertReadableRun(result.runDir);
    // The cancel is said, with the checkpoint kept and a Resume button.
    const ck = result.checkpoints.at(-1);
    assert.equal(result.message, `SFT it-cancel cancelled at step ${steps}; checkpoint step-${ck} kept.`);
    assert.deepEqual(result.actions, ['Resume', 'Open Curves']);
    cancelledRun = { dir: result.runDir, step: steps };
  });

  it('Resume continues a cancelled run from its checkpoint (and can be cancelled again)', async () => {
    assert.ok(cancelledRun, 'the cancel test ran');
    const metricsFile = vscode.Uri.joinPath(vscode.Uri.file(cancelledRun.dir), 'metrics.jsonl');
    const sftLines = async () => (await text(metricsFile)).split('\n').filter((l) => l.includes('"phase":"sft"')).length;
    const before = await sftLines();
    const running = vscode.commands.executeCommand<JobResult>('agentLab.resumeTraining', { runDir: cancelledRun.dir });
    const deadline = Date.now() + 120_000;
    while ((await sftLines()) < before + 2) {
      assert.ok(Date.now() < deadline, 'the resumed run never trained');
      await new Promise((r) => setTimeout(r, 200));
    }
    await vscode.commands.executeCommand('agentLab.cancelTraining');
    const result = await running;
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.ok(result.cancelled);
    const lines = (await text(metricsFile)).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(lines.some((l) => l['event'] === 'resume' && l['step'] === cancelledRun!.step), 'a resume marker at the step it stopped');
    assert.ok(Number(result.summary['steps']) > cancelledRun.step, `went on past step ${cancelledRun.step}`);
  });

  describe('Train (GRPO)', () => {
    /** The SFT student: the first test's run, or (when it did not run, e.g. under a grep) a short one of its own. */
    async function sftStudent(): Promise<string> {
      if (sftRunDir) return sftRunDir;
      const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainSft', { steps: 6, runName: 'it-grpo-sft', evalLimit: 0 });
      assert.ok(result?.ok && !result.cancelled, `the SFT student failed: ${result?.error}`);
      sftRunDir = result.runDir;
      return sftRunDir;
    }

    // Tiny on purpose: each rollout of a barely trained student can fill its 512-token context.
    const tiny = { steps: 2, groupSize: 2, tasksPerStep: 1, evalLimit: 2, evalEvery: 0 };

    it('is contributed to the command palette in the category "Agent Lab" and registered', async () => {
      const ext = vscode.extensions.getExtension('agent-lab.agent-lab');
      assert.ok(ext, 'the extension is installed (development path)');
      await ext.activate(); // registered on activation (the fixture's .transcript activates it at startup)
      const contributes = ext.packageJSON.contributes as {
        commands: { command: string; title: string; category?: string }[];
        menus?: { commandPalette?: { command: string; when?: string }[] };
      };
      const c = contributes.commands.find((x) => x.command === 'agentLab.trainGrpo');
      assert.ok(c, 'package.json contributes agentLab.trainGrpo');
      assert.equal(c.title, 'Train (GRPO)');
      assert.equal(c.category, 'Agent Lab');
      const hidden = (contributes.menus?.commandPalette ?? []).filter((m) => m.command === 'agentLab.trainGrpo' && m.when === 'false');
      assert.deepEqual(hidden, [], 'not hidden from the command palette');
      assert.ok((await vscode.commands.getCommands(true)).includes('agentLab.trainGrpo'), 'registered when the extension is active');
    });

    it('runs two GRPO steps from the SFT student: grpo metrics, a checkpoint, progress', async () => {
      const from = await sftStudent();
      const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainGrpo', { fromRunDir: from, runName: 'it-grpo', ...tiny });
      assert.ok(result, 'the command returned its result');
      assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
      assert.ok(result.ok && !result.cancelled);
      assert.ok(result.progressEvents > 0, `progress seen: ${result.progressEvents}`);
      assert.ok(result.checkpoints.includes(2), `checkpoints: ${result.checkpoints.join(', ')}`);
      assert.equal(result.summary['steps'], 2);

      const root = vscode.Uri.file(result.runDir);
      const config = JSON.parse(await text(vscode.Uri.joinPath(root, 'config.json')));
      assert.equal(config.kind, 'grpo');
      assert.equal(config.from.run, from, 'config records the SFT run it started from');
      assert.equal(config.grpo.groupSize, 2);
      assert.equal(config.grpo.tasksPerStep, 1);
      const records = (await text(vscode.Uri.joinPath(root, 'metrics.jsonl')))
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const grpo = records.filter((r) => r['phase'] === 'grpo');
      assert.deepEqual(
        grpo.map((r) => r['step']),
        [1, 2],
        'one grpo line per step',
      );
      for (const r of grpo) {
        for (const k of ['reward_mean', 'frac_reward_zero_std', 'kl', 'entropy']) assert.ok(k in r, `step ${r['step']} records ${k}`);
        assert.ok(Number.isFinite(r['reward_mean']), `reward_mean ${r['reward_mean']}`);
        const frac = r['frac_reward_zero_std'] as number;
        assert.ok(frac >= 0 && frac <= 1, `frac_reward_zero_std ${frac}`);
      }
      const latest = (await text(vscode.Uri.joinPath(root, 'checkpoints', 'latest'))).trim();
      assert.equal(latest, 'step-2');
      const weights = await vscode.workspace.fs.stat(vscode.Uri.joinPath(root, 'checkpoints', latest, 'model.safetensors'));
      assert.ok(weights.size > 100_000, 'the weights are there');
    });

    it('refuses to start when the system prompt differs from the SFT data by one character', async () => {
      const from = await sftStudent();
      const at = SYSTEM_PROMPT.indexOf('research');
      assert.ok(at > 0);
      const drifted = SYSTEM_PROMPT.slice(0, at) + 'R' + SYSTEM_PROMPT.slice(at + 1);
      assert.equal(drifted.length, SYSTEM_PROMPT.length);
      assert.notEqual(drifted, SYSTEM_PROMPT);
      const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainGrpo', {
        fromRunDir: from,
        runName: 'it-grpo-drift',
        ...tiny,
        systemPrompt: drifted,
      });
      assert.ok(result, 'the command returned its result');
      assert.ok(!result.ok && !result.cancelled, 'the run did not start');
      assert.match(result.error ?? '', /refused to start/);
      assert.match(result.error ?? '', /first differing byte/);
      // The byte of the changed character: after "<|system|>", ASCII throughout.
      assert.match(result.error ?? '', new RegExp(`first differing byte: ${SYS.length + at}\\b`));
      const root = vscode.Uri.file(result.runDir);
      assert.ok(await missing(vscode.Uri.joinPath(root, 'metrics.jsonl')), 'no metrics.jsonl was written');
      assert.ok(await missing(vscode.Uri.joinPath(root, 'config.json')), 'no config.json was written');
      assert.equal(result.checkpoints.length, 0);
    });

    it('refuses to start with a multiplicative-gate reward (the reward audit fails)', async () => {
      const from = await sftStudent();
      const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainGrpo', {
        fromRunDir: from,
        runName: 'it-grpo-gate',
        ...tiny,
        reward: 'exact,step=0.05,gate=answer-tag',
      });
      assert.ok(result, 'the command returned its result');
      assert.ok(!result.ok && !result.cancelled, 'the run did not start');
      assert.match(result.error ?? '', /refused to start/);
      assert.match(result.error ?? '', /multiplicative gate|reward audit/);
      assert.ok(await missing(vscode.Uri.joinPath(vscode.Uri.file(result.runDir), 'metrics.jsonl')), 'no metrics.jsonl was written');
    });
  });
});
