// The transcript grammar (syntaxes/agent-transcript.tmLanguage.json).
// Part 1 needs nothing: the JSON loads, every regex compiles in JavaScript, and the
// special tokens are matched by the rules meant for them.
// Part 2 tokenizes real transcripts with the real TextMate engine (vscode-textmate +
// vscode-oniguruma, as VS Code does). Those packages are not dependencies of this
// project; they come bundled inside code-server, which `scripts/setup-vscode-test.sh`
// installs into ~/.cache/agent-lab. Without that install, part 2 is reported as
// pending (skipped) with the reason, never as passed.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const repoRoot = path.resolve(__dirname, '..', '..');
const grammarPath = path.join(repoRoot, 'syntaxes', 'agent-transcript.tmLanguage.json');
const languageConfigPath = path.join(repoRoot, 'syntaxes', 'transcript.language-configuration.json');
const samplePath = path.join(repoRoot, 'test', 'fixtures', 'workspace', 'sample.transcript');

const SPECIAL_TOKENS = ['<|bos|>', '<|eos|>', '<|pad|>', '<|end|>', '<|system|>', '<|user|>', '<|assistant|>', '<|tool_call|>', '<|tool_result|>'];
const ROLE_MARKERS = ['<|system|>', '<|user|>', '<|assistant|>', '<|tool_result|>'];

interface Rule {
  name?: string;
  match?: string;
  begin?: string;
  end?: string;
  while?: string;
  include?: string;
  patterns?: Rule[];
  captures?: Record<string, { name?: string }>;
  beginCaptures?: Record<string, { name?: string }>;
  endCaptures?: Record<string, { name?: string }>;
}
interface Grammar extends Rule {
  scopeName: string;
  repository: Record<string, Rule>;
}

function loadGrammar(): Grammar {
  return JSON.parse(fs.readFileSync(grammarPath, 'utf8')) as Grammar;
}

