// An independent, real LSP client: headless Neovim (Debian's 0.7.2) attaches
// `agent-lab lsp --stdio` to transcripts generated for this run (a fresh seed each time,
// printed) and to a dataset, and reports the diagnostics and hovers it received. Every
// grammar rejection must sit on its exact character (UTF-16 in the protocol, bytes in
// vim.diagnostic), and hovers must say `supervised` on assistant thoughts, calls and
// answers and `masked` on system, user and tool-result text.
// Where nvim is missing (scripts/setup-neovim.sh installs it), the test is pending.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkCall } from '../../core/grammar';
import { isJsonObject, pyJsonLoads } from '../../core/pyjson';
import { renderCallBody } from '../../core/wire';
import { distilledRows } from '../../bench/lsp';
import { defaultCommand, repoRootFrom } from '../../bench/lspClient';
import { mulberry32 } from '../../core/mulberry32';

const root = repoRootFrom(__dirname);

interface Expect {
  path: string;
  text: string;
  /** Grammar rejections: [line, character, endCharacter] in UTF-16. */
  rejections: [number, number, number][];
  hovers: { at: [number, number]; word: 'supervised' | 'masked'; what: string }[];
}

const rng = mulberry32;

function position(text: string, offset: number): [number, number] {
  const before = text.slice(0, offset);
  const line = before.split('\n').length - 1;
  return [line, offset - (before.lastIndexOf('\n') + 1)];
}

/** A JSON body the grammar rejects and that is not merely a re-spelling of a valid call. */
function damage(body: string, rand: () => number): string | null {
  const BAD = ['0', 'x', '#', "'", ' ', 'é', '😀', '"', '}', '\\', 'k', ':', 'Q'];
  for (let attempt = 0; attempt < 40; attempt++) {
    const units = [...body];
    const at = Math.floor(rand() * (units.length + 1));
    const c = BAD[Math.floor(rand() * BAD.length)]!;
    if (rand() < 0.5 && at < units.length) units[at] = c;
    else units.splice(at, 0, c);
    const candidate = units.join('');
    if (checkCall(candidate).accepted) continue;
    try {
      const obj = pyJsonLoads(candidate);
      if (isJsonObject(obj) && typeof obj['tool'] === 'string' && isJsonObject(obj['args'] ?? {}) && renderCallBody(obj['tool'], (obj['args'] ?? {}) as never) !== candidate) continue;
    } catch {
      // not JSON: the grammar's verdict stands alone
    }
    return candidate;
  }
  return null;
}

function generate(dir: string, seed: number, count: number): Expect[] {
  const rand = rng(seed);
  const rows = distilledRows();
  const out: Expect[] = [];
  for (let n = 0; n < count; n++) {
    let text = rows[Math.floor(rand() * rows.length)]!.text;
    // Characters that are one UTF-16 unit but two bytes, and two units / four bytes.
    text = text.replace('<|end|><|assistant|>Thought: ', ' (é😀)<|end|><|assistant|>Thought: é😀 ');
    const rejections: number[][] = [];
    let from = 0;
    for (;;) {
      const s = text.indexOf('<|tool_call|>', from);
      if (s === -1) break;
      const bodyStart = s + '<|tool_call|>'.length;
      const bodyEnd = text.indexOf('<|end|>', bodyStart);
      const body = text.slice(bodyStart, bodyEnd);
      const bad = rand() < 0.8 ? damage(body, rand) : null;
      if (bad !== null) {
        text = text.slice(0, bodyStart) + bad + text.slice(bodyEnd);
        const v = checkCall(bad);
        const off = bodyStart + [...bad].slice(0, v.rejectedAt!).join('').length;
        const got = [...bad][v.rejectedAt!]!;
        rejections.push([off, off + got.length]);
      }
      from = text.indexOf('<|end|>', bodyStart) + 1;
    }
    const file = path.join(dir, `gen-${seed}-${n}.transcript`);
    writeFileSync(file, `${text}\n`);
    const at = (needle: string, skip: number): [number, number] => position(text, text.indexOf(needle) + skip);
    const hovers: Expect['hovers'] = [
      { at: at('You are a narrow', 4), word: 'masked', what: 'system prompt' },
      { at: at('<|user|>', 10), word: 'masked', what: 'user question' },
      { at: at('Thought: é😀', 3), word: 'supervised', what: 'assistant thought' },
      { at: at('<|tool_call|>', 16), word: 'supervised', what: 'tool call' },
      { at: at('<|tool_result|>', 18), word: 'masked', what: 'tool result' },
      { at: at('Answer: ', 8), word: 'supervised', what: 'final answer' },
      { at: at('<|assistant|>', 3), word: 'masked', what: 'the <|assistant|> marker' },
    ];
    out.push({
      path: file,
      text,
      rejections: rejections.map(([s, e]) => {
        const [l, c] = position(text, s!);
        return [l, c, c + (e! - s!)] as [number, number, number];
      }),
      hovers,
    });
  }
  return out;
}

