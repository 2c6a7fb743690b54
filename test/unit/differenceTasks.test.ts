// The no-teacher family (issue 28): "By how much is the <attr> of A larger than the <attr> of
// B?". Its gold is recomputed here from the worlds' own passages (not from the generator's
// table or its calculator call); the evaluation split fresh-differences and RL's pool of that
// name never share a world seed, a task or an overlap key (asserted in code, checked here);
// the stub teacher refuses to demonstrate one; eval of the split reports by_kind.difference.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { NoTeacherError, differenceTask, splitPairs } from '../../core/differenceTasks';
import { ToolEnv, distill, rollout, type Teacher } from '../../core/distill';
import { overlapKey } from '../../core/overlap';
import { makeStubTeacher } from '../../core/stubTeacher';
import { encodeWithMask } from '../../core/sftFormat';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import type { Passage, Task } from '../../core/types';
import { TASK_FACTS, taskToRow } from '../../core/world';
import { rowToTask } from '../../core/worldRows';
import { loadWorldTasks } from '../../trainer/run/jobEval';
import { distillAsync } from '../../core/distillAsync';
import { parseFactTable } from '../../core/worldSource';
import {
  FRESH_SPLITS,
  RL_POOL_PER_SHAPE,
  RL_POOL_WORLDS,
  ReservedWorldError,
  TRAINING_SEEDS,
  type WorldTask,
  assertPoolApart,
  buildWorld,
  freshDifferencePool,
  freshSplitTasks,
  reservedWorlds,
  worldEnv,
  worldName,
} from '../../core/worlds';
import { AgentRuntime } from '../../trainer/agent/agentRuntime';
import { evaluateTasks } from '../../trainer/agent/eval';
import { teacherEpisode } from '../../trainer/grpo/guide';
import { rlTaskPool, worldRlTaskPool } from '../../trainer/grpo/grpo';
import { freshWorldDifferenceTasks, freshWorldTasks, readWorldFolder } from '../../store/worldFolder';
import { capture } from '../support/capture';
import { replayPolicy } from '../support/scriptedPolicy';

const repoRoot = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');

/** A fact's value as the corpus states it ("the {attribute} of {entity} is {value}"), read from the passages alone. */
function stated(corpus: readonly Passage[], entity: string, attribute: string): string {
  const clause = `the ${attribute} of ${entity} is `;
  for (const p of corpus) {
    const at = p.text.indexOf(clause);
    if (at >= 0) return /^[^.,;]+/.exec(p.text.slice(at + clause.length))![0].trim();
  }
  throw new Error(`no passage states "${clause}..."`);
}

/**
 * The gold recomputed independently: A's and B's values read from the corpus, subtracted as
 * integers (exactly), printed as the seed's calculator prints an integer.
 */
function checkAgainstCorpus(task: Task, corpus: readonly Passage[]): void {
  assert.equal(task.kind, 'difference');
  assert.equal(task.hints.op, 'difference');
  const [[a, attr], [b, attrB]] = task.hints.facts as [[string, string], [string, string]];
  assert.equal(attr, attrB, 'one attribute of two entities');
  assert.notEqual(a, b);
  assert.deepEqual(task.hints.names, [a, b]);
  assert.deepEqual(task.hints.queries, [`${a} ${attr}`, `${b} ${attr}`]);
  assert.equal(task.question, `By how much is the ${attr} of ${a} larger than the ${attr} of ${b}? Use the corpus.`);
  const va = BigInt(stated(corpus, a, attr));
  const vb = BigInt(stated(corpus, b, attr));
  assert.ok(va > vb, `A's value is the larger: ${task.question} (${va} vs ${vb})`);
  assert.equal(task.gold, String(va - vb), task.question);
}

