// The HTTP teacher against a hostile chat-completions server on loopback (issue 11,
// findings 4 and 5 and the Low items on the Authorization header and Ctrl-C): the waits
// between retries are measured at the server, failures are counted by reason, a reply of
// any size costs bounded memory, and the API key never leaves the Authorization header.
import * as assert from 'node:assert/strict';
import { ToolEnv } from '../../core/env';
import { distillAsync, newDistillStats } from '../../core/distillAsync';
import { BACKOFF_CAP_MS, makeHttpTeacher, parseRetryAfter, redactSecrets, replyCapBytes, retryDelayMs } from '../../core/teachers/http';
import { TeacherError } from '../../core/teachers/teacher';
import type { Task } from '../../core/types';
import { buildCorpus } from '../../core/world';
import { ASST, END, SYS, USER } from '../../core/wire';
import { summaryLines } from '../../trainer/agent/distillJob';
import { HostileServer, Mode, hostileChatServer } from './hostileChatServer';

const env = new ToolEnv(buildCorpus());
const TASK: Task = { question: 'What is 2+2? Use the calculator.', gold: '4', kind: 'sum', hints: { queries: [], facts: [], op: 'sum' } };
const PROMPT = `${SYS}You are an agent.${END}${USER}${TASK.question}${END}${ASST}`;
const GOOD = 'Thought: I know this one.\nAnswer: 4';
const KEY = 'sk-test-0123456789abcdef';

async function withServer<T>(modeFor: (n: number, body: string) => Mode, f: (s: HostileServer) => Promise<T>): Promise<T> {
  const s = await hostileChatServer(modeFor);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}

