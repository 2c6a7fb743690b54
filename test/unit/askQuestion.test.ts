// Ask the Student on a user's world (issue 35): the box starts with a held-out question of
// the run's own world (the textbook's question only for a textbook run), "Ask Again" keeps the
// last question, and a question of the world's tasks is checked against its gold.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TEXTBOOK_QUESTION, askedEvalRow, checkAnswer, checkText, questionToAsk, runWorldTasks } from '../../extension/askQuestion';
import { parseSource } from '../../core/transcript/trajectories';
import { makeTaskPool, makeTasks, taskToRow } from '../../core/world';
import { buildFactWorld, parseFactTable } from '../../core/worldSource';

const RIVERS = 'entity,attribute,value\nVolga,length in km,3530\nDanube,length in km,2850\nRhine,length in km,1233\nNile,length in km,6650\nVolga,source country,Russia\n';

describe('Ask the Student asks about the run\'s own world (issue 35)', () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-ask-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const writeWorldRun = (): { run: string; heldout: ReturnType<typeof buildFactWorld>['heldout']; train: ReturnType<typeof buildFactWorld>['train'] } => {
    const w = buildFactWorld(parseFactTable(RIVERS, 'rivers.csv'));
    const run = path.join(tmp, 'run');
    fs.mkdirSync(path.join(run, 'world'), { recursive: true });
    fs.writeFileSync(path.join(run, 'world', 'world.json'), JSON.stringify({ format: 'agent-lab-world/1' }));
    for (const [split, tasks] of [['heldout', w.heldout], ['train', w.train], ['dev', w.dev]] as const) {
      fs.writeFileSync(path.join(run, 'world', `${split}.jsonl`), tasks.map((t) => JSON.stringify(taskToRow(t))).join('\n') + '\n');
    }
    return { run, heldout: w.heldout, train: w.train };
  };

  it("a run of a user's world: a held-out question of that world, never the textbook's; Ask Again keeps the last", () => {
    const { run, heldout } = writeWorldRun();
    const q = questionToAsk(run);
    assert.notEqual(q, TEXTBOOK_QUESTION);
    assert.ok(heldout.some((t) => t.question === q), q);
    assert.doesNotMatch(q, /Stack-100M|RoPE/);
    assert.equal(questionToAsk(run, 'What is the source country of Volga? Use the corpus.'), 'What is the source country of Volga? Use the corpus.');
    assert.equal(questionToAsk(run, '  '), q);
  });

  it("a textbook run keeps the textbook's question", () => {
    const run = path.join(tmp, 'textbook');
    fs.mkdirSync(run);
    assert.equal(questionToAsk(run), TEXTBOOK_QUESTION);
    const tasks = runWorldTasks(run);
    assert.equal(tasks.filter((t) => t.split === 'heldout').length, makeTaskPool(0).heldout.length);
    assert.equal(new Set(tasks.map((t) => t.task.question)).size, new Set(makeTasks(0).map((t) => t.question)).size);
  });

  it("a question of the world's tasks is checked against its gold (normalised as eval does); another question is not", () => {
    const { run, heldout, train } = writeWorldRun();
    const t = heldout[0]!;
    const right = checkAnswer(run, t.question, `${t.gold}.`);
    assert.deepEqual(right, { gold: t.gold, split: 'heldout', correct: true, kind: t.kind });
    assert.equal(checkText(right), ' Correct (a held-out task).');
    const wrong = checkAnswer(run, ` ${t.question} `, '7763');
    assert.equal(wrong!.correct, false);
    assert.equal(checkText(wrong), ` Wrong: the gold answer is ${JSON.stringify(t.gold)} (a held-out task).`);
    if (train.length) assert.equal(checkAnswer(run, train[0]!.question, null)!.split, 'train');
    assert.equal(checkAnswer(run, 'How long is a piece of string?', '7'), null);
    assert.equal(checkText(null), '');
    // The textbook's own question on a textbook run: its gold is the seed's 10000 (a task in neither split).
    const textbook = path.join(tmp, 'textbook');
    fs.mkdirSync(textbook);
    assert.deepEqual(checkAnswer(textbook, TEXTBOOK_QUESTION, '10000'), { gold: '10000', split: 'other', correct: true, kind: 'lookup' });
    // In the inspector the checked answer is an eval row: marked wrong, with its gold.
    const text = `<|user|>${t.question}<|end|><|assistant|>Thought: x\nAnswer: 7763<|end|>`;
    const parsed = parseSource(JSON.stringify(askedEvalRow(t.question, '7763', 1, text, wrong!)) + '\n', false);
    assert.equal(parsed.rows.length, 1);
    assert.equal(parsed.rows[0]!.summary.solved, false);
    assert.equal(parsed.rows[0]!.summary.gold, t.gold);
    assert.equal(parsed.rows[0]!.summary.answer, '7763');
    assert.equal(checkAnswer(textbook, TEXTBOOK_QUESTION, '10001')!.correct, false);
  });
});
