// `agent-lab export --format trl-sft|trl-grpo` on a run folder built the cheap way (world +
// stub-teacher distillation + tokenizer, no training). TRL cannot be installed here (Python
// packages come only from Debian), so these tests check the fields TRL documents, render
// the shipped chat template (a TS Jinja subset always; real Jinja2 where python3-jinja2 is
// installed), tokenize with @huggingface/tokenizers, and run grpo/reward.py with python3
// against the lab's own reward.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { exportToTrl } from '../../cli/export';
import { normalize, renderPrompt } from '../../core/distill';
import { CHAT_TEMPLATE, ChatMessage, supervisedSpans, transcriptToMessages } from '../../core/export';
import { splitOnce } from '../../core/pystr';
import { encodeWithMask } from '../../core/sftFormat';
import { tokenizerFromJsonText } from '../../core/tokenizer';
import { ASST, END, SPECIAL_TOKENS, SYS, TOOL_CALL, TOOL_RESULT, USER, parseAssistantStep } from '../../core/wire';
import { assistantTurns, reward } from '../../trainer/agent/eval';
import { dataFiles, prepareRunData } from '../../trainer/sft/prepare';
import { renderJinja } from '../support/miniJinja';
import { referenceUnavailable, repoRoot, runReference } from '../support/reference';

interface Trace {
  task: string;
  text: string;
  kind: string;
}
interface TaskRow {
  question: string;
  gold: string;
  kind: string;
}
type Completion = string | ChatMessage[];

const readJsonl = <T>(file: string): T[] =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);

/** Debian's python3 (where python3-jinja2 lives), else whatever python3 is on PATH. */
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

