// SFT's option table (core/protocol/sftOptions.ts) is the one spelling of the options: the
// CLI's flags (train sft's, and those train grpo shares), the worker's job spec and its
// validator, and the editor's settings are derived from it or checked here against it.
import * as assert from 'node:assert/strict';
import { COMMANDS } from '../../cli/commands';
import { GRPO_OPTIONS, SFT_OPTIONS } from '../../cli/train';
import { GRPO_OPTION_TABLE } from '../../core/protocol/grpoOptions';
import { type UsageRow, usageFromRows } from '../../core/protocol/optionRows';
import { SFT_OPTION_DEFAULTS, SFT_OPTION_TABLE, sftConfigProblem, sftOptionsFromFlags, sftOptionsFromJob, sftUsage } from '../../core/protocol/sftOptions';
import { checkSftConfig } from '../../trainer/run/runGuards';
import { checkJobSpec } from '../../core/protocol/worker';
import { BACKEND_CHOICES } from '../../trainer/model/backend';
import { PRESET_NAMES } from '../../trainer/model/model';
import { RECIPE_NAMES } from '../../trainer/sft/recipes';
import { declaredSettings } from '../support/settings';

type Row = { kind: string; flag?: string; grpo?: true; job?: true; setting?: string; default?: unknown };
const rows = Object.entries(SFT_OPTION_TABLE) as [string, Row][];
const grpoRows = GRPO_OPTION_TABLE as Record<string, { kind: string; flag?: string; shared?: true }>;

