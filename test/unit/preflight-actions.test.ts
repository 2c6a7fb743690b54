// Issue 33: a refused GRPO run offers a button for every next step its verdict names. The
// road from the verdict to the job: the refusal's actions recorded in config.json, the card's
// buttons and the messages they post (validated as the extension validates them), the
// command each message runs for the refused run (extension/preflightActions.ts, the curves
// panel's and the refusal notification's seam), the job spec those commands build (guide as a
// GRPO job option, `from` on an SFT job), and a continued SFT job through the worker's runJob.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseFromWebviewFor } from '../../core/protocol/panels';
import { checkJobSpec } from '../../core/protocol/worker';
import { commandOfMessage, refusedRunOf, retryCommand, sftMoreNext, type RetryCommand } from '../../extension/preflightActions';
import { grpoJobSpec, sftMoreJobSpec } from '../../extension/jobSpecs';
import { preflightViewOf } from '../../extension/runMeta';
import { type JobHooks, runJob } from '../../trainer/run/jobs';
import { type PrescreenVerdict, prescreenVerdict, summarisePrescreen } from '../../trainer/grpo/prescreen';
import { buttonMessage, preflightTable } from '../../webview-ui/curves/preflight';

/** 72 screened tasks, task i with correct(i) of 8 rollouts right. */
const screen = (correct: (i: number) => number) => summarisePrescreen(Array.from({ length: 72 }, (_, i) => ({ kind: 'sum' as const, correct: correct(i) })), 8, 8);
/** A refused run's config.json as trainer/grpo/grpo.ts writes it (the verdict through JSON). */
const refusedConfig = (v: PrescreenVerdict, grpo: Record<string, unknown> = { pool: 'fresh-entities', temperature: 0.8, guide: false }) => ({
  kind: 'grpo',
  from: { run: '/ws/runs/sft-1', checkpoint: 'latest', step: 200 },
  grpo,
  data: { pool: grpo['pool'] },
  refused: true,
  prescreenVerdict: JSON.parse(JSON.stringify(v)) as unknown,
});
const ctx = { pool: 'fresh-entities' as const, noFreshPools: false, fromRun: '/ws/runs/sft-1', dynamicSampling: true };

/** Each button of the refused run's card, clicked: the message (validated) and the command it runs. */
function clickAll(config: Record<string, unknown>): { label: string; command: unknown }[] {
  const t = preflightTable(preflightViewOf(config)!);
  return t.buttons.map((b) => {
    const parsed = parseFromWebviewFor('curves', buttonMessage('/ws/runs/grpo-1', b));
    assert.ok(parsed.ok, b.label);
    const m = parsed.message;
    assert.ok(m.type === 'curves/retryGrpo' || m.type === 'curves/sftMore', m.type);
    return { label: b.label, command: commandOfMessage(m, config) };
  });
}