/** Every regex in the grammar with a JSON path, for error messages. */
function regexes(g: Grammar): { where: string; source: string }[] {
  const out: { where: string; source: string }[] = [];
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}[${i}]`));
    if (node === null || typeof node !== 'object') return;
    for (const [k, v] of Object.entries(node)) {
      if ((k === 'match' || k === 'begin' || k === 'end' || k === 'while') && typeof v === 'string') {
        out.push({ where: `${where}.${k}`, source: v });
      } else {
        walk(v, `${where}.${k}`);
      }
    }
  };
  walk(g, '$');
  return out;
}

/**
 * vscode-textmate + vscode-oniguruma from the code-server install (not dependencies of this
 * project), or the test skipped with the reason (never passed without them).
 */
async function textmateEngine(ctx: Mocha.Context): Promise<{ tm: TextmateModule; registry: (file: string, scopeName: string) => TextmateRegistry }> {
  const tools = process.env['AGENT_LAB_TOOLS'] ?? path.join(os.homedir(), '.cache', 'agent-lab');
  const nm = path.join(tools, 'code-server-4.100.3', 'node_modules', 'code-server', 'lib', 'vscode', 'node_modules');
  const tmPath = path.join(nm, 'vscode-textmate');
  const onigPath = path.join(nm, 'vscode-oniguruma');
  if (!fs.existsSync(path.join(tmPath, 'package.json')) || !fs.existsSync(path.join(onigPath, 'release', 'onig.wasm'))) {
    console.log(`      skipped: vscode-textmate/vscode-oniguruma not found under ${nm} (run scripts/setup-vscode-test.sh)`);
    ctx.skip();
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const tm = require(tmPath);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const onig = require(onigPath);
  if (!onigLoaded) {
    const wasm = fs.readFileSync(path.join(onigPath, 'release', 'onig.wasm'));
    onigLoaded = onig.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  }
  await onigLoaded;
  const registry = (file: string, scopeName: string) =>
    new tm.Registry({
      onigLib: Promise.resolve({
        createOnigScanner: (sources: string[]) => new onig.OnigScanner(sources),
        createOnigString: (s: string) => new onig.OnigString(s),
      }),
      loadGrammar: async (name: string) => (name === scopeName ? tm.parseRawGrammar(fs.readFileSync(file, 'utf8'), file) : null),
    });
  return { tm, registry };
}
let onigLoaded: Promise<void> | undefined;
/** The parts of vscode-textmate these tests use (its types are not a dependency of this project). */
interface TextmateGrammar {
  tokenizeLine(line: string, state: unknown): { tokens: { startIndex: number; endIndex: number; scopes: string[] }[]; ruleStack: unknown };
}
interface TextmateRegistry {
  loadGrammar(scopeName: string): Promise<TextmateGrammar>;
}
interface TextmateModule {
  INITIAL: unknown;
  Registry: new (options: unknown) => TextmateRegistry;
  parseRawGrammar(text: string, file: string): unknown;
}

describe('textmate grammar: agent-transcript', () => {
  describe('static checks (no setup needed)', () => {
    it('loads, has the scope name package.json declares, and every include resolves', () => {
      const g = loadGrammar();
      assert.equal(g.scopeName, 'source.agent-transcript');
      const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
      const declared = pkg.contributes.grammars.find((x: { language: string }) => x.language === 'agent-transcript');
      assert.equal(declared.scopeName, g.scopeName);
      assert.equal(path.resolve(repoRoot, declared.path), grammarPath);
      const includes: string[] = [];
      JSON.stringify(g, (k, v) => {
        if (k === 'include') includes.push(v);
        return v;
      });
      for (const inc of includes) {
        if (inc.startsWith('#')) assert.ok(g.repository[inc.slice(1)], `unresolved include ${inc}`);
        else assert.ok(inc === '$self' || inc === '$base', `external include ${inc} (the grammar is meant to be self-contained)`);
      }
    });

    it('every regex compiles in JavaScript', () => {
      const all = regexes(loadGrammar());
      assert.ok(all.length >= 20, `only ${all.length} regexes found`);
      for (const { where, source } of all) {
        assert.doesNotThrow(() => new RegExp(source), `${where}: ${source}`);
      }
    });

    it('each special token is matched by exactly the structural rule named for it', () => {
      const g = loadGrammar();
      const structural = g.repository['structural']!.patterns!;
      for (const token of SPECIAL_TOKENS) {
        const hits = structural.filter((r) => r.match !== undefined && new RegExp(`^(?:${r.match})$`).test(token));
        assert.equal(hits.length, 1, `${token} matched by ${hits.length} structural rules`);
        const scope = hits[0]!.name!;
        const short = token.slice(2, -2).replace('_', '-');
        assert.ok(scope.endsWith(`.${short}.agent-transcript`), `${token} -> ${scope}`);
        if (ROLE_MARKERS.includes(token)) assert.match(scope, /^entity\.name\.tag\.role\./, `${token} is a role marker`);
        else assert.match(scope, /^keyword\.control\.special-token\./, `${token} is structural`);
      }
      // A misspelt token is flagged, a real one is not.
      const unknown = new RegExp(g.repository['unknown-token']!.match!);
      assert.ok(unknown.test('<|tool_calls|>'));
      const turnBegins = ['turn-system', 'turn-user', 'turn-assistant', 'turn-tool-result'].map((k) => new RegExp(g.repository[k]!.begin!));
      for (const role of ROLE_MARKERS) assert.equal(turnBegins.filter((re) => re.test(role)).length, 1, role);
    });

    it('the language configuration loads and its word pattern keeps special tokens whole', () => {
      const cfg = JSON.parse(fs.readFileSync(languageConfigPath, 'utf8'));
      const words = 'Thought: x<|tool_call|>{"query": "Stack-100M RoPE base"}<|end|>'.match(new RegExp(cfg.wordPattern, 'g'));
      assert.deepEqual(words, ['Thought', 'x', '<|tool_call|>', 'query', 'Stack-100M', 'RoPE', 'base', '<|end|>']);
    });
  });

  describe('tokenized by vscode-textmate + vscode-oniguruma (from the code-server install)', () => {
    type Token = { text: string; scopes: string[] };
    let tokenize: ((text: string) => Token[]) | undefined;

    before(async function () {
      this.timeout(30000);
      const engine = await textmateEngine(this);
      const { tm } = engine;
      const registry = engine.registry(grammarPath, 'source.agent-transcript');
      const grammar = await registry.loadGrammar('source.agent-transcript');
      tokenize = (text: string) => {
        const out: Token[] = [];
        let state = tm.INITIAL;
        for (const line of text.split('\n')) {
          const r = grammar.tokenizeLine(line, state);
          for (const t of r.tokens) out.push({ text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes });
          state = r.ruleStack;
        }
        return out;
      };
    });

    /** The innermost scope of the first token whose text is `text` (after `from` tokens). */
    function scopeOf(tokens: Token[], text: string, nth = 0): string[] {
      const hits = tokens.filter((t) => t.text === text);
      assert.ok(hits.length > nth, `no token ${JSON.stringify(text)} (#${nth}) in ${JSON.stringify(tokens.map((t) => t.text))}`);
      return hits[nth]!.scopes;
    }
    const has = (scopes: string[], prefix: string) => scopes.some((s) => s.startsWith(prefix));

    it('scopes the fixture transcript: roles, structure, labels, call JSON, observations', () => {
      const tokens = tokenize!(fs.readFileSync(samplePath, 'utf8'));
      for (const role of ['system', 'user', 'assistant']) {
        assert.ok(has(scopeOf(tokens, `<|${role}|>`), `entity.name.tag.role.${role}.`), role);
      }
      assert.ok(has(scopeOf(tokens, '<|tool_result|>'), 'entity.name.tag.role.tool-result.'));
      assert.ok(has(scopeOf(tokens, '<|tool_call|>'), 'keyword.control.special-token.tool-call.'));
      assert.ok(has(scopeOf(tokens, '<|end|>'), 'keyword.control.special-token.end.'));
      assert.ok(has(scopeOf(tokens, 'Thought'), 'keyword.other.label.thought.'));
      assert.ok(has(scopeOf(tokens, 'Answer'), 'keyword.other.label.answer.'));
      assert.ok(has(scopeOf(tokens, '12019', 1), 'string.unquoted.answer.'), 'the answer value');
      assert.ok(has(scopeOf(tokens, '12019', 0), 'constant.numeric.result.'), 'the calculator result');
      const toolKey = scopeOf(tokens, '"tool"');
      assert.ok(has(toolKey, 'support.type.property-name.json'));
      assert.ok(has(toolKey, 'meta.tool-call.agent-transcript'));
      assert.ok(has(scopeOf(tokens, '"search"'), 'entity.name.function.tool.'));
      assert.ok(has(scopeOf(tokens, '"RMSNorm publication year"'), 'string.quoted.double.json'));
      assert.ok(has(scopeOf(tokens, '2'), 'constant.numeric.json'));
      assert.ok(has(scopeOf(tokens, '1'), 'constant.numeric.hit-number.'));
    });

    it('colours the nine special tokens anywhere, and flags unknown ones', () => {
      const tokens = tokenize!('<|bos|><|pad|><|tool_call|>{}<|end|><|eos|><|tool_calls|>');
      assert.ok(has(scopeOf(tokens, '<|bos|>'), 'keyword.control.special-token.bos.'));
      assert.ok(has(scopeOf(tokens, '<|pad|>'), 'keyword.control.special-token.pad.'));
      assert.ok(has(scopeOf(tokens, '<|eos|>'), 'keyword.control.special-token.eos.'));
      assert.ok(has(scopeOf(tokens, '<|tool_calls|>'), 'invalid.illegal.unknown-special-token.'));
    });

    it('shows error observations, and a malformed call cannot swallow the next turns', () => {
      const text =
        '<|assistant|>Thought: x\n<|tool_call|>{"tool": "calc", "args": {"expr": "1/0<|end|>' +
        '<|tool_result|>CalcError: division by zero<|end|><|assistant|>Thought: y\n<|tool_call|>{"tool": "search"}}<|end|>' +
        '<|tool_result|>NoResults<|end|><|assistant|>Answer: 4<|end|>';
      const tokens = tokenize!(text);
      assert.ok(has(scopeOf(tokens, '"1/0'), 'invalid.illegal.unterminated-string.json'));
      assert.ok(has(scopeOf(tokens, 'CalcError'), 'invalid.illegal.observation-error.'));
      assert.ok(has(scopeOf(tokens, 'NoResults'), 'constant.language.no-results.'));
      assert.ok(has(scopeOf(tokens, '<|tool_result|>', 1), 'entity.name.tag.role.tool-result.'));
      assert.ok(!has(scopeOf(tokens, '<|tool_result|>', 1), 'meta.tool-call'), 'the call region ended');
      assert.ok(has(scopeOf(tokens, 'Answer'), 'keyword.other.label.answer.'));
      assert.ok(has(scopeOf(tokens, '4'), 'string.unquoted.answer.'));
    });
  });
});

