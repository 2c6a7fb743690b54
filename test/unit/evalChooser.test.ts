// Evaluate's one chooser (issue 35): one list instead of three questions (run, split, world):
// each run (newest first) with its own world's held-out split first (Enter evaluates it),
// another world's held-out only when agentLab.world names another world, the fresh splits
// only for worlds that have them, and each split's task count (the limit said).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type EvalChoice, evaluateChoices, isRunsOwnWorld, runWorldFacts } from '../../extension/evalChooser';
import { readRun } from '../../extension/runFolders';

describe("Evaluate's one chooser (issue 35)", () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-chooser-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const run = (name: string, world: { dir: string; heldout: number; dev: number; fresh: boolean } | null) => {
    const dir = path.join(tmp, 'runs', name);
    fs.mkdirSync(path.join(dir, 'checkpoints', 'step-10'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ kind: 'sft', ...(world ? { world: { dir: world.dir } } : {}) }));
    if (world) {
      fs.mkdirSync(path.join(dir, 'world'));
      fs.writeFileSync(
        path.join(dir, 'world', 'world.json'),
        JSON.stringify({ format: 'agent-lab-world/1', name: path.basename(world.dir), made: { split: { train: 100, heldout: world.heldout, dev: world.dev } }, ...(world.fresh ? { fresh: {} } : {}) }),
      );
    }
    return readRun(dir);
  };
  const choices = (rows: ReturnType<typeof evaluateChoices>) => rows.filter((r): r is EvalChoice => !('separator' in r));

  it("the newest run's held-out split of its own world comes first, named with its task count", () => {
    const rivers = path.join(tmp, 'runs', 'world-rivers');
    const newest = run('sft-2', { dir: rivers, heldout: 55, dev: 12, fresh: true });
    const older = run('sft-1', null);
    const rows = evaluateChoices([newest, older], null);
    assert.deepEqual(rows[0], { separator: 'sft-2 · sft · step 0' });
    const c = choices(rows);
    assert.deepEqual(c[0], { label: 'sft-2: held-out', description: 'its 55 tasks of world-rivers (the figure every run reports)', runDir: newest.dir, split: 'heldout' });
    assert.deepEqual(c.filter((x) => x.runDir === newest.dir).map((x) => x.split), ['heldout', 'fresh-values', 'fresh-entities', 'fresh-differences', 'dev', 'dev-entities', 'train']);
    // The textbook run: its 50 held-out tasks, fresh worlds for dev.
    const t = c.filter((x) => x.runDir === older.dir);
    assert.equal(t[0]!.description, 'its 50 tasks of the textbook world (the figure every run reports)');
    assert.deepEqual(t.map((x) => x.split), ['heldout', 'fresh-values', 'fresh-entities', 'fresh-differences', 'dev', 'dev-entities', 'train']);
    assert.deepEqual(runWorldFacts(older.dir), { name: 'the textbook world', heldout: 50, dev: 0, train: 200, fresh: true });
  });

  it('another world only when agentLab.world names one the run was not made from; a documents world has no fresh splits; the limit is said', () => {
    const notes = path.join(tmp, 'runs', 'world-notes');
    const r = run('sft-docs', { dir: notes, heldout: 4, dev: 0, fresh: false });
    assert.deepEqual(choices(evaluateChoices([r], null)).map((x) => x.split), ['heldout', 'train']);
    assert.ok(!choices(evaluateChoices([r], { dir: notes, name: 'world-notes' })).some((x) => x.world !== undefined), 'its own world is no other world');
    const other = choices(evaluateChoices([r], { dir: path.join(tmp, 'runs', 'world-rivers'), name: 'world-rivers' }));
    assert.deepEqual(other[1], { label: 'sft-docs: held-out of world-rivers', description: 'another world (agentLab.world): the student on tasks it never saw', runDir: r.dir, split: 'heldout', world: path.join(tmp, 'runs', 'world-rivers') });
    const big = run('sft-big', { dir: path.join(tmp, 'big'), heldout: 400, dev: 0, fresh: true });
    assert.match(choices(evaluateChoices([big], null, 100))[0]!.description, /^100 of its 400 tasks of big \(the figure every run reports\), the question shapes in turn$/);
  });
  it("the run's own world is never offered as another: a GRPO run records its SFT run's copy, a world built again lies elsewhere", () => {
    const source = (sha: string) => ({ files: [{ path: '/w/facts.csv', sha256: sha }] });
    const built = path.join(tmp, 'runs', 'world-rivers');
    fs.mkdirSync(built, { recursive: true });
    fs.writeFileSync(path.join(built, 'world.json'), JSON.stringify({ name: 'world-rivers', source: source('aa') }));
    // The tour's case: agentLab.world names the rivers world; the GRPO run's config names sft-1/world.
    const grpo = path.join(tmp, 'runs', 'grpo-1');
    fs.mkdirSync(path.join(grpo, 'checkpoints', 'step-5'), { recursive: true });
    fs.writeFileSync(path.join(grpo, 'config.json'), JSON.stringify({ kind: 'grpo', world: { dir: path.join(tmp, 'runs', 'sft-1', 'world'), source: source('aa') } }));
    assert.equal(isRunsOwnWorld(grpo, built), true);
    assert.ok(!choices(evaluateChoices([readRun(grpo)], { dir: built, name: 'world-rivers' })).some((x) => x.world !== undefined), 'offered once, as its own');
    // Another table (other digests) is another world; a run with no record of its world is offered it.
    fs.writeFileSync(path.join(built, 'world.json'), JSON.stringify({ name: 'world-rivers', source: source('bb') }));
    assert.equal(isRunsOwnWorld(grpo, built), false);
    const textbook = run('sft-t', null);
    assert.equal(isRunsOwnWorld(textbook.dir, built), false);
  });
});
