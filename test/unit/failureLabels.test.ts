// Failure labels that name the first real mistake (issue 35): a search that returned the
// needed fact is no search failure whatever its query or k; a calc with the teacher's result
// is no calc failure; an answer naming an entity the question does not gets its own label,
// `not_in_question`. Trajectories are constructed step by step over a rivers world; the
// same labels reach the eval rows, the summary and the inspector's reading of the rows.
import * as assert from 'node:assert/strict';
import { ToolEnv, rollout } from '../../core/distill';
import { makeStubTeacher } from '../../core/stubTeacher';
import type { Task } from '../../core/types';
import { buildFactWorld, parseFactTable } from '../../core/worldSource';
import { renderPrompt } from '../../core/distill';
import { renderCall } from '../../core/wire';
import { type Fact, compareTask, lookupTask, sumTask } from '../../core/world';
import type { Episode, StepRecord } from '../../trainer/agent/agentRuntime';
import { AgentRuntime } from '../../trainer/agent/agentRuntime';
import { replayPolicy } from '../support/scriptedPolicy';
import { FAILURES, classifyFailure, corpusEntities, evaluateTasks, summarize } from '../../trainer/agent/eval';
import { FAILURE_KINDS, FAILURE_MEANINGS, failureMeaning } from '../../core/protocol/panels';
import { parseSource } from '../../core/transcript/trajectories';
import { encodeWithMask } from '../../core/sftFormat';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import * as fs from 'node:fs';
import * as path from 'node:path';

const RIVERS = [
  'entity,attribute,value',
  'Volga,length in km,3530',
  'Danube,length in km,2850',
  'Rhine,length in km,1233',
  'Nile,length in km,6650',
  'Amazon,length in km,6400',
  'Mississippi,length in km,3766',
  'Volga,source country,Russia',
  'Nile,source country,Burundi',
].join('\n');

const table = parseFactTable(RIVERS, 'rivers.csv');
const world = buildFactWorld(table);
const env = new ToolEnv(world.corpus);
const fact = (e: string, a = 'length in km'): Fact => table.facts.find((f) => f[0] === e && f[1] === a)!;
const compare = compareTask(fact('Volga'), fact('Danube'))!;
const sum = sumTask(fact('Rhine'), fact('Amazon'));
const lookup = lookupTask(fact('Volga'));
const teacherText = (t: Task) => rollout(t, makeStubTeacher([t]), env).transcript;
const ctx = (task: Task) => ({ task, isEntity: corpusEntities(env) });

const search = (query: string, k: number): StepRecord => ({ kind: 'tool', text: '', tool: 'search', args: { query, k }, observation: env.runTool({ kind: 'tool', thought: '', tool: 'search', args: { query, k } }), truncated: false });
const calc = (expr: string): StepRecord => ({ kind: 'tool', text: '', tool: 'calc', args: { expr }, observation: env.runTool({ kind: 'tool', thought: '', tool: 'calc', args: { expr } }), truncated: false });
const answer = (a: string): StepRecord => ({ kind: 'final', text: `Answer: ${a}`, truncated: false });
const ep = (record: StepRecord[], a: string | null): Episode => ({ solved: false, outOfSteps: false, answer: a, record }) as unknown as Episode;
const value = (e: string, a: string) => table.facts.find((f) => f[0] === e && f[1] === a)![2];

