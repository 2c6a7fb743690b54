// The seed's role split (split_roles) and `distill --roles`: each pair's prefix is the full
// history up to an assistant turn and its target is that one turn; search turns go to the
// query writer, the rest to the synthesizer. Compared live with the seed's own function.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { RoleSplitError, splitRoles } from '../../core/roles';
import { ASST, END } from '../../core/wire';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { referenceDir, referenceUnavailable, runReference } from '../support/reference';

const pool = makeTaskPool(0);
const tasks = pool.heldout;
const traces = distill(tasks, makeStubTeacher(tasks), new ToolEnv(buildCorpus()), 1);

/** The seed's split_roles source, cut from the seed text beside the reference. */
function seedSplitRoles(): string | null {
  const seed = path.join(referenceDir, '..', '000_c811424ecfc91c62.txt');
  if (!fs.existsSync(seed)) return null;
  const text = fs.readFileSync(seed, 'utf8');
  const m = /def split_roles\(transcript: str\):[\s\S]*?return qw, syn\n/.exec(text);
  return m ? m[0] : null;
}

describe('split_roles', () => {
  it('query-writer pairs are the search turns, synthesizer pairs the others; prefixes hold the full history', () => {
    for (const row of traces) {
      const { queryWriter, synthesizer } = splitRoles(row.text);
      const turns = row.text.split(ASST).length - 1;
      assert.equal(queryWriter.length + synthesizer.length, turns);
      const facts = tasks.find((t) => t.question === row.task)!.hints.facts.length;
      assert.equal(queryWriter.length, facts, row.task);
      for (const p of [...queryWriter, ...synthesizer]) {
        assert.ok(p.prefix.endsWith(ASST) && p.target.endsWith(END));
        assert.ok(row.text.startsWith(p.prefix + p.target), 'prefix + target is a prefix of the transcript');
        assert.equal(p.target.split(END).length, 2, 'one turn per target');
      }
      for (const p of queryWriter) assert.match(p.target, /"tool": "search"/);
      for (const p of synthesizer) assert.doesNotMatch(p.target, /"tool": "search"/);
    }
    assert.throws(() => splitRoles(`pre${ASST}no end here`), RoleSplitError);
  });

  it('agrees with the seed\'s split_roles on every held-out transcript', function () {
    const why = referenceUnavailable();
    const source = seedSplitRoles();
    if (why || !source) {
      console.log(`      pending: ${why ?? "the seed's text (with split_roles) is not beside the reference"}`);
      this.skip();
      return;
    }
    const expected = runReference<[string, string][][][]>(
      `from stacklm.agent.react import ASST, END\n${source}\nprint(json.dumps([list(map(lambda r: [list(p) for p in r], split_roles(t))) for t in INPUT]))`,
      traces.map((r) => r.text),
    );
    const ours = traces.map((r) => {
      const s = splitRoles(r.text);
      return [s.queryWriter.map((p) => [p.prefix, p.target]), s.synthesizer.map((p) => [p.prefix, p.target])];
    });
    assert.deepEqual(ours, expected);
  });
});

describe('agent-lab distill --roles', () => {
  it('writes X.query_writer.jsonl and X.synthesizer.jsonl beside X.traces.jsonl', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-roles-'));
    try {
      const out = path.join(tmp, 'h.traces.jsonl');
      const log = console.log;
      console.log = () => {};
      let code: number;
      try {
        code = await main(['distill', '--split', 'heldout', '--samples', '1', '--roles', '--out', out]);
      } finally {
        console.log = log;
      }
      assert.equal(code, 0);
      const read = (f: string) => fs.readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, string>);
      const rows = read(out);
      const qw = read(path.join(tmp, 'h.query_writer.jsonl'));
      const syn = read(path.join(tmp, 'h.synthesizer.jsonl'));
      assert.deepEqual(Object.keys(qw[0]!), ['prefix', 'target', 'task', 'kind']);
      const expected = rows.map((r) => splitRoles(r['text']!));
      assert.deepEqual(qw.map((r) => r['target']), expected.flatMap((s) => s.queryWriter.map((p) => p.target)));
      assert.deepEqual(syn.map((r) => r['prefix']), expected.flatMap((s) => s.synthesizer.map((p) => p.prefix)));
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