describe('the difference family (issue 28)', () => {
  it("a task's gold is the calculator's print of A's value minus B's, A the larger; no task for equal values or one entity", () => {
    const t = differenceTask(['Adam', 'publication year', '2014'], ['DPO', 'publication year', '2023'])!;
    assert.equal(t.question, 'By how much is the publication year of DPO larger than the publication year of Adam? Use the corpus.');
    assert.equal(t.gold, '9');
    assert.deepEqual(t.hints, { queries: ['DPO publication year', 'Adam publication year'], facts: [['DPO', 'publication year'], ['Adam', 'publication year']], op: 'difference', names: ['DPO', 'Adam'] });
    // Integers stay integers, exactly, at any size; negatives read as Python reads 5--3.
    assert.equal(differenceTask(['A', 'x', '90071992547409930'], ['B', 'x', '1'])!.gold, '90071992547409929');
    assert.equal(differenceTask(['A', 'x', '-3'], ['B', 'x', '5'])!.gold, '8');
    // Decimals: the seed's calculator prints an integer-valued float as an int (12.5-2.5 prints 10, not 10.0), others as Python's repr.
    assert.equal(differenceTask(['A', 'x', '12.5'], ['B', 'x', '2.5'])!.gold, '10');
    assert.equal(differenceTask(['A', 'x', '7.5'], ['B', 'x', '2.25'])!.gold, '5.25');
    assert.equal(differenceTask(['A', 'x', '0.3'], ['B', 'x', '0.1'])!.gold, '0.19999999999999998');
    assert.equal(differenceTask(['A', 'x', '7'], ['B', 'x', '7']), null, 'equal values: no "larger"');
    assert.equal(differenceTask(['A', 'x', '7'], ['A', 'x', '9']), null, 'one entity');
    assert.equal(differenceTask(['A', 'x', 'H'], ['B', 'x', '9']), null, 'a text value');
    assert.throws(() => differenceTask(['A', 'x', '7'], ['B', 'y', '9']), /one attribute/);
  });

  it('the textbook split fresh-differences: 500 tasks over fresh-values\' reserved worlds, deterministic, gold recomputed from each world\'s corpus', () => {
    const split = freshSplitTasks('fresh-differences');
    assert.equal(split.length, 500);
    assert.deepEqual(freshSplitTasks('fresh-differences'), split, 'deterministic');
    assert.deepEqual(FRESH_SPLITS['fresh-differences'].seeds, FRESH_SPLITS['fresh-values'].seeds);
    const seeds = new Set(FRESH_SPLITS['fresh-values'].seeds);
    for (const { task, world } of split) {
      assert.equal(world.kind, 'values');
      assert.ok(seeds.has(world.seed));
      checkAgainstCorpus(task, buildWorld(world).corpus);
    }
    // Distinct questions within each world, and the same pair asked in several worlds (with other values).
    for (const seed of seeds) {
      const qs = split.filter((x) => x.world.seed === seed).map((x) => x.task.question);
      assert.equal(new Set(qs).size, qs.length);
    }
    assert.ok(new Set(split.map((x) => x.task.gold)).size > 20, 'the answers vary');
  });

  it("RL's pool fresh-differences: the RL value worlds, and never a world seed, task or overlap key of any evaluation split", () => {
    const pool = rlTaskPool('fresh-differences', '/nonexistent/train.tasks.jsonl', []);
    assert.deepEqual(pool, freshDifferencePool());
    assert.equal(pool.length, RL_POOL_WORLDS * RL_POOL_PER_SHAPE);
    const reserved = reservedWorlds();
    const rlSeeds = new Set(Array.from({ length: RL_POOL_WORLDS }, (_, i) => TRAINING_SEEDS.rlValues + i));
    for (const { task, world } of pool) {
      assert.equal(world.kind, 'values');
      assert.ok(rlSeeds.has(world.seed), worldName(world));
      assert.ok(!reserved.has(worldName(world)), worldName(world));
      checkAgainstCorpus(task, buildWorld(world).corpus);
    }
    // Against every evaluation split: no world, question or (kind, facts) key in common.
    const evaluation: WorldTask[] = (['dev', 'fresh-values', 'fresh-entities', 'fresh-differences'] as const).flatMap((s) => freshSplitTasks(s));
    const evalWorlds = new Set(evaluation.map((e) => worldName(e.world)));
    const evalQuestions = new Set(evaluation.map((e) => e.task.question));
    const evalKeys = new Set(evaluation.map((e) => overlapKey(e.task)));
    for (const { task, world } of pool) {
      assert.ok(!evalWorlds.has(worldName(world)));
      assert.ok(!evalQuestions.has(task.question), task.question);
      assert.ok(!evalKeys.has(overlapKey(task)), task.question);
    }
    // The split's and the pool's pairs partition the table's pairs (16 papers' years: 120).
    const { evaluation: e, training: t } = splitPairs(TASK_FACTS);
    assert.equal(e.size + t.size, 120);
    assert.ok([...t].every((k) => !e.has(k)));
  });

  it('the assertion names the colliding item: a shared world seed, task or overlap key is an error', () => {
    const evaluation = freshSplitTasks('fresh-differences').map(({ task, world }) => ({ task, seed: world.seed }));
    const pool = freshDifferencePool().map(({ task, world }) => ({ task, seed: world.seed }));
    assert.doesNotThrow(() => assertPoolApart(pool, evaluation, 'test pool'));
    const e0 = evaluation[0]!;
    assert.throws(() => assertPoolApart([...pool, { task: pool[0]!.task, seed: e0.seed }], evaluation, 'test pool'), (err: Error) => err instanceof ReservedWorldError && err.message.includes(`world seed ${e0.seed}`) && err.message.startsWith('test pool:'));
    assert.throws(() => assertPoolApart([...pool, { task: e0.task, seed: 5 }], evaluation, 'test pool'), (err: Error) => err instanceof ReservedWorldError && err.message.includes(JSON.stringify(e0.task.question)));
    // The same facts asked the other way round (the key is unordered): named with the evaluation task it shares.
    const [[a, attr], [b]] = e0.task.hints.facts as [[string, string], [string, string]];
    const swapped: Task = { ...e0.task, question: `other wording ${b} ${a}`, hints: { ...e0.task.hints, facts: [[b, attr], [a, attr]] } };
    assert.throws(() => assertPoolApart([{ task: swapped, seed: 5 }], evaluation, 'test pool'), (err: Error) => err instanceof ReservedWorldError && err.message.includes(JSON.stringify(e0.task.question)) && err.message.includes('other wording'));
  });

  it('the stub teacher never demonstrates one: the teacher and distill, sync and async (every SFT data and augmentation path), refuse it; a grader\'s reference may follow it; guidance is off', async () => {
    const world = FRESH_SPLITS['fresh-differences'].seeds[0]!;
    const task = freshSplitTasks('fresh-differences')[0]!.task;
    const env = worldEnv({ kind: 'values', seed: world });
    assert.throws(() => makeStubTeacher([task]), (err: Error) => err instanceof NoTeacherError && /stub teacher: .*is a difference task, a family the stub teacher never demonstrates/.test(err.message));
    // Whatever the teacher: distilling a difference task is an error naming it (a teacher that would answer it right is refused too).
    const oracle: Teacher = () => `Thought: x\nAnswer: ${task.gold}`;
    assert.throws(() => distill([task], oracle, env, 1), (err: Error) => err instanceof NoTeacherError && err.message.includes(JSON.stringify(task.question)) && err.message.startsWith('distill:'));
    // The asynchronous road (an HTTP teacher, agent-lab distill) too, before any request.
    let asked = 0;
    await assert.rejects(
      distillAsync([task], async () => (asked++, `Thought: x\nAnswer: ${task.gold}`), env, { samplesPerTask: 1 }),
      (err: Error) => err instanceof NoTeacherError && err.message.startsWith('distill:'),
    );
    assert.equal(asked, 0);
    // A mixed list (as an augmentation world's would be) is refused too, naming the difference task.
    const values = buildWorld({ kind: 'values', seed: TRAINING_SEEDS.augment });
    assert.throws(() => makeStubTeacher([...values.train.slice(0, 5), task]), NoTeacherError);
    assert.throws(() => distill([...values.train.slice(0, 5), task], makeStubTeacher(values.train.slice(0, 5)), worldEnv(values.id), 1), NoTeacherError);
    // A grader's reference (eval's failure labels) follows the key: two searches, one calc, the calculator's answer.
    const ref = rollout(task, makeStubTeacher([task], { reference: true }), env);
    assert.ok(ref.solved, ref.transcript);
    assert.match(ref.transcript, /"calc", "args": \{"expr": "\d+-\d+"\}/);
    assert.equal(teacherEpisode(task, { kind: 'values', seed: world }, trainDefaultTokenizer(), {}, 4096, 6), null);
  });

  it('task rows read back: a difference task through data/train.tasks.jsonl (with its world) and a world file row', () => {
    const { task, world } = freshDifferencePool()[0]!;
    const row = { ...taskToRow(task), world: worldName(world) };
    assert.deepEqual(rowToTask(JSON.parse(JSON.stringify(row)), 'row'), task);
    const tmpFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-diff-rows-')), 'train.tasks.jsonl');
    try {
      fs.writeFileSync(tmpFile, `${JSON.stringify(row)}\n`);
      assert.deepEqual(loadWorldTasks(tmpFile, new Map()), [{ task, world }]);
    } finally {
      fs.rmSync(path.dirname(tmpFile), { recursive: true, force: true });
    }
    assert.throws(() => rowToTask({ ...row, hints: { ...row.hints, op: 'divide' } }, 'row'), /"hints\.op" must be null, double, sum, compare or difference/);
    assert.throws(() => rowToTask({ ...row, kind: 'divide' }, 'row'), /"kind" must be one of lookup, double, sum, compare, difference/);
  });

  it("a world's shapes stay the four: --shapes difference and a settings row with it are refused", async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-diff-shapes-'));
    try {
      const r = await capture(() => main(['world', '--facts', ELEMENTS, '--shapes', 'lookup,difference', '--out', path.join(out, 'w')]));
      assert.equal(r.code, 2);
      assert.match(r.stderr, /--shapes: 'difference' is a family no teacher demonstrates/);
      assert.ok(!fs.existsSync(path.join(out, 'w')), 'nothing written');
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
    assert.throws(() => parseFactTable('{"settings": {"shapes": ["difference"]}}\n{"entity": "A", "attribute": "x", "value": 1}\n', 'f.jsonl'), /f\.jsonl:1: field "settings\.shapes": must be a non-empty list of lookup, double, sum, compare/);
  });
});