describe('failure labels: the first real mistake (issue 35)', () => {
  it('the labels are one list, each with a meaning, shared by the eval summary and the inspector', () => {
    assert.deepEqual([...FAILURES], [...FAILURE_KINDS]);
    assert.ok(FAILURES.includes('not_in_question'));
    for (const k of FAILURE_KINDS) assert.ok(FAILURE_MEANINGS[k].length > 10, k);
    assert.equal(failureMeaning('not_in_question'), 'answered with an entity the question does not name');
    assert.equal(failureMeaning('no such kind'), '');
    assert.equal(failureMeaning(null), '');
    const s = summarize('heldout', [{ solved: false, failure: 'not_in_question', kind: 'compare' } as never], 0, {});
    assert.equal(s.failures.not_in_question, 1);
    assert.deepEqual(Object.keys(s.failures), [...FAILURE_KINDS]);
  });

  it("a compare whose two searches (k 1, the teacher's k 2) returned the two facts and whose answer is an entity not in the question: not_in_question, not search", () => {
    const [[e1, a1], [e2, a2]] = compare.hints.facts as [[string, string], [string, string]];
    const teacher = teacherText(compare);
    assert.match(teacher, /"k": 2/);
    const steps = [search(`${e1} ${a1}`, 1), search(`${e2} ${a2}`, 1)];
    assert.ok(steps[0]!.observation!.includes(`the ${a1} of ${e1} is `) && steps[1]!.observation!.includes(`the ${a2} of ${e2} is `));
    const diff = calc(`${value(e1, a1)}-${value(e2, a2)}`);
    assert.equal(classifyFailure(ep([...steps, diff, answer('Mississippi')], 'Mississippi'), teacher, ctx(compare)), 'not_in_question');
    // Before this change the same trajectory was a search failure (its calls differ from the teacher's).
    assert.equal(classifyFailure(ep([...steps, diff, answer('Mississippi')], 'Mississippi'), teacher), 'search');
    // Answered at once after the searches: still the answer names the wrong entity.
    assert.equal(classifyFailure(ep([...steps, answer('Mississippi')], 'Mississippi'), teacher, ctx(compare)), 'not_in_question');
    // The loser of the two (an entity of the question): a wrong answer after the right steps.
    const loser = compare.hints.names!.find((n) => n !== compare.gold)!;
    assert.equal(classifyFailure(ep([...steps, diff, answer(loser)], loser), teacher, ctx(compare)), 'final');
    // Not an entity at all: final, not not_in_question.
    assert.equal(classifyFailure(ep([...steps, diff, answer('unknown')], 'unknown'), teacher, ctx(compare)), 'final');
    assert.equal(classifyFailure(ep([...steps, diff, answer('-700')], '-700'), teacher, ctx(compare)), 'final');
  });

  it('a search in other words that returned the needed fact is no departure; one that did not is search', () => {
    const [[e1, a1], [e2, a2]] = sum.hints.facts as [[string, string], [string, string]];
    const teacher = teacherText(sum);
    const good = [search(`how long is the ${e1} in km`, 3), search(`${e2} ${a2}`, 2)];
    assert.ok(good[0]!.observation!.includes(`the ${a1} of ${e1} is `));
    const wrongSum = calc(`${value(e1, a1)}+${value(e2, a2)}+1`);
    assert.equal(classifyFailure(ep([...good, wrongSum, answer('1')], '1'), teacher, ctx(sum)), 'calc');
    // A search that returned neither needed fact is the first mistake, whatever follows.
    const bad = search('Burundi source country', 1);
    assert.ok(!bad.observation!.includes(`of ${e1} is `) && !bad.observation!.includes(`of ${e2} is `));
    assert.equal(classifyFailure(ep([bad, good[1]!, wrongSum, answer('1')], '1'), teacher, ctx(sum)), 'search');
    // The same fact twice does not stand for the second one.
    const first = search(`${e1} ${a1}`, 1);
    assert.ok(!first.observation!.includes(`of ${e2} is `));
    assert.equal(classifyFailure(ep([first, first, wrongSum, answer('1')], '1'), teacher, ctx(sum)), 'search');
  });

  it('one search that returned both facts stands for both of the teacher\'s; a calc with the teacher\'s result (operands swapped) is no departure', () => {
    const [[e1, a1], [e2, a2]] = sum.hints.facts as [[string, string], [string, string]];
    const teacher = teacherText(sum);
    const both = search(`${e1} ${e2} ${a1}`, 2);
    assert.ok(both.observation!.includes(`the ${a1} of ${e1} is `) && both.observation!.includes(`the ${a2} of ${e2} is `), both.observation);
    const swapped = calc(`${value(e2, a2)}+${value(e1, a1)}`);
    assert.equal(classifyFailure(ep([both, swapped, answer('12')], '12'), teacher, ctx(sum)), 'final');
    assert.equal(classifyFailure(ep([both, calc('1+1'), answer('2')], '2'), teacher, ctx(sum)), 'calc');
  });

  it('a lookup answered with another entity of the world is not_in_question; answered early with a number, early_answer; the earlier labels keep their meaning', () => {
    const [[e, a]] = lookup.hints.facts as [[string, string]];
    const teacher = teacherText(lookup);
    assert.equal(classifyFailure(ep([search(`${e} ${a}`, 2), answer('Nile')], 'Nile'), teacher, ctx(lookup)), 'not_in_question');
    assert.equal(classifyFailure(ep([search(`${e} ${a}`, 2), answer('12')], '12'), teacher, ctx(lookup)), 'final');
    assert.equal(classifyFailure(ep([answer('12')], '12'), teacher, ctx(lookup)), 'early_answer');
    assert.equal(classifyFailure(ep([answer('Nile')], 'Nile'), teacher, ctx(lookup)), 'not_in_question');
    assert.equal(classifyFailure(ep([search(`${e} ${a}`, 2), calc('1+1')], null), teacher, ctx(lookup)), 'extra_call');
    assert.equal(classifyFailure(ep([{ kind: 'malformed', text: '', truncated: false }], null), teacher, ctx(lookup)), 'format');
    assert.equal(classifyFailure({ ...ep([search(`${e} ${a}`, 2), { kind: 'forced', text: '', truncated: false }], null), outOfSteps: true }, teacher, ctx(lookup)), 'out_of_steps');
  });

  it('evaluated for real: the eval rows, the summary and the inspector carry the same not_in_question label', async () => {
    const tok = trainDefaultTokenizer();
    const tasks = [compare];
    const [[e1, a1], [e2, a2]] = compare.hints.facts as [[string, string], [string, string]];
    // The student's script: its own searches (k 1), the right calc, then an entity the question does not name.
    let script = renderPrompt(compare.question, env.systemPrompt);
    for (const [e, a] of [[e1, a1], [e2, a2]] as const) {
      const call = { query: `${e} ${a}`, k: 1 };
      script += `<|assistant|>Thought: search.\n${renderCall('search', call)}<|tool_result|>${env.runTool({ kind: 'tool', thought: '', tool: 'search', args: call })}<|end|>`;
    }
    const expr = `${value(e1, a1)}-${value(e2, a2)}`;
    script += `<|assistant|>Thought: compute.\n${renderCall('calc', { expr })}<|tool_result|>${env.runTool({ kind: 'tool', thought: '', tool: 'calc', args: { expr } })}<|end|>`;
    script += '<|assistant|>Thought: done.\nAnswer: Mississippi<|end|>';
    const ids = encodeWithMask(script, tok).ids;
    const policy = replayPolicy(tok.vocabSize, ids);
    const { rows, summary } = await evaluateTasks(new AgentRuntime(policy, tok, env, null), tasks, env, { split: 'heldout' });
    assert.equal(rows[0]!.answer, 'Mississippi');
    assert.equal(rows[0]!.failure, 'not_in_question');
    assert.equal(summary.failures.not_in_question, 1);
    assert.equal(summary.failures.search, 0);
    const src = parseSource(rows.map((r) => JSON.stringify(r)).join('\n') + '\n', false);
    assert.equal(src.rows[0]!.summary.failure, 'not_in_question');
  });

  it('docs/architecture.md lists every failure kind', () => {
    const arch = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'architecture.md'), 'utf8');
    for (const k of FAILURE_KINDS) assert.ok(arch.includes(`\`${k}\``), k);
  });
});
