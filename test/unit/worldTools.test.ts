// A world's tool list (docs/worlds.md, "Tools"): the default list gives the textbook's tool
// line and grammar exactly; a list may only narrow search and calc, and the call grammar
// (checkCall, `agent-lab grammar --world`) and the world build's outside_grammar count follow it.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { SYSTEM_PROMPT, ToolEnv } from '../../core/env';
import { TEMPLATES, checkCall } from '../../core/grammar';
import { AGENT_TOOLS } from '../../core/tools/schemas';
import { END, SYS, USER, renderCallBody } from '../../core/wire';
import { worldEnv } from '../../core/worlds';
import { WorldFileError } from '../../core/worldSource';
import { CHARS_KEY, parseToolList, systemPromptFor, templatesFor } from '../../core/worldTools';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { tokenizerCallMask } from '../../trainer/agent/policy';
import { checkPromptDrift } from '../../trainer/grpo/preflight';
import { prepareWorldRunData } from '../../trainer/sft/prepare';
import { readWorldFolder } from '../../store/worldFolder';
import { capture } from '../support/capture';

const REPO = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(REPO, 'samples', 'worlds', 'elements', 'elements.csv');

const withQuery = (query: Record<string, unknown>, extra: unknown[] = []) =>
  JSON.stringify([{ ...AGENT_TOOLS[0], inputSchema: { ...AGENT_TOOLS[0]!.inputSchema, properties: { ...AGENT_TOOLS[0]!.inputSchema.properties, query } } }, AGENT_TOOLS[1], ...extra]);