describe('core/protocol/sftOptions: one table for the SFT options', () => {
  it("the train command's options are what they were: the GRPO-only flags, the SFT table's, --threads and --run", () => {
    // Written out as cli/commands.ts spelled them before the table: kinds, bounds, choices, path, required.
    assert.deepStrictEqual(COMMANDS['train']!.options, {
      ...GRPO_OPTIONS,
      from: { kind: 'string', path: true },
      seed: { kind: 'int' },
      preset: { kind: 'string', choices: PRESET_NAMES },
      recipe: { kind: 'string', choices: RECIPE_NAMES },
      backend: { kind: 'string', choices: BACKEND_CHOICES },
      minutes: { kind: 'number', min: 0.05, max: 100000 },
      steps: { kind: 'int', min: 1, max: 100000000 },
      resume: { kind: 'flag' },
      'eval-limit': { kind: 'int', min: 0, max: 100000 },
      'checkpoint-every': { kind: 'int', min: 0, max: 100000 },
      threads: { kind: 'int', min: 1, max: 64 },
      'keep-checkpoints': { kind: 'int', min: 0, max: 100000 },
      world: { kind: 'string', path: true },
      traces: { kind: 'string', path: true },
      base: { kind: 'string', path: true },
      lora: { kind: 'string' },
      run: { kind: 'string', required: true, path: true },
    });
  });

  it("the CLI's SFT flags are the table's, each in the usage of 'train sft'", () => {
    const own = rows.filter(([, r]) => r.flag !== undefined && !r.grpo).map(([, r]) => r.flag);
    assert.deepEqual(Object.keys(SFT_OPTIONS), own);
    const train = COMMANDS['train']!;
    const sftUsage = train.usage.slice(0, train.usage.indexOf('agent-lab train grpo'));
    assert.ok(sftUsage.startsWith('agent-lab train sft'));
    for (const [, r] of rows.filter(([, x]) => x.flag !== undefined)) {
      assert.ok(train.options[r.flag!], `--${r.flag} is an option of 'train'`);
      assert.ok(sftUsage.includes(`--${r.flag}`), `--${r.flag} is in the usage of 'train sft'`);
    }
    assert.ok(
      rows.every(([, r]) => r.kind !== 'fractions' || r.flag === undefined),
      'a list of fractions has no flag',
    );
  });

  it("'train sft''s usage is made from the rows: a row's place and text move its usage, a row without a line is not listed", () => {
    const text = sftUsage();
    assert.equal(text.split('\n')[0], 'agent-lab train sft [--preset P] [--recipe R] [--backend B] [--minutes M | --steps N] [--seed N] [--threads N] [--from SFT_RUN | --base HF_DIR] [--resume] [--eval-limit N]');
    assert.match(text, /\n {6}\[--checkpoint-every SECONDS\] \[--keep-checkpoints K\] --run DIR {6}\(--from: continued SFT/);
    const sftRows = Object.entries(SFT_OPTION_TABLE) as [string, UsageRow][];
    const moved = sftRows.map(([k, r]): [string, UsageRow] => (k === 'preset' ? [k, { ...r, usageOrder: 20, metavar: 'NAME' }] : [k, r]));
    assert.match(usageFromRows('agent-lab train sft', moved, '--run DIR').split('\n')[0]!, /\[--eval-limit N\] \[--preset NAME\]$/);
    const unlisted = sftRows.map(([k, r]): [string, UsageRow] => (k === 'resume' ? [k, { ...r, usageLine: undefined }] : [k, r]));
    assert.doesNotMatch(usageFromRows('agent-lab train sft', unlisted, '--run DIR'), /--resume/);
    assert.throws(() => usageFromRows('x', [['a', { kind: 'int', flag: 'a', usageLine: 1 }]], ''), /option --a: its row names no metavar/);
  });

  it('a flag both trainings take has one home: shared in the GRPO table where its spec is here, here marked grpo where it is there', () => {
    for (const [key, r] of rows.filter(([, x]) => x.flag !== undefined)) {
      const g = grpoRows[key];
      if (r.grpo) {
        assert.ok(g && !g.shared, `${key}: the GRPO table gives its spec`);
        assert.equal(g.flag, r.flag, `${key}'s flag`);
        assert.equal(g.kind, r.kind, `${key}'s kind`);
      } else if (g) {
        assert.ok(g.shared, `${key}: the GRPO table marks it shared`);
        assert.equal(g.flag, r.flag, `${key}'s flag`);
        assert.equal(g.kind, r.kind, `${key}'s kind`);
      }
    }
    for (const [key, g] of Object.entries(grpoRows).filter(([, x]) => x.shared)) {
      const r = (SFT_OPTION_TABLE as Record<string, Row>)[key];
      assert.ok(r && !r.grpo && r.flag === g.flag, `--${g.flag}, shared by the GRPO table, has its spec here`);
    }
  });

  it('every setting the table names is declared in package.json with the type of its row, and its default where the row has one', () => {
    const props = declaredSettings();
    const withSetting = rows.filter(([, r]) => r.setting !== undefined);
    assert.ok(withSetting.length >= 5, 'preset, backend, steps, minutes and the held-out tasks come from settings');
    for (const [key, r] of withSetting) {
      const p = props[`agentLab.${r.setting}`];
      assert.ok(p, `agentLab.${r.setting} (${key}) is declared`);
      assert.equal(p.type, r.kind === 'int' ? 'integer' : r.kind, `agentLab.${r.setting}'s type`);
      assert.ok(r.job, `${key}: a setting reaches the worker through the job spec`);
      if (r.default !== undefined) assert.deepEqual(p.default, r.default, `agentLab.${r.setting}'s default`);
    }
  });

  it("the defaults are the run's, and a default choice is one of its list", () => {
    assert.deepEqual(SFT_OPTION_DEFAULTS, { preset: 'tiny', backend: 'auto', seed: 0, evalPoints: [0.5, 1] });
    assert.ok(PRESET_NAMES.includes(SFT_OPTION_DEFAULTS.preset as (typeof PRESET_NAMES)[number]));
    assert.ok(BACKEND_CHOICES.includes(SFT_OPTION_DEFAULTS.backend as (typeof BACKEND_CHOICES)[number]));
  });

  it('parsed flags become the trainer options the rows name; flags not given stay out', () => {
    assert.deepEqual(
      sftOptionsFromFlags({ preset: 'small', 'eval-limit': 0, 'checkpoint-every': 30, from: '/s', seed: 3, resume: true, run: 'r', threads: 2 }),
      {
        preset: 'small',
        resume: true,
        evalLimit: 0,
        from: '/s',
        seed: 3,
        checkpointEverySeconds: 30,
      },
    );
    assert.deepEqual(sftOptionsFromFlags({ 'keep-checkpoints': 2, world: 'w', traces: 't', base: 'b', lora: '8,16' }), {
      world: 'w',
      traces: 't',
      base: 'b',
      lora: '8,16',
      keepCheckpoints: 2,
    });
    assert.deepEqual(sftOptionsFromFlags({}), {});
  });

  it("a job spec's SFT fields reach the trainer, its others do not", () => {
    const spec = { kind: 'sft', runDir: '/r', preset: 'tiny', steps: 2, resume: false, evalLimit: 0, from: '/s', seed: 9, evalPoints: [1] };
    assert.deepEqual(sftOptionsFromJob(spec), { preset: 'tiny', steps: 2, resume: false, evalLimit: 0, from: '/s' });
    assert.deepEqual(sftOptionsFromJob({}), {});
  });

  it("the worker's validator checks every job option of the table by its kind, naming it", () => {
    const base = { kind: 'sft', runDir: '/r' };
    const jobRows = rows.filter(([, r]) => r.job);
    assert.deepEqual(
      jobRows.map(([k]) => k),
      ['preset', 'recipe', 'backend', 'steps', 'minutes', 'resume', 'evalLimit', 'world', 'traces', 'base', 'lora', 'from'],
    );
    for (const [key, r] of jobRows) {
      const bad = r.kind === 'string' ? 3 : r.kind === 'flag' ? 'yes' : -1;
      assert.match(checkJobSpec({ ...base, [key]: bad }) ?? '', new RegExp(`^job\\.${key} must be`), key);
      const good = r.kind === 'string' ? 'x' : r.kind === 'flag' ? true : 1;
      // LoRA trains adapters on a base model: a spec with lora names one.
      assert.equal(checkJobSpec({ ...base, ...(key === 'lora' ? { base: '/hf' } : {}), [key]: good }), null, key);
    }
    assert.match(checkJobSpec({ ...base, resume: 'yes' }) ?? '', /^job\.resume must be a boolean$/);
  });

  describe("a resumed run's config.json, checked by the rows that say where it is kept", () => {
    const good = { preset: 'tiny', recipe: { name: 'default', curriculum: [{ until: 1 }] }, seed: 3, budget: { steps: 40 }, backend: { asked: 'auto', used: 'wasm' }, evalLimit: 5 };

    it('the rows marked config are the options a run records: preset, seed and the held-out limit at the top, steps and minutes in the budget', () => {
      const marked = rows.filter(([, r]) => (r as { config?: string }).config !== undefined).map(([k, r]) => `${k}:${(r as { config?: string }).config}`);
      assert.deepEqual(marked.sort(), ['evalLimit:optional', 'minutes:budget', 'preset:required', 'seed:optional', 'steps:budget']);
    });

    it("a run's own config passes, a job's small minutes budget too; optional records may be absent", () => {
      assert.equal(sftConfigProblem(good), null);
      assert.equal(sftConfigProblem({ ...good, budget: { minutes: 0.02 } }), null, 'a job may ask for fewer minutes than the CLI bound');
      assert.equal(sftConfigProblem({ ...good, budget: { steps: 4, minutes: 1 } }), null);
      const { seed: _s, evalLimit: _e, budget: _b, ...bare } = good;
      assert.equal(sftConfigProblem(bare), null);
      assert.doesNotThrow(() => checkSftConfig({ ...good }, 'config.json'));
    });

    it('each bad record is named, with what it must be', () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ preset: 7 }, '"preset" must be a preset name'],
        [{ preset: undefined }, '"preset" must be a preset name'],
        [{ seed: 1.5 }, '"seed" must be an integer'],
        [{ evalLimit: -1 }, '"evalLimit" must be a non-negative integer'],
        [{ evalLimit: '5' }, '"evalLimit" must be a non-negative integer'],
        [{ budget: 5 }, '"budget" must be {"steps": N} or {"minutes": M}'],
        [{ budget: {} }, '"budget" must be {"steps": N} or {"minutes": M} with N, M > 0'],
        [{ budget: { steps: 0 } }, '"budget" must be {"steps": N} or {"minutes": M} with N, M > 0'],
        [{ budget: { steps: 2.5 } }, '"budget" must be {"steps": N} or {"minutes": M} with N, M > 0'],
        [{ budget: { minutes: -1 } }, '"budget" must be {"steps": N} or {"minutes": M} with N, M > 0'],
      ];
      for (const [change, message] of cases) {
        assert.equal(sftConfigProblem({ ...good, ...change }), message, JSON.stringify(change));
        assert.throws(() => checkSftConfig({ ...good, ...change }, '/r/config.json'), (err: Error) => err.message === `/r/config.json: ${message}`);
      }
    });

    it('the composite records without a row keep their own checks', () => {
      assert.throws(() => checkSftConfig({ ...good, recipe: { name: 'x', curriculum: [] } }, 'c.json'), /"recipe" must be a recipe object/);
      assert.throws(() => checkSftConfig({ ...good, backend: 'wasm' }, 'c.json'), /"backend" must be \{"asked"/);
    });
  });
});
