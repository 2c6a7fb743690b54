// Issue 36, finding 2: messages were cut to a length (300 characters of an HTTP error body,
// 120 of a non-JSON reply, 200 of a refusal, 160 of a malformed step) before the API key was
// redacted, so a key straddling the cut survived minus its tail. These tests put the key at
// every position around each cut, on each surface a reply reaches a message through.
import * as assert from 'node:assert/strict';
import { makeHttpTeacher } from '../../core/teachers/http';
import { redactSecrets } from '../../core/teachers/redact';
import { TeacherError } from '../../core/teachers/teacher';
import { ASST, END, SYS, USER } from '../../core/wire';

const PROMPT = `${SYS}You are an agent.${END}${USER}What is 2+2?${END}${ASST}`;
const KEYS = ['sk-abcdefgh', 'sk-test-0123456789abcdef', `sk-proj-${'Zq7'.repeat(15)}`];

/** Any 6 characters of the key in a row: enough to call it leaked. */
function leaks(text: string, key: string): string | null {
  for (let i = 0; i + 6 <= key.length; i++) if (text.includes(key.slice(i, i + 6))) return key.slice(i, i + 6);
  return null;
}

type Surface = { name: string; cut: number; reply: (payload: string) => Response };
const json = (status: number, v: unknown): Response => new Response(JSON.stringify(v), { status, headers: { 'content-type': 'application/json' } });
const SURFACES: Surface[] = [
  { name: 'a 401 error message (cut at 300)', cut: 300, reply: (m) => json(401, { error: { message: m } }) },
  { name: 'a 500 error message and its retry (cut at 300)', cut: 300, reply: (m) => json(500, { error: { message: m } }) },
  { name: 'a 500 plain-text body (cut at 300)', cut: 300, reply: (m) => new Response(m, { status: 500 }) },
  { name: 'a 200 reply that is not JSON (cut at 120)', cut: 120, reply: (m) => new Response(m, { status: 200 }) },
  { name: 'a 200 refusal (cut at 200)', cut: 200, reply: (m) => json(200, { choices: [{ message: { content: null, refusal: m } }] }) },
  { name: 'a 200 malformed step (cut at 160)', cut: 160, reply: (m) => json(200, { choices: [{ message: { content: `Thought: x\n<|tool_call|>{"tool": ${m}` } }] }) },
  { name: 'a 200 refusal with the key JSON-escaped (cut at 200)', cut: 200, reply: (m) => new Response(JSON.stringify({ choices: [{ message: { refusal: m } }] }).replace(/sk-/g, '\\u0073k-'), { status: 200 }) },
];

async function messageFor(surface: Surface, key: string, payload: string): Promise<string> {
  const teacher = makeHttpTeacher({
    baseUrl: 'http://127.0.0.1:9/v1',
    model: 'm',
    apiKey: key,
    exemplars: [],
    retries: 1,
    backoffMs: 0,
    fetch: (async () => surface.reply(payload)) as typeof fetch,
  });
  try {
    await teacher(PROMPT);
  } catch (err) {
    assert.ok(err instanceof TeacherError, `a TeacherError, got ${String(err)}`);
    return `${err.message}\n${err.detail}`;
  }
  assert.fail(`${surface.name}: the request should fail`);
}

describe('issue 36 finding 2: the API key never leaks through a cut message', function () {
  this.timeout(60_000);

  for (const surface of SURFACES) {
    it(`finding 2: a key at any position around the cut of ${surface.name} never reaches the message`, async () => {
      for (const key of KEYS) {
        // Key positions from well before the cut to past it, so it straddles the cut at every offset.
        for (let start = surface.cut - key.length - 3; start <= surface.cut + 2; start++) {
          const payload = `${'E'.repeat(Math.max(0, start))}${key}${'F'.repeat(20)}`;
          const message = await messageFor(surface, key, payload);
          const leaked = leaks(message, key);
          assert.equal(leaked, null, `${surface.name}, key of ${key.length} at ${start}: "${leaked}" of the key is in ${JSON.stringify(message.slice(-80))}`);
        }
      }
    });
  }

  it('redactSecrets still replaces a whole key and a Bearer token', () => {
    assert.equal(redactSecrets('x sk-test-0123456789abcdef y', 'sk-test-0123456789abcdef'), 'x [redacted] y');
    assert.equal(redactSecrets('Authorization: Bearer abc.def'), 'Authorization: Bearer [redacted]');
  });
});
