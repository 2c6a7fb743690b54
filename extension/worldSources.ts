// The worlds a workspace holds, read from the files (docs/worlds.md): world sources a user
// writes (a fact table; a docs folder with a tasks file) and world folders that
// `agent-lab world` built from them. What `agentLab.world` names is classified here, Build
// World finds the folders a source was built into (world.json's source paths), and "Agent
// Lab: New World…" takes its templates from here. No vscode (unit-tested in
// test/unit/worldSources.test.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CORPUS_FILE, FACTS_CSV_SOURCE_FILE, TASKS_SOURCE_FILE, WORLD_MANIFEST, type WorldManifest } from '../core/protocol/folders';

/** A world the editor's commands can use. */
export type WorldRef =
  | { kind: 'folder'; dir: string }
  | { kind: 'facts'; file: string }
  | { kind: 'docs'; docsDir: string; tasksFile: string };

/** The CSV header a fact table starts with (after comment lines). */
export const FACT_HEADER = 'entity,attribute,value';
/** The folder of a documents world's sources beside its tasks file (docs/worlds.md, "In the editor"). */
export const DOCS_FOLDER = 'docs';

const firstDataLine = (text: string): string | undefined =>
  text
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .find((l) => l.trim() !== '' && !l.startsWith('#'));

function head(file: string, bytes = 4096): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    const n = fs.readSync(fd, buf, 0, bytes, 0);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** True when a file's first rows make it a fact table: a CSV with the header, or JSONL with the keys (or a settings row). */
export function looksLikeFactTable(file: string): boolean {
  let text: string;
  try {
    text = head(file);
  } catch {
    return false;
  }
  const first = firstDataLine(text);
  if (first === undefined) return false;
  if (/\.csv$/i.test(file)) return first.trim() === FACT_HEADER;
  if (!/\.jsonl$/i.test(file)) return false;
  try {
    const row = JSON.parse(first) as unknown;
    if (typeof row !== 'object' || row === null || Array.isArray(row)) return false;
    return 'settings' in row || ('entity' in row && 'attribute' in row && 'value' in row);
  } catch {
    return false;
  }
}

const isDir = (p: string) => fs.existsSync(p) && fs.statSync(p).isDirectory();
const isFile = (p: string) => fs.existsSync(p) && fs.statSync(p).isFile();

/**
 * What a path names: a world folder (it has corpus.jsonl), a fact table (a file, or a folder
 * holding exactly one), or a docs+tasks source (a tasks.jsonl beside a docs/ folder, or the
 * folder holding both). Throws an Error naming the path and what it lacks.
 */
export function classifyWorldPath(abs: string): WorldRef {
  if (!fs.existsSync(abs)) throw new Error(`${abs} does not exist`);
  if (isFile(abs)) {
    if (looksLikeFactTable(abs)) return { kind: 'facts', file: abs };
    if (/\.jsonl$/i.test(abs) && isDir(path.join(path.dirname(abs), DOCS_FOLDER))) {
      return { kind: 'docs', docsDir: path.join(path.dirname(abs), DOCS_FOLDER), tasksFile: abs };
    }
    throw new Error(
      `${abs} is neither a fact table (a CSV starting "${FACT_HEADER}", or JSONL rows with those keys) nor a tasks file beside a ${DOCS_FOLDER}/ folder`,
    );
  }
  if (isFile(path.join(abs, CORPUS_FILE))) return { kind: 'folder', dir: abs };
  if (isFile(path.join(abs, TASKS_SOURCE_FILE)) && isDir(path.join(abs, DOCS_FOLDER))) {
    return { kind: 'docs', docsDir: path.join(abs, DOCS_FOLDER), tasksFile: path.join(abs, TASKS_SOURCE_FILE) };
  }
  const tables = fs
    .readdirSync(abs)
    .filter((n) => /\.(csv|jsonl)$/i.test(n))
    .map((n) => path.join(abs, n))
    .filter(looksLikeFactTable);
  if (tables.length === 1) return { kind: 'facts', file: tables[0]! };
  if (tables.length > 1) throw new Error(`${abs} holds ${tables.length} fact tables (${tables.map((t) => path.basename(t)).join(', ')}): name one of them`);
  throw new Error(`${abs} is not a world: no corpus.jsonl (a built world), no fact table, no ${TASKS_SOURCE_FILE} with a ${DOCS_FOLDER}/ folder`);
}

/** The source files of a world source, as world.json records them (absolute paths). */
export function sourceFiles(ref: WorldRef): string[] {
  if (ref.kind === 'facts') return [ref.file];
  if (ref.kind === 'docs') return [ref.tasksFile];
  return [];
}

/** A short name for a world: the source's folder or file name. */
export function worldName(ref: WorldRef): string {
  const base =
    ref.kind === 'folder'
      ? path.basename(ref.dir)
      : ref.kind === 'facts'
        ? path.basename(ref.file).replace(/\.(csv|jsonl)$/i, '') === 'facts'
          ? path.basename(path.dirname(ref.file))
          : path.basename(ref.file).replace(/\.(csv|jsonl)$/i, '')
        : path.basename(path.dirname(ref.tasksFile));
  return base.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '') || 'world';
}

