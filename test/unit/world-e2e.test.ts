// A user's world end to end (docs/worlds.md), through the built CLI: the elements fact table
// goes world → distill → train sft → eval → run, and the run keeps its world; the planets
// documents+questions world is distilled with the HTTP teacher against A LOCAL
// CHAT-COMPLETIONS SERVER ON 127.0.0.1 (a test double that knows the answers; no real
// model is contacted), trained on those trajectories and evaluated, with the tasks it did
// not solve counted by reason.
import { spreadByShape } from '../../trainer/run/jobs';
import * as assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { SYSTEM_PROMPT, makeStubTeacher } from '../../core/distill';
import { splitOnce } from '../../core/pystr';
import { ASST, END, SYS, TOOL_RESULT, USER, renderCall } from '../../core/wire';
import { worldEnv, worldTemplates } from '../../core/worlds';
import { TEMPLATES, checkCall } from '../../core/grammar';
import { AGENT_TOOLS } from '../../core/tools/schemas';
import { parseTasksFile } from '../../core/worldSource';
import { runSplits } from '../../store/worldFolder';
import { prepareSftRunData } from '../../trainer/sft/tracesRun';
import { capture } from '../support/capture';
import { canonicalTokenizerJson, trainBpe } from '../../core/tokenizer';
import { RUN_VOCAB_CAP, TOKENIZER_DATA } from '../../trainer/sft/prepare';

const repoRoot = path.resolve(__dirname, '..', '..');
const bin = path.join(repoRoot, 'bin', 'agent-lab');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');
const PLANETS = path.join(repoRoot, 'samples', 'worlds', 'planets-notes');

/** The built CLI, asynchronously (the test double serves from this process meanwhile). */
function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

const rows = (file: string): Record<string, unknown>[] =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