function nvimVersion(): string | null {
  const r = spawnSync('nvim', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return null;
  return r.stdout.split('\n')[0] ?? null;
}

describe('headless Neovim as an LSP client', function () {
  this.timeout(180_000);
  const version = nvimVersion();
  let tmp: string;

  before(function () {
    if (!version) {
      console.log('      PENDING: nvim is not installed (scripts/setup-neovim.sh installs Debian\'s neovim; it could not here)');
      this.skip();
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-nvim-'));
  });
  after(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('reports every grammar rejection at its exact character and says supervised/masked in hovers', () => {
    const seed = Number(process.env['AGENT_LAB_NVIM_SEED'] ?? Math.floor(Math.random() * 1e9));
    console.log(`      ${version}; transcripts generated with seed ${seed} (AGENT_LAB_NVIM_SEED=${seed} repeats them)`);
    const expects = generate(tmp, seed, 6);
    assert.ok(expects.reduce((n, e) => n + e.rejections.length, 0) > 0, 'some calls were damaged');

    // A dataset too: a row whose k is 0, spelled \u0030 inside the JSON string.
    const row = JSON.stringify(distilledRows()[3]).replace('\\"k\\": 2', '\\"k\\": \\u0030');
    const dataset = path.join(tmp, 'gen.traces.jsonl');
    writeFileSync(dataset, `${row}\n`);
    const k = row.indexOf('\\u0030');

    const out = path.join(tmp, 'out.json');
    const spec = path.join(tmp, 'spec.json');
    writeFileSync(
      spec,
      JSON.stringify({
        cmd: defaultCommand(root),
        root: tmp,
        out,
        files: [
          ...expects.map((e) => ({ path: e.path, hovers: e.hovers.map((h) => h.at) })),
          { path: dataset, hovers: [[0, k + 2]] },
        ],
      }),
    );
    const r = spawnSync('nvim', ['--headless', '--clean', '-n', '-c', `luafile ${path.join(__dirname, 'nvim', 'client.lua')}`], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, AGENT_LAB_NVIM_SPEC: spec },
      timeout: 150_000,
    });
    assert.equal(r.status, 0, `nvim exited ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}\n${safeRead(out)}`);
    const got = JSON.parse(readFileSync(out, 'utf8')) as {
      error?: string;
      exit?: { code: number };
      files: {
        uri: string;
        got_diagnostics: boolean;
        raw: { diagnostics: { range: { start: { line: number; character: number }; end: { line: number; character: number } }; code: string; message: string }[] };
        diagnostics: { lnum: number; col: number; end_col: number; code?: string; message: string }[];
        hovers: { position: [number, number]; value: string | null }[];
      }[];
    };
    assert.equal(got.error, undefined, got.error);
    assert.equal(got.files.length, expects.length + 1);

    expects.forEach((e, i) => {
      const f = got.files[i]!;
      assert.equal(f.uri, pathToFileURL(e.path).toString());
      assert.ok(f.got_diagnostics, `diagnostics for ${e.path}`);
      const rejections = f.raw.diagnostics
        .filter((d) => d.code === 'grammar-rejected')
        .map((d) => [d.range.start.line, d.range.start.character, d.range.end.character]);
      assert.deepEqual(rejections, e.rejections, `${path.basename(e.path)}: rejections (UTF-16)`);
      for (const d of f.raw.diagnostics.filter((x) => x.code === 'grammar-rejected')) assert.match(d.message, /^tool call rejected by the grammar: expected .+, got .+/);
      // vim.diagnostic works in bytes: the same places, converted by Neovim itself.
      const lines = e.text.split('\n');
      const inBytes = f.diagnostics
        .filter((d) => d.code === 'grammar-rejected')
        .map((d) => [d.lnum, d.col, d.end_col]);
      const expectedBytes = e.rejections.map(([l, s, en]) => [
        l,
        Buffer.byteLength(lines[l]!.slice(0, s)),
        Buffer.byteLength(lines[l]!.slice(0, en)),
      ]);
      assert.deepEqual(inBytes, expectedBytes, `${path.basename(e.path)}: rejections (bytes, vim.diagnostic)`);
      e.hovers.forEach((h, j) => {
        const v = f.hovers[j]!.value ?? '';
        assert.match(v, new RegExp(`\\*\\*${h.word}\\*\\*`), `${path.basename(e.path)}: hover on the ${h.what} at ${h.at} says ${h.word}:\n${v}`);
        const other = h.word === 'supervised' ? 'masked' : 'supervised';
        assert.doesNotMatch(v.split('\n')[0]!, new RegExp(`\\*\\*${other}\\*\\*`));
      });
    });
    const ds = got.files[expects.length]!;
    const g = ds.raw.diagnostics.filter((d) => d.code === 'grammar-rejected');
    assert.equal(g.length, 1);
    assert.deepEqual(g[0]!.range, { start: { line: 0, character: k }, end: { line: 0, character: k + 6 } });
    assert.match(ds.hovers[0]!.value ?? '', /\*\*supervised\*\*/);
    assert.equal(got.exit?.code, 0, 'the server exited cleanly when Neovim stopped it');
  });
});

function safeRead(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '(no output file)';
  }
}