export function readManifest(dir: string): WorldManifest | null {
  try {
    const v = JSON.parse(fs.readFileSync(path.join(dir, WORLD_MANIFEST), 'utf8')) as unknown;
    return typeof v === 'object' && v !== null ? (v as WorldManifest) : null;
  } catch {
    return null;
  }
}

/** World folders (newest first by world.json's "created") built from this source. */
export function foldersBuiltFrom(worldDirs: readonly string[], ref: WorldRef): string[] {
  const wanted = sourceFiles(ref).map((f) => path.resolve(f));
  if (wanted.length === 0) return [];
  return worldDirs
    .map((dir) => ({ dir, manifest: readManifest(dir) }))
    .filter(({ manifest }) => {
      const paths = manifest?.source?.files?.map((f) => path.resolve(f.path)) ?? [];
      return wanted.every((w) => paths.includes(w));
    })
    .sort((a, b) => String(b.manifest?.made?.created ?? '').localeCompare(String(a.manifest?.made?.created ?? '')))
    .map(({ dir }) => dir);
}

/** Task counts of a built world (world.json), summed over shapes. */
export function builtCounts(dir: string): { passages: number; train: number; heldout: number; dev: number } | null {
  const m = readManifest(dir);
  if (!m?.counts) return null;
  const sum = (split: string) => Object.values(m.counts.tasks?.[split] ?? {}).reduce((a, b) => a + b, 0);
  return { passages: m.counts.passages, train: sum('train'), heldout: sum('heldout'), dev: sum('dev') };
}

// ---- New World's templates -------------------------------------------------------------

export type NewWorldKind = 'facts' | 'docs';

/** The files a new world source starts with, relative to its folder, and the one to open. */
export function worldTemplate(kind: NewWorldKind): { files: { rel: string; text: string }[]; main: string } {
  if (kind === 'facts') {
    return {
      main: FACTS_CSV_SOURCE_FILE,
      files: [
        {
          rel: FACTS_CSV_SOURCE_FILE,
          text:
            '# A fact table: one fact per row, "the {attribute} of {entity} is {value}" (the format: "Agent Lab: Open the World Format Guide").\n' +
            '# A numeric value is an integer; no value may contain "." "," or ";". Replace these rows with your own.\n' +
            `${FACT_HEADER}\n` +
            'Everest,height in metres,8849\n' +
            'Everest,first ascent year,1953\n' +
            'Everest,mountain range,Himalaya\n' +
            'K2,height in metres,8611\n' +
            'K2,first ascent year,1954\n' +
            'K2,mountain range,Karakoram\n' +
            'Kangchenjunga,height in metres,8586\n' +
            'Kangchenjunga,first ascent year,1955\n' +
            'Kangchenjunga,mountain range,Himalaya\n' +
            'Lhotse,height in metres,8516\n' +
            'Lhotse,first ascent year,1956\n' +
            'Lhotse,mountain range,Himalaya\n',
        },
      ],
    };
  }
  const task = (question: string, gold: string, kind: string, facts: string[][], op: string | null, queries: string[]) =>
    JSON.stringify({ question, gold, kind, hints: { queries, facts, op } });
  return {
    main: TASKS_SOURCE_FILE,
    files: [
      {
        rel: `${DOCS_FOLDER}/notes.md`,
        text:
          '# Notes\n\n' +
          'Your documents go in this folder (.md or .txt). The stub teacher reads a fact from a sentence ' +
          'of the form "the {attribute} of {entity} is {value}".\n\n' +
          'Everest is the highest mountain on Earth: the height in metres of Everest is 8849. It was first climbed in 1953.\n' +
          'K2 lies in the Karakoram, and the height in metres of K2 is 8611.\n' +
          'Lhotse neighbours Everest; the height in metres of Lhotse is 8516.\n',
      },
      {
        rel: TASKS_SOURCE_FILE,
        text:
          [
            task('What is the height in metres of Everest? Use the corpus.', '8849', 'lookup', [['Everest', 'height in metres']], null, ['Everest height in metres']),
            task('What is the height in metres of K2? Use the corpus.', '8611', 'lookup', [['K2', 'height in metres']], null, ['K2 height in metres']),
            task('What is the height in metres of Lhotse? Use the corpus.', '8516', 'lookup', [['Lhotse', 'height in metres']], null, ['Lhotse height in metres']),
            task(
              'What do you get if you add the height in metres of Everest to the height in metres of K2? Use the corpus.',
              '17460',
              'sum',
              [
                ['Everest', 'height in metres'],
                ['K2', 'height in metres'],
              ],
              'sum',
              ['Everest height in metres', 'K2 height in metres'],
            ),
            JSON.stringify({ question: 'Which mountain neighbours Everest? Use the corpus.', gold: 'Lhotse' }),
          ].join('\n') + '\n',
      },
    ],
  };
}

/** The template's files under `dir` that already exist (New World refuses to write over them). */
export function existingTemplateFiles(dir: string, kind: NewWorldKind): string[] {
  return worldTemplate(kind)
    .files.map((f) => path.join(dir, ...f.rel.split('/')))
    .filter((p) => fs.existsSync(p));
}
