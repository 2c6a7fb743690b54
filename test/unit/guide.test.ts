// Teacher-guided groups (trainer/grpo/guide.ts): the stub teacher's transcript of an RL task as a
// group member. What the update may learn from it is exactly the assistant's turns.
import * as assert from 'node:assert/strict';
import { completionFromTranscript, parseRewardSpec, scoreCompletion, DEFAULT_REWARD_TEXT } from '../../core/reward';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { ASST, END } from '../../core/wire';
import { TRAINING_SEEDS, freshTrainingTasks, type WorldId } from '../../core/worlds';
import { rolloutBatch } from '../../trainer/grpo/grpo';
import { teacherEpisode } from '../../trainer/grpo/guide';
import { IGNORE } from '../../trainer/model/model';

describe('teacher-guided groups', () => {
  const tokenizer = trainDefaultTokenizer();
  const world: WorldId = { kind: 'values', seed: TRAINING_SEEDS.rlValues + 3 };
  const tasks = freshTrainingTasks(world, 2, new Set());

  it("gives the teacher's solved transcript of each shape, with the fresh world's gold", () => {
    const kinds = new Set<string>();
    for (const task of tasks) {
      const ep = teacherEpisode(task, world, tokenizer, { teacherTopHit: true }, 4096, 6);
      assert.ok(ep, `${task.kind}: ${task.question}`);
      kinds.add(task.kind);
      const score = scoreCompletion(completionFromTranscript(ep.text), task.gold, parseRewardSpec(DEFAULT_REWARD_TEXT), 6);
      assert.equal(score.correct, true, `${task.question}: scored as the rollouts are`);
      assert.equal(ep.answer, task.gold);
    }
    assert.deepEqual([...kinds].sort(), ['compare', 'double', 'lookup', 'sum']);
  });

  it("marks as generated the assistant's turns and nothing the harness wrote", () => {
    const task = tasks.find((t) => t.kind === 'sum')!;
    const ep = teacherEpisode(task, world, tokenizer, {}, 4096, 6)!;
    assert.equal(ep.ids.length, ep.generated.length);
    assert.equal(tokenizer.decode(ep.ids), ep.text, 'the ids are the transcript, byte for byte');
    // Runs of generated tokens, decoded: each is (the body of) one assistant turn.
    const runs: string[] = [];
    let cur: number[] = [];
    ep.ids.forEach((id, t) => {
      if (ep.generated[t] === 1) cur.push(id);
      else if (cur.length) {
        runs.push(tokenizer.decode(cur));
        cur = [];
      }
    });
    if (cur.length) runs.push(tokenizer.decode(cur));
    const turns = ep.text.split(ASST).slice(1).map((s) => s.slice(0, s.indexOf(END) + END.length));
    assert.equal(runs.length, turns.length, `${runs.length} generated runs for ${turns.length} assistant turns`);
    runs.forEach((r, i) => assert.equal(r, turns[i], `generated run ${i}`));
    assert.ok(!runs.some((r) => r.includes(task.question)), 'the question is never a label');
    // In the update's batch, labels fall only where the teacher wrote.
    const { batch } = rolloutBatch([{ episode: ep, advantage: 1 }]);
    for (let t = 0; t + 1 < ep.ids.length; t++) assert.equal(batch.labels[t] !== IGNORE, ep.generated[t + 1] === 1);
  });

  it('gives null where the transcript outgrows the context', () => {
    assert.equal(teacherEpisode(tasks[0]!, world, tokenizer, {}, 8, 6), null);
  });
});
