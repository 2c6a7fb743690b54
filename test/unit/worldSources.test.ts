// extension/worldSources.ts: what agentLab.world may name (classifyWorldPath), which built
// folders came from a source (world.json's source paths), and New World's templates, which
// must pass the same checks as `agent-lab world` (core/worldSource.ts) and build a world.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildDocsWorld, buildFactWorld, chunkDocuments, parseFactTable, parseTasksFile } from '../../core/worldSource';
import { classifyWorldPath, existingTemplateFiles, foldersBuiltFrom, looksLikeFactTable, worldName, worldTemplate } from '../../extension/worldSources';

const repo = path.resolve(__dirname, '..', '..');

describe('extension/worldSources', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-worldsources-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const write = (rel: string, text: string) => {
    const f = path.join(tmp, rel);
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, text);
    return f;
  };

  it('the fact-table template passes the fact-table checks and builds all four shapes', () => {
    const t = worldTemplate('facts');
    assert.equal(t.main, 'facts.csv');
    const file = write('w/facts.csv', t.files[0]!.text);
    const table = parseFactTable(fs.readFileSync(file, 'utf8'), file);
    assert.equal(table.facts.length, 12);
    const built = buildFactWorld(table);
    for (const shape of ['lookup', 'double', 'sum', 'compare']) {
      const n = [...built.train, ...built.heldout, ...built.dev].filter((x) => x.kind === shape).length;
      assert.ok(n > 0, `${shape} tasks: ${n}`);
    }
    assert.deepEqual(built.unsolvable, {});
    assert.ok(looksLikeFactTable(file));
  });

  it('the documents template passes the tasks checks; only the question without hints is unsolvable', () => {
    const t = worldTemplate('docs');
    assert.equal(t.main, 'tasks.jsonl');
    const docs = t.files.filter((f) => f.rel.startsWith('docs/')).map((f) => ({ relPath: f.rel.slice(5), text: f.text }));
    const tasksText = t.files.find((f) => f.rel === 'tasks.jsonl')!.text;
    const tasks = parseTasksFile(tasksText, 'tasks.jsonl');
    assert.equal(tasks.length, 5);
    const built = buildDocsWorld(chunkDocuments(docs), tasks, 'tasks.jsonl');
    assert.deepEqual(built.unsolvable, { no_hints: 1 });
  });

  it('classifies what agentLab.world may name, and says what a path lacks', () => {
    const csv = path.join(repo, 'samples', 'worlds', 'elements', 'elements.csv');
    assert.deepEqual(classifyWorldPath(csv), { kind: 'facts', file: csv });
    // A folder holding exactly one fact table names it.
    assert.deepEqual(classifyWorldPath(path.dirname(csv)), { kind: 'facts', file: csv });
    const notes = path.join(repo, 'samples', 'worlds', 'planets-notes');
    const docsRef = { kind: 'docs', docsDir: path.join(notes, 'docs'), tasksFile: path.join(notes, 'tasks.jsonl') };
    assert.deepEqual(classifyWorldPath(notes), docsRef);
    assert.deepEqual(classifyWorldPath(path.join(notes, 'tasks.jsonl')), docsRef);
    write('built/corpus.jsonl', '{"doc_id": "d", "text": "t"}\n');
    assert.deepEqual(classifyWorldPath(path.join(tmp, 'built')), { kind: 'folder', dir: path.join(tmp, 'built') });
    const jsonl = write('t.facts.jsonl', '{"entity": "A", "attribute": "b", "value": 1}\n');
    assert.deepEqual(classifyWorldPath(jsonl), { kind: 'facts', file: jsonl });
    const other = write('other.csv', 'name,size\nA,1\n');
    assert.throws(() => classifyWorldPath(other), new RegExp(`${other.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is neither a fact table`));
    assert.throws(() => classifyWorldPath(path.join(tmp, 'missing')), /missing does not exist/);
    write('two/a.csv', 'entity,attribute,value\nA,b,1\n');
    write('two/b.csv', 'entity,attribute,value\nA,b,2\n');
    assert.throws(() => classifyWorldPath(path.join(tmp, 'two')), /holds 2 fact tables \(a\.csv, b\.csv\)/);
    assert.equal(worldName({ kind: 'facts', file: csv }), 'elements');
    assert.equal(worldName({ kind: 'facts', file: path.join(tmp, 'my-world', 'facts.csv') }), 'my-world');
  });

  it('finds the folders built from a source, newest first, and no other', () => {
    const src = write('src/facts.csv', 'entity,attribute,value\nA,b,1\n');
    const manifest = (file: string, created: string) => JSON.stringify({ format: 'agent-lab-world/1', source: { kind: 'facts', files: [{ path: file, sha256: 'x' }] }, made: { created } });
    write('runs/world-a/world.json', manifest(src, '2026-01-01T00:00:00Z'));
    write('runs/world-b/world.json', manifest(src, '2026-02-01T00:00:00Z'));
    write('runs/world-c/world.json', manifest(path.join(tmp, 'elsewhere.csv'), '2026-03-01T00:00:00Z'));
    fs.mkdirSync(path.join(tmp, 'runs', 'world-textbook'));
    const dirs = ['world-a', 'world-b', 'world-c', 'world-textbook'].map((n) => path.join(tmp, 'runs', n));
    assert.deepEqual(foldersBuiltFrom(dirs, { kind: 'facts', file: src }), [dirs[1], dirs[0]]);
  });

  it('names the template files already there (New World refuses them)', () => {
    assert.deepEqual(existingTemplateFiles(path.join(tmp, 'w'), 'docs'), []);
    const tasks = write('w/tasks.jsonl', 'mine\n');
    assert.deepEqual(existingTemplateFiles(path.join(tmp, 'w'), 'docs'), [tasks]);
    assert.deepEqual(existingTemplateFiles(path.join(tmp, 'w'), 'facts'), []);
  });
});
