// Teacher-guided groups (LUFFY: Yan et al. 2025, "Learning to Reason under Off-Policy
// Guidance"): when every rollout of a group is wrong, the last is replaced by the stub
// teacher's transcript of the same task in the same world. The group then has a spread, so
// a confident error (the same wrong answer in all G rollouts: a flat group, no gradient)
// is pushed towards the teacher's path and away from the student's. Only where a teacher
// exists: the stub teacher reads values from observations, so it solves any textbook world;
// the no-teacher case (a pool that was never distilled) is exactly where this is off.
import { rollout as teacherRollout } from '../../core/distill';
import { isNoTeacherKind } from '../../core/differenceTasks';
import { makeStubTeacher } from '../../core/stubTeacher';
import type { Tokenizer } from '../../core/tokenizer';
import type { Task } from '../../core/types';
import { worldEnv, type WorldId } from '../../core/worlds';
import type { Episode } from '../agent/agentRuntime';
import { UNSUPERVISED, tokenizeTrace } from '../sft/data';
import { stubTeacherOptions, type TeacherKnobs } from '../sft/recipes';

/**
 * The stub teacher's solved transcript of `task` in `world` as an episode: its ids as the
 * SFT data tokenizes them, `generated` = 1 exactly where SFT supervises (the assistant's
 * turns), so the update's labels are the teacher's tokens and never the harness's.
 * Null when the teacher does not solve it, the transcript outgrows `maxSeq`, or the task is
 * of a family no teacher demonstrates (core/differenceTasks.ts).
 */
export function teacherEpisode(task: Task, world: WorldId, tokenizer: Tokenizer, knobs: TeacherKnobs, maxSeq: number, maxSteps: number): Episode | null {
  // A no-teacher family (fresh-differences) has no teacher to guide with: the group stays the student's.
  if (isNoTeacherKind(task.kind)) return null;
  const env = worldEnv(world);
  const teacher = makeStubTeacher([task], stubTeacherOptions(knobs, env));
  const { transcript, solved, answer, steps } = teacherRollout(task, teacher, env, maxSteps);
  if (!solved) return null;
  const trace = tokenizeTrace(transcript, tokenizer);
  if (trace.ids.length > maxSeq) return null;
  return {
    question: task.question,
    gold: task.gold,
    kind: task.kind,
    answer,
    solved: true,
    steps,
    outOfSteps: false,
    contextFull: false,
    text: transcript,
    ids: Array.from(trace.ids),
    generated: Array.from(trace.kinds, (k) => (k === UNSUPERVISED ? 0 : 1)),
    record: [],
  };
}
