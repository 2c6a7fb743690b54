// Issue 36, finding 9: a teacher's calls are held to the world's tool list (tools.json). A
// calc call in a world without calc, or a query over the list's maxLength, is neither run
// nor kept (the rollout fails `off-tools`, named in the distill summary), and `train sft
// --traces` refuses a traces file whose transcripts make such calls, naming the row. The
// HTTP teacher is a hostile chat server on 127.0.0.1 (test/unit/hostileChatServer.ts).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { summaryLines } from '../../trainer/agent/distillJob';
import { ToolEnv, renderPrompt } from '../../core/distill';
import { AsyncTeacher, OFF_TOOLS, distillAsync, newDistillStats, rolloutAsync } from '../../core/distillAsync';
import { makeHttpTeacher } from '../../core/teachers/http';
import { AGENT_TOOLS, McpTool } from '../../core/tools/schemas';
import type { Task } from '../../core/types';
import { buildCorpus } from '../../core/world';
import { ASST, Action, END, TOOL_RESULT, renderCall } from '../../core/wire';
import { CHARS_KEY, toolCallViolation, transcriptToolViolation } from '../../core/worldTools';
import { InputError } from '../../store/files';
import { prepareWorldRunData, readTraceRows } from '../../trainer/sft/prepare';
import { readWorldFolder } from '../../store/worldFolder';
import { capture } from '../support/capture';
import { HostileServer, Mode, hostileChatServer } from './hostileChatServer';

const repoRoot = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');

const [SEARCH, CALC] = AGENT_TOOLS as [McpTool, McpTool];
/** The textbook's search with a narrower query (and optionally its characters). */
const searchWith = (query: Record<string, unknown>): McpTool => ({
  ...SEARCH,
  inputSchema: { ...SEARCH.inputSchema, properties: { ...SEARCH.inputSchema.properties, query: { type: 'string', ...query } as McpTool['inputSchema']['properties'][string] } },
});
const SEARCH_ONLY: McpTool[] = [SEARCH];
const SHORT_QUERIES: McpTool[] = [searchWith({ maxLength: 10 }), CALC];

const QUERY_40 = 'atomic number of the element called Iron'; // 40 characters
const CALC_STEP = `Thought: I will compute it.\n${renderCall('calc', { expr: '2+2' })}`;
const SEARCH_40_STEP = `Thought: I will search.\n${renderCall('search', { query: QUERY_40, k: 2 })}`;
const TASK: Task = { question: 'What is 2+2? Use the calculator.', gold: '4', kind: 'sum', hints: { queries: [], facts: [], op: 'sum' } };

/** The textbook's tools, recording every call that reaches them. */
class SpyEnv extends ToolEnv {
  readonly ran: Action[] = [];
  override runTool(action: Action): string {
    this.ran.push(action);
    return super.runTool(action);
  }
}

async function withServer<T>(modeFor: (n: number, body: string) => Mode, f: (s: HostileServer) => Promise<T>): Promise<T> {
  const s = await hostileChatServer(modeFor);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}

/** A server that first makes `call`, then (after an observation) answers the gold. */
const callThenAnswer = (call: string, gold: string) => (_n: number, body: string): Mode => ({ kind: 'ok', content: body.includes('Observation: ') ? `Thought: done.\nAnswer: ${gold}` : call });

const fast = { retries: 0, timeoutMs: 5000, exemplars: [] as string[] };

