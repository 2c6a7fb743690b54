// The distill job (trainer/agent/distillJob.ts) as the worker runs it (runJob with hooks) and
// as the editor reaches it (dist/worker.js over IPC): the stub teacher writes the rows the
// seed's distill() gives and the very file `agent-lab distill` writes; an existing output is
// refused with nothing touched; a cancel writes the finished tasks; the HTTP teacher takes its
// key from the process's environment only (a LOCAL chat-completions test double on
// 127.0.0.1), and the key is in no job, message, log line or file.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { runJob, type JobHooks } from '../../trainer/run/jobs';
import { UserError } from '../../trainer/run/jobRun';
import { ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { API_KEY_ENV } from '../../core/teachers/http';
import type { Task } from '../../core/types';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { toJsonl } from '../../store/files';
import { type DistillJobSpec, type FromWorker, type ToWorker } from '../../core/protocol/worker';
import { capture } from '../support/capture';
import { main } from '../../cli/main';
import { ensureWorkerBuilt, talkToWorker } from '../support/worker';

const corpus = buildCorpus();
const pool = makeTaskPool();
/** Twelve answerable questions and one without hints (no answer key for the stub). */
const hinted = pool.heldout.slice(0, 12);
const HINTLESS: Task = { ...pool.heldout[12]!, question: 'A question with no answer key?', hints: { queries: [], facts: [], op: null } };

interface Heard {
  backends: string[];
  reports: [string, number, number][];
  logs: [string, string][];
}

/** Hooks that record what the job reports; after `cancelAfter` progress reports the job is asked to stop. */
function recordingHooks(cancelAfter = Infinity): JobHooks & Heard {
  const heard: Heard = { backends: [], reports: [], logs: [] };
  return {
    ...heard,
    started: (backend) => void heard.backends.push(backend),
    progress: (phase, done, total) => void heard.reports.push([phase, done, total]),
    metrics: () => {},
    log: (level, message) => void heard.logs.push([level, message]),
    checkpoint: () => {},
    isCancelled: () => heard.reports.length >= cancelAfter,
  };
}

const readRows = (file: string): Record<string, unknown>[] =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function withEnv<T>(vars: Record<string, string | undefined>, f: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (v: Record<string, string | undefined>): void => {
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) delete process.env[k];
      else process.env[k] = x;
    }
  };
  set(vars);
  try {
    return await f();
  } finally {
    set(saved);
  }
}

interface FakeTeacher {
  baseUrl: string;
  authorizations: (string | undefined)[];
  close(): Promise<void>;
}

