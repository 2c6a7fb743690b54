// Worlds from a fact table: the seed's table through the generalised builder is the seed's
// world byte for byte; a counterfactual world's gold answers agree with an independent
// reading of its own corpus; the evaluation splits' world seeds are reserved.
import * as assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { overlapKey } from '../../core/overlap';
import { TASK_FACTS, buildCorpus, makeTaskPool } from '../../core/world';
import {
  FRESH_SPLITS,
  ReservedWorldError,
  SEED_WORLD,
  TRAINING_SEEDS,
  assertNotReserved,
  buildWorld,
  freshSplitTasks,
  freshTrainingTasks,
  loadedWorldId,
  loadedWorlds,
  namesTrainingMustNotSee,
  parseWorldName,
  RL_POOL_WORLDS,
  reservedWorlds,
  seedGoldOf,
  worldFacts,
  worldName,
  worldTemplates,
} from '../../core/worlds';
import { classifyFailure } from '../../trainer/agent/eval';
import { prepareRunData } from '../../trainer/sft/prepare';
import type { Episode } from '../../trainer/agent/agentRuntime';
import { ToolEnv, rollout } from '../../core/distill';
import { makeStubTeacher } from '../../core/stubTeacher';
import { annotateSpans } from '../../core/spans';
import { worldEnv } from '../../core/worlds';