describe("fresh-differences of a user's fact world (samples/worlds/elements)", function () {
  this.timeout(300_000);
  let tmp: string;
  let dir: string;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-diff-world-'));
    dir = path.join(tmp, 'elements');
    const r = await capture(() => main(['world', '--facts', ELEMENTS, '--out', dir]));
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("the split: fresh-values' derived worlds asked the family, about 500, deterministic, gold recomputed from each derived corpus", () => {
    const w = readWorldFolder(dir);
    const { tasks, spec } = freshWorldTasks(w, 'fresh-differences');
    assert.deepEqual(spec.seeds, w.manifest!.fresh!['fresh-values'].seeds);
    assert.equal(tasks.length, 500);
    assert.deepEqual(freshWorldDifferenceTasks(w).tasks.map((t) => t.task), tasks.map((t) => t.task), 'deterministic');
    const parent = new Map(w.facts!.map((f) => [`${f[0]}\u0000${f[1]}`, f[2]] as const));
    let memorisable = 0;
    for (const { task, world } of tasks) {
      assert.equal(world.kind, 'custom');
      checkAgainstCorpus(task, buildWorld(world).corpus);
      // Values resampled: the parent's difference is mostly not the answer.
      const [[a, attr], [b]] = task.hints.facts as [[string, string], [string, string]];
      if (String(BigInt(parent.get(`${a}\u0000${attr}`)!) - BigInt(parent.get(`${b}\u0000${attr}`)!)) === task.gold) memorisable++;
    }
    assert.ok(memorisable < tasks.length / 4, `${memorisable} of ${tasks.length} answers equal the parent table's`);
    assert.ok(new Set(tasks.map((t) => t.task.hints.facts[0]![1])).size >= 3, 'more than one attribute is asked');
  });

  it("the RL pool: the RL value worlds' derived tables, apart from the split (no task or overlap key shared), and the per-task gold recomputed", () => {
    const w = readWorldFolder(dir);
    const pool = worldRlTaskPool(w, 'fresh-differences');
    assert.equal(pool.length, RL_POOL_WORLDS * RL_POOL_PER_SHAPE);
    const split = freshWorldDifferenceTasks(w).tasks;
    const keys = new Set(split.map((t) => overlapKey(t.task)));
    const evalWorlds = new Set(split.map((t) => worldName(t.world)));
    for (const { task, world } of pool) {
      assert.ok(!keys.has(overlapKey(task)), task.question);
      assert.ok(!evalWorlds.has(worldName(world)));
      checkAgainstCorpus(task, buildWorld(world).corpus);
    }
  });

  it('a scripted student that reads and subtracts solves the split: the summary reports by_kind.difference', async () => {
    const w = readWorldFolder(dir);
    const tasks = freshWorldDifferenceTasks(w).tasks.slice(0, 6);
    const tok = trainDefaultTokenizer();
    for (const { task, world } of tasks) {
      const env = worldEnv(world);
      const script = encodeWithMask(rollout(task, makeStubTeacher([task], { reference: true }), env).transcript, tok).ids;
      const { rows, summary } = await evaluateTasks(new AgentRuntime(replayPolicy(tok.vocabSize, script), tok, env, null), [task], env, { split: 'fresh-differences', world });
      assert.deepEqual(summary.by_kind, { difference: { n: 1, accuracy: 1 } });
      assert.equal(rows[0]!.failure, null);
    }
  });
});