/** An OpenAI-compatible chat-completions double on 127.0.0.1 that answers each question with its gold at once. */
async function goldTeacher(tasks: readonly Task[]): Promise<FakeTeacher> {
  const gold = new Map(tasks.map((t) => [t.question, t.gold]));
  const authorizations: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      authorizations.push(req.headers['authorization']);
      const messages = (JSON.parse(body) as { messages: { role: string; content: string }[] }).messages;
      const question = messages.filter((m) => m.role === 'user').pop()?.content ?? '';
      const content = `Thought: I know this.\nAnswer: ${gold.get(question) ?? 'no idea'}`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    authorizations,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let tmp: string;
let world: string;
before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-distill-job-'));
  world = path.join(tmp, 'world');
  fs.mkdirSync(world);
  fs.writeFileSync(path.join(world, 'corpus.jsonl'), toJsonl(corpus.map(passageToRow)));
  fs.writeFileSync(path.join(world, 'heldout.jsonl'), toJsonl([...hinted, HINTLESS].map(taskToRow)));
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('the distill job through runJob (as the worker calls it)', function () {
  this.timeout(120_000);

  it("the stub teacher on a world folder: the seed's distill() rows, the CLI's very files and stdout, the hintless question counted", async () => {
    const out = path.join(tmp, 'job', 'heldout.traces.jsonl');
    const hooks = recordingHooks();
    const r = await runJob({ kind: 'distill', split: 'heldout', out, world, samples: 2, roles: true }, hooks);
    assert.equal(r.kind, 'distill');
    assert.equal(r.cancelled, false);
    const want = distill(hinted, makeStubTeacher(hinted), new ToolEnv(corpus), 2);
    assert.deepEqual(readRows(out), want);
    assert.deepEqual([r.summary.out, r.summary.tasks, r.summary.kept, r.summary.unsolved], [out, 12, want.length, { no_hints: 1 }]);
    assert.deepEqual(hooks.backends, ['none']);
    assert.deepEqual(hooks.reports.at(-1), ['distill', 12, 12]);
    assert.match(r.summary.lines[0]!, /^wrote the role split \(split_roles\): .*heldout\.query_writer\.jsonl \(\d+ query-writer pairs\)/);
    assert.match(r.summary.lines[1]!, new RegExp(`^wrote .*heldout\\.traces\\.jsonl: ${want.length} trajectories kept from 12 tasks \\(`));
    assert.equal(r.summary.lines[2], '  unsolved 1 of 13 tasks: no_hints 1');

    const cliOut = path.join(tmp, 'cli', 'heldout.traces.jsonl');
    const c = await capture(() => main(['distill', '--world', world, '--split', 'heldout', '--samples', '2', '--roles', '--out', cliOut]));
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.stdout, r.summary.lines.map((l) => l.replaceAll(path.dirname(out), path.dirname(cliOut))).join('\n'));
    for (const f of ['heldout.traces.jsonl', 'heldout.query_writer.jsonl', 'heldout.synthesizer.jsonl']) {
      assert.equal(fs.readFileSync(path.join(tmp, 'cli', f), 'utf8'), fs.readFileSync(path.join(tmp, 'job', f), 'utf8'), f);
    }
  });

  it('refuses an output that exists (or a role file beside it) before any rollout, and touches nothing', async () => {
    const out = path.join(tmp, 'mine.traces.jsonl');
    fs.writeFileSync(out, 'my own file\n');
    const hooks = recordingHooks();
    await assert.rejects(runJob({ kind: 'distill', split: 'heldout', out, world }, hooks), (e: unknown) => e instanceof UserError && /mine\.traces\.jsonl already exists/.test(e.message));
    assert.equal(fs.readFileSync(out, 'utf8'), 'my own file\n');
    assert.deepEqual([hooks.backends, hooks.reports], [[], []]);

    const fresh = path.join(tmp, 'fresh.traces.jsonl');
    fs.writeFileSync(path.join(tmp, 'fresh.synthesizer.jsonl'), 'mine too\n');
    await assert.rejects(runJob({ kind: 'distill', split: 'heldout', out: fresh, world, roles: true }, recordingHooks()), /fresh\.synthesizer\.jsonl already exists/);
    assert.equal(fs.existsSync(fresh), false);
    assert.equal(fs.existsSync(path.join(tmp, 'fresh.query_writer.jsonl')), false);
    assert.equal(fs.readFileSync(path.join(tmp, 'fresh.synthesizer.jsonl'), 'utf8'), 'mine too\n');
  });

  it('a cancel mid-way stops the stub between chunks: the finished tasks are written, cancelled, no unsolved count', async () => {
    const out = path.join(tmp, 'stopped.traces.jsonl');
    const r = await runJob({ kind: 'distill', split: 'heldout', out, samples: 1 }, recordingHooks(2));
    assert.equal(r.cancelled, true);
    const tasks = pool.heldout;
    assert.ok(r.summary.tasks > 0 && r.summary.tasks < tasks.length, `finished ${r.summary.tasks}`);
    const finished = tasks.slice(0, r.summary.tasks);
    assert.deepEqual(readRows(out), distill(finished, makeStubTeacher(finished), new ToolEnv(corpus), 1));
    assert.match(r.summary.lines[0]!, new RegExp(`kept from ${r.summary.tasks} tasks \\(stopped: ${r.summary.tasks} of ${tasks.length} tasks finished\\)`));
    assert.deepEqual(r.summary.unsolved, {});
  });

  it('the HTTP teacher takes its key from the environment: it reaches the header, and no log line, summary or file', async () => {
    const key = 'sk-distill-job-only-in-env-5e1d';
    const teacher = await goldTeacher(hinted);
    try {
      await withEnv({ [API_KEY_ENV]: key }, async () => {
        const out = path.join(tmp, 'http.traces.jsonl');
        const hooks = recordingHooks();
        const spec: DistillJobSpec = { kind: 'distill', split: 'heldout', out, world, teacher: 'http', teacherUrl: teacher.baseUrl, teacherModel: 'gold', samples: 2, retries: 0 };
        const r = await runJob(spec, hooks);
        assert.equal(r.cancelled, false);
        assert.deepEqual([r.summary.tasks, r.summary.kept, r.summary.unsolved], [13, 12, { wrong_answer: 1 }]);
        assert.deepEqual(hooks.backends, ['none']);
        assert.ok(teacher.authorizations.length >= 26 && teacher.authorizations.every((a) => a === `Bearer ${key}`));
        assert.ok(hooks.logs.some(([, m]) => m === `teacher: gold at ${teacher.baseUrl} (key from ${API_KEY_ENV})`), JSON.stringify(hooks.logs));
        const said = JSON.stringify([hooks.logs, r, spec]) + fs.readFileSync(out, 'utf8');
        assert.ok(!said.includes(key), 'the key is in a log line, the result or the file');
      });
      await withEnv({ [API_KEY_ENV]: undefined }, async () => {
        const hooks = recordingHooks();
        teacher.authorizations.length = 0;
        await runJob({ kind: 'distill', split: 'heldout', out: path.join(tmp, 'nokey.traces.jsonl'), world, teacher: 'http', teacherUrl: teacher.baseUrl, teacherModel: 'gold', samples: 1 }, hooks);
        assert.ok(teacher.authorizations.every((a) => a === undefined));
        assert.ok(hooks.logs.some(([, m]) => m.endsWith(`(no ${API_KEY_ENV}: no Authorization header)`)));
      });
    } finally {
      await teacher.close();
    }
  });

  it("the HTTP teacher hears a cancel: no new rollouts, the finished tasks' rows written", async () => {
    const teacher = await goldTeacher(hinted);
    try {
      const out = path.join(tmp, 'http-stopped.traces.jsonl');
      const r = await runJob(
        { kind: 'distill', split: 'heldout', out, world, teacher: 'http', teacherUrl: teacher.baseUrl, teacherModel: 'gold', samples: 1, concurrency: 1 },
        recordingHooks(3),
      );
      assert.equal(r.cancelled, true);
      assert.ok(r.summary.tasks >= 3 && r.summary.tasks < 13, `finished ${r.summary.tasks}`);
      assert.equal(readRows(out).length, r.summary.kept);
      assert.match(r.summary.lines[0]!, /\(stopped: \d+ of 13 tasks finished\)$/);
    } finally {
      await teacher.close();
    }
  });
});