let tmp: string;
before(function () {
  this.timeout(300_000);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-world-e2e-'));
  if (!fs.existsSync(path.join(repoRoot, 'dist', 'cli.js'))) {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
  }
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('a fact table of another domain through the CLI: world → distill → train sft → eval → run', () => {
  it('trains and evaluates on the elements world, and the run folder remembers it', async function () {
    this.timeout(600_000);
    const world = path.join(tmp, 'elements');
    const w = await cli(['world', '--facts', ELEMENTS, '--out', world]);
    assert.equal(w.code, 0, w.stderr);
    const heldout = rows(path.join(world, 'heldout.jsonl'));
    const heldQuestions = new Set(heldout.map((r) => r['question']));

    const traces = path.join(tmp, 'elements.train.traces.jsonl');
    const d = await cli(['distill', '--world', world, '--split', 'train', '--samples', '1', '--out', traces]);
    assert.equal(d.code, 0, d.stderr);
    const trainQuestions = new Set(rows(path.join(world, 'train.jsonl')).map((r) => r['question']));
    const distilled = rows(traces);
    assert.ok(distilled.length > 0.9 * trainQuestions.size, `stub yield ${distilled.length}/${trainQuestions.size}`);
    assert.ok(distilled.every((r) => trainQuestions.has(r['task'])));

    const run = path.join(tmp, 'run-elements');
    const t = await cli(['train', 'sft', '--world', world, '--steps', '12', '--eval-limit', '0', '--run', run]);
    assert.equal(t.code, 0, t.stderr);
    const config = JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8'));
    assert.equal(config['world'].name, 'elements');
    assert.equal(config['world'].dir, world);
    assert.equal(config['world'].source.files[0].path, ELEMENTS);
    assert.equal(config['splits'].heldout.tasks, heldout.length);
    // The run trains on the world's transcripts, none of a held-out question, and (the default
    // recipe's reading augmentation, issue 27) on transcripts of worlds derived from its table.
    const all = rows(path.join(run, 'data', 'train.traces.jsonl'));
    const trained = all.filter((r) => r['world'] === undefined);
    const derived = all.filter((r) => r['world'] !== undefined);
    assert.ok(trained.length > 0 && trained.every((r) => trainQuestions.has(r['task']) && !heldQuestions.has(r['task'])));
    assert.deepEqual(config['data'].augmentation, { rows: derived.length, worlds: 60, ownNames: 6400 });
    assert.equal(config['recipe'].name, 'reader-k1-names-own', "a user's world's default recipe");
    assert.ok(derived.length > 1000, `${derived.length} augmentation transcripts`);
    // No derived task is a held-out or dev task's facts (read back to the parent's names: values worlds keep them).
    const evalFacts = new Set([...heldout, ...rows(path.join(world, 'dev.jsonl'))].map((r) => `${String(r['kind'])}|${JSON.stringify(r['hints'])}`));
    const derivedTasks = rows(path.join(run, 'data', 'train.tasks.jsonl')).filter((r) => r['derived'] === true);
    assert.equal(derivedTasks.length, derived.length);
    assert.ok(derivedTasks.every((r) => !evalFacts.has(`${String(r['kind'])}|${JSON.stringify(r['hints'])}`)));
    // The tokenizer is trained on the corpus and the training transcripts only: never the held-out ones.
    const corpusTexts = rows(path.join(run, 'world', 'corpus.jsonl')).map((r) => String(r['text']));
    const retrained = canonicalTokenizerJson(trainBpe([...corpusTexts, ...all.map((r) => String(r['text']))], { vocabSize: RUN_VOCAB_CAP }));
    assert.deepEqual(config['tokenizer'].data, TOKENIZER_DATA);
    assert.equal(fs.readFileSync(path.join(run, 'tokenizer.json'), 'utf8'), retrained);
    assert.deepEqual(rows(path.join(run, 'world', 'heldout.jsonl')), heldout);

    // eval without --world finds the run's world again.
    const e = await cli(['eval', '--run', run, '--limit', '6', '--json']);
    assert.equal(e.code, 0, e.stderr);
    const summary = JSON.parse(e.stdout.trim().split('\n').pop()!) as { n: number; accuracy: number; by_kind: Record<string, unknown> };
    assert.equal(summary.n, 6);
    const evalRows = rows(path.join(run, 'eval', 'heldout.jsonl'));
    // --limit takes the question shapes in turn (trainer/run/jobs.ts spreadByShape), in the split's order.
    const limited = (n: number) => spreadByShape(heldout.map((r) => ({ task: { kind: String(r['kind']) }, r })), n).map((x) => x.r['question']);
    assert.deepEqual(evalRows.map((r) => r['question']), limited(6));
    assert.ok(evalRows.every((r) => heldQuestions.has(r['question'])));
    const evalSummary = JSON.parse(fs.readFileSync(path.join(run, 'eval', 'heldout.json'), 'utf8'));
    assert.equal(evalSummary['worlds'].kind, 'custom');
    // The reading splits of a user's world (issue 27): worlds derived from its own table, from
    // the reserved seeds world.json and config.json record; 10 tasks, so the second thread has some.
    const fresh = JSON.parse(fs.readFileSync(path.join(world, 'world.json'), 'utf8'))['fresh'];
    assert.deepEqual(config['world'].fresh, fresh);
    assert.equal(fresh['fresh-values'].seeds.length * fresh['fresh-values'].tasks_per_world, 500);
    const parentNames = new Set(rows(path.join(world, 'train.jsonl')).flatMap((r) => (r['hints'] as { facts: [string, string][] }).facts.map((f) => f[0])));
    // dev-entities: new-name worlds of their own reserved seeds for choosing recipes (about 200 tasks), names apart from fresh-entities'.
    assert.equal(fresh['dev-entities'].kind, 'entities');
    assert.ok(fresh['dev-entities'].seeds.every((s: number) => !fresh['fresh-entities'].seeds.includes(s)));
    assert.ok(fresh['dev-entities'].seeds.length * fresh['dev-entities'].tasks_per_world >= 200);
    for (const split of ['fresh-values', 'fresh-entities', 'dev-entities']) {
      const f = await cli(['eval', '--run', run, '--split', split, '--limit', '10', '--json']);
      assert.equal(f.code, 0, f.stderr);
      const fs1 = JSON.parse(fs.readFileSync(path.join(run, 'eval', `${split}.json`), 'utf8'));
      assert.equal(fs1['n'], 10);
      assert.equal(fs1['worlds'].kind, split === 'fresh-values' ? 'values' : 'entities');
      assert.deepEqual(fs1['worlds'].seeds, fresh[split].seeds);
      assert.equal(fs1['contaminated'], 0);
      const fr = rows(path.join(run, 'eval', `${split}.jsonl`));
      assert.ok(fr.every((r) => /^custom:\d+$/.test(String(r['world'])) && !heldQuestions.has(r['question']) || split === 'fresh-values'));
      const named = fr.map((r) => /of ([A-Z][a-z]+)/.exec(String(r['question']))?.[1]).filter((n): n is string => n !== undefined);
      assert.ok(named.length > 0);
      if (split !== 'fresh-values') assert.ok(named.every((n) => !parentNames.has(n)), `new names only: ${named.join(', ')}`);
      else assert.ok(named.every((n) => parentNames.has(n)), `the table's own names: ${named.join(', ')}`);
    }
    // run: the student's tools search the run's world.
    const q = await cli(['run', '--run', run, '--json', '--', 'What is the atomic number of Iron? Use the corpus.']);
    assert.equal(q.code, 0, q.stderr);
    const env = worldEnv(runSplits(run).id);
    assert.match(env.retriever.search('Iron atomic number', 1)[0]!.passage.text, /the atomic number of Iron is 26/);
    // Building again over the run's data with another world is refused; nothing is rewritten.
    const other = path.join(tmp, 'other');
    assert.equal((await cli(['world', '--facts', ELEMENTS, '--shapes', 'lookup', '--out', other])).code, 0);
    const before = fs.readFileSync(path.join(run, 'data', 'train.traces.jsonl'));
    const r2 = await cli(['train', 'sft', '--world', other, '--resume', '--run', run]);
    assert.notEqual(r2.code, 0);
    assert.match(r2.stderr, /built from the world in .*elements/);
    assert.deepEqual(fs.readFileSync(path.join(run, 'data', 'train.traces.jsonl')), before);

    // A run made before its tokenizer's data was recorded (no data/prepared.json, no
    // tokenizer.data in config.json; its tokenizer.json saw held-out text) still evaluates and resumes.
    const oldRun = path.join(tmp, 'run-elements-old');
    fs.cpSync(run, oldRun, { recursive: true });
    fs.rmSync(path.join(oldRun, 'data', 'prepared.json'));
    const oldConfig = JSON.parse(fs.readFileSync(path.join(oldRun, 'config.json'), 'utf8'));
    delete oldConfig['tokenizer'].data;
    fs.writeFileSync(path.join(oldRun, 'config.json'), JSON.stringify(oldConfig, null, 2));
    const oe = await cli(['eval', '--run', oldRun, '--limit', '2', '--json']);
    assert.equal(oe.code, 0, oe.stderr);
    const or = await cli(['train', 'sft', '--resume', '--eval-limit', '0', '--run', oldRun]);
    assert.equal(or.code, 0, or.stderr);
    assert.ok(!fs.existsSync(path.join(oldRun, 'data', 'prepared.json')), 'an older run is not rewritten');

    // train grpo --from: the RL run takes the SFT run's world (its copy, its record) and evaluates on its held-out split.
    const grpoRun = path.join(tmp, 'grpo-elements');
    const g = await cli(['train', 'grpo', '--from', run, '--steps', '1', '--group', '2', '--tasks', '1', '--eval-limit', '2', '--run', grpoRun]);
    assert.equal(g.code, 0, g.stderr);
    assert.deepEqual(rows(path.join(grpoRun, 'world', 'heldout.jsonl')), heldout);
    const grpoConfig = JSON.parse(fs.readFileSync(path.join(grpoRun, 'config.json'), 'utf8'));
    assert.equal(grpoConfig['world'].dir, world);
    assert.equal(grpoConfig['splits'].heldout.kind, 'custom');
    assert.equal(grpoConfig['grpo'].pool, 'fresh-entities', "a fact world's RL run defaults to new-name worlds derived from its own table, as the textbook's does");
    assert.match(g.stderr, /\d+ RL tasks \(pool fresh-entities\)/);
    // train sft --from: continued SFT keeps the world too (it once fell back to the textbook's splits, so
    // its evaluations asked the textbook's questions of a student of elements).
    const moreRun = path.join(tmp, 'sft-more-elements');
    const m = await cli(['train', 'sft', '--from', run, '--steps', '2', '--eval-limit', '2', '--run', moreRun]);
    assert.equal(m.code, 0, m.stderr);
    assert.deepEqual(rows(path.join(moreRun, 'world', 'heldout.jsonl')), heldout);
    const moreConfig = JSON.parse(fs.readFileSync(path.join(moreRun, 'config.json'), 'utf8'));
    assert.equal(moreConfig['world'].dir, world);
    assert.equal(moreConfig['splits'].heldout.kind, 'custom');
    const me = await cli(['eval', '--run', moreRun, '--limit', '3', '--json']);
    assert.equal(me.code, 0, me.stderr);
    const asked = rows(path.join(moreRun, 'eval', 'heldout.jsonl')).map((r) => r['question']);
    assert.deepEqual(asked, limited(3), "the world's own held-out questions");
    const gw = await cli(['train', 'grpo', '--from', run, '--world', world, '--run', path.join(tmp, 'never')]);
    assert.equal(gw.code, 2);
    assert.match(gw.stderr, /takes the world of its --from run/);

    // demo --world: the data report of the world (no training with --minutes 0).
    const demoRun = path.join(tmp, 'demo-elements');
    const dm = await cli(['demo', '--minutes', '0', '--world', world, '--run', demoRun]);
    assert.equal(dm.code, 0, dm.stderr);
    assert.deepEqual(rows(path.join(demoRun, 'world', 'heldout.jsonl')), heldout);
    assert.match(fs.readFileSync(path.join(demoRun, 'world', 'world.json'), 'utf8'), /"name": "elements"/);
    // export --world: the world's dev tasks as GRPO prompts with gold answers.
    const ex = await cli(['export', '--format', 'trl-grpo', '--world', world, '--split', 'dev', '--out', path.join(tmp, 'export')]);
    assert.equal(ex.code, 0, ex.stderr);
    const prompts = rows(path.join(tmp, 'export', 'grpo', 'prompts.jsonl'));
    assert.deepEqual(prompts.map((p) => p['gold']), rows(path.join(world, 'dev.jsonl')).map((r) => r['gold']));
  });
});

// ---- the HTTP teacher's test double ---------------------------------------------------------

interface ChatRequest {
  messages: { role: string; content: string }[];
}

/** The transcript the chat messages stand for (the inverse of the HTTP teacher's mapping, docs/architecture.md, "HTTP teacher"). */
function transcriptOf(messages: ChatRequest['messages']): string {
  let t = `${SYS}${SYSTEM_PROMPT}${END}`;
  for (const m of messages.slice(1)) {
    if (m.role === 'assistant') t += `${ASST}${m.content}${END}`;
    else if (m.content.startsWith('Observation: ') && t.includes(ASST)) t += `${TOOL_RESULT}${m.content.slice('Observation: '.length)}${END}`;
    else t += `${USER}${m.content}${END}`;
  }
  return t + ASST;
}

/**
 * A chat-completions server on 127.0.0.1 that plays a competent teacher: the stub's steps for
 * questions with hints; for the others one search, then the gold answer — except two
 * questions it gets wrong on purpose: one with a malformed reply, one with a wrong answer.
 */
async function knowingTeacher(tasksFile: string, malformed: string, wrong: string) {
  const tasks = parseTasksFile(fs.readFileSync(tasksFile, 'utf8'), tasksFile);
  const stub = makeStubTeacher(tasks.filter((t) => t.hinted).map((t) => t.task));
  const gold = new Map(tasks.map((t) => [t.task.question, t]));
  let requests = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest;
      const prompt = transcriptOf(body.messages);
      const question = splitOnce(splitOnce(prompt, USER)[1]!, END)[0];
      const task = gold.get(question);
      let content: string;
      if (!task) content = 'Thought: I do not know this question.\nAnswer: unknown';
      else if (question === malformed) content = 'I would rather chat about something else.';
      else if (task.hinted) content = splitOnce(stub(prompt), END)[0];
      else if (!prompt.includes(TOOL_RESULT)) content = `Thought: I'll search the notes.\n${renderCall('search', { query: question.replace(/\? Use the corpus\.$/, ''), k: 2 })}`;
      else content = `Thought: The notes say it.\nAnswer: ${question === wrong ? 'Pluto' : task.task.gold}`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('a documents+questions world with the HTTP teacher (a loopback test double)', () => {
  it('distils (unsolved tasks counted by reason), trains on those trajectories and evaluates', async function () {
    this.timeout(600_000);
    const world = path.join(tmp, 'planets');
    const w = await cli(['world', '--docs', path.join(PLANETS, 'docs'), '--tasks', path.join(PLANETS, 'tasks.jsonl'), '--split', 'heldout=8,dev=0', '--out', world]);
    assert.equal(w.code, 0, w.stderr);
    assert.match(w.stdout, /the stub teacher cannot solve: no_hints 6/);
    const train = rows(path.join(world, 'train.jsonl'));
    const hintless = train.filter((r) => (r['hints'] as { queries: unknown[] }).queries.length === 0).map((r) => r['question'] as string);
    assert.ok(hintless.length >= 2, `the split left ${hintless.length} questions without hints in train`);

    // The stub teacher: the questions without hints are counted, not lost.
    const stubOut = path.join(tmp, 'planets.stub.traces.jsonl');
    const s = await capture(() => main(['distill', '--world', world, '--split', 'train', '--samples', '1', '--out', stubOut]));
    assert.equal(s.code, 0, s.stderr);
    assert.match(s.stdout, new RegExp(`unsolved ${hintless.length} of ${train.length} tasks: no_hints ${hintless.length}$`, 'm'));

    const teacher = await knowingTeacher(path.join(PLANETS, 'tasks.jsonl'), hintless[0]!, hintless[1]!);
    const traces = path.join(tmp, 'planets.http.traces.jsonl');
    try {
      const h = await capture(() =>
        main(['distill', '--world', world, '--split', 'train', '--teacher', 'http', '--teacher-url', teacher.baseUrl, '--teacher-model', 'test-double', '--samples', '1', '--retries', '0', '--out', traces]),
      );
      assert.equal(h.code, 0, h.stderr);
      assert.ok(teacher.requests() > train.length);
      assert.match(h.stdout, new RegExp(`unsolved 2 of ${train.length} tasks: (malformed 1, wrong_answer 1|wrong_answer 1, malformed 1)$`, 'm'));
      const kept = rows(traces).map((r) => r['task']);
      assert.equal(kept.length, train.length - 2);
      for (const q of hintless.slice(2)) assert.ok(kept.includes(q), `the teacher's answer to ${q} is kept`);
    } finally {
      await teacher.close();
    }

    const run = path.join(tmp, 'run-planets');
    const t = await cli(['train', 'sft', '--world', world, '--traces', traces, '--steps', '8', '--eval-limit', '0', '--run', run]);
    assert.equal(t.code, 0, t.stderr);
    assert.equal(rows(path.join(run, 'data', 'train.traces.jsonl')).length, train.length - 2);
    const e = await cli(['eval', '--run', run, '--json']);
    assert.equal(e.code, 0, e.stderr);
    const summary = JSON.parse(e.stdout.trim().split('\n').pop()!) as { n: number; failures: Record<string, number>; accuracy: number };
    assert.equal(summary.n, 8);
    const wrongOrRight = Object.values(summary.failures).reduce((a, b) => a + b, 0) + Math.round(summary.accuracy * summary.n);
    assert.equal(wrongOrRight, 8, 'every held-out task is either solved or has a failure kind');
    // A documents world has no table to derive fresh worlds from: refused, with the reason.
    const f = await cli(['eval', '--run', run, '--split', 'fresh-values', '--limit', '2']);
    assert.equal(f.code, 2);
    assert.match(f.stderr, /has no fresh-values split: it is not a fact table's world/);
  });
});

describe("the editor's Train (SFT) on a user's world (the worker prepares its run: trainer/sft/tracesRun.ts)", () => {
  it("a traces file inside a world folder with world.json makes a run of that world, evaluated on the world's held-out split", async () => {
    const world = path.join(tmp, 'world-elements');
    const quiet = (args: string[]) => capture(() => main(args));
    // With a tool list whose query alphabet has no digits: the run's grammar is the world's.
    const toolsFile = path.join(tmp, 'letters.tools.json');
    const [search, calc] = AGENT_TOOLS;
    fs.writeFileSync(toolsFile, JSON.stringify([{ ...search, inputSchema: { ...search!.inputSchema, properties: { ...search!.inputSchema.properties, query: { type: 'string', 'x-agent-lab-chars': 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ' } } } }, calc]));
    assert.equal((await quiet(['world', '--facts', ELEMENTS, '--shapes', 'lookup,sum', '--tools', toolsFile, '--out', world])).code, 0);
    const traces = path.join(world, 'train.traces.jsonl');
    assert.equal((await quiet(['distill', '--world', world, '--split', 'train', '--samples', '1', '--out', traces])).code, 0);
    const run = path.join(tmp, 'run-from-editor');
    const prepared = prepareSftRunData(run, traces);
    assert.equal(prepared.world, 'folder');
    assert.equal(prepared.trainRows, rows(traces).length);
    // The editor's run draws a user's world's default recipe's reading augmentation too (issue 27):
    // 40 counterfactual-value worlds and 20 new-name worlds (and the copies with names of their own).
    const source = JSON.parse(fs.readFileSync(path.join(run, 'data', 'source.json'), 'utf8'));
    assert.equal(source['augmentation'].worlds, 60);
    assert.equal(rows(path.join(run, 'data', 'train.traces.jsonl')).filter((r) => String(r['world']).endsWith('/own-names')).length, 6400);
    assert.equal(rows(path.join(run, 'data', 'train.traces.jsonl')).filter((r) => r['world'] !== undefined).length, source['augmentation'].transcripts);
    const splits = runSplits(run);
    assert.deepEqual(splits.heldout.map((t) => t.question), rows(path.join(world, 'heldout.jsonl')).map((r) => r['question']));
    assert.ok(fs.existsSync(path.join(run, 'tokenizer.json')));
    assert.ok(fs.existsSync(path.join(run, 'world', 'tools.json')));
    const templates = worldTemplates(splits.id);
    assert.notEqual(templates, TEMPLATES);
    assert.equal(checkCall('{"tool": "search", "args": {"query": "Iron 26", "k": 2}}', templates).accepted, false);
    assert.equal(checkCall('{"tool": "search", "args": {"query": "Iron 26", "k": 2}}').complete, true);
    assert.throws(() => prepareSftRunData(run, traces), /not empty/);
  });
});

