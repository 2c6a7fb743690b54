// The agent runtime with scripted policies: an oracle that replays the teacher's tokens
// must reproduce the teacher's transcript byte for byte, with generated flags exactly on
// the tokens the loss mask supervises; guards and the forced answer fire as specified.
import * as assert from 'node:assert/strict';
import { ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { accepts, startStates, step, type StateSet } from '../../core/grammar';
import { encodeWithMask } from '../../core/sftFormat';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { AgentRuntime, CallMask, DecodeSession, FORCED_ANSWER_TEXT, Policy, REPEATED_CALL } from '../../trainer/agent/agentRuntime';
import { initBackend } from '../../trainer/model/backend';
import { StackModel } from '../../trainer/model/model';
import { modelPolicy, tokenizerCallMask } from '../../trainer/agent/policy';
import { scriptedPolicy as scriptedPolicyOf } from '../support/scriptedPolicy';

const tok = trainDefaultTokenizer();
const corpus = buildCorpus();
const env = new ToolEnv(corpus);
const pool = makeTaskPool();
const traces = distill(pool.heldout, makeStubTeacher(pool.heldout), env, 1);

/** Logits with one hot token (test/support/scriptedPolicy.ts), over the run tokenizer's vocabulary unless told. */
function scriptedPolicy(next: (history: readonly number[]) => number, vocab = tok.vocabSize): Policy {
  return scriptedPolicyOf(vocab, next);
}

/** A character-level mask: feed each token's decoded text to the acceptor (slow, obviously right). */
const naiveMask: CallMask = {
  start: () => startStates(),
  apply(logits, states) {
    for (let id = 0; id < logits.length; id++) {
      if (id === 3) {
        if (!accepts(states)) logits[id] = -Infinity;
        continue;
      }
      if (tok.isSpecial(id)) {
        logits[id] = -Infinity;
        continue;
      }
      let st: StateSet = states;
      for (const ch of tok.decode([id])) {
        st = step(st, ch);
        if (st.length === 0) break;
      }
      if (st.length === 0) logits[id] = -Infinity;
    }
  },
  advance(states, id) {
    let st = states;
    for (const ch of tok.decode([id])) st = step(st, ch);
    return st;
  },
};

describe('agent runtime', () => {
  it('an oracle policy reproduces every teacher transcript, flagging exactly the supervised tokens as generated', () => {
    for (const mask of [null, naiveMask]) {
      for (const row of traces.slice(0, mask ? 6 : traces.length)) {
        const task = pool.heldout.find((t) => t.question === row.task)!;
        const want = encodeWithMask(row.text, tok);
        const policy = scriptedPolicy((h) => want.ids[h.length] ?? 3);
        const ep = new AgentRuntime(policy, tok, env, mask).run(task);
        assert.equal(ep.text, row.text);
        assert.deepEqual(ep.ids, want.ids);
        assert.deepEqual(ep.generated, want.supervised.map((s) => (s ? 1 : 0)));
        assert.equal(ep.solved, true);
        assert.equal(ep.outOfSteps, false);
      }
    }
  });

  it('the grammar mask keeps a policy that prefers a bad k inside the call grammar', () => {
    const task = pool.heldout[0]!;
    const zero = tok.encode('0')[0]!;
    const one = tok.encode('1')[0]!;
    // Replays the teacher, but always ranks "0" first and "1" second once inside a call's k.
    const row = traces.find((r) => r.task === task.question)!;
    const want = encodeWithMask(row.text, tok).ids;
    const policy: Policy = {
      vocab: tok.vocabSize,
    maxContext: 4096,
      newSession() {
        const history: number[] = [];
        return {
          append(ids) {
            history.push(...ids);
            const l = new Float32Array(tok.vocabSize).fill(-10);
            const text = tok.decode(history);
            if (text.endsWith('"k": ')) {
              l[zero] = 10;
              l[one] = 9;
            } else l[want[history.length] ?? 3] = 10;
            return l;
          },
          dispose() {},
        };
      },
    };
    const constrained = new AgentRuntime(policy, tok, env, naiveMask).run(task, { maxSteps: 1 });
    assert.match(constrained.record[0]!.text, /"k": 1\}\}$/);
    const free = new AgentRuntime(policy, tok, env, naiveMask).run(task, { maxSteps: 1, constrained: false });
    assert.match(free.record[0]!.text, /"k": 0/);
  });

  it('guards a repeated call and forces one answer when out of steps', () => {
    const task = pool.heldout[0]!;
    const call = tok.encode('Thought: again.\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+1"}}<|end|>');
    const answer = tok.encode(' 42<|end|>');
    const policy = scriptedPolicy((h) => {
      const text = tok.decode(h);
      const lastAsst = text.lastIndexOf('<|assistant|>');
      const turn = text.slice(lastAsst + '<|assistant|>'.length);
      if (turn.startsWith(FORCED_ANSWER_TEXT)) return answer[tok.encode(turn.slice(FORCED_ANSWER_TEXT.length)).length] ?? 3;
      return call[tok.encode(turn).length] ?? 3;
    });
    const ep = new AgentRuntime(policy, tok, env, null).run(task, { maxSteps: 3 });
    assert.equal(ep.steps, 3);
    assert.equal(ep.record[0]!.observation, '2');
    assert.equal(ep.record[1]!.guard, 'RepeatedCall');
    assert.equal(ep.record[1]!.observation, REPEATED_CALL);
    assert.equal(ep.outOfSteps, true);
    assert.equal(ep.answer, '42');
    // The forced text is the harness's: its tokens are flagged not generated.
    const forcedAt = ep.text.lastIndexOf(FORCED_ANSWER_TEXT);
    const prefixTokens = tok.encode(ep.text.slice(0, forcedAt)).length;
    const forcedTokens = tok.encode(FORCED_ANSWER_TEXT).length;
    assert.deepEqual(ep.generated.slice(prefixTokens, prefixTokens + forcedTokens), new Array(forcedTokens).fill(0));
  });

  it('closes a turn that never ends and flags that <|end|> as the harness', () => {
    const task = pool.heldout[1]!;
    const a = tok.encode('a')[0]!;
    const ep = new AgentRuntime(scriptedPolicy(() => a), tok, env, null).run(task, { maxSteps: 1, maxTurnTokens: 5 });
    assert.equal(ep.record[0]!.truncated, true);
    const endPositions = ep.ids.map((id, i) => (id === 3 ? i : -1)).filter((i) => i >= 0);
    assert.equal(ep.generated[endPositions[2]!], 0);
  });

  it('runBatch and runBatchAsync: oracle episodes in lockstep, through a batched append, equal run() one by one', async () => {
    const rows = traces.slice(0, 8);
    const tasks = rows.map((row) => pool.heldout.find((t) => t.question === row.task)!);
    const wants = rows.map((row) => encodeWithMask(row.text, tok));
    const oracle = (h: readonly number[], want: { ids: number[] }) => want.ids[h.length] ?? 3;
    // A policy whose sessions know their own script; appendBatch counts how many tokens went batched.
    let batchedTokens = 0;
    const histories = new Map<DecodeSession, { h: number[]; want: { ids: number[] } }>();
    let nextWant = 0;
    const logitsFor = (id: number) => {
      const l = new Float32Array(tok.vocabSize).fill(-10);
      l[id] = 10;
      return l;
    };
    const policy: Policy = {
      vocab: tok.vocabSize,
      maxContext: 4096,
      newSession() {
        const st = { h: [] as number[], want: wants[nextWant++]! };
        const session: DecodeSession = {
          append(ids) {
            st.h.push(...ids);
            return logitsFor(oracle(st.h, st.want));
          },
          dispose() {},
        };
        histories.set(session, st);
        return session;
      },
      appendBatch(sessions, ids) {
        batchedTokens += ids.length;
        assert.equal(new Set(sessions).size, sessions.length);
        return sessions.map((s, k) => {
          const st = histories.get(s)!;
          st.h.push(ids[k]!);
          return logitsFor(oracle(st.h, st.want));
        });
      },
    };
    const runtime = new AgentRuntime(policy, tok, env, naiveMask);
    // The same schedule driven synchronously and asynchronously (the policy has no async decoding: its sync one is awaited).
    for (const drive of [() => runtime.runBatch(tasks.map((task) => ({ task }))), () => runtime.runBatchAsync(tasks.map((task) => ({ task })))]) {
      nextWant = 0;
      batchedTokens = 0;
      const eps = await drive();
      eps.forEach((ep, i) => {
        assert.equal(ep.text, rows[i]!.text);
        assert.deepEqual(ep.ids, wants[i]!.ids);
        assert.deepEqual(ep.generated, wants[i]!.supervised.map((s) => (s ? 1 : 0)));
        assert.equal(ep.solved, true);
      });
      const generatedTotal = eps.reduce((n, e) => n + e.generated.reduce((a, b) => a + b, 0), 0);
      assert.ok(batchedTokens > generatedTotal / 2, `most sampled tokens went through the batched append (${batchedTokens} of ${generatedTotal})`);
    }
  });

  it('runBatch with a real model (batched KV-cache steps) decodes greedily what run() decodes', async () => {
    await initBackend('wasm');
    const model = StackModel.create({ vocab: tok.vocabSize, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 48, maxSeq: 400, ropeBase: 10000 }, 5);
    const runtime = new AgentRuntime(modelPolicy(model, tok.vocabSize), tok, env, tokenizerCallMask(tok));
    const tasks = pool.heldout.slice(0, 4);
    const options = { maxSteps: 2, maxTurnTokens: 24, temperature: 0 };
    const one = tasks.map((task) => runtime.run(task, options));
    const batch = runtime.runBatch(tasks.map((task) => ({ task, options })));
    batch.forEach((ep, i) => {
      assert.deepEqual(ep.ids, one[i]!.ids);
      assert.deepEqual(ep.generated, one[i]!.generated);
      assert.equal(ep.text, one[i]!.text);
    });
    model.dispose();
  });
});