describe('the distill job through the worker process (dist/worker.js, as the editor runs it)', function () {
  this.timeout(300_000);
  before(function () {
    this.timeout(300_000);
    ensureWorkerBuilt();
  });

  /** The worker's messages for `messages` sent in order (each validated); `env` is the worker's environment. */
  async function talk(messages: ToWorker[], env: NodeJS.ProcessEnv, disconnectAfter?: (m: FromWorker) => boolean): Promise<FromWorker[]> {
    const heard = await talkToWorker(messages, { cwd: tmp, env, ...(disconnectAfter ? { disconnectAfter } : {}) });
    assert.deepEqual(heard.bad, [], 'every message validates');
    return heard.messages;
  }

  it("an HTTP distillation in the worker: the key from the worker's inherited environment, in no message; the summary as in-process", async () => {
    const key = 'sk-worker-env-only-77aa';
    const teacher = await goldTeacher(hinted);
    try {
      const out = path.join(tmp, 'worker-http.traces.jsonl');
      const job: DistillJobSpec = { kind: 'distill', split: 'heldout', out, world, teacher: 'http', teacherUrl: teacher.baseUrl, teacherModel: 'gold', samples: 1 };
      const heard = await talk([{ type: 'start', job }], { ...process.env, [API_KEY_ENV]: key });
      const done = heard.find((m) => m.type === 'done');
      assert.ok(done && done.kind === 'distill', JSON.stringify(heard.slice(-3)));
      assert.deepEqual([done.cancelled, done.summary.tasks, done.summary.kept, done.summary.out], [false, 13, 12, out]);
      assert.ok(heard.some((m) => m.type === 'progress' && m.phase === 'distill' && m.done === 13 && m.total === 13));
      assert.ok(heard.some((m) => m.type === 'log' && m.message.endsWith(`(key from ${API_KEY_ENV})`)));
      assert.ok(teacher.authorizations.every((a) => a === `Bearer ${key}`));
      assert.ok(!JSON.stringify(heard).includes(key), 'the key is in a worker message');
      assert.equal(readRows(out).length, 12);
    } finally {
      await teacher.close();
    }
  });

  it('a job that carries a key is refused by the worker, which says failed and exits on its own; the key in no message; nothing is written', async () => {
    const key = 'sk-in-a-job-is-refused-01';
    const out = path.join(tmp, 'worker-refused.traces.jsonl');
    const job = { kind: 'distill', split: 'heldout', out, world, teacher: 'http', teacherUrl: 'http://127.0.0.1:9/v1', teacherModel: 'm', apiKey: key };
    // No disconnect from this side: the worker must end by itself, or the test times out.
    const heard = await talk([{ type: 'start', job } as unknown as ToWorker], process.env);
    assert.ok(heard.some((m) => m.type === 'log' && m.level === 'error' && /job\.apiKey: a job never carries a credential/.test(m.message)), JSON.stringify(heard));
    assert.ok(heard.some((m) => m.type === 'failed' && /refused: job\.apiKey/.test(m.error)), JSON.stringify(heard));
    assert.ok(!heard.some((m) => m.type === 'started' || m.type === 'done'));
    assert.ok(!JSON.stringify(heard).includes(key));
    assert.equal(fs.existsSync(out), false);
  });
});