// The fact table grammar (syntaxes/agent-facts.tmLanguage.json): facts.csv opens as a fact table,
// not Plain Text; the language server's checks stay the source of truth about the rows.
describe('textmate grammar: agent-facts', () => {
  const factsGrammarPath = path.join(repoRoot, 'syntaxes', 'agent-facts.tmLanguage.json');

  it('package.json gives facts.csv and *.facts.csv the language, with its grammar and # comments', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    const lang = pkg.contributes.languages.find((l: { id: string }) => l.id === 'agent-facts');
    assert.deepEqual(lang.filenamePatterns, ['facts.csv', '*.facts.csv']);
    assert.ok(new RegExp(lang.firstLine).test('entity,attribute,value'));
    const cfg = JSON.parse(fs.readFileSync(path.resolve(repoRoot, lang.configuration), 'utf8'));
    assert.equal(cfg.comments.lineComment, '#');
    const declared = pkg.contributes.grammars.find((x: { language: string }) => x.language === 'agent-facts');
    assert.equal(path.resolve(repoRoot, declared.path), factsGrammarPath);
    const g = JSON.parse(fs.readFileSync(factsGrammarPath, 'utf8')) as Grammar;
    assert.equal(g.scopeName, declared.scopeName);
    for (const { where, source } of regexes(g)) assert.doesNotThrow(() => new RegExp(source), `${where}: ${source}`);
  });

  it('scopes a fact table: comments, the header, entities, attributes, integers and words', async function () {
    this.timeout(30000);
    const engine = await textmateEngine(this);
    const grammar = await engine.registry(factsGrammarPath, 'source.agent-facts').loadGrammar('source.agent-facts');
    let state = engine.tm.INITIAL;
    const rows: Record<string, string[]>[] = [];
    for (const line of ['# rivers, in km', 'entity,attribute,value', 'Volga,length in km,3530', 'Volga,source country,Russia']) {
      const r = grammar.tokenizeLine(line, state);
      const row: Record<string, string[]> = {};
      for (const t of r.tokens) row[line.slice(t.startIndex, t.endIndex)] = t.scopes;
      rows.push(row);
      state = r.ruleStack;
    }
    const last = (scopes: string[] | undefined) => scopes?.[scopes.length - 1];
    assert.equal(last(rows[0]!['# rivers, in km']), 'comment.line.number-sign.agent-facts');
    assert.equal(last(rows[1]!['attribute']), 'keyword.other.header.agent-facts');
    assert.equal(last(rows[2]!['Volga']), 'entity.name.type.entity.agent-facts');
    assert.equal(last(rows[2]!['length in km']), 'variable.other.attribute.agent-facts');
    assert.equal(last(rows[2]!['3530']), 'constant.numeric.integer.agent-facts');
    assert.equal(last(rows[3]!['Russia']), 'string.unquoted.value.agent-facts');
  });
});