describe('agent-lab eval --split fresh-differences on a tiny trained student', function () {
  this.timeout(600_000);
  let tmp: string;
  let run: string;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-diff-eval-'));
    run = path.join(tmp, 'run');
    const t = await capture(() => main(['train', 'sft', '--steps', '2', '--eval-limit', '0', '--run', run]));
    assert.equal(t.code, 0, t.stderr);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes a summary with by_kind.difference, the fresh-values worlds and the split size', async () => {
    const e = await capture(() => main(['eval', '--run', run, '--split', 'fresh-differences', '--limit', '4', '--json']));
    assert.equal(e.code, 0, e.stderr);
    const printed = JSON.parse(e.stdout.trim().split('\n').pop()!) as { n: number; by_kind: Record<string, { n: number }>; of: number };
    assert.equal(printed.n, 4);
    assert.equal(printed.of, 500);
    assert.deepEqual(Object.keys(printed.by_kind), ['difference']);
    assert.equal(printed.by_kind['difference']!.n, 4);
    const summary = JSON.parse(fs.readFileSync(path.join(run, 'eval', 'fresh-differences.json'), 'utf8'));
    assert.equal(summary.split, 'fresh-differences');
    assert.deepEqual(summary.worlds, { kind: 'values', seeds: FRESH_SPLITS['fresh-values'].seeds, tasks: 500 });
    assert.equal(summary.contaminated, 0);
    const rows = fs.readFileSync(path.join(run, 'eval', 'fresh-differences.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(rows.map((r) => r.question), freshSplitTasks('fresh-differences').slice(0, 4).map((x) => x.task.question));
    assert.ok(rows.every((r) => r.kind === 'difference' && /^values:100000\d+$/.test(r.world)));
  });

  it('train grpo --pool fresh-differences draws the pool (one step, a wiring check, not a measurement)', async () => {
    const g = path.join(tmp, 'grpo');
    const r = await capture(() =>
      main(['train', 'grpo', '--from', run, '--pool', 'fresh-differences', '--steps', '1', '--group', '2', '--tasks', '2', '--dynamic-sampling', 'off', '--prescreen', '0', '--eval-limit', '0', '--eval-every', '0', '--run', g]),
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /500 RL tasks \(pool fresh-differences\)/);
    const config = JSON.parse(fs.readFileSync(path.join(g, 'config.json'), 'utf8'));
    assert.equal(config.grpo.pool, 'fresh-differences');
    assert.deepEqual(config.data.taskCounts, { difference: 500 });
    assert.equal(config.data.rlWorlds, RL_POOL_WORLDS);
  });

  it("failure labels: memorised (the seed world's difference where the fresh world's differs), calc (subtracted the wrong way round)", async () => {
    const seedValues = new Map(TASK_FACTS.map((f) => [`${f[0]}\u0000${f[1]}`, f[2]] as const));
    const seedDifference = (t: Task): string => {
      const [[a, attr], [b]] = t.hints.facts as [[string, string], [string, string]];
      return String(BigInt(seedValues.get(`${a}\u0000${attr}`)!) - BigInt(seedValues.get(`${b}\u0000${attr}`)!));
    };
    const { task, world } = freshSplitTasks('fresh-differences').find(({ task }) => seedDifference(task) !== task.gold)!;
    const remembered = seedDifference(task);
    const tok = trainDefaultTokenizer();
    const env: ToolEnv = worldEnv(world);
    const reference = rollout(task, makeStubTeacher([task], { reference: true }), env).transcript;
    const wrong = reference.replace(/Answer: .*<\|end\|>$/, `Answer: ${remembered}<|end|>`);
    assert.notEqual(wrong, reference);
    const { rows, summary } = await evaluateTasks(new AgentRuntime(replayPolicy(tok.vocabSize, encodeWithMask(wrong, tok).ids), tok, env, null), [task], env, { split: 'fresh-differences', world });
    assert.equal(rows[0]!.failure, 'memorised');
    assert.deepEqual(summary.by_kind, { difference: { n: 1, accuracy: 0 } });
    // A student that subtracts the wrong way round departs at its calc: labelled `calc` against the grader's reference.
    const reversed: Teacher = (prompt) => makeStubTeacher([task], { reference: true })(prompt).replace(/"expr": "(\d+)-(\d+)"/, '"expr": "$2-$1"');
    const backwards = rollout(task, reversed, env);
    assert.match(backwards.answer!, /^-\d+$/);
    const r2 = await evaluateTasks(new AgentRuntime(replayPolicy(tok.vocabSize, encodeWithMask(backwards.transcript, tok).ids), tok, env, null), [task], env, { split: 'fresh-differences', world });
    assert.equal(r2.rows[0]!.failure, 'calc');
  });
});
