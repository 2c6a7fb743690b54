// GRPO's option table (core/protocol/grpoOptions.ts) is the one spelling of the options:
// the CLI's flags, the worker's job spec and its validator, and the editor's settings are
// derived from it, so each of those is checked here against the table.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { COMMANDS } from '../../cli/commands';
import { GRPO_OPTIONS } from '../../cli/train';
import { GRPO_OPTION_TABLE, grpoJobOptionsFromSettings, grpoOptionsFromFlags } from '../../core/protocol/grpoOptions';
import { checkJobSpec } from '../../core/protocol/worker';
import { repoRoot } from '../support/reference';

const rows = Object.entries(GRPO_OPTION_TABLE) as [string, { kind: string; flag?: string; shared?: true; job?: true; setting?: string }][];

describe('core/protocol/grpoOptions: one table for the GRPO options', () => {
  it('every setting the table names is declared in package.json with the type of its row', () => {
    const declared = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      contributes: { configuration: { properties: Record<string, { type: string }> } | { properties: Record<string, { type: string }> }[] };
    }).contributes.configuration;
    const props = Object.assign({}, ...(Array.isArray(declared) ? declared : [declared]).map((c) => c.properties)) as Record<string, { type: string }>;
    const withSetting = rows.filter(([, r]) => r.setting !== undefined);
    assert.ok(withSetting.length >= 5, 'steps, group size, tasks per step, temperature and reward come from settings');
    for (const [key, r] of withSetting) {
      const p = props[`agentLab.${r.setting}`];
      assert.ok(p, `agentLab.${r.setting} (${key}) is declared`);
      assert.equal(p.type, r.kind === 'int' ? 'integer' : r.kind, `agentLab.${r.setting}'s type`);
      assert.ok(r.job, `${key}: a setting reaches the worker through the job spec`);
    }
  });

  it("the CLI's GRPO-only flags are the table's, each in the train command's usage", () => {
    const own = rows.filter(([, r]) => r.flag !== undefined && !r.shared).map(([, r]) => r.flag);
    assert.deepEqual(Object.keys(GRPO_OPTIONS), own);
    const train = COMMANDS['train']!;
    for (const [, r] of rows.filter(([, x]) => x.flag !== undefined)) {
      assert.ok(train.options[r.flag!], `--${r.flag} is an option of 'train'`);
      assert.ok(train.usage.includes(`--${r.flag}`), `--${r.flag} is in the usage`);
    }
  });

  it('parsed flags become the trainer options the rows name; flags not given stay out', () => {
    assert.deepEqual(grpoOptionsFromFlags({ group: 4, tasks: 2, 'dynamic-sampling': 'on', 'from-checkpoint': 'step-3', 'checkpoint-every': 0, run: 'r', threads: 2 }), {
      fromCheckpoint: 'step-3',
      groupSize: 4,
      tasksPerStep: 2,
      checkpointEverySeconds: 0,
      dynamicSampling: true,
    });
    assert.deepEqual(grpoOptionsFromFlags({ 'dynamic-sampling': 'off', resume: true }), { dynamicSampling: false, resume: true });
    assert.deepEqual(grpoOptionsFromFlags({}), {});
  });

  it("the editor's settings fill what the command was not told; a value of the wrong type or an empty reward is left out", () => {
    const settings: Record<string, unknown> = { 'grpo.steps': 60, 'grpo.groupSize': 8, 'grpo.tasksPerStep': '4', 'grpo.temperature': 0.8, 'grpo.reward': '' };
    assert.deepEqual(grpoJobOptionsFromSettings((s) => settings[s], { steps: 2, groupSize: undefined }), { steps: 2, groupSize: 8, temperature: 0.8 });
    assert.deepEqual(grpoJobOptionsFromSettings((s) => settings[s], { reward: 'exact' }).reward, 'exact');
    assert.deepEqual(grpoJobOptionsFromSettings(() => undefined, {}), {});
  });

  it("the worker's validator checks every job option of the table by its kind, naming it", () => {
    const base = { kind: 'grpo', runDir: '/g', from: '/s' };
    const jobRows = rows.filter(([, r]) => r.job);
    assert.ok(jobRows.length >= 15);
    for (const [key, r] of jobRows) {
      // A flag and an `on|off` option are booleans in a job spec (`--guide on`: guide: true).
      const boolean = r.kind === 'flag' || r.kind === 'onOff';
      const bad = r.kind === 'string' ? 3 : boolean ? 'yes' : -1;
      assert.match(checkJobSpec({ ...base, [key]: bad }) ?? '', new RegExp(`^job\\.${key} must be`), key);
      const good = r.kind === 'string' ? 'x' : boolean ? true : 1;
      assert.equal(checkJobSpec({ ...base, [key]: good }), null, key);
    }
    // The editor's retry of a too-hard refusal: --guide on reaches the worker as guide: true.
    assert.equal(checkJobSpec({ ...base, guide: true, temperature: 1.2 }), null);
    assert.match(checkJobSpec({ ...base, guide: 'on' }) ?? '', /^job\.guide must be a boolean/);
  });
});
