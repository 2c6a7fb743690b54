// Real teachers for `agent-lab distill`: the async loop (same bytes as the stub's), the
// HTTP teacher against a LOCAL HTTP SERVER THAT SPEAKS THE OPENAI CHAT-COMPLETIONS PROTOCOL
// (a test double on 127.0.0.1; no real model is contacted), and the student of a run folder
// as a teacher. Bad servers (malformed replies, 5xx, hangs, refusals) must give failed
// rollouts counted by reason, never a crash.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { SYSTEM_PROMPT, ToolEnv, distill, makeStubTeacher, normalize, rollout } from '../../core/distill';
import { AsyncTeacher, TeacherError, asyncTeacher, canonicalStep, distillAsync, newDistillStats, rolloutAsync } from '../../core/distillAsync';
import { splitOnce } from '../../core/pystr';
import { AGENT_TOOLS } from '../../core/tools/schemas';
import { API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, TeacherConfigError, chatMessages, defaultExemplars, makeHttpTeacher, teacherSystemMessage } from '../../core/teachers/http';
import { canonicalTokenizerJson, trainDefaultTokenizer } from '../../core/tokenizer';
import type { Task } from '../../core/types';
import { ASST, END, SYS, TOOL_RESULT, USER, parseAssistantStep } from '../../core/wire';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { AgentRuntime, DecodeSession, Policy } from '../../trainer/agent/agentRuntime';
import { initBackend } from '../../trainer/model/backend';
import { saveCheckpoint } from '../../trainer/run/checkpoint';
import { StackModel } from '../../trainer/model/model';
import { tokenizerCallMask } from '../../trainer/agent/policy';
import { makeStudentTeacher, runtimeTeacher } from '../../trainer/sft/studentTeacher';
import { capture } from '../support/capture';

const corpus = buildCorpus();
const env = new ToolEnv(corpus);
const pool = makeTaskPool();
const stub = makeStubTeacher([...pool.train, ...pool.heldout]);
const TWO_PLUS_TWO: Task = { question: 'What is 2+2? Use the calculator.', gold: '4', kind: 'sum', hints: { queries: [], facts: [], op: 'sum' } };

// ---- the local chat-completions server (test double) -------------------------------------

interface ChatRequest {
  model: string;
  messages: { role: string; content: string }[];
  temperature: number;
  max_tokens: number;
  stop: string[];
}
interface Recorded {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: ChatRequest;
}
type Reply = { status?: number; json?: unknown; text?: string; headers?: Record<string, string> } | 'hang';

interface LocalServer {
  baseUrl: string;
  requests: Recorded[];
  close(): Promise<void>;
}