describe('world tool lists', () => {
  it("the default list is the textbook's: same tool line, same system prompt, same grammar", () => {
    const tools = parseToolList(JSON.stringify({ tools: AGENT_TOOLS }), 'tools.json');
    assert.equal(systemPromptFor(tools), SYSTEM_PROMPT);
    assert.deepEqual(templatesFor(tools), TEMPLATES);
    assert.equal(systemPromptFor([AGENT_TOOLS[0]!]), SYSTEM_PROMPT.replace('search(query,k), calc(expr)', 'search(query,k)'));
  });

  it('issue 36, Low: a 15 MB tool description (sent in every teacher request) is refused, naming the field and the limit', () => {
    const huge = JSON.stringify([{ ...AGENT_TOOLS[0], description: 'x'.repeat(15 * 1024 * 1024) }, AGENT_TOOLS[1]]);
    assert.throws(() => parseToolList(huge, 'tools.json'), /tools\[0\]\.description.*15728640 characters; at most 2000/);
    assert.throws(() => parseToolList(withQuery({ type: 'string', description: 'y'.repeat(2001) }), 'tools.json'), /properties\.query\.description.*at most 2000/);
    assert.doesNotThrow(() => parseToolList(withQuery({ type: 'string', description: 'y'.repeat(2000) }), 'tools.json'));
  });

  it('narrows: query characters and length, k range; calls outside them are refused, the rest accepted', () => {
    const tools = parseToolList(withQuery({ type: 'string', maxLength: 20, [CHARS_KEY]: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ' }), 'tools.json');
    const t = templatesFor(tools);
    const call = (query: string, k = 2) => checkCall(renderCallBody('search', { query, k }), t);
    assert.equal(call('Iron atomic number').complete, true);
    assert.equal(call('Iron atomic number 26').accepted, false); // digits narrowed away
    assert.equal(call('Iron atomic number xyz').accepted, false); // 22 > 20 characters
    assert.equal(checkCall(renderCallBody('search', { query: 'Iron atomic number 26', k: 2 })).complete, true, 'the default grammar is unchanged');
    const k = parseToolList(JSON.stringify([{ ...AGENT_TOOLS[0], inputSchema: { ...AGENT_TOOLS[0]!.inputSchema, properties: { query: { type: 'string' }, k: { type: 'integer', minimum: 1, maximum: 3, [CHARS_KEY]: '123' } } } }]), 't.json');
    assert.equal(checkCall(renderCallBody('search', { query: 'a', k: 3 }), templatesFor(k)).complete, true);
    assert.equal(checkCall(renderCallBody('search', { query: 'a', k: 4 }), templatesFor(k)).accepted, false);
    assert.equal(checkCall(renderCallBody('calc', { expr: '1+2' }), templatesFor(k)).accepted, false, 'no calc in the list: no calc template');
  });

  it("the student's token mask follows a world's grammar: a digit cannot start inside a letters-only query", () => {
    const tokenizer = trainDefaultTokenizer();
    const narrow = templatesFor(parseToolList(withQuery({ type: 'string', [CHARS_KEY]: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ' }), 't.json'));
    const legal = (mask: ReturnType<typeof tokenizerCallMask>) => {
      let states = mask.start();
      for (const id of tokenizer.encode('{"tool": "search", "args": {"query": "Iron')) states = mask.advance(states, id);
      assert.ok(states.length > 0, 'the prefix is a legal call start');
      const logits = new Float32Array(tokenizer.vocabSize);
      mask.apply(logits, states);
      return (text: string) => {
        const ids = tokenizer.encode(text);
        assert.equal(ids.length, 1, `${JSON.stringify(text)} is one token`);
        return logits[ids[0]!] !== -Infinity;
      };
    };
    const narrowLegal = legal(tokenizerCallMask(tokenizer, narrow));
    const defaultLegal = legal(tokenizerCallMask(tokenizer));
    assert.equal(defaultLegal('1'), true);
    assert.equal(narrowLegal('1'), false);
    assert.equal(narrowLegal(' '), true);
    assert.equal(narrowLegal('a'), true);
  });

  const cases: [string, string, RegExp][] = [
    ['not json', '', /not JSON/],
    ['[]', '', /non-empty list/],
    [JSON.stringify([{ ...AGENT_TOOLS[0], name: 'weather' }]), 'tools[0].name', /not a tool the lab runs/],
    [JSON.stringify([AGENT_TOOLS[1]]), '', /needs search/],
    [JSON.stringify([AGENT_TOOLS[0], AGENT_TOOLS[0]]), 'tools[1].name', /listed twice/],
    [withQuery({ type: 'string', maxLength: 100 }), 'tools[0].inputSchema.properties.query.maxLength', /from 1 to 64/],
    [withQuery({ type: 'string', [CHARS_KEY]: 'abcé' }), `tools[0].inputSchema.properties.query.${CHARS_KEY}`, /"é" outside/],
    [withQuery({ type: 'integer' }), 'tools[0].inputSchema.properties.query.type', /must be "string"/],
    [JSON.stringify([{ ...AGENT_TOOLS[0], inputSchema: { type: 'object', properties: { query: { type: 'string' } } } }]), 'tools[0].inputSchema.properties', /exactly query, k/],
  ];
  for (const [text, field, what] of cases) {
    it(`refuses ${field || 'the file'} (${what.source})`, () => {
      let e: unknown;
      try {
        parseToolList(text, 'tools.json');
      } catch (err) {
        e = err;
      }
      assert.ok(e instanceof WorldFileError, String(e));
      assert.equal(e.field, field || null);
      assert.match(e.message, what);
      assert.ok(e.message.startsWith('tools.json:1: '));
    });
  }

  it('agent-lab world --tools: the list is written and recorded, outside_grammar follows it; no calc with arithmetic shapes is exit 2; grammar --world follows the world', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-tools-'));
    try {
      const toolsFile = path.join(tmp, 'tools.json');
      // Queries of letters and spaces only: "Iron atomic number" fits, "Iron melting point in kelvin" too; none has a digit.
      fs.writeFileSync(toolsFile, withQuery({ type: 'string', maxLength: 24, [CHARS_KEY]: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ' }));
      const out = path.join(tmp, 'w');
      const r = await capture(() => main(['world', '--facts', ELEMENTS, '--tools', toolsFile, '--out', out]));
      assert.equal(r.code, 0, r.stderr);
      const m = JSON.parse(fs.readFileSync(path.join(out, 'world.json'), 'utf8'));
      assert.equal(m['tools'].system_prompt, SYSTEM_PROMPT);
      const longQueries = [...['train', 'heldout', 'dev']].flatMap((s) =>
        fs.readFileSync(path.join(out, `${s}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { hints: { queries: string[] } }),
      ).filter((t) => t.hints.queries.some((q) => q.length > 24)).length;
      assert.ok(longQueries > 0);
      assert.equal(m['unsolvable'].outside_grammar, longQueries);
      assert.ok(fs.existsSync(path.join(out, 'tools.json')));
      const g = await capture(() => main(['grammar', '--json', '--world', out, '--', renderCallBody('search', { query: 'Iron melting point 1811', k: 2 })]));
      assert.equal((JSON.parse(g.stdout) as { accepted: boolean }).accepted, false);
      const g0 = await capture(() => main(['grammar', '--json', '--', renderCallBody('search', { query: 'Iron melting point 1811', k: 2 })]));
      assert.equal((JSON.parse(g0.stdout) as { complete: boolean }).complete, true);

      const searchOnly = path.join(tmp, 'search.json');
      fs.writeFileSync(searchOnly, JSON.stringify([AGENT_TOOLS[0]]));
      const never = path.join(tmp, 'never');
      const r2 = await capture(() => main(['world', '--facts', ELEMENTS, '--tools', searchOnly, '--out', never]));
      assert.equal(r2.code, 2);
      assert.match(r2.stderr, /search\.json:1: the list has no calc, but the world has \d+ double, sum or compare task/);
      assert.equal(fs.existsSync(never), false);
      const r3 = await capture(() => main(['world', '--facts', ELEMENTS, '--tools', searchOnly, '--shapes', 'lookup', '--out', never]));
      assert.equal(r3.code, 0, r3.stderr);
      assert.match(JSON.parse(fs.readFileSync(path.join(never, 'world.json'), 'utf8'))['tools'].system_prompt, /Tools: search\(query,k\)\.$/);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("a world without calc: its trajectories, a run's data, the student's prompt and GRPO's prompt check say its own tool line", async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-tools-prompt-'));
    try {
      const searchOnly = path.join(tmp, 'search.json');
      fs.writeFileSync(searchOnly, JSON.stringify([AGENT_TOOLS[0]]));
      const world = path.join(tmp, 'w');
      assert.equal((await capture(() => main(['world', '--facts', ELEMENTS, '--tools', searchOnly, '--shapes', 'lookup', '--out', world]))).code, 0);
      const prompt = systemPromptFor([AGENT_TOOLS[0]!]);
      assert.ok(prompt.endsWith('Tools: search(query,k).') && !prompt.includes('calc'));
      const prefix = `${SYS}${prompt}${END}${USER}`;
      const rowsOf = (f: string) => fs.readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { task: string; text: string });
      // agent-lab distill --world
      const traces = path.join(tmp, 'train.traces.jsonl');
      const d = await capture(() => main(['distill', '--world', world, '--split', 'train', '--samples', '1', '--out', traces]));
      assert.equal(d.code, 0, d.stderr);
      const distilled = rowsOf(traces);
      assert.ok(distilled.length > 0);
      for (const r of distilled) assert.ok(r.text.startsWith(prefix), r.text.slice(0, 200));
      // train sft --world: the run's data, as the trainer prepares it.
      const loaded = readWorldFolder(world);
      const runDir = path.join(tmp, 'run');
      const prepared = prepareWorldRunData(runDir, { world: loaded });
      assert.ok(prepared.train.rows.length > 0 && prepared.heldout.rows.length > 0);
      for (const r of [...prepared.train.rows, ...prepared.heldout.rows]) assert.ok(r.text.startsWith(prefix), r.text.slice(0, 200));
      // The world's env carries the prompt the student's runtime renders (agentRuntime: o.systemPrompt ?? env.systemPrompt).
      const env = worldEnv(loaded.id);
      assert.equal(env.systemPrompt, prompt);
      // GRPO's prompt-drift check: with the world's prompt the data agrees; with the textbook's it would not.
      const trainTraces = path.join(runDir, 'data', 'train.traces.jsonl');
      assert.equal(checkPromptDrift(trainTraces, env.systemPrompt).ok, true);
      assert.equal(checkPromptDrift(trainTraces, undefined).ok, false);
      // export --world: GRPO prompts with the world's system message, and the manifest says where it came from.
      const out = path.join(tmp, 'export');
      const ex = await capture(() => main(['export', '--format', 'trl-grpo', '--world', world, '--out', out]));
      assert.equal(ex.code, 0, ex.stderr);
      const prompts = fs.readFileSync(path.join(out, 'grpo', 'prompts.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { prompt: { role: string; content: string }[] });
      assert.ok(prompts.length > 0);
      for (const p of prompts) assert.deepEqual(p.prompt[0], { role: 'system', content: prompt });
      const manifest = JSON.parse(fs.readFileSync(path.join(out, 'grpo', 'manifest.json'), 'utf8')) as { system_prompt: string; system_prompt_from: string };
      assert.equal(manifest.system_prompt, prompt);
      assert.match(manifest.system_prompt_from, /the world's tool list/);
      // The textbook world's prompt is unchanged.
      assert.equal(new ToolEnv([]).systemPrompt, SYSTEM_PROMPT);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
