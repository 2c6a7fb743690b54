// Training from the command palette's commands in a real VS Code: a short SFT run in the
// worker process reports progress and a checkpoint; a second run is cancelled; both run
// folders stay readable (every metrics line parses, `latest` names a complete checkpoint).
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';

interface JobResult {
  ok: boolean;
  cancelled: boolean;
  runDir: string;
  summary: Record<string, unknown>;
  checkpoints: number[];
  progressEvents: number;
  error?: string;
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

describe('Training from the commands (integration)', function () {
  this.timeout(240_000);

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
  });
});