/** node:http on 127.0.0.1, a free port; `handle` answers each POST /v1/chat/completions. */
async function chatCompletionsServer(handle: (req: Recorded, n: number) => Reply): Promise<LocalServer> {
  const requests: Recorded[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no route ${req.url}` } }));
        return;
      }
      const rec: Recorded = { url: req.url, headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest };
      requests.push(rec);
      const reply = handle(rec, requests.length);
      if (reply === 'hang') return; // never answers
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
      res.end(reply.text ?? JSON.stringify(reply.json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function completion(content: string | null, finish = 'stop', extra: Record<string, unknown> = {}): Reply {
  return {
    json: {
      id: 'chatcmpl-test',
      object: 'chat.completion',
      created: 0,
      model: 'test-teacher',
      choices: [{ index: 0, message: { role: 'assistant', content, ...extra }, finish_reason: finish }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    },
  };
}

/** The transcript the messages stand for (the inverse of the Contract's mapping). */
function transcriptOf(messages: ChatRequest['messages']): string {
  let t = `${SYS}${SYSTEM_PROMPT}${END}`;
  for (const m of messages.slice(1)) {
    if (m.role === 'assistant') t += `${ASST}${m.content}${END}`;
    else if (m.content.startsWith('Observation: ') && t.includes(ASST)) t += `${TOOL_RESULT}${m.content.slice('Observation: '.length)}${END}`;
    else t += `${USER}${m.content}${END}`;
  }
  return t + ASST;
}

/** A competent teacher: the stub's step for the transcript the messages describe (cut at <|end|>, or not, as a server that ignores `stop`). */
const asStub = (cut = true) => (req: Recorded): Reply => {
  const step = stub(transcriptOf(req.body.messages));
  return completion(cut ? splitOnce(step, END)[0] : `${splitOnce(step, END)[0]}${END}\nObservation: (the server kept writing)`);
};

const fast = { retries: 0, backoffMs: 1, timeoutMs: 5000 };

async function withServer<T>(handle: (req: Recorded, n: number) => Reply, f: (s: LocalServer) => Promise<T>): Promise<T> {
  const s = await chatCompletionsServer(handle);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}

const readJsonl = (file: string): Record<string, unknown>[] =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** The answer of a transcript's last assistant turn. */
function finalAnswer(text: string): string | null {
  const last = text.slice(text.lastIndexOf(ASST) + ASST.length, text.lastIndexOf(END));
  const a = parseAssistantStep(last);
  return a.kind === 'final' ? a.answer : null;
}

function withEnv<T>(vars: Record<string, string | undefined>, f: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) delete process.env[k];
      else process.env[k] = x;
    }
  };
  set(vars);
  return f().finally(() => set(saved));
}

let tmp: string;
before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-teachers-'));
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// ---- the async loop -------------------------------------------------------------------

describe('async distillation', () => {
  const tasks = pool.heldout.slice(0, 12);

  it('the stub wrapped as an async teacher gives the same transcripts as the sync loop', async () => {
    for (const t of tasks) {
      const { error, raw, ...got } = await rolloutAsync(t, asyncTeacher(stub), env);
      assert.deepEqual(got, rollout(t, stub, env));
      assert.equal(error, null);
      assert.deepEqual(raw, []);
    }
    const want = distill(tasks, makeStubTeacher(tasks), env, 3);
    const got = await distillAsync(tasks, asyncTeacher(makeStubTeacher(tasks)), env, { samplesPerTask: 3, concurrency: 1 });
    assert.deepEqual(got, want);
  });

  it('keeps task then sample order whatever order replies arrive in, and reports progress', async () => {
    // Replies delayed at random: completion order differs from request order.
    let seed = 7;
    const jittery: AsyncTeacher = (prompt) =>
      new Promise((resolve) => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        setTimeout(() => resolve(stub(prompt)), seed % 5);
      });
    const progress: [number, number][] = [];
    const stats = newDistillStats();
    const got = await distillAsync(tasks, jittery, env, { samplesPerTask: 2, concurrency: 5, stats, onProgress: (d, t) => progress.push([d, t]) });
    assert.deepEqual(got, distill(tasks, stub, env, 2));
    assert.deepEqual(progress.map(([d]) => d), tasks.map((_, i) => i + 1));
    assert.ok(progress.every(([, t]) => t === tasks.length));
    assert.equal(stats.rollouts, 24);
    assert.equal(stats.kept, got.length);
    assert.deepEqual(stats.failed, {});
  });

  it('a TeacherError fails that rollout (counted by reason); any other error is a bug and propagates', async () => {
    let n = 0;
    const flaky: AsyncTeacher = async (prompt) => {
      if (++n % 3 === 0) throw new TeacherError(n % 2 ? 'timeout' : 'refusal', 'scripted');
      return stub(prompt);
    };
    const stats = newDistillStats();
    const rows = await distillAsync(tasks, flaky, env, { samplesPerTask: 2, concurrency: 3, stats });
    const failed = Object.values(stats.failed).reduce((a, b) => a + b, 0);
    assert.ok(failed > 0 && stats.failed['timeout']! > 0 && stats.failed['refusal']! > 0, JSON.stringify(stats.failed));
    assert.equal(stats.rollouts, 24);
    assert.equal(Object.values(stats.perKind).reduce((a, k) => a + k.failed, 0), failed);
    assert.ok(rows.every((r) => normalize(finalAnswer(r.text)) === normalize(tasks.find((t) => t.question === r.task)!.gold)));
    const bug: AsyncTeacher = async () => {
      throw new RangeError('a bug, not a teacher failure');
    };
    await assert.rejects(distillAsync(tasks, bug, env, { samplesPerTask: 1 }), RangeError);
  });

  it('an aborted run keeps only the tasks whose samples all finished', async () => {
    const controller = new AbortController();
    const stats = newDistillStats();
    const rows = await distillAsync(tasks, asyncTeacher(stub), env, {
      samplesPerTask: 2,
      concurrency: 2,
      stats,
      signal: controller.signal,
      onProgress: (d) => d === 3 && controller.abort(),
    });
    assert.equal(stats.cancelled, true);
    assert.ok(stats.tasks >= 3 && stats.tasks < tasks.length);
    assert.deepEqual(rows, distill(tasks.slice(0, stats.tasks), stub, env, 2));
  });

  it('canonicalStep re-renders calls (key order, spacing, arg order, default k) and refuses what is neither a call nor an answer', () => {
    assert.equal(
      canonicalStep('Thought:  compute it \n<|tool_call|>{"args": {"expr":"2+2"},   "tool":"calc"}'),
      'Thought: compute it\n<|tool_call|>{"tool": "calc", "args": {"expr": "2+2"}}<|end|>',
    );
    assert.equal(
      canonicalStep('Thought: look\n<|tool_call|>{"tool":"search","args":{"k":"3","query":"RMSNorm year"}}\nObservation: made up<|end|>junk'),
      'Thought: look\n<|tool_call|>{"tool": "search", "args": {"query": "RMSNorm year", "k": 3}}<|end|>',
    );
    assert.equal(canonicalStep('Thought: look\n<|tool_call|>{"tool": "search", "args": {"query": "x"}}'), 'Thought: look\n<|tool_call|>{"tool": "search", "args": {"query": "x", "k": 2}}<|end|>');
    assert.equal(canonicalStep('Thought: done.\nAnswer:  2019 \n'), 'Thought: done.\nAnswer: 2019');
    for (const [bad, reason] of [
      ['Thought: hmm\n<|tool_call|>{"tool": calc}', 'malformed'],
      ['I think the answer is probably 4', 'malformed'],
      ['Thought: x\n<|tool_call|>{"tool": "search", "args": {"query": "what\'s this?", "k": 2}}', 'off-grammar'],
      ['Thought: x\n<|tool_call|>{"tool": "python", "args": {"code": "1"}}', 'off-grammar'],
    ] as const) {
      assert.throws(() => canonicalStep(bad), (e: unknown) => e instanceof TeacherError && e.reason === reason, bad);
    }
  });
});

// ---- the HTTP teacher -------------------------------------------------------------------

describe('HTTP teacher against a local chat-completions server (test double)', () => {
  const tasks = pool.heldout.slice(0, 8);

  it('sends the Contract request: model, stop, system (prompt, MCP schemas, two exemplars), question, assistant turns, observations, Bearer key given', async () => {
    await withEnv({ [API_KEY_ENV]: undefined }, () =>
      withServer(asStub(), async (s) => {
        const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'test-teacher', temperature: 0.3, maxTokens: 200, apiKey: 'sk-test-teacher-key-123', ...fast });
        const task = tasks.find((t) => t.kind === 'sum')!;
        const r = await rolloutAsync(task, teacher, env);
        assert.equal(r.transcript, distill([task], stub, env, 1)[0]!.text);
        assert.equal(s.requests.length, r.steps);
        const first = s.requests[0]!;
        assert.equal(first.url, '/v1/chat/completions');
        assert.equal(first.headers['authorization'], 'Bearer sk-test-teacher-key-123');
        assert.equal(first.headers['content-type'], 'application/json');
        assert.equal(first.body.model, 'test-teacher');
        assert.deepEqual(first.body.stop, ['<|end|>']);
        assert.equal(first.body.temperature, 0.3);
        assert.equal(first.body.max_tokens, 200);
        const [system, user, ...rest] = first.body.messages;
        assert.equal(rest.length, 0);
        assert.equal(system!.role, 'system');
        assert.ok(system!.content.startsWith(SYSTEM_PROMPT));
        assert.match(system!.content, /"inputSchema"/);
        assert.match(system!.content, /"name": "search"/);
        assert.match(system!.content, /"name": "calc"/);
        const exemplars = defaultExemplars();
        assert.equal(exemplars.length, 2);
        for (const e of exemplars) assert.ok(system!.content.includes(e), 'an exemplar transcript is in the system message');
        assert.deepEqual(user, { role: 'user', content: task.question });
        const last = s.requests[s.requests.length - 1]!.body.messages;
        assert.deepEqual(last.map((m) => m.role), ['system', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
        assert.match(last[2]!.content, /^Thought: .*\n<\|tool_call\|>\{"tool": "search", "args": \{"query": /);
        assert.ok(!last[2]!.content.includes('<|assistant|>') && !last[2]!.content.includes('<|end|>'));
        assert.match(last[3]!.content, /^Observation: \[1\] /);
        assert.match(last[7]!.content, /^Observation: -?[0-9]/);
        assert.deepEqual(chatMessages(`${r.transcript.slice(0, r.transcript.lastIndexOf(ASST))}${ASST}`, exemplars), last);
      }),
    );
  });

  it("a world's tool list without calc: the system message shows its schemas and call forms only, and no exemplar that calls calc", async () => {
    const searchOnly = [AGENT_TOOLS[0]!];
    await withServer(asStub(), async (s) => {
      const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', tools: searchOnly, ...fast });
      const task = [...pool.heldout, ...pool.train].find((t) => t.kind === 'lookup')!;
      const r = await rolloutAsync(task, teacher, env);
      assert.ok(r.solved, 'the lookup is still solved');
      const system = s.requests[0]!.body.messages[0]!.content;
      assert.ok(system.includes(JSON.stringify(searchOnly, null, 2)), "the list's schemas");
      assert.doesNotMatch(system, /"name": "calc"/);
      assert.doesNotMatch(system, /\{"tool": "calc"/, 'no calc call form, no calc exemplar');
      assert.match(system, /Look facts up with search; never answer from memory\./);
      const lookupExemplar = defaultExemplars().find((e) => !e.includes('{"tool": "calc"'))!;
      assert.ok(system.includes(lookupExemplar), 'the search-only exemplar stays');
    });
    // The default list: the calc call form and the sentence as before.
    const message = teacherSystemMessage(SYSTEM_PROMPT, []);
    assert.ok(message.includes('<|tool_call|>{"tool": "search", "args": {"query": "<keywords>", "k": 2}}\nor\n<|tool_call|>{"tool": "calc", "args": {"expr": "<arithmetic, digits and + - * / ( ) only>"}}\nor the final answer'));
    assert.ok(message.includes('Look facts up with search and compute with calc; never answer from memory.'));
    assert.ok(message.includes(JSON.stringify(AGENT_TOOLS, null, 2)));
  });

  // The CLI and the extension read the key from the environment (the --teacher http test below); core/ reads none.
  it('sends no Authorization header without a key, whatever the environment holds', async () => {
    await withEnv({ [API_KEY_ENV]: 'sk-in-the-env-only-0123' }, () =>
      withServer(asStub(), async (s) => {
        await rolloutAsync(tasks[0]!, makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast }), env);
        assert.equal(s.requests[0]!.headers['authorization'], undefined);
      }),
    );
  });

  it('distill through it keeps the stub transcripts byte for byte, the raw replies beside them (a server that does not cut at <|end|> too)', async () => {
    for (const cut of [true, false]) {
      await withServer(asStub(cut), async (s) => {
        const stats = newDistillStats();
        const rows = await distillAsync(tasks, makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast }), env, { samplesPerTask: 2, concurrency: 4, stats });
        const want = distill(tasks, stub, env, 2);
        assert.deepEqual(
          rows.map(({ teacher_raw: _raw, ...rest }) => rest),
          want,
        );
        for (const row of rows) {
          assert.deepEqual(Object.keys(row), ['task', 'text', 'kind', 'teacher_raw']);
          assert.equal(row.teacher_raw!.length, row.text.split(ASST).length - 1);
          if (!cut) assert.ok(row.teacher_raw!.every((raw) => raw.includes('(the server kept writing)')));
        }
        assert.deepEqual(stats.failed, {});
      });
    }
  });

  it('re-renders a non-canonical call and keeps the raw reply in teacher_raw', async () => {
    const raw0 = 'Thought: I add with the calculator.\n<|tool_call|>{"args": {"expr": "2+2"},   "tool":"calc"}';
    const raw1 = 'Thought: I have it.\nAnswer: 4';
    await withServer((_req, n) => completion(n === 1 ? raw0 : raw1), async (s) => {
      const rows = await distillAsync([TWO_PLUS_TWO], makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast }), env, { samplesPerTask: 1 });
      assert.equal(rows.length, 1);
      assert.ok(rows[0]!.text.includes('<|assistant|>Thought: I add with the calculator.\n<|tool_call|>{"tool": "calc", "args": {"expr": "2+2"}}<|end|><|tool_result|>4<|end|>'));
      assert.ok(!rows[0]!.text.includes('"args": {"expr": "2+2"},   "tool"'));
      assert.deepEqual(rows[0]!.teacher_raw, [raw0, raw1]);
    });
  });

  /** One rollout of 2+2 through a server; returns the stats. */
  async function oneRollout(handle: (req: Recorded, n: number) => Reply, opts: Partial<Parameters<typeof makeHttpTeacher>[0]> = {}) {
    return withServer(handle, async (s) => {
      const stats = newDistillStats();
      const rows = await distillAsync([TWO_PLUS_TWO], makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast, ...opts }), env, { samplesPerTask: 1, stats });
      return { rows, stats, requests: s.requests.length };
    });
  }

  it('a malformed reply is a failed rollout (malformed), not a crash', async () => {
    for (const content of ['Thought: hmm\n<|tool_call|>{"tool": calc, args}', 'Sure! The answer is four.', '<html>oops']) {
      const r = await oneRollout(() => completion(content));
      assert.deepEqual(r.stats.failed, { malformed: 1 }, content);
      assert.equal(r.rows.length, 0);
    }
    const notJson = await oneRollout(() => ({ text: 'not json at all' }));
    assert.deepEqual(notJson.stats.failed, { malformed: 1 });
  });

  it('a 500 then a success is retried and solves', async () => {
    const r = await oneRollout(
      (_req, n) => (n === 1 ? { status: 500, json: { error: { message: 'overloaded' } } } : completion(n === 2 ? 'Thought: c\n<|tool_call|>{"tool": "calc", "args": {"expr": "2+2"}}' : 'Thought: d\nAnswer: 4')),
      { retries: 2 },
    );
    assert.deepEqual(r.stats.failed, {});
    assert.equal(r.rows.length, 1);
    assert.equal(r.requests, 3);
  });

  it('a 429 with Retry-After is retried; a 500 forever fails as http 500 after the retries', async () => {
    const limited = await oneRollout((_req, n) => (n === 1 ? { status: 429, headers: { 'retry-after': '0' }, json: {} } : completion('Thought: d\nAnswer: 4')), { retries: 1 });
    assert.equal(limited.rows.length, 1);
    const r = await oneRollout(() => ({ status: 500, json: { error: { message: 'internal' } } }), { retries: 2 });
    assert.deepEqual(r.stats.failed, { 'http 500': 1 });
    assert.equal(r.requests, 3);
    assert.match(r.stats.failureExamples['http 500']!, /internal/);
  });

  it('a server that never answers times out (timeout) within the per-request limit', async () => {
    const t0 = Date.now();
    const r = await oneRollout(() => 'hang', { timeoutMs: 150, retries: 1 });
    assert.deepEqual(r.stats.failed, { timeout: 1 });
    assert.equal(r.requests, 2);
    assert.ok(Date.now() - t0 < 3000);
  });

  it('refusals (content_filter, an empty reply, a refusal field) are failed rollouts (refusal)', async () => {
    for (const reply of [completion('Thought: x\nAnswer: 4', 'content_filter'), completion(''), completion(null), completion(null, 'stop', { refusal: 'I cannot help with that.' })]) {
      const r = await oneRollout(() => reply);
      assert.deepEqual(r.stats.failed, { refusal: 1 });
    }
  });

  it('a 400 fails at once with the server message; 401/404 stop the run (fatal); a closed port is a network failure', async () => {
    const bad = await oneRollout(() => ({ status: 400, json: { error: { message: 'context too long' } } }), { retries: 3 });
    assert.deepEqual(bad.stats.failed, { 'http 400': 1 });
    assert.equal(bad.requests, 1);
    assert.match(bad.stats.failureExamples['http 400']!, /context too long/);
    await withServer(() => ({ status: 401, json: { error: { message: 'Incorrect API key provided' } } }), async (s) => {
      await assert.rejects(
        distillAsync(tasks, makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', ...fast }), env, { samplesPerTask: 2, concurrency: 2 }),
        (e: unknown) => e instanceof TeacherError && e.fatal && e.reason === 'http 401' && /Incorrect API key/.test(e.message),
      );
      assert.ok(s.requests.length <= 3, 'no new rollouts after a fatal failure');
    });
    const closed = await chatCompletionsServer(() => completion('x'));
    await closed.close();
    const stats = newDistillStats();
    await distillAsync([TWO_PLUS_TWO], makeHttpTeacher({ baseUrl: closed.baseUrl, model: 'm', ...fast }), env, { samplesPerTask: 1, stats });
    assert.deepEqual(stats.failed, { network: 1 });
  });

  it('validates its options with clear errors', () => {
    const ok = { baseUrl: 'http://127.0.0.1:1/v1', model: 'm' };
    for (const [o, msg] of [
      [{ ...ok, baseUrl: 'not a url' }, /not a URL/],
      [{ ...ok, baseUrl: 'ftp://host/v1' }, /http or https/],
      [{ ...ok, baseUrl: 'http://user:pw@host/v1' }, /no credentials/],
      [{ ...ok, model: ' ' }, /model/],
      [{ ...ok, temperature: 3 }, /temperature/],
      [{ ...ok, retries: -1 }, /retries/],
      [{ ...ok, timeoutMs: 0.5 }, /timeout/],
      [{ ...ok, maxTokens: 0 }, /max tokens/],
    ] as const) {
      assert.throws(() => makeHttpTeacher(o), (e: unknown) => e instanceof TeacherConfigError && msg.test(e.message), JSON.stringify(o));
    }
  });
});

// ---- the CLI ----------------------------------------------------------------------------

describe('agent-lab distill with real teachers (in-process CLI)', () => {
  const tasks = pool.heldout.slice(0, 4);
  let world: string;
  before(() => {
    world = path.join(tmp, 'world');
    fs.mkdirSync(world, { recursive: true });
    fs.writeFileSync(path.join(world, 'corpus.jsonl'), corpus.map((p) => JSON.stringify(passageToRow(p)) + '\n').join(''));
    fs.writeFileSync(path.join(world, 'heldout.jsonl'), tasks.map((t) => JSON.stringify(taskToRow(t)) + '\n').join(''));
  });

  it('--teacher http end to end against the local chat-completions server; the key reaches the header and no file or log', async () => {
    const key = 'sk-never-in-a-file-9f3c';
    await withEnv({ [API_KEY_ENV]: key }, () =>
      withServer(asStub(), async (s) => {
        const out = path.join(tmp, 'http.traces.jsonl');
        const r = await capture(() =>
          main(['distill', '--split', 'heldout', '--world', world, '--teacher', 'http', '--teacher-url', s.baseUrl, '--teacher-model', 'test-teacher', '--samples', '2', '--retries', '0', '--out', out]),
        );
        assert.equal(r.code, 0, r.stderr);
        const rows = readJsonl(out);
        assert.deepEqual(
          rows.map(({ teacher_raw: _raw, ...rest }) => rest),
          distill(tasks, stub, env, 2),
        );
        assert.ok(rows.every((row) => Array.isArray(row['teacher_raw'])));
        assert.match(r.stdout, /rollouts 8, solved 8, kept \d+ \(de-duplicated\), failed 0/);
        assert.match(r.stderr, /distill 4\/4 tasks/);
        assert.ok(s.requests.every((q) => q.headers['authorization'] === `Bearer ${key}`));
        assert.ok(!r.stdout.includes(key) && !r.stderr.includes(key));
        const files = fs.readdirSync(tmp, { recursive: true, withFileTypes: true }).filter((d) => d.isFile());
        for (const f of files) assert.ok(!fs.readFileSync(path.join(f.parentPath ?? f.path, f.name), 'utf8').includes(key), f.name);
      }),
    );
  });

  it('counts failures by reason in the summary, and a fatal 401 exits 1 with the server message', async () => {
    await withServer((_req, n) => (n % 2 ? { status: 503, json: { error: { message: 'busy' } } } : asStub()(_req)), async (s) => {
      const out = path.join(tmp, 'flaky.traces.jsonl');
      const r = await capture(() =>
        main(['distill', '--split', 'heldout', '--world', world, '--teacher', 'http', '--teacher-url', s.baseUrl, '--teacher-model', 'm', '--samples', '1', '--retries', '0', '--concurrency', '1', '--out', out]),
      );
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /failed [1-9]\d* \(http 503 [1-9]/);
      assert.match(r.stderr, /failed rollout .*busy/);
    });
    await withServer(() => ({ status: 401, json: { error: { message: 'Incorrect API key provided' } } }), async (s) => {
      const out = path.join(tmp, 'denied.traces.jsonl');
      const r = await capture(() =>
        main(['distill', '--split', 'heldout', '--world', world, '--teacher', 'http', '--teacher-url', s.baseUrl, '--teacher-model', 'm', '--out', out]),
      );
      assert.equal(r.code, 1);
      assert.match(r.stderr, /http 401: Incorrect API key provided/);
      assert.equal(fs.existsSync(out), false);
    });
  });

  it('usage errors exit 2 with a clear message', async () => {
    await withEnv({ [BASE_URL_ENV]: undefined, [MODEL_ENV]: undefined }, async () => {
      const out = path.join(tmp, 'x.jsonl');
      const cases: [string[], RegExp][] = [
        [['--teacher', 'http', '--teacher-model', 'm'], /needs --teacher-url/],
        [['--teacher', 'http', '--teacher-url', 'http://127.0.0.1:9/v1'], /needs --teacher-model/],
        [['--teacher', 'http', '--teacher-url', 'ftp://x', '--teacher-model', 'm'], /http or https/],
        [['--teacher', 'http', '--teacher-url', 'http://127.0.0.1:9/v1', '--teacher-model', 'm', '--temperature', 'hot'], /--temperature' needs a number/],
        [['--teacher-url', 'http://127.0.0.1:9/v1'], /--teacher-url applies to --teacher http only/],
        [['--teacher', 'student'], /needs --run DIR/],
        [['--teacher', 'student', '--run', path.join(tmp, 'nope')], /not a run folder/],
        [['--teacher', 'http', '--run', 'x', '--teacher-url', 'http://h/v1', '--teacher-model', 'm'], /--run applies to --teacher student only/],
      ];
      for (const [args, msg] of cases) {
        const r = await capture(() => main(['distill', '--split', 'heldout', '--world', world, ...args, '--out', out]));
        assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, msg);
        assert.match(r.stderr, /usage: agent-lab distill/);
      }
      assert.equal(fs.existsSync(out), false);
    });
  });

  it('--teacher-url / --teacher-model fall back to AGENT_LAB_TEACHER_BASE_URL / AGENT_LAB_TEACHER_MODEL', async () => {
    await withServer(asStub(), (s) =>
      withEnv({ [BASE_URL_ENV]: s.baseUrl, [MODEL_ENV]: 'env-model' }, async () => {
        const out = path.join(tmp, 'envs.traces.jsonl');
        const r = await capture(() => main(['distill', '--split', 'heldout', '--world', world, '--teacher', 'http', '--samples', '1', '--out', out]));
        assert.equal(r.code, 0, r.stderr);
        assert.equal(s.requests[0]!.body.model, 'env-model');
        assert.equal(readJsonl(out).length, distill(tasks, stub, env, 1).length);
      }),
    );
  });
});

// ---- the student as the teacher ------------------------------------------------------

describe('student teacher', () => {
  const tok = trainDefaultTokenizer();
  const endId = tok.specialIds['<|end|>'];

  /** A student that writes the stub's step for whatever prompt it is given. */
  function oraclePolicy(): Policy {
    return {
      vocab: tok.vocabSize,
      maxContext: 4096,
      newSession(): DecodeSession {
        const history: number[] = [];
        let promptLen = -1;
        let script: number[] = [];
        return {
          append(ids) {
            history.push(...ids);
            if (promptLen < 0) {
              promptLen = history.length;
              script = [...tok.encode(splitOnce(stub(tok.decode(history)), END)[0]), endId];
            }
            const l = new Float32Array(tok.vocabSize).fill(-10);
            l[script[history.length - promptLen] ?? endId] = 10;
            return l;
          },
          dispose() {},
        };
      },
    };
  }

  it('generates one step per prompt through the runtime: an oracle student reproduces the stub transcripts', async () => {
    const tasks = pool.heldout.slice(0, 6);
    const runtime = new AgentRuntime(oraclePolicy(), tok, env, tokenizerCallMask(tok));
    const teacher = runtimeTeacher(runtime, { temperature: 0.7, random: () => 0.5 });
    const rows = await distillAsync(tasks, teacher, env, { samplesPerTask: 1, concurrency: 1 });
    assert.deepEqual(rows, distill(tasks, stub, env, 1));
  });

  it('a freshly initialised student of a run folder gives canonical steps or counted failures, and distill --teacher student runs', async function () {
    this.timeout(60000);
    await initBackend('wasm');
    const run = path.join(tmp, 'run');
    fs.mkdirSync(run, { recursive: true });
    fs.writeFileSync(path.join(run, 'tokenizer.json'), canonicalTokenizerJson(tok));
    const model = StackModel.create({ vocab: tok.vocabSize, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 32, maxSeq: 1024, ropeBase: 10000 }, 1);
    await saveCheckpoint(run, 0, model, null, {});
    model.dispose();

    const student = await makeStudentTeacher({ runDir: run, backend: 'wasm', seed: 3, temperature: 0.7 });
    assert.equal(student.checkpoint, 'step-0');
    const prompt = `${SYS}${SYSTEM_PROMPT}${END}${USER}${pool.heldout[0]!.question}${END}${ASST}`;
    const outcomes: string[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        try {
          const step = (await student.teacher(prompt)) as string;
          assert.equal(canonicalStep(step), step, 'a canonical step');
          assert.notEqual(parseAssistantStep(splitOnce(step, END)[0]).kind, 'malformed');
          outcomes.push(step);
        } catch (err) {
          assert.ok(err instanceof TeacherError && ['malformed', 'off-grammar', 'context'].includes(err.reason), String(err));
          outcomes.push(err.message); // names the generated text
        }
      }
    } finally {
      student.dispose();
    }
    assert.ok(new Set(outcomes).size > 1, `samples differ at temperature 0.7: ${JSON.stringify(outcomes)}`);

    const world = path.join(tmp, 'world-student');
    fs.mkdirSync(world, { recursive: true });
    fs.writeFileSync(path.join(world, 'corpus.jsonl'), corpus.map((p) => JSON.stringify(passageToRow(p)) + '\n').join(''));
    fs.writeFileSync(path.join(world, 'heldout.jsonl'), pool.heldout.slice(0, 3).map((t) => JSON.stringify(taskToRow(t)) + '\n').join(''));
    const out = path.join(tmp, 'student.traces.jsonl');
    const r = await capture(() =>
      main(['distill', '--split', 'heldout', '--world', world, '--teacher', 'student', '--run', run, '--backend', 'wasm', '--samples', '2', '--seed', '5', '--out', out]),
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /teacher: the student of .*checkpoint step-0/);
    const m = /rollouts (\d+), solved (\d+), kept (\d+) \(de-duplicated\), failed (\d+)/.exec(r.stdout);
    assert.ok(m, r.stdout);
    assert.equal(Number(m[1]), 6);
    assert.ok(Number(m[2]) + Number(m[4]) <= 6);
    const rows = readJsonl(out);
    assert.equal(rows.length, Number(m[3]));
    for (const row of rows) {
      const task = pool.heldout.find((t) => t.question === row['task'])!;
      assert.equal(normalize(finalAnswer(row['text'] as string)), normalize(task.gold), 'every kept row is solved');
    }
  });
});