describe('worlds from a fact table', () => {
  it('the seed table given as data builds the seed world byte for byte', () => {
    assert.deepEqual(buildCorpus(0, 120, [...TASK_FACTS]), buildCorpus(0, 120));
    assert.deepEqual(makeTaskPool(0, 200, 50, [...TASK_FACTS]), makeTaskPool(0));
    const golden = JSON.parse(readFileSync(path.join(__dirname, '..', 'golden', 'world_seed0.json'), 'utf8')) as {
      corpus: { doc_id: string; text: string }[];
    };
    const seed = buildWorld({ kind: 'seed', seed: 0 });
    assert.deepEqual(
      seed.corpus.map((p) => ({ doc_id: p.docId, text: p.text })),
      golden.corpus,
    );
  });

  it("a counterfactual world's gold answers are recomputed independently from its own corpus", () => {
    const id = { kind: 'values' as const, seed: 1_000_004 };
    const w = buildWorld(id);
    // Same entities and attributes, every value different from the seed's.
    w.facts.forEach((f, i) => {
      assert.equal(f[0], TASK_FACTS[i]![0]);
      assert.equal(f[1], TASK_FACTS[i]![1]);
      assert.notEqual(f[2], TASK_FACTS[i]![2], `value of ${f[0]} ${f[1]} resampled`);
    });
    // Read each value back from the rendered passages (not from the table), then recompute gold.
    const text = w.corpus.map((p) => p.text).join('\n');
    const valueOf = (e: string, a: string): bigint => {
      const m = new RegExp(`the ${a.replace(/[-]/g, '\\-')} of ${e.replace(/[-]/g, '\\-')} is (\\d+)`).exec(text);
      assert.ok(m, `the corpus states ${a} of ${e}`);
      return BigInt(m[1]!);
    };
    for (const t of [...w.train, ...w.heldout]) {
      const vals = t.hints.facts.map(([e, a]) => valueOf(e, a));
      const gold =
        t.kind === 'lookup'
          ? String(vals[0])
          : t.kind === 'double'
            ? String(vals[0]! * 2n)
            : t.kind === 'sum'
              ? String(vals[0]! + vals[1]!)
              : vals[0]! > vals[1]!
                ? t.hints.facts[0]![0]
                : t.hints.facts[1]![0];
      assert.equal(t.gold, gold, t.question);
    }
  });

  it('new-entity worlds rename every entity and keep the grammar alphabet', () => {
    const facts = worldFacts({ kind: 'entities', seed: 2_000_001 });
    const seedNames = new Set(TASK_FACTS.map((f) => f[0]));
    for (const [e, a] of facts) {
      assert.ok(!seedNames.has(e), `${e} is new`);
      assert.match(`${e} ${a}`, /^[A-Za-z0-9 ._,()-]{1,64}$/);
    }
    assert.equal(new Set(facts.map((f) => f[0])).size, new Set(TASK_FACTS.map((f) => f[0])).size);
  });

  it('the fresh splits hold at least 500 tasks of all four shapes; seedGoldOf finds the seed value', () => {
    for (const name of ['fresh-values', 'fresh-entities'] as const) {
      const tasks = freshSplitTasks(name);
      assert.ok(tasks.length >= 500, `${name}: ${tasks.length}`);
      assert.deepEqual(new Set(tasks.map((t) => t.task.kind)), new Set(['lookup', 'double', 'sum', 'compare']));
    }
    const t = freshSplitTasks('fresh-values').find((x) => x.task.kind === 'lookup')!;
    const [e, a] = t.task.hints.facts[0]!;
    assert.equal(seedGoldOf(t.task), TASK_FACTS.find((f) => f[0] === e && f[1] === a)![2]);
    assert.equal(seedGoldOf(freshSplitTasks('fresh-entities')[0]!.task), null);
  });

  it('reserved seeds: no training pool may use an evaluation world (asserted), and augmentation seeds avoid them', () => {
    const reserved = reservedWorlds();
    // fresh-differences asks in fresh-values' worlds: dev 4, dev-entities 4, fresh-values 10, fresh-entities 10 worlds.
    assert.equal(reserved.size, new Set(Object.values(FRESH_SPLITS).flatMap((s) => s.seeds.map((seed) => `${s.kind}:${seed}`))).size);
    assert.equal(reserved.size, 28);
    for (const s of Object.values(FRESH_SPLITS)) {
      assert.throws(() => assertNotReserved({ kind: s.kind, seed: s.seeds[0]! }, 'augmentation'), ReservedWorldError);
      assert.throws(() => freshTrainingTasks({ kind: s.kind, seed: s.seeds[1]! }, 5, new Set()), /reserved for evaluation/);
    }
    for (let i = 0; i < 1000; i++) {
      assert.ok(!reserved.has(worldName({ kind: 'values', seed: TRAINING_SEEDS.augment + i })));
      assert.ok(!reserved.has(worldName({ kind: 'values', seed: TRAINING_SEEDS.rlValues + i })));
      assert.ok(!reserved.has(worldName({ kind: 'entities', seed: TRAINING_SEEDS.rlEntities + i })));
    }
  });

  it("augmentation: rows carry their world, and no task has a held-out task's (kind, facts) in any world", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-aug-'));
    try {
      const data = prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 2, perShape: 3 } });
      assert.deepEqual(data.augment!.worlds, ['values:1', 'values:2']);
      const rows = readFileSync(path.join(dir, 'data', 'train.traces.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const aug = rows.filter((r) => r.world !== undefined);
      assert.equal(aug.length, data.augment!.rows);
      assert.ok(aug.length >= 2 * 4 * 3 - 4, `${aug.length} augmented rows`);
      assert.deepEqual(Object.keys(aug[0]).slice(0, 3), ['task', 'text', 'kind']);
      const held = new Set(makeTaskPool(0).heldout.map(overlapKey));
      const tasks = readFileSync(path.join(dir, 'data', 'train.tasks.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      for (const t of tasks) assert.ok(!held.has(overlapKey(t)), `not a held-out task in any world: ${t.question}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a user's world is a value passed along, not an id in a registry", () => {
  const rows = () => {
    const w = makeTaskPool(3, 6, 2);
    return { corpus: buildCorpus(3, 12), train: w.train, heldout: w.heldout, dev: [], tools: null };
  };

  it('its id carries its rows and is named by their content: the same rows the same name, other rows another', () => {
    const a = loadedWorldId(rows());
    const b = loadedWorldId(rows());
    assert.equal(worldName(a), worldName(b));
    assert.match(worldName(a), /^custom:\d+$/);
    assert.notEqual(a.rows, b.rows);
    const other = loadedWorldId({ ...rows(), heldout: rows().heldout.slice(1) });
    assert.notEqual(worldName(other), worldName(a));
    assert.deepEqual(buildWorld(a).heldout, a.rows.heldout);
    assert.equal(worldEnv(a).retriever.search('the hidden size', 1).length, 1);
    assert.equal(worldTemplates(a), worldTemplates(SEED_WORLD));
  });

  it("a name resolves to a user's world only where that world was passed; generated worlds need nothing", () => {
    const a = loadedWorldId(rows());
    assert.throws(() => parseWorldName(worldName(a)), new RegExp(`world ${worldName(a)} is a user's world that was not passed along.*no user world is loaded here`));
    const known = loadedWorlds([SEED_WORLD, a, { kind: 'values', seed: 7 }]);
    assert.deepEqual([...known.keys()], [worldName(a)]);
    assert.equal(parseWorldName(worldName(a), known), a);
    assert.deepEqual(parseWorldName('values:7'), { kind: 'values', seed: 7 });
    assert.throws(() => parseWorldName('custom:1', known), /custom:1 .*the loaded ones: custom:\d+/);
  });
});

describe("SFT's new-entity worlds (Augmentation.entityWorlds)", () => {
  const newNames = (seed: number) => {
    const seedNames = new Set(TASK_FACTS.map((f) => f[0]));
    return worldFacts({ kind: 'entities', seed }).map((f) => f[0]).filter((n) => !seedNames.has(n));
  };

  it("draw names apart from the fresh-entities split's and the RL pool's, which stay as they were", () => {
    const evalNames = new Set([...FRESH_SPLITS['fresh-entities'].seeds, ...FRESH_SPLITS['dev-entities'].seeds].flatMap(newNames));
    const rlNames = new Set(Array.from({ length: RL_POOL_WORLDS }, (_, i) => newNames(TRAINING_SEEDS.rlEntities + i)).flat());
    assert.deepEqual(namesTrainingMustNotSee(), new Set([...evalNames, ...rlNames]));
    // The syllables are few: worlds of ordinary seeds do share names with the evaluation's.
    const ordinary = Array.from({ length: 20 }, (_, i) => newNames(5_000_001 + i)).flat();
    assert.ok(ordinary.some((n) => evalNames.has(n)), 'ordinary new-entity worlds reuse evaluation names (what the rule prevents)');
    for (let i = 0; i < 20; i++) {
      const names = newNames(TRAINING_SEEDS.augmentEntities + i);
      assert.equal(new Set(names).size, new Set(TASK_FACTS.map((f) => f[0])).size, 'every entity renamed, no two alike');
      for (const n of names) assert.ok(!evalNames.has(n) && !rlNames.has(n), `entities:${TRAINING_SEEDS.augmentEntities + i} uses ${n}`);
    }
  });

  it("keep the overlap contract under new names: a renamed held-out question is never a training task", () => {
    const world = { kind: 'entities', seed: TRAINING_SEEDS.augmentEntities } as const;
    const facts = worldFacts(world);
    const seedNameOf = new Map(facts.map((f, i) => [f[0], TASK_FACTS[i]![0]] as const));
    const inSeedNames = (t: { kind: string; question: string; hints: { facts: [string, string][] } }) =>
      overlapKey({ ...t, hints: { ...t.hints, facts: t.hints.facts.map(([e, a]) => [seedNameOf.get(e)!, a] as [string, string]) } } as never);
    const held = new Set(makeTaskPool(0).heldout.map(overlapKey));
    const unfiltered = freshTrainingTasks(world, 10_000, new Set());
    assert.ok(unfiltered.some((t) => held.has(inSeedNames(t))), 'some renamed tasks are held-out questions (the filter has work to do)');
    const kept = freshTrainingTasks(world, 10_000, held);
    assert.ok(kept.length > 0);
    for (const t of kept) assert.ok(!held.has(inSeedNames(t)), `renamed held-out task kept: ${t.question}`);
  });

  it('join the fresh draws of a run, each row naming its world', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-aug-names-'));
    try {
      const data = prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 1, perShape: 2, entityWorlds: 2 } });
      assert.deepEqual(data.augment!.worlds, ['values:1', `entities:${TRAINING_SEEDS.augmentEntities}`, `entities:${TRAINING_SEEDS.augmentEntities + 1}`]);
      const rows = readFileSync(path.join(dir, 'data', 'train.traces.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const named = rows.filter((r) => r.world === `entities:${TRAINING_SEEDS.augmentEntities}`);
      assert.ok(named.length > 0);
      const names = newNames(TRAINING_SEEDS.augmentEntities);
      for (const r of named) assert.ok(names.some((n) => r.text.includes(n)), 'a new-entity transcript speaks of its own names');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("RL's fresh-values pool with balanced compares (GRPO balanceCompares)", () => {
  // The winner of a compare recomputed from a table (no task builder): the fact whose value is larger.
  const winnerIn = (facts: readonly (readonly [string, string, string])[], task: { hints: { facts: [string, string][]; names?: string[] } }) => {
    const value = (e: string, a: string) => Number(facts.find((f) => f[0] === e && f[1] === a)![2].replace(/[^\d.-]/g, ''));
    const [[e0, a0], [e1, a1]] = task.hints.facts as [[string, string], [string, string]];
    const [v0, v1] = [value(e0!, a0!), value(e1!, a1!)];
    return v0 === v1 ? null : v0 > v1 ? 0 : 1;
  };
  it('draws as many compares whose winner differs from the seed world\'s as the same, where plain draws keep the seed\'s winner mostly; other shapes unchanged', () => {
    let plainSame = 0;
    let plainAll = 0;
    for (let i = 0; i < 10; i++) {
      const world = { kind: 'values', seed: TRAINING_SEEDS.rlValues + i } as const;
      const facts = worldFacts(world);
      const plain = freshTrainingTasks(world, 10, new Set());
      const balanced = freshTrainingTasks(world, 10, new Set(), { balanceCompares: true });
      assert.deepEqual(
        balanced.filter((t) => t.kind !== 'compare'),
        plain.filter((t) => t.kind !== 'compare'),
      );
      // A tie in the seed's table has no winner to remember: not a flip.
      const flips = (tasks: typeof plain) =>
        tasks.filter((t) => t.kind === 'compare').map((t) => winnerIn(TASK_FACTS, t) !== null && winnerIn(facts, t) !== winnerIn(TASK_FACTS, t));
      const p = flips(plain);
      const b = flips(balanced);
      plainSame += p.filter((f) => !f).length;
      plainAll += p.length;
      assert.equal(b.length, 10);
      assert.equal(b.filter((f) => f).length, 5, `world ${worldName(world)}: five of ten compares flip the seed's winner`);
      for (const t of balanced.filter((x) => x.kind === 'compare')) assert.equal(t.gold, t.hints.names![winnerIn(facts, t)!], t.question);
    }
    assert.ok(plainSame / plainAll > 0.65, `plain draws keep the seed's winner in ${plainSame} of ${plainAll} (the bias the balance removes)`);
  });

  it("SFT's augmentation takes the knob (recipe reader-k1-balanced): each fresh world's compares flip the seed's winner half the time", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-aug-balanced-'));
    try {
      prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 2, perShape: 10, balanceCompares: true } });
      const rows = readFileSync(path.join(dir, 'data', 'train.tasks.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      for (const world of ['values:1', 'values:2']) {
        const facts = worldFacts(parseWorldName(world));
        const compares = rows.filter((r) => r.world === world && r.kind === 'compare');
        assert.equal(compares.length, 10, world);
        const flipped = compares.filter((t) => winnerIn(TASK_FACTS, t) !== null && winnerIn(facts, t) !== winnerIn(TASK_FACTS, t));
        assert.equal(flipped.length, 5, `${world}: ${flipped.length} of 10 flipped`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the teacher that restates what it read (recipe knob teacherNotes)', () => {
  it('restates each fact after its search, makes the same calls and answer as the seed teacher, and marks the restated value a copy span', () => {
    const world = { kind: 'values', seed: TRAINING_SEEDS.augment } as const;
    const env = worldEnv(world);
    const tasks = freshTrainingTasks(world, 3, new Set());
    const sum = tasks.find((t) => t.kind === 'sum')!;
    const seedText = rollout(sum, makeStubTeacher([sum]), env).transcript;
    const notes = rollout(sum, makeStubTeacher([sum], { restateFacts: true }), env).transcript;
    const calls = (t: string) => t.match(/<\|tool_call\|>[^<]*/g);
    assert.deepEqual(calls(notes), calls(seedText));
    assert.equal(notes.slice(notes.lastIndexOf('Answer:')), seedText.slice(seedText.lastIndexOf('Answer:')));
    const [[e0, a0], [e1, a1]] = sum.hints.facts as [[string, string], [string, string]];
    // The values come from this world's corpus (not the seed's): read them from the passages independently.
    const valueOf = (e: string, a: string) => {
      const clause = `the ${a} of ${e} is `;
      const p = buildWorld(world).corpus.find((x) => x.text.includes(clause))!.text;
      return p.slice(p.indexOf(clause) + clause.length).split(/[.,;]/)[0]!.trim();
    };
    const v0 = valueOf(e0!, a0!);
    const v1 = valueOf(e1!, a1!);
    assert.ok(notes.includes(`Thought: The ${a0} of ${e0} is ${v0}. I need the ${a1} of ${e1}. `), notes);
    assert.ok(notes.includes(`Thought: The ${a1} of ${e1} is ${v1}. Now I compute ${v0}+${v1} with the calculator.`), notes);
    const copied = annotateSpans(notes)
      .filter((s) => s.kind === 'thought' && s.copy)
      .map((s) => notes.slice(s.start, s.end));
    assert.deepEqual(copied, [a0, e0, v0, a1, e1, v1, `${v0}+${v1}`]);
    // Without the knob the seed's thoughts are unchanged.
    assert.ok(!seedText.includes(`The ${a0} of ${e0} is`));
  });

  it('a lookup restates the fact before answering; the seed world through the knob answers as before', () => {
    const env = new ToolEnv(buildCorpus(0));
    const lookup = makeTaskPool(0).train.find((t) => t.kind === 'lookup')!;
    const text = rollout(lookup, makeStubTeacher([lookup], { restateFacts: true }), env).transcript;
    assert.match(text, new RegExp(`Thought: The .+ of .+ is ${lookup.gold}\\. I have everything I need\\.\nAnswer: ${lookup.gold}<`));
  });
});

describe('the teacher that reads the sign of a compare (recipe knob teacherVerdict)', () => {
  it('names the winner the calculator decides, in a world whose winner differs from the seed\'s, and marks the number, the sign word and the name as copies', () => {
    const seedWinner = new Map(makeTaskPool(0).train.filter((t) => t.kind === 'compare').map((t) => [t.question, t.gold]));
    let checked = 0;
    let flipped = 0;
    for (let seed = TRAINING_SEEDS.augment; checked < 12; seed++) {
      const world = { kind: 'values', seed } as const;
      const env = worldEnv(world);
      for (const task of freshTrainingTasks(world, 3, new Set()).filter((t) => t.kind === 'compare')) {
        const plain = rollout(task, makeStubTeacher([task]), env).transcript;
        const text = rollout(task, makeStubTeacher([task], { compareVerdict: true }), env).transcript;
        const diff = /<\|tool_result\|>([^<]*)<\|end\|><\|assistant\|>[^<]*Answer:/.exec(text)![1]!.trim();
        const [e0, e1] = task.hints.names!;
        // The gold recomputed here from the calculator's result, not taken from the teacher.
        const winner = diff.startsWith('-') ? e1 : e0;
        assert.equal(winner, task.gold, task.question);
        assert.ok(text.endsWith(`Thought: ${diff} is ${diff.startsWith('-') ? 'below' : 'above'} zero, so ${winner} is larger.\nAnswer: ${winner}<|end|>`), text);
        // Same calls, same answer as the seed's teacher: only the last thought changes.
        assert.equal(text.slice(0, text.lastIndexOf('Thought:')), plain.slice(0, plain.lastIndexOf('Thought:')));
        assert.equal(plain.slice(plain.lastIndexOf('Answer:')), text.slice(text.lastIndexOf('Answer:')));
        const copied = annotateSpans(text).filter((s) => s.kind === 'thought' && s.copy).map((s) => text.slice(s.start, s.end));
        assert.deepEqual(copied.slice(-3), [diff, diff.startsWith('-') ? 'below' : 'above', winner]);
        if (seedWinner.has(task.question) && seedWinner.get(task.question) !== winner) flipped++;
        checked++;
      }
    }
    assert.ok(flipped > 0, 'some compare has another winner than in the seed world');
  });
});

describe('failure kinds', () => {
  const teacher =
    '<|system|>s<|end|><|user|>q<|end|><|assistant|>Thought: a\n<|tool_call|>{"tool": "search", "args": {"query": "x", "k": 2}}<|end|>' +
    '<|tool_result|>r<|end|><|assistant|>Thought: done\nAnswer: 5<|end|>';
  const ep = (record: Episode['record']): Episode => ({ solved: false, outOfSteps: false, record }) as unknown as Episode;
  it('early_answer: the student answered where the teacher called a tool', () => {
    assert.equal(classifyFailure(ep([{ kind: 'final', text: 'Answer: 3', truncated: false }]), teacher), 'early_answer');
  });
  it('extra_call: the student called a tool where the teacher answered', () => {
    const call = { kind: 'tool' as const, text: '', tool: 'search', args: { query: 'x', k: 2 }, truncated: false };
    assert.equal(classifyFailure(ep([call, { kind: 'tool', text: '', tool: 'calc', args: { expr: '1+1' }, truncated: false }]), teacher), 'extra_call');
    assert.equal(classifyFailure(ep([call, { kind: 'final', text: 'Answer: 4', truncated: false }]), teacher), 'final');
  });
});