describe("a refused GRPO run's next steps as buttons (issue 33, extension/preflightActions.ts)", () => {
  it('too hard: Train SFT More… continues the SFT run; the easier pool and the guide retry GRPO keeping the rest of the refused run', () => {
    const config = refusedConfig(prescreenVerdict(screen(() => 0), ctx));
    assert.deepEqual(clickAll(config), [
      { label: 'Train SFT More…', command: { command: 'agentLab.trainSft', args: { from: '/ws/runs/sft-1' } } },
      { label: 'Train with --pool fresh-values', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-values', temperature: 0.8 } } },
      { label: 'Train with --guide on', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-entities', temperature: 0.8, guide: true } } },
      { label: 'Train Anyway', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-entities', temperature: 0.8, force: true } } },
    ]);
  });

  it('confident: hotter rollouts on the same pool; memorised on pool train: the next pool', () => {
    const confident = refusedConfig(prescreenVerdict(screen((i) => (i % 2 ? 8 : 0)), ctx));
    assert.deepEqual(clickAll(confident)[0], {
      label: 'Train with --temperature 1.2',
      command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-entities', temperature: 1.2 } },
    });
    const memorised = refusedConfig(prescreenVerdict(screen(() => 8), { ...ctx, pool: 'train' }), { pool: 'train', temperature: 1, guide: true });
    assert.deepEqual(clickAll(memorised), [
      { label: 'Train with --pool fresh-values', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-values', temperature: 1, guide: true } } },
      { label: 'Train Anyway', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'train', temperature: 1, guide: true, force: true } } },
    ]);
  });

  it('an old run folder: its pool button from the text; a run recorded with no pool keeps the trainer default', () => {
    const v = prescreenVerdict(screen(() => 8), { ...ctx, pool: 'train' });
    const { actions: _a, ...old } = v;
    const config = { ...refusedConfig(old as PrescreenVerdict), grpo: {}, data: {} };
    assert.deepEqual(clickAll(config), [
      { label: 'Train with --pool fresh-values', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', pool: 'fresh-values' } } },
      { label: 'Train Anyway', command: { command: 'agentLab.trainGrpo', args: { fromRunDir: '/ws/runs/sft-1', force: true } } },
    ]);
  });

  it('refuses what is not a refused GRPO run of an SFT run, and a pool the trainer does not know', () => {
    const config = refusedConfig(prescreenVerdict(screen(() => 0), ctx));
    const retry = { type: 'curves/retryGrpo' as const, id: '/ws/runs/grpo-1', pool: null, force: false };
    assert.match(commandOfMessage(retry, { ...config, kind: 'sft' }) as string, /not a GRPO run started from an SFT run/);
    assert.match(commandOfMessage({ type: 'curves/sftMore', id: 'x' }, { ...config, from: 'nowhere' }) as string, /not a GRPO run/);
    assert.match(commandOfMessage(retry, null) as string, /not a GRPO run/);
    assert.match(commandOfMessage({ ...retry, pool: 'elsewhere' }, config) as string, /unknown pool "elsewhere"/);
    assert.equal(refusedRunOf({ ...config, grpo: { pool: 'elsewhere', temperature: 'hot' }, data: {} })?.pool, undefined, 'a damaged record keeps nothing it cannot read');
    assert.deepEqual(refusedRunOf({ ...config, grpo: { pool: 'elsewhere', temperature: 'hot' }, data: {} }), { from: '/ws/runs/sft-1' });
    // The notification's seam: the same commands from the verdict's actions.
    assert.deepEqual(retryCommand({ kind: 'grpo', flags: { guide: 'on' } }, { from: '/s' }), { command: 'agentLab.trainGrpo', args: { fromRunDir: '/s', guide: true } });
    assert.match(sftMoreNext('/ws/runs/sft-1'), /^Continued SFT from sft-1: start GRPO from this run/);
  });

  it("each button's command becomes the job the worker accepts: the step's flag in the spec, the settings for the rest", () => {
    const settings: Record<string, unknown> = { backend: 'wasm', 'grpo.steps': 60, 'grpo.temperature': 0.9, 'sft.heldoutTasks': 20 };
    const read = (k: string) => settings[k];
    const config = refusedConfig(prescreenVerdict(screen(() => 0), ctx), { pool: 'fresh-entities', temperature: 0.9, guide: false });
    const specs = clickAll(config).map(({ label, command }) => {
      const cmd = command as RetryCommand;
      const spec =
        cmd.command === 'agentLab.trainGrpo'
          ? grpoJobSpec(cmd.args, read, '/ws/runs/grpo-2', cmd.args.fromRunDir)
          : sftMoreJobSpec(cmd.args.from, '/ws/runs/sft-more', { minutes: 10 }, read);
      assert.equal(checkJobSpec(spec), null, label);
      return spec;
    });
    assert.deepEqual(specs, [
      { kind: 'sft', runDir: '/ws/runs/sft-more', from: '/ws/runs/sft-1', backend: 'wasm', minutes: 10, evalLimit: 20 },
      { kind: 'grpo', runDir: '/ws/runs/grpo-2', from: '/ws/runs/sft-1', backend: 'wasm', steps: 60, temperature: 0.9, pool: 'fresh-values' },
      { kind: 'grpo', runDir: '/ws/runs/grpo-2', from: '/ws/runs/sft-1', backend: 'wasm', steps: 60, temperature: 0.9, pool: 'fresh-entities', guide: true },
      { kind: 'grpo', runDir: '/ws/runs/grpo-2', from: '/ws/runs/sft-1', backend: 'wasm', steps: 60, temperature: 0.9, force: true, pool: 'fresh-entities' },
    ]);
    // The hotter temperature wins over the setting.
    const confident = clickAll(refusedConfig(prescreenVerdict(screen((i) => (i % 2 ? 8 : 0)), ctx)))[0]!.command as RetryCommand;
    assert.equal(confident.command, 'agentLab.trainGrpo');
    if (confident.command === 'agentLab.trainGrpo') assert.equal(grpoJobSpec(confident.args, read, '/g', '/s').temperature, 1.2);
  });

  it('the job specs the commands build: guide and temperature on a GRPO job, from on an SFT job (not with base or world)', () => {
    assert.equal(checkJobSpec({ kind: 'grpo', runDir: '/g', from: '/s', pool: 'fresh-values', guide: true, temperature: 1.2 }), null);
    assert.equal(checkJobSpec({ kind: 'sft', runDir: '/r', from: '/s', minutes: 3, evalLimit: 50 }), null);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', from: 3 }) ?? '', /^job\.from must be a string/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', from: '' }) ?? '', /^job\.from must be an SFT run folder/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', from: '/s', base: '/hf' }) ?? '', /job\.base and job\.from both give the starting weights/);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', from: '/s', world: '/w' }) ?? '', /job\.from continues on that run's data and world/);
  });
});

describe("Train SFT More…'s job through the worker's runJob (tiny preset)", function () {
  this.timeout(600000);
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sft-more-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const hooks = (logs: string[]): JobHooks => ({ started: () => {}, progress: () => {}, metrics: () => {}, log: (_l, m) => logs.push(m), checkpoint: () => {}, isCancelled: () => false });

  it("an SFT job with `from` continues that run's checkpoint in a new run folder, the start untouched", async () => {
    const start = path.join(tmp, 'sft-1');
    const logs: string[] = [];
    const first = await runJob({ kind: 'sft', runDir: start, backend: 'wasm', steps: 2, evalLimit: 0 }, hooks(logs));
    assert.equal(first.summary.steps, 2, logs.join('\n'));
    const before = fs.readFileSync(path.join(start, 'config.json'), 'utf8');
    const more = path.join(tmp, 'sft-more');
    const r = await runJob({ kind: 'sft', runDir: more, backend: 'wasm', from: start, steps: 1, evalLimit: 0 }, hooks(logs));
    assert.ok(r.summary.steps >= 1, logs.join('\n'));
    const config = JSON.parse(fs.readFileSync(path.join(more, 'config.json'), 'utf8')) as { kind: string; from?: { run: string; step: number } };
    assert.equal(config.kind, 'sft');
    assert.equal(config.from?.run, start, 'the new run names the run it continued');
    assert.equal(config.from?.step, 2);
    assert.ok(logs.some((l) => l.startsWith(`continued SFT from ${start}`)), logs.join('\n'));
    assert.equal(fs.readFileSync(path.join(start, 'config.json'), 'utf8'), before, 'the SFT run it started from is not written');
  });
});