async function failure(p: Promise<unknown>): Promise<TeacherError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof TeacherError, `a TeacherError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the request to fail');
}

const gaps = (s: HostileServer): number[] => s.arrivals.slice(1).map((a, i) => a.at - s.arrivals[i]!.at);

describe('HTTP teacher against a hostile server (issue 11)', function () {
  this.timeout(30_000);

  describe('finding 4: retries wait the documented backoff', () => {
    it('finding 4: a 5xx without Retry-After waits 100, 200, 400 ms between attempts (backoffMs 100), not 0', async () => {
      await withServer(
        () => ({ kind: 'status', status: 503 }),
        async (s) => {
          const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', retries: 3, backoffMs: 100, apiKey: KEY, exemplars: [] });
          const err = await failure(teacher(PROMPT));
          assert.equal(err.reason, 'http 503');
          assert.equal(s.arrivals.length, 4);
          const g = gaps(s);
          [100, 200, 400].forEach((want, i) => {
            assert.ok(g[i]! >= want - 5, `wait ${i + 1} was ${g[i]!.toFixed(0)} ms, at least ${want} ms expected`);
            assert.ok(g[i]! < want + 250, `wait ${i + 1} was ${g[i]!.toFixed(0)} ms, about ${want} ms expected`);
          });
        },
      );
    });

    it('finding 4: Retry-After wins (seconds, and an HTTP date), capped at 30 s; a garbage header falls back to the backoff', async () => {
      await withServer(
        (n) => (n === 1 ? { kind: 'status', status: 429, retryAfter: '1' } : n === 2 ? { kind: 'status', status: 500, retryAfter: 'soon, maybe' } : { kind: 'ok', content: GOOD }),
        async (s) => {
          const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', retries: 3, backoffMs: 100, exemplars: [] });
          const reply = await teacher(PROMPT);
          assert.equal(typeof reply === 'string' ? reply : reply.text, GOOD);
          const g = gaps(s);
          assert.ok(g[0]! >= 995 && g[0]! < 1400, `Retry-After: 1 waited ${g[0]!.toFixed(0)} ms`);
          assert.ok(g[1]! >= 195 && g[1]! < 500, `an unreadable Retry-After falls back to the backoff (200 ms), waited ${g[1]!.toFixed(0)} ms`);
        },
      );
      const now = Date.parse('2030-01-01T00:00:00Z');
      assert.equal(parseRetryAfter(null, now), null);
      assert.equal(parseRetryAfter('', now), null);
      assert.equal(parseRetryAfter('2', now), 2000);
      assert.equal(parseRetryAfter('Tue, 01 Jan 2030 00:00:05 GMT', now), 5000);
      assert.equal(retryDelayMs(null, 0, 500, now), 500);
      assert.equal(retryDelayMs(null, 10, 500, now), BACKOFF_CAP_MS);
      assert.equal(retryDelayMs('3600', 0, 500, now), 30_000);
    });
  });

  describe('finding 5: the reply body is capped from max_tokens, read as a stream', () => {
    it('finding 5: a 300 MB reply is an over-long failure after reading at most the cap: bounded memory, under 3 s, not retried', async () => {
      await withServer(
        () => ({ kind: 'huge', bytes: 300 * 1024 * 1024 }),
        async (s) => {
          const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', maxTokens: 64, retries: 2, exemplars: [] });
          global.gc?.();
          const rss0 = process.memoryUsage().rss;
          const t0 = performance.now();
          const err = await failure(teacher(PROMPT));
          const ms = performance.now() - t0;
          const grew = (process.memoryUsage().rss - rss0) / 1048576;
          assert.equal(err.reason, 'over-long');
          assert.match(err.message, new RegExp(`over ${replyCapBytes(64)} bytes`));
          assert.equal(s.arrivals.length, 1, 'an over-long reply is not retried');
          assert.ok(ms < 3000, `took ${ms.toFixed(0)} ms`);
          assert.ok(grew < 64, `the client grew by ${grew.toFixed(0)} MB`);
          // The server could push only what fits the socket buffers before the client went away.
          await new Promise((r) => setTimeout(r, 100));
          assert.ok(s.arrivals[0]!.aborted, 'the client dropped the connection');
          assert.ok(s.arrivals[0]!.sent < 64 * 1024 * 1024, `the server sent ${(s.arrivals[0]!.sent / 1048576).toFixed(0)} MB before the client hung up`);
        },
      );
    });

    it('finding 5: a reply that declares a length over the cap is refused unread; a 5 MB thought in a correct step is over-long', async () => {
      await withServer(
        (n) => (n === 1 ? { kind: 'huge', bytes: 10 * 1024 * 1024, declareLength: true } : { kind: 'ok', content: `Thought: ${'x'.repeat(5 * 1024 * 1024)}\nAnswer: 4` }),
        async (s) => {
          const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', maxTokens: 512, retries: 0, exemplars: [] });
          assert.equal((await failure(teacher(PROMPT))).reason, 'over-long');
          assert.equal((await failure(teacher(PROMPT))).reason, 'over-long');
        },
      );
    });
  });

  it('finding 5: slow and drip replies time out, truncated ones are "truncated" (and retried), 5xx/429 by status: counted by reason, memory bounded', async () => {
    const modes: Mode[] = [
      { kind: 'slow', delayMs: 2000, content: GOOD },
      { kind: 'drip', everyMs: 100, content: GOOD },
      { kind: 'truncated', content: GOOD },
      { kind: 'status', status: 502 },
      { kind: 'status', status: 429, retryAfter: '0' },
      { kind: 'ok', content: GOOD },
    ];
    // Task i's question ends in "#i"; the server answers its every attempt with mode i.
    const tasks = modes.map((_, i) => ({ ...TASK, question: `${TASK.question} #${i}` }));
    await withServer(
      (_n, body) => modes[Number(/#(\d+)/.exec(body)?.[1] ?? 5)]!,
      async (s) => {
        const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', retries: 1, backoffMs: 10, timeoutMs: 400, exemplars: [] });
        const stats = newDistillStats();
        const rows = await distillAsync(tasks, teacher, env, { samplesPerTask: 1, concurrency: 2, stats });
        assert.deepEqual(stats.failed, { timeout: 2, truncated: 1, 'http 502': 1, 'http 429': 1 });
        assert.equal(rows.length, 1);
        assert.equal(stats.kept, 1);
        // Every failing mode was tried twice (retries 1); the good one once.
        assert.equal(s.arrivals.length, 5 * 2 + 1);
        assert.ok(process.memoryUsage().rss < 2 * 1024 * 1024 * 1024);
      },
    );
  });

  describe('Low: the Authorization header', () => {
    it('Low: a server that echoes the Authorization header never puts the key into a message, a summary line or a row', async () => {
      await withServer(
        (n) => (n === 1 ? { kind: 'echo', where: 'error' } : { kind: 'echo', where: 'content' }),
        async (s) => {
          const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', retries: 0, apiKey: KEY, exemplars: [] });
          const stats = newDistillStats();
          const rows = await distillAsync([TASK, { ...TASK, question: `${TASK.question} again` }], teacher, env, { samplesPerTask: 1, concurrency: 1, stats });
          assert.equal(s.arrivals[0]!.authorization, `Bearer ${KEY}`, 'the key is sent in the header');
          assert.equal(stats.failed['http 500'], 1);
          const text = [JSON.stringify(rows), JSON.stringify(stats), ...summaryLines('out.jsonl', stats, 2)].join('\n');
          assert.ok(text.includes('[redacted]'), 'the echoed header shows as [redacted]');
          assert.ok(!text.includes(KEY), `the key leaked: ${text.slice(0, 400)}`);
          assert.ok(!text.includes(KEY.slice(3)), 'no part of the key after the prefix either');
        },
      );
      assert.equal(redactSecrets(`x ${KEY} y Bearer abc.def z`, KEY), 'x [redacted] y Bearer [redacted] z');
    });
  });

  it('Low: Ctrl-C (the abort signal) ends HTTP requests in flight at once: nothing waits for the timeout', async () => {
    await withServer(
      () => ({ kind: 'hang' }),
      async (s) => {
        const teacher = makeHttpTeacher({ baseUrl: s.baseUrl, model: 'm', retries: 2, timeoutMs: 20_000, exemplars: [] });
        const controller = new AbortController();
        const stats = newDistillStats();
        const t0 = performance.now();
        setTimeout(() => controller.abort(), 200);
        const rows = await distillAsync([TASK, { ...TASK, question: 'b' }, { ...TASK, question: 'c' }], teacher, env, { samplesPerTask: 2, concurrency: 4, stats, signal: controller.signal });
        const ms = performance.now() - t0;
        assert.ok(ms < 1500, `stopped after ${ms.toFixed(0)} ms (the request timeout is 20 s)`);
        assert.deepEqual(rows, []);
        assert.equal(stats.cancelled, true);
        assert.deepEqual(stats.failed, {}, 'requests stopped by Ctrl-C are not counted as failures');
        assert.ok(s.arrivals.length >= 1);
      },
    );
  });
});
