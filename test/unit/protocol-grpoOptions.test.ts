// GRPO's option table (core/protocol/grpoOptions.ts) is the one spelling of the options:
// the CLI's flags, the worker's job spec and its validator, and the editor's settings are
// derived from it, so each of those is checked here against the table.
import * as assert from 'node:assert/strict';
import { COMMANDS } from '../../cli/commands';
import { GRPO_OPTIONS } from '../../cli/train';
import {
  GRPO_OPTION_DEFAULTS,
  GRPO_OPTION_TABLE,
  grpoConfigProblem,
  grpoConfigSettings,
  grpoJobOptionsFromSettings,
  grpoOptionsFromFlags,
  grpoUsage,
} from '../../core/protocol/grpoOptions';
import { DEFAULT_REWARD, DEFAULT_REWARD_TEXT, formatRewardSpec } from '../../core/reward';
import { GRPO_DEFAULTS } from '../../trainer/grpo/grpo';
import { checkJobSpec } from '../../core/protocol/worker';
import { declaredSettings } from '../support/settings';

const rows = Object.entries(GRPO_OPTION_TABLE) as [string, { kind: string; flag?: string; shared?: true; job?: true; setting?: string; default?: unknown; config?: string }][];

describe('core/protocol/grpoOptions: one table for the GRPO options', () => {
  it('every setting the table names is declared in package.json with the type of its row', () => {
    const props = declaredSettings();
    const withSetting = rows.filter(([, r]) => r.setting !== undefined);
    assert.ok(withSetting.length >= 5, 'steps, group size, tasks per step, temperature and reward come from settings');
    for (const [key, r] of withSetting) {
      const p = props[`agentLab.${r.setting}`];
      assert.ok(p, `agentLab.${r.setting} (${key}) is declared`);
      assert.equal(p.type, r.kind === 'int' ? 'integer' : r.kind, `agentLab.${r.setting}'s type`);
      assert.ok(r.job, `${key}: a setting reaches the worker through the job spec`);
    }
  });

  it('a setting declared in package.json defaults to its row\'s default', () => {
    const props = declaredSettings();
    const both = rows.filter(([, r]) => r.setting !== undefined && r.default !== undefined);
    assert.ok(both.length >= 5);
    for (const [key, r] of both) assert.equal(props[`agentLab.${r.setting}`]!.default, r.default, key);
  });

  it("the trainer's defaults are the table's: GRPO_DEFAULTS and the reward's text", () => {
    for (const [key, value] of Object.entries(GRPO_OPTION_DEFAULTS)) assert.equal((GRPO_DEFAULTS as Record<string, unknown>)[key], value, key);
    assert.deepEqual(Object.keys(GRPO_OPTION_DEFAULTS), rows.filter(([, r]) => r.default !== undefined).map(([k]) => k));
    assert.equal(DEFAULT_REWARD_TEXT, formatRewardSpec(DEFAULT_REWARD));
    assert.equal(GRPO_DEFAULTS.pool, 'fresh-entities');
  });

  it("a new run's config.json settings: given, else computed by the run, else the default; options with neither stay out", () => {
    const g = grpoConfigSettings({ groupSize: 3, steps: 5, prescreen: 0, systemPrompt: 'S' }, { pool: 'train', maxDraws: 12 });
    // Only the rows kept in config.json, in table order.
    assert.deepEqual(Object.keys(g), rows.filter(([k, r]) => r.config !== undefined && k !== 'evalLimit').map(([k]) => k));
    assert.equal(g.groupSize, 3);
    assert.equal(g.systemPrompt, 'S');
    assert.equal(g.pool, 'train', 'the computed default (a documents world) wins over the table\'s');
    assert.equal(g.maxDraws, 12);
    assert.equal(g.temperature, 0.8);
    assert.equal(g.reward, 'exact,step=0.05');
    assert.equal(grpoConfigSettings({ pool: 'fresh-values' }, { pool: 'train' }).pool, 'fresh-values', 'a given option wins');
    assert.equal(grpoConfigProblem(g as Record<string, unknown>), null, "a new run's settings pass the resume check");
  });

  it("a resume's check of config.json names the bad setting by its row's kind", () => {
    const good = grpoConfigSettings({}, { maxDraws: 12 }) as Record<string, unknown>;
    assert.equal(grpoConfigProblem(good), null);
    const cases: [Record<string, unknown>, string][] = [
      [{ groupSize: undefined }, '"grpo.groupSize" must be an integer'],
      [{ groupSize: 2.5 }, '"grpo.groupSize" must be an integer'],
      [{ temperature: '0.8' }, '"grpo.temperature" must be a number'],
      [{ lr: Infinity }, '"grpo.lr" must be a number'],
      [{ reward: 1 }, '"grpo.reward" must be a reward spec'],
      [{ guide: 'on' }, '"grpo.guide" must be true or false'],
      [{ stopFlat: -1 }, '"grpo.stopFlat" must be a non-negative integer'],
      [{ evalLimit: 1.5 }, '"grpo.evalLimit" must be a non-negative integer'],
      [{ pool: 'everything' }, '"grpo.pool" must be one of train, fresh-values, fresh-entities, fresh-differences'],
      [{ objective: 'dpo' }, '"grpo.objective" must be one of grpo, rft'],
    ];
    for (const [change, message] of cases) assert.equal(grpoConfigProblem({ ...good, ...change }), message, JSON.stringify(change));
    // Settings added after the first runs may be absent (an older run); the first ones may not.
    const old = { ...good };
    for (const k of ['pool', 'objective', 'dynamicSampling', 'stopFlat', 'maxDraws', 'guide']) delete old[k];
    assert.equal(grpoConfigProblem(old), null);
  });

  it("train grpo's usage is made from the rows: each flag once, on its row's line, the notes after", () => {
    const usage = grpoUsage();
    const options = usage.replace(/\([^()]*\)/g, ''); // without the notes
    for (const [, r] of rows.filter(([, x]) => x.flag !== undefined)) {
      assert.equal(options.split(new RegExp(`--${r.flag}\\b(?!-)`)).length - 1, 1, `--${r.flag} once`);
    }
    assert.match(usage, new RegExp(`default ${String(GRPO_OPTION_TABLE.stopFlat.default)}, 0: never`), "the stop-flat note says the row's default");
    // Six lines: the command, then the continuation lines (cli/main.ts subcommandUsage reads them so); each row's text on its line.
    const lines = usage.split('\n').filter((l) => !l.startsWith('        ')); // a note's second line starts deeper
    assert.equal(lines.length, 6);
    assert.ok(lines[0]!.startsWith('  agent-lab train grpo --from SFT_RUN '));
    assert.ok(lines.slice(1).every((l) => l.startsWith('      [--')));
    assert.ok(lines[5]!.endsWith(' --run DIR'));
    assert.match(lines[1]!, /\[--lr LR\] \[--warmup-steps N\] \[--seed N\]/, 'in table order');
    assert.match(lines[2]!, /^ {6}\[--pool train\|fresh-values\|fresh-entities\|fresh-differences\] \[--objective grpo\|rft\]/, 'choices spell themselves');
    assert.ok(COMMANDS['train']!.usage.endsWith(usage));
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