describe('issue 36: teacher calls are held to the world tool list', function () {
  this.timeout(60_000);

  describe('the HTTP teacher (distillAsync)', () => {
    it('a calc call from the HTTP teacher in a world without calc is not executed or kept', async () => {
      await withServer(callThenAnswer(CALC_STEP, '4'), async (s) => {
        const env = new SpyEnv(buildCorpus());
        const stats = newDistillStats();
        const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', tools: SEARCH_ONLY, ...fast });
        const rows = await distillAsync([TASK], teacher, env, { samplesPerTask: 1, concurrency: 1, stats, tools: SEARCH_ONLY });
        assert.deepEqual(env.ran, [], 'the calc call never reached the calculator');
        assert.deepEqual(rows, []);
        assert.equal(s.arrivals.length, 1, 'the rollout stopped at the call');
        assert.deepEqual(stats.failed, { [OFF_TOOLS]: 1 });
        assert.equal(stats.solved, 0);
        assert.match(stats.failureExamples[OFF_TOOLS]!, /"calc" is not in the world's tool list \(search\)/);
        const summary = summaryLines('out.jsonl', stats, 1).join('\n');
        assert.match(summary, /failed 1 \(off-tools 1\)/);
        assert.match(summary, /off-tools: calls outside the world's tool list/);
      });
    });

    it("a 40-character query from the HTTP teacher where the list says maxLength 10 is not executed or kept", async () => {
      const task: Task = { question: 'What is the atomic number of Iron? Use the corpus.', gold: '26', kind: 'lookup', hints: { queries: [], facts: [], op: null } };
      await withServer(callThenAnswer(SEARCH_40_STEP, '26'), async (s) => {
        const env = new SpyEnv(buildCorpus());
        const stats = newDistillStats();
        const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', tools: SHORT_QUERIES, ...fast });
        const rows = await distillAsync([task], teacher, env, { samplesPerTask: 1, stats, tools: SHORT_QUERIES });
        assert.deepEqual(env.ran, []);
        assert.deepEqual(rows, []);
        assert.deepEqual(stats.failed, { [OFF_TOOLS]: 1 });
        assert.match(stats.failureExamples[OFF_TOOLS]!, /search's query is 40 characters, over the list's maxLength 10/);
      });
    });

    it('the same calls in the textbook world (no tool list) still run and are kept', async () => {
      await withServer(callThenAnswer(CALC_STEP, '4'), async (s) => {
        const env = new SpyEnv(buildCorpus());
        const rows = await distillAsync([TASK], makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast }), env, { samplesPerTask: 1 });
        assert.equal(env.ran.length, 1);
        assert.equal(rows.length, 1);
      });
    });

    it('any teacher is held to the list: a k above its maximum, a query outside its characters', async () => {
      const list: McpTool[] = [searchWith({ [CHARS_KEY]: 'abcdefghijklmnopqrstuvwxyz ' })];
      for (const [args, why] of [
        [{ query: 'iron', k: 7 }, /search's k is 7, above the list's maximum 5/],
        [{ query: 'iron 26', k: 2 }, /search's query has "26", outside the list's x-agent-lab-chars/],
      ] as const) {
        const env = new SpyEnv(buildCorpus());
        const teacher: AsyncTeacher = () => Promise.resolve(`Thought: search.\n${renderCall('search', args)}`);
        const r = await rolloutAsync(TASK, teacher, env, undefined, undefined, list);
        assert.equal(r.error?.reason, OFF_TOOLS);
        assert.match(r.error.message, why);
        assert.deepEqual(env.ran, []);
        assert.equal(r.transcript, renderPrompt(TASK.question, env.systemPrompt), 'the refused step is not in the transcript');
      }
    });
  });

  describe('toolCallViolation', () => {
    it('names the tool, the argument and the rule; a call that keeps to the list passes', () => {
      const list: McpTool[] = [searchWith({ maxLength: 10 }), CALC];
      assert.equal(toolCallViolation('search', { query: 'iron', k: 2 }, list), null);
      assert.equal(toolCallViolation('search', { query: 'iron' }, list), null, 'k defaults to 2, inside 1-5');
      assert.equal(toolCallViolation('calc', { expr: '2+2' }, list), null);
      assert.match(toolCallViolation('python', { code: '1' }, list)!, /"python" is not in the world's tool list \(search, calc\)/);
      assert.match(toolCallViolation('search', { k: 2 }, list)!, /search needs query/);
      assert.match(toolCallViolation('search', { query: 'iron', k: 2, lang: 'en' }, list)!, /search takes query, k, not "lang"/);
      assert.match(toolCallViolation('search', { query: 3, k: 2 }, list)!, /search's query must be a string, got 3/);
      assert.match(toolCallViolation('search', { query: 'iron', k: '2' }, list)!, /search's k must be an integer, got "2"/);
      assert.match(toolCallViolation('search', { query: 'iron', k: 0 }, list)!, /search's k is 0, below the list's minimum 1/);
      const minK: McpTool = { ...SEARCH, inputSchema: { ...SEARCH.inputSchema, properties: { ...SEARCH.inputSchema.properties, k: { type: 'integer', minimum: 3 } } } };
      assert.match(toolCallViolation('search', { query: 'iron' }, [minK])!, /search's k is 2, below the list's minimum 3/, 'the k the environment would run');
      // Code points, as JSON Schema counts: ten accented letters are ten characters.
      assert.equal(toolCallViolation('search', { query: 'éééééééééé' }, list), null);
    });
  });

  describe('distill --world with a tool list (the CLI)', () => {
    let tmp: string;
    let world: string;
    before(async function () {
      this.timeout(120_000);
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hardening-tools-'));
      world = path.join(tmp, 'world');
      const toolsFile = path.join(tmp, 'tools.json');
      // No calc, and queries of at most 24 characters ("Manganese melting point in kelvin" is 33).
      fs.writeFileSync(toolsFile, JSON.stringify([searchWith({ maxLength: 24 })]));
      const w = await capture(() => main(['world', '--facts', ELEMENTS, '--shapes', 'lookup', '--tools', toolsFile, '--out', world]));
      assert.equal(w.code, 0, w.stderr);
    });
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));

    const jsonl = (file: string): Record<string, unknown>[] =>
      fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);

    it("distill --teacher http in a world without calc: the teacher's calc calls are not kept, and the summary names off-tools", async () => {
      const dev = jsonl(path.join(world, 'dev.jsonl')) as { question: string; gold: string }[];
      const goldIn = (body: string): string => dev.find((t) => body.includes(JSON.stringify(t.question).slice(1, -1)))?.gold ?? '?';
      const out = path.join(tmp, 'http.traces.jsonl');
      await withServer(
        (_n, body) => ({ kind: 'ok', content: body.includes('Observation: ') ? `Thought: done.\nAnswer: ${goldIn(body)}` : CALC_STEP }),
        async (s) => {
          const d = await capture(() => main(['distill', '--world', world, '--split', 'dev', '--teacher', 'http', '--teacher-url', s.baseUrl, '--teacher-model', 'm', '--samples', '1', '--retries', '0', '--out', out]));
          assert.equal(d.code, 0, d.stderr);
          assert.equal(s.arrivals.length, dev.length, 'one request per task: no rollout went on past its calc call');
          assert.deepEqual(jsonl(out), []);
          assert.match(d.stdout, new RegExp(`failed ${dev.length} \\(off-tools ${dev.length}\\)`));
          assert.match(d.stdout, new RegExp(`unsolved ${dev.length} of ${dev.length} tasks: off-tools ${dev.length}$`, 'm'));
        },
      );
    });

    it("distill with the stub teacher keeps no trajectory whose query is over the list's maxLength (unsolved: off-tools)", async () => {
      const out = path.join(tmp, 'stub.traces.jsonl');
      const d = await capture(() => main(['distill', '--world', world, '--split', 'train', '--samples', '1', '--out', out]));
      assert.equal(d.code, 0, d.stderr);
      const kept = jsonl(out) as { text: string }[];
      assert.ok(kept.length > 0);
      for (const r of kept) assert.equal(transcriptToolViolation(r.text, [searchWith({ maxLength: 24 })]), null);
      const m = /unsolved (\d+) of (\d+) tasks: off-tools (\d+)$/m.exec(d.stdout);
      assert.ok(m, d.stdout);
      assert.ok(Number(m[3]) > 0);
      assert.equal(Number(m[2]) - Number(m[3]), kept.length);
      // What the stub kept, train sft --traces takes.
      assert.equal(readTraceRows(out, readWorldFolder(world).tools).length, kept.length);
    });

    describe('train sft --traces', () => {
      /** A trace row of the world's first training task whose one call is `call`. */
      const rowWith = (call: string): string => {
        const w = readWorldFolder(world);
        const task = w.train[0]!;
        const text = `${renderPrompt(task.question)}${ASST}${call}${END}${TOOL_RESULT}4${END}${ASST}Thought: done.\nAnswer: ${task.gold}${END}`;
        return JSON.stringify({ task: task.question, text, kind: task.kind });
      };
      const goodRow = (): string => {
        const w = readWorldFolder(world);
        const task = w.train[1]!;
        return JSON.stringify({ task: task.question, text: `${renderPrompt(task.question)}${ASST}Thought: I know.\nAnswer: ${task.gold}${END}`, kind: task.kind });
      };

      for (const [name, call, why] of [
        ['a calc call in a world without calc', CALC_STEP, /"calc" is not in the world's tool list \(search\)/],
        ["a 40-character query where the list says maxLength 24", SEARCH_40_STEP, /search's query is 40 characters, over the list's maxLength 24/],
      ] as const) {
        it(`a traces row with ${name} is refused, naming the file, the line and the call`, async () => {
          const traces = path.join(tmp, `bad-${name.length}.traces.jsonl`);
          fs.writeFileSync(traces, `${goodRow()}\n${rowWith(call)}\n`);
          const tools = readWorldFolder(world).tools;
          assert.throws(
            () => readTraceRows(traces, tools),
            (err: unknown) => err instanceof InputError && err.message.startsWith(`${traces}:2: the call {"tool": `) && why.test(err.message),
          );
          // The path train sft takes (and the editor's Train (SFT)): nothing is trained on.
          const run = path.join(tmp, `run-${name.length}`);
          assert.throws(() => prepareWorldRunData(run, { world: readWorldFolder(world), traces }), (err: unknown) => err instanceof InputError && err.message.includes(`${traces}:2:`));
          assert.equal(fs.existsSync(path.join(run, 'data', 'train.traces.jsonl')), false);
          // And through the CLI: exit 1, the row named.
          const run2 = path.join(tmp, `run2-${name.length}`);
          const t = await capture(() => main(['train', 'sft', '--world', world, '--traces', traces, '--steps', '1', '--eval-limit', '0', '--run', run2]));
          assert.equal(t.code, 1);
          assert.match(t.stderr, new RegExp(`${traces.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: the call .*outside the world's tool list`));
          // Without a tool list (the textbook world's reading of run data) the row is read as before.
          assert.equal(readTraceRows(traces).length, 2);
        });
      }
    });
  });
});