function python(args: string[], input: unknown, cwd = repoRoot): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(PYTHON, args, {
    cwd,
    input: JSON.stringify(input),
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw new Error(`python3 is needed for this test and could not run (${PYTHON}): ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The lab's verdict on a TRL completion, from the lab's own parts (trainer/agent/eval.ts, core/). */
function labReward(completion: Completion, gold: string): number {
  const opens = [SYS, USER, ASST, TOOL_RESULT].some((m) => typeof completion === 'string' && completion.startsWith(m));
  const turns =
    typeof completion === 'string'
      ? assistantTurns(opens ? completion : ASST + completion)
      : completion.filter((m) => m.role === 'assistant').map((m) => splitOnce(m.content, END)[0]);
  const last = turns[turns.length - 1];
  const action = last === undefined ? null : parseAssistantStep(last);
  const solved = action !== null && action.kind === 'final' && normalize(action.answer) === normalize(gold);
  return reward(solved, turns.length);
}

describe('agent-lab export (Hugging Face TRL; TRL itself is not installable here: the documented fields are checked)', function () {
  this.timeout(60_000);
  let tmp: string;
  let run: string;
  let out: string;
  let traces: Trace[];
  let heldoutTraces: Trace[];

  before(function () {
    tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-export-'));
    run = path.join(tmp, 'run');
    prepareRunData(run, 'seed');
    traces = readJsonl<Trace>(dataFiles(run).trainTraces);
    heldoutTraces = readJsonl<Trace>(dataFiles(run).heldoutTraces);
    out = path.join(tmp, 'out');
    exportToTrl({ format: 'trl-sft', run, out });
    exportToTrl({ format: 'trl-grpo', run, out });
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  describe('trl-sft', () => {
    it('writes the documented layout: tokenizer files, sft/*.jsonl with a manifest, train_sft.py, README.md', () => {
      for (const f of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'README.md', 'train_sft.py', 'sft/messages.jsonl', 'sft/prompt_completion.jsonl', 'sft/manifest.json']) {
        assert.ok(fs.existsSync(path.join(out, f)), f);
      }
      const manifest = JSON.parse(fs.readFileSync(path.join(out, 'sft/manifest.json'), 'utf8'));
      assert.equal(manifest.conversations, traces.length);
      assert.equal(manifest.assistant_turns, traces.reduce((n, t) => n + assistantTurns(t.text).length, 0));
      assert.equal(manifest.max_len, 1024);
    });

    it('messages.jsonl: TRL conversational language-modeling rows {"messages": [{"role", "content"}]}, one per transcript', () => {
      const rows = readJsonl<Record<string, unknown>>(path.join(out, 'sft/messages.jsonl'));
      assert.equal(rows.length, traces.length);
      for (const row of rows) {
        assert.deepEqual(Object.keys(row), ['messages']);
        for (const m of row['messages'] as Record<string, unknown>[]) {
          assert.deepEqual(Object.keys(m), ['role', 'content']);
          assert.ok(['system', 'user', 'assistant', 'tool'].includes(m['role'] as string));
          assert.equal(typeof m['content'], 'string');
        }
      }
      // The tool call stays in the assistant content as the lab renders it.
      const first = (rows[0]!['messages'] as ChatMessage[])[2]!;
      assert.equal(first.role, 'assistant');
      assert.match(first.content, /^Thought: .*\n<\|tool_call\|>\{"tool": "search", "args": \{"query": .*\}\}$/);
    });

    it('the chat template renders every conversation back to its transcript byte for byte, generation blocks = the lab\'s supervised spans (TS Jinja subset)', () => {
      const config = JSON.parse(fs.readFileSync(path.join(out, 'tokenizer_config.json'), 'utf8'));
      assert.equal(config.chat_template, CHAT_TEMPLATE);
      const rows = readJsonl<{ messages: ChatMessage[] }>(path.join(out, 'sft/messages.jsonl'));
      rows.forEach((row, i) => {
        const r = renderJinja(config.chat_template, { messages: row.messages as never, add_generation_prompt: false });
        assert.equal(r.text, traces[i]!.text, `row ${i + 1}`);
        assert.deepEqual(r.generation, supervisedSpans(traces[i]!.text), `row ${i + 1}`);
      });
      assert.throws(() => renderJinja(config.chat_template, { messages: [{ role: 'narrator', content: 'x' }] as never }), /unknown role narrator/);
    });

    it('the same with the real Jinja2 and transformers\' template settings and {% generation %} tracking', function () {
      const rows = readJsonl<{ messages: ChatMessage[] }>(path.join(out, 'sft/messages.jsonl'));
      const r = python([path.join(repoRoot, 'test/support/chat_template.py')], {
        template: CHAT_TEMPLATE,
        cases: rows.map((row) => ({ messages: row.messages, add_generation_prompt: false })),
      });
      if (r.status === 3) {
        console.log(`      (pending: ${r.stderr.trim()} for ${PYTHON}; Debian: apt-get install python3-jinja2)`);
        this.skip();
      }
      assert.equal(r.status, 0, r.stderr);
      const rendered = JSON.parse(r.stdout) as { text: string; generation: [number, number][] }[];
      rendered.forEach((x, i) => {
        assert.equal(x.text, traces[i]!.text, `row ${i + 1}`);
        assert.deepEqual(x.generation, supervisedSpans(traces[i]!.text), `row ${i + 1}`);
      });
    });

    it('prompt_completion.jsonl: one row per assistant turn; prompt+completion is a prefix of the transcript; the completions are exactly the supervised spans', () => {
      const rows = readJsonl<Record<string, string>>(path.join(out, 'sft/prompt_completion.jsonl'));
      let k = 0;
      let checked = 0;
      for (const t of traces) {
        const spans: [number, number][] = [];
        for (let turn = 0; turn < assistantTurns(t.text).length; turn++) {
          const row = rows[k++]!;
          assert.deepEqual(Object.keys(row), ['prompt', 'completion']);
          assert.ok(t.text.startsWith(row['prompt']! + row['completion']!), `row ${k}: a prefix of its transcript`);
          assert.ok(row['prompt']!.endsWith(ASST) && row['completion']!.endsWith(END), `row ${k}`);
          spans.push([row['prompt']!.length, row['prompt']!.length + row['completion']!.length]);
        }
        assert.deepEqual(spans, supervisedSpans(t.text));
        checked++;
      }
      assert.equal(k, rows.length);
      assert.equal(checked, traces.length);
    });

    it('token level, with the exported tokenizer in @huggingface/tokenizers: TRL\'s completion mask (ids(prompt+completion) after ids(prompt)) is the lab\'s loss mask', () => {
      const hf = new Tokenizer(JSON.parse(fs.readFileSync(path.join(out, 'tokenizer.json'), 'utf8')), JSON.parse(fs.readFileSync(path.join(out, 'tokenizer_config.json'), 'utf8')));
      const lab = tokenizerFromJsonText(fs.readFileSync(path.join(run, 'tokenizer.json'), 'utf8'));
      const rows = readJsonl<{ prompt: string; completion: string }>(path.join(out, 'sft/prompt_completion.jsonl'));
      let k = 0;
      let tokens = 0;
      for (const t of traces) {
        const { ids, supervised } = encodeWithMask(t.text, lab);
        assert.deepEqual(hf.encode(t.text).ids, ids, 'same ids as the lab');
        const trl: number[] = [];
        for (let turn = 0; turn < assistantTurns(t.text).length; turn++) {
          const row = rows[k++]!;
          const p = hf.encode(row.prompt).ids;
          const pc = hf.encode(row.prompt + row.completion).ids;
          assert.deepEqual(pc.slice(0, p.length), p, 'the prompt tokens are a prefix of prompt+completion');
          trl.push(...pc.slice(p.length));
        }
        assert.deepEqual(trl, ids.filter((_, i) => supervised[i]));
        tokens += trl.length;
      }
      assert.ok(tokens > 1000, `${tokens} supervised tokens compared`);
    });

    it('tokenizer files: AutoTokenizer fields, eos <|end|>, the nine wire tokens single ids; decode(skip_special_tokens) keeps <|tool_call|> and drops <|end|>', () => {
      const config = JSON.parse(fs.readFileSync(path.join(out, 'tokenizer_config.json'), 'utf8'));
      assert.equal(config.tokenizer_class, 'PreTrainedTokenizerFast');
      assert.deepEqual([config.bos_token, config.eos_token, config.pad_token], ['<|bos|>', '<|end|>', '<|pad|>']);
      assert.equal(config.clean_up_tokenization_spaces, false);
      assert.deepEqual(JSON.parse(fs.readFileSync(path.join(out, 'special_tokens_map.json'), 'utf8')), {
        bos_token: '<|bos|>',
        eos_token: '<|end|>',
        pad_token: '<|pad|>',
      });
      const json = JSON.parse(fs.readFileSync(path.join(out, 'tokenizer.json'), 'utf8'));
      const original = JSON.parse(fs.readFileSync(path.join(run, 'tokenizer.json'), 'utf8'));
      assert.deepEqual(json.model, original.model, 'same vocabulary and merges as the run');
      const hf = new Tokenizer(json, config);
      SPECIAL_TOKENS.forEach((s, id) => assert.deepEqual(hf.encode(s).ids, [id], s));
      const turn = traces[0]!.text.slice(traces[0]!.text.indexOf(ASST) + ASST.length);
      const ids = hf.encode(splitOnce(turn, END)[0] + END).ids;
      const decoded = hf.decode(ids, { skip_special_tokens: true });
      assert.ok(decoded.includes(TOOL_CALL), decoded);
      assert.ok(!decoded.includes(END), decoded);
    });

    it('train_sft.py compiles and uses the documented SFTConfig fields', () => {
      const script = fs.readFileSync(path.join(out, 'train_sft.py'), 'utf8');
      const r = python(['-c', 'import sys\nfor f in sys.argv[1:]: compile(open(f).read(), f, "exec")', path.join(out, 'train_sft.py')], null);
      assert.equal(r.status, 0, r.stderr);
      for (const field of ['SFTConfig(', 'SFTTrainer(', 'completion_only_loss=', 'assistant_only_loss=', 'max_length=None', 'processing_class=tokenizer', 'AutoTokenizer.from_pretrained(HERE)']) {
        assert.ok(script.includes(field), field);
      }
    });
  });

  describe('trl-grpo', () => {
    it('prompts.jsonl: TRL conversational prompt-only rows with gold and kind (extra columns reach the reward as kwargs)', () => {
      const rows = readJsonl<Record<string, unknown>>(path.join(out, 'grpo/prompts.jsonl'));
      const tasks = readJsonl<TaskRow>(dataFiles(run).trainTasks);
      assert.equal(rows.length, tasks.length);
      rows.forEach((row, i) => {
        assert.deepEqual(Object.keys(row), ['prompt', 'gold', 'kind']);
        assert.deepEqual(row['prompt'], [
          { role: 'system', content: transcriptToMessages(traces[0]!.text)[0]!.content },
          { role: 'user', content: tasks[i]!.question },
        ]);
        assert.equal(row['gold'], tasks[i]!.gold);
        assert.equal(row['kind'], tasks[i]!.kind);
      });
    });

    it('no prompt drift: each prompt with add_generation_prompt renders to the SFT transcripts\' prefix up to <|assistant|> (TS subset, and Jinja2 where installed)', function () {
      const rows = readJsonl<{ prompt: ChatMessage[]; gold: string }>(path.join(out, 'grpo/prompts.jsonl'));
      const byQuestion = new Map(traces.map((t) => [t.task, t.text]));
      const rendered = rows.map((r) => renderJinja(CHAT_TEMPLATE, { messages: r.prompt as never, add_generation_prompt: true }).text);
      let compared = 0;
      rows.forEach((row, i) => {
        assert.equal(rendered[i], renderPrompt(row.prompt[1]!.content) + ASST);
        const sft = byQuestion.get(row.prompt[1]!.content);
        if (sft === undefined) return; // a task the teacher did not solve has no transcript
        assert.equal(sft.slice(0, sft.indexOf(ASST) + ASST.length), rendered[i]);
        compared++;
      });
      assert.ok(compared > 150, `${compared} prompts compared with their SFT transcripts`);
      const r = python([path.join(repoRoot, 'test/support/chat_template.py')], {
        template: CHAT_TEMPLATE,
        cases: rows.map((row) => ({ messages: row.prompt, add_generation_prompt: true })),
      });
      if (r.status === 3) return console.log(`      (Jinja2 part pending: ${r.stderr.trim()})`);
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(
        (JSON.parse(r.stdout) as { text: string }[]).map((x) => x.text),
        rendered,
      );
    });

    it('--split heldout: the 50 held-out tasks with their gold answers', () => {
      const held = path.join(tmp, 'held');
      exportToTrl({ format: 'trl-grpo', run, split: 'heldout', out: held });
      const rows = readJsonl<{ prompt: ChatMessage[]; gold: string; kind: string }>(path.join(held, 'grpo/prompts.jsonl'));
      const world = readJsonl<TaskRow>(path.join(run, 'world', 'heldout.jsonl'));
      assert.equal(rows.length, 50);
      assert.deepEqual(
        rows.map((r) => [r.prompt[1]!.content, r.gold, r.kind]),
        world.map((t) => [t.question, t.gold, t.kind]),
      );
    });

    it('reward.py (python3, no TRL) equals the lab\'s reward (trainer/agent/eval.ts reward, core normalize) on teacher episodes, string and conversational, and tricky answers', function () {
      const golds = new Map(readJsonl<TaskRow>(path.join(run, 'world', 'heldout.jsonl')).map((t) => [t.question, t.gold]));
      const cases: { completion: Completion; gold: string; what: string }[] = [];
      for (const t of heldoutTraces) {
        const gold = golds.get(t.task)!;
        const start = t.text.indexOf(ASST) + ASST.length;
        const messages = transcriptToMessages(t.text).slice(2);
        const turns = assistantTurns(t.text);
        cases.push({ completion: t.text.slice(start), gold, what: 'teacher episode, wire text' });
        cases.push({ completion: messages, gold, what: 'teacher episode, messages' });
        cases.push({ completion: t.text, gold, what: 'whole transcript' });
        cases.push({ completion: turns[turns.length - 1]!, gold, what: 'the answer turn alone' });
        cases.push({ completion: turns[0]!, gold, what: 'a first turn (a tool call)' });
        cases.push({ completion: [{ role: 'assistant', content: turns[0]! }], gold, what: 'a tool call, conversational' });
        cases.push({ completion: `Thought: guess.\nAnswer: ${gold}7`, gold, what: 'wrong' });
      }
      const numeric = ['4042', '4042.0', ' 4042 ', '4,042', '4042.', '4042..', '4.042e3', '+4042', '4042\u00a0', '\uff14\uff10\uff14\uff12', '4_042', '4042.5', '-0', 'inf', 'nan', '0x', '', '4042 tokens'];
      for (const a of numeric) cases.push({ completion: `Thought: t.\nAnswer: ${a}`, gold: '4042', what: `numeric ${JSON.stringify(a)}` });
      for (const a of ['-0', '0.0', '0', 'nan', 'inf']) cases.push({ completion: `Answer: ${a}`, gold: a === 'inf' || a === 'nan' ? a : '0', what: `zero/special ${a}` });
      const text = ['Stack-100M', 'stack-100m', 'Stack-100M.', '  Stack-100M ', 'STACK-100M\n', 'Stack - 100M', 'Stack-100M!', 'stack-100m.\n'];
      for (const a of text) cases.push({ completion: `Answer: ${a}`, gold: 'Stack-100M', what: `text ${JSON.stringify(a)}` });
      for (const a of ['adam   w', 'Adam\tW', 'adam\u3000w', 'ADAM W.', 'adamw']) cases.push({ completion: `Answer: ${a}`, gold: 'Adam W', what: `spaces ${JSON.stringify(a)}` });
      const shapes: [string, string][] = [
        ['Answer:\n4042', 'answer on the next line'],
        ['Answer: 4042\n', 'trailing newline'],
        ['Answer: \x1c4042', 'a Python-only whitespace'],
        ['Answer: \nAnswer: 4042', 'two Answer: markers'],
        ['Thought: just\n4042', 'no Answer: (the whole text answers)'],
        ['4042', 'bare answer (the derailment rule: solved)'],
        ['Answer: 4042<|end|>', 'with its <|end|>'],
        ['Thought: x\n<|tool_call|>{"tool": "calc"', 'malformed call'],
        ['Thought: x\n<|tool_call|>{"tool": "calc", "args": {"expr": "4000+42"}}<|end|><|tool_result|>4042<|end|><|assistant|>Thought: done\nAnswer: 4042<|end|>', 'two turns, wire text'],
        ['Thought: x\nAnswer: 4042<|end|><|tool_result|>noise<|end|><|assistant|>Thought: again\n<|tool_call|>{"tool": "calc", "args": {"expr": "1"}}<|end|>', 'ends on a call'],
        [Array.from({ length: 7 }, () => 'Thought: t\n<|tool_call|>{"tool": "search", "args": {"query": "q"}}<|end|><|tool_result|>NoResults<|end|><|assistant|>').join('') + 'Answer: 4042', 'eight turns'],
      ];
      for (const [c, what] of shapes) cases.push({ completion: c, gold: '4042', what });
      cases.push({ completion: [], gold: '4042', what: 'no assistant message' });
      cases.push({ completion: [{ role: 'assistant', content: 'Thought: x\nAnswer: 4042<|end|>' }], gold: '4042', what: 'message with its <|end|>' });
      cases.push({
        completion: [
          { role: 'assistant', content: 'Thought: x\n<|tool_call|>{"tool": "calc", "args": {"expr": "4000+42"}}' },
          { role: 'tool', content: '4042' },
          { role: 'assistant', content: 'Answer: 4042.0' },
        ],
        gold: '4042',
        what: 'two turns, messages',
      });

      const program = [
        'import json, sys',
        'sys.path.insert(0, sys.argv[1])',
        'from reward import reward, normalize',
        'data = json.load(sys.stdin)',
        'print(json.dumps({"rewards": reward([c["completion"] for c in data["cases"]], [c["gold"] for c in data["cases"]], kind=None),',
        '                  "normalized": [normalize(s) for s in data["strings"]]}))',
      ].join('\n');
      const strings = [...numeric, ...text, '1e400', '-1e400', '1e16', '123456789012345678901234567890', '0.1', '1/3', '٤٠٤٢', ' 4042\u2028', 'nan.', '.', '..5', '5..', '\u00a0'];
      const r = python(['-c', program, path.join(out, 'grpo')], { cases, strings });
      assert.equal(r.status, 0, r.stderr);
      const got = JSON.parse(r.stdout) as { rewards: number[]; normalized: string[] };
      assert.equal(got.rewards.length, cases.length);
      let solved = 0;
      cases.forEach((c, i) => {
        const want = labReward(c.completion, c.gold);
        assert.equal(got.rewards[i], want, `${c.what}: python ${got.rewards[i]} vs lab ${want}`);
        if (want > 0.5) solved++;
      });
      assert.deepEqual(got.normalized, strings.map((s) => normalize(s)));
      // Both outcomes occur, so equality is not a constant.
      assert.ok(solved > 100 && solved < cases.length - 100, `${solved} of ${cases.length} solved`);
      console.log(`      reward.py = the lab's reward on ${cases.length} completions (${solved} solved); normalize agrees on ${strings.length} strings`);
      if (referenceUnavailable() === null) {
        assert.deepEqual(runReference<string[]>('from stacklm.agent.distill import normalize\nprint(json.dumps([normalize(s) for s in INPUT]))', strings), got.normalized);
      }
    });

    it('reward.py and train_grpo.py compile; train_grpo.py uses the documented GRPOConfig/GRPOTrainer fields', () => {
      const files = ['train_grpo.py', 'grpo/reward.py'].map((f) => path.join(out, f));
      const r = python(['-c', 'import sys\nfor f in sys.argv[1:]: compile(open(f).read(), f, "exec")', ...files], null);
      assert.equal(r.status, 0, r.stderr);
      const script = fs.readFileSync(path.join(out, 'train_grpo.py'), 'utf8');
      for (const field of ['GRPOConfig(', 'GRPOTrainer(', 'reward_funcs=[reward]', 'num_generations=8', 'temperature=0.8', 'beta=0.02', 'epsilon=0.2', 'remove_unused_columns=False', 'loss_type="dapo"']) {
        assert.ok(script.includes(field), field);
      }
      assert.match(fs.readFileSync(path.join(out, 'grpo/reward.py'), 'utf8'), /^def reward\(completions, gold, \*\*kwargs\):$/m);
    });
  });

  describe('other inputs and bad input', () => {
    it('--data FILE: a traces file (trl-sft) or a task file (trl-grpo), with the default tokenizer', () => {
      const o = path.join(tmp, 'from-data');
      exportToTrl({ format: 'trl-sft', data: dataFiles(run).heldoutTraces, out: o });
      assert.equal(readJsonl(path.join(o, 'sft/messages.jsonl')).length, heldoutTraces.length);
      exportToTrl({ format: 'trl-grpo', data: path.join(run, 'world', 'heldout.jsonl'), out: o });
      assert.equal(readJsonl(path.join(o, 'grpo/prompts.jsonl')).length, 50);
      assert.equal(JSON.parse(fs.readFileSync(path.join(o, 'grpo/manifest.json'), 'utf8')).system_prompt_from, 'the lab default (no SFT data to take it from)');
    });

    async function cli(...args: string[]): Promise<{ code: number; stderr: string }> {
      // Loaded here, not at the top: the CLI pulls in every command's code.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy on purpose; import() would leave tsx's CommonJS hook
      const { main } = require('../../cli/main') as typeof import('../../cli/main');
      const lines: string[] = [];
      const saved: [typeof console.error, typeof console.log] = [console.error, console.log];
      console.error = (...a: unknown[]) => void lines.push(a.join(' '));
      console.log = () => {};
      try {
        return { code: await main(['export', ...args]), stderr: lines.join('\n') };
      } finally {
        [console.error, console.log] = saved;
      }
    }

    it('the CLI: exit 0 on a run; exit 2 with a clear message for a missing run folder, an unknown format, or neither --run nor --data', async () => {
      assert.equal((await cli('--format', 'trl-sft', '--run', run, '--out', path.join(tmp, 'cli'))).code, 0);
      assert.ok(fs.existsSync(path.join(tmp, 'cli', 'sft', 'messages.jsonl')));
      const missing = await cli('--format', 'trl-sft', '--run', path.join(tmp, 'nope'), '--out', path.join(tmp, 'x'));
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /no run folder at .*nope/);
      const format = await cli('--format', 'trl-dpo', '--run', run, '--out', path.join(tmp, 'x'));
      assert.equal(format.code, 2);
      assert.match(format.stderr, /--format' must be one of trl-sft, trl-grpo, hf; got 'trl-dpo'/);
      const neither = await cli('--format', 'trl-sft', '--out', path.join(tmp, 'x'));
      assert.equal(neither.code, 2);
      assert.match(neither.stderr, /give --run DIR or --data FILE/);
      assert.doesNotMatch(missing.stderr + format.stderr + neither.stderr, /\n\s+at /, 'no stack trace');
      assert.ok(!fs.existsSync(path.join(tmp, 'x')), 'nothing written on bad input');
    });

    it('a corrupt data line, a row without a transcript, a transcript not in the wire format: the message names the file, the line and what is wrong', async () => {
      const lines = fs.readFileSync(dataFiles(run).trainTraces, 'utf8').split('\n');
      const bad = (name: string, line3: string): string => {
        const f = path.join(tmp, name);
        fs.writeFileSync(f, [lines[0], lines[1], line3, lines[3]].join('\n') + '\n');
        return f;
      };
      const cases: [string, RegExp][] = [
        [bad('torn.traces.jsonl', lines[2]!.slice(0, 40)), /torn\.traces\.jsonl:3: not JSON/],
        [bad('notext.traces.jsonl', '{"task": "q", "kind": "sum"}'), /notext\.traces\.jsonl:3: "text" must be a string/],
        [bad('between.traces.jsonl', JSON.stringify({ task: 'q', text: traces[2]!.text.replace(`${END}${ASST}`, `${END}\n${ASST}`), kind: 'sum' })), /between\.traces\.jsonl:3: "text" is not a wire-format transcript: character \d+: expected a turn/],
        [bad('open.traces.jsonl', JSON.stringify({ task: 'q', text: traces[2]!.text.slice(0, -END.length), kind: 'sum' })), /open\.traces\.jsonl:3: .*is not closed by <\|end\|>/],
      ];
      for (const [file, message] of cases) {
        const r = await cli('--format', 'trl-sft', '--data', file, '--out', path.join(tmp, 'y'));
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, message);
      }
      const tasks = path.join(tmp, 'tasks.jsonl');
      fs.writeFileSync(tasks, '{"question": "q?", "gold": "1", "kind": "sum"}\n{"question": "q?", "kind": "sum"}\n');
      const r = await cli('--format', 'trl-grpo', '--data', tasks, '--out', path.join(tmp, 'y'));
      assert.equal(r.code, 2);
      assert.match(r.stderr, /tasks\.jsonl:2: "gold" must be a string/);
      assert.ok(!fs.existsSync(path.join(tmp, 'y')), 'nothing written on bad input');
    });
  });
});
