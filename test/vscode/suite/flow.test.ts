// The connected flow in a real VS Code: Build World → Distill → Train (SFT) on exactly those
// trajectories → a finish message with the next steps → Evaluate; then the commands around
// the student (Ask the Student, Export to TRL, Audit Reward) and the run folder as the Runs
// view reads it. Arguments are passed as the buttons and the Runs view pass them, so no
// quick pick waits for a person.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { overlapKey } from '../../../core/overlap';
import { makeTaskPool } from '../../../core/world';
import { readRun } from '../../../extension/runFolders';

interface JobResult {
  ok: boolean;
  cancelled: boolean;
  runDir: string;
  summary: Record<string, unknown>;
  checkpoints: number[];
  error?: string;
  message?: string;
  actions?: string[];
  prepared?: { trainRows: number; excluded: number; world: string };
}
const rowsOf = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { task: string; text: string; kind: string });

describe('The flow from world to trained student (integration)', function () {
  this.timeout(300_000);
  let tracesFile: string;
  let runDir: string;

  it('Build World then Distill write a world folder and its train.traces.jsonl', async () => {
    const built = await vscode.commands.executeCommand<{ folder: vscode.Uri; train: number } | undefined>('agentLab.buildWorld');
    assert.ok(built, 'Build World returned its result');
    const distilled = await vscode.commands.executeCommand<{ file: vscode.Uri; kept: number } | undefined>('agentLab.distill', built.folder, 'train');
    assert.ok(distilled && distilled.kept > 0, 'Distill kept trajectories');
    tracesFile = distilled.file.fsPath;
    assert.equal(path.dirname(tracesFile), built.folder.fsPath);
    // A second distillation never writes over the first file.
    const before = fs.readFileSync(tracesFile, 'utf8');
    const again = await vscode.commands.executeCommand<{ file: vscode.Uri } | undefined>('agentLab.distill', built.folder, 'train');
    assert.ok(again && again.file.fsPath !== tracesFile, `a new file: ${again?.file.fsPath}`);
    assert.equal(fs.readFileSync(tracesFile, 'utf8'), before);
  });

  it('Train (SFT) trains on exactly the distilled rows (less the held-out overlaps) and ends with the next steps', async () => {
    const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainSft', { traces: tracesFile, steps: 4, evalLimit: 2, runName: 'it-flow' });
    assert.ok(result, 'the command returned its result');
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.ok(result.ok && !result.cancelled);
    runDir = result.runDir;
    const held = new Set(makeTaskPool(0).heldout.map(overlapKey));
    const byQuestion = new Map(makeTaskPool(0).train.map((t) => [t.question, t]));
    const expected = rowsOf(tracesFile).filter((r) => !held.has(overlapKey(byQuestion.get(r.task)!)));
    assert.deepEqual(rowsOf(path.join(runDir, 'data', 'train.traces.jsonl')), expected);
    assert.equal(result.prepared?.trainRows, expected.length);
    assert.equal(result.prepared?.excluded, rowsOf(tracesFile).length - expected.length);
    assert.match(result.message ?? '', /^SFT it-flow finished: 4 steps in [\d.]+ min(?: of training \(what the budget counts\), [\d.]+ min in all with the held-out evaluations and checkpoints)?\. Held-out exact match [\d.]+% on \d+ of the 50 held-out tasks at step-4 \(.+\)\. Evaluate measures all 50\.$/);
    assert.deepEqual(result.actions, ['Evaluate', 'Open Curves', 'Train (GRPO)']);
    const config = JSON.parse(fs.readFileSync(path.join(runDir, 'config.json'), 'utf8')) as { data: { trainExamples: number } };
    assert.ok(config.data.trainExamples <= expected.length && config.data.trainExamples > 0);
  });

  it('Evaluate reports the held-out figure; the run folder reads as finished with it', async () => {
    const result = await vscode.commands.executeCommand<JobResult>('agentLab.evaluate', { runDir, split: 'heldout', limit: 3 });
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.match(result.message ?? '', /^it-flow: held-out exact match [\d.]+% on 3 of the 50 held-out tasks at step-4 \(checkpoint latest, step-4\); per shape .+\.$/);
    assert.deepEqual(result.actions, ['Inspect Evaluation', 'Open Curves', 'Train (GRPO)']);
    const run = readRun(runDir);
    assert.equal(run.status, 'finished');
    assert.equal(run.kind, 'sft');
    assert.equal(run.trainedOn, tracesFile);
    assert.ok(run.heldout !== null, 'a held-out figure');
    assert.deepEqual(run.evals.map((e) => [e.split, e.n]), [['heldout', 3]]);
    assert.equal(run.checkpoints.at(-1), 'step-4');
  });

  it('Ask the Student writes its trajectory as a new .transcript and opens it', async () => {
    const r = await vscode.commands.executeCommand<{ answer: string | null; steps: number; transcript: string } | undefined>('agentLab.askStudent', {
      runDir,
      question: 'What is the RoPE base of Stack-100M? Use the corpus.',
    });
    assert.ok(r, 'an answer (or an error was shown)');
    assert.ok(r.steps >= 1);
    assert.ok(r.transcript.startsWith(path.join(runDir, 'asked')), r.transcript);
    assert.match(fs.readFileSync(r.transcript, 'utf8'), /^<\|system\|>/);
  });

  it('Export to TRL writes a new export folder', async () => {
    const out = await vscode.commands.executeCommand<string | undefined>('agentLab.exportTrl', { runDir, format: 'trl-sft' });
    assert.ok(out && fs.existsSync(path.join(out, 'sft', 'messages.jsonl')), `export in ${out}`);
    const second = await vscode.commands.executeCommand<string | undefined>('agentLab.exportTrl', { runDir, format: 'trl-sft' });
    assert.notEqual(second, out, 'the first export is not written over');
  });

  it('Audit Reward passes the default reward and fails the multiplicative gate', async () => {
    const good = await vscode.commands.executeCommand<{ ok: boolean; report: string } | undefined>('agentLab.auditReward', { reward: 'exact,step=0.05' });
    assert.equal(good?.ok, true);
    const bad = await vscode.commands.executeCommand<{ ok: boolean; report: string } | undefined>('agentLab.auditReward', { reward: 'exact,gate=answer-tag' });
    assert.equal(bad?.ok, false);
    assert.match(bad!.report, /Reward audit: /);
  });

  it('contributes the Runs view, its container and the walkthrough', () => {
    const pkg = vscode.extensions.all.find((e) => e.packageJSON.name === 'agent-lab')!.packageJSON as {
      contributes: { views: Record<string, { id: string }[]>; viewsContainers: { activitybar: { id: string }[] }; walkthroughs: { id: string; steps: unknown[] }[] };
    };
    assert.deepEqual(pkg.contributes.viewsContainers.activitybar.map((c) => c.id), ['agentLab']);
    assert.deepEqual(pkg.contributes.views['agentLab']!.map((v) => v.id), ['agentLab.runs']);
    assert.equal(pkg.contributes.walkthroughs[0]!.id, 'agentLab.gettingStarted');
    assert.equal(pkg.contributes.walkthroughs[0]!.steps.length, 8); // with "Your own world" (issue 35)
  });
});
