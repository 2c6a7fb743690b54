// The world and run folders' names and the shapes of the files other parts read
// (docs/architecture.md "The run folder", docs/worlds.md): their one home. The trainer and the
// CLI write these folders; the extension, the language server and the benchmarks read them.
// Types and constants only, no Node: core/protocol/ is shared with the webviews. A new file
// or folder name goes here; lint (scripts/eslint/folders.mjs) refuses the literal elsewhere.

// ---- A world folder (agent-lab world --out DIR; a run's world/ is a copy) ----

/** The passages the student reads (one row a passage). */
export const CORPUS_FILE = 'corpus.jsonl';
/** The world's task splits, one row a task. */
export const TRAIN_FILE = 'train.jsonl';
export const HELDOUT_FILE = 'heldout.jsonl';
/** Absent in worlds written before worlds had a dev split. */
export const DEV_FILE = 'dev.jsonl';
/** A world's MCP tool list, narrowing search/calc (docs/worlds.md "Tools"). */
export const TOOLS_FILE = 'tools.json';
/** A fact world's table as built (its fresh splits are derived from it). */
export const FACTS_FILE = 'facts.json';
/** The world's manifest: what it was made from and how (`WorldManifest` below). */
export const WORLD_MANIFEST = 'world.json';
/** world.json's "format". */
export const WORLD_FORMAT = 'agent-lab-world/1';
/** Every file a world folder may hold; writing a world refuses a folder holding anything else. */
export const WORLD_FILES: readonly string[] = [CORPUS_FILE, TRAIN_FILE, HELDOUT_FILE, DEV_FILE, TOOLS_FILE, FACTS_FILE, WORLD_MANIFEST];

// ---- A world's source files (what `agent-lab world --facts|--docs --tasks` reads) ----

/** A documents world's task list: `tasks.jsonl` or `NAME.tasks.jsonl`. */
export const TASKS_SOURCE_FILE = 'tasks.jsonl';
/** A fact table: `facts.csv` or `NAME.facts.csv`, in JSONL `facts.jsonl` or `NAME.facts.jsonl`. */
export const FACTS_CSV_SOURCE_FILE = 'facts.csv';
export const FACTS_SOURCE_FILE = 'facts.jsonl';

// ---- A run folder (one run = one folder, readable at any moment) ----

/** What the run is (kind, preset, model, budget, world): `RunConfigView` below is what other parts read of it. */
export const CONFIG_FILE = 'config.json';
/** One JSON object a line, appended (core/protocol/metrics.ts). */
export const METRICS_FILE = 'metrics.jsonl';
/** Held while a job trains the run. */
export const RUN_LOCK_FILE = 'run.lock';
/** The run's tokenizer (also a Hugging Face folder's) and its config. */
export const TOKENIZER_FILE = 'tokenizer.json';
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';
/** The demo's report of what it achieved. */
export const REPORT_FILE = 'report.json';
/** The run's copy of its world (a world folder; with world.json when it is a user's world). */
export const RUN_WORLD_DIR = 'world';
/** The run's training data: the files below. */
export const DATA_DIR = 'data';
export const TRAIN_TRACES_FILE = 'train.traces.jsonl';
export const HELDOUT_TRACES_FILE = 'heldout.traces.jsonl';
export const TRAIN_TASKS_FILE = 'train.tasks.jsonl';
/** What the data was prepared from (its hashes), so a resume finds the same data. */
export const PREPARED_FILE = 'prepared.json';
/** Which traces the editor trained the run on (`RunSourceView`). */
export const SOURCE_FILE = 'source.json';
/** A traces file's suffix: `NAME.traces.jsonl`. */
export const TRACES_SUFFIX = '.traces.jsonl';
/** Evaluations: `eval/<split>.jsonl` (one row a task) and `eval/<split>.json` (the summary). */
export const EVAL_DIR = 'eval';
export const evalRowsFile = (split: string): string => `${split}.jsonl`;
export const evalSummaryFile = (split: string): string => `${split}.json`;
/** Checkpoints: `checkpoints/step-N/` and the `checkpoints/latest` pointer (a file naming one). */
export const CHECKPOINTS_DIR = 'checkpoints';
export const LATEST_POINTER = 'latest';
/** A checkpoint folder's files. */
export const CHECKPOINT_INFO_FILE = 'checkpoint.json';
export const WEIGHTS_FILE = 'model.safetensors';
export const OPTIMIZER_FILE = 'optimizer.safetensors';

// ---- A Hugging Face model folder (--base reads one, export --format hf writes one) ----

/** The model's config (a Hugging Face folder's, not a run's CONFIG_FILE, though the name is the same). */
export const HF_CONFIG_FILE = 'config.json';
/** Single-file weights; sharded ones have `model.safetensors.index.json`. */
export const HF_WEIGHTS_FILE = WEIGHTS_FILE;
/** Sharded weights' index: which shard holds each tensor. */
export const HF_WEIGHTS_INDEX_FILE = 'model.safetensors.index.json';
/** The chat template as its own file (it wins over tokenizer_config.json's chat_template, as in transformers). */
export const CHAT_TEMPLATE_FILE = 'chat_template.jinja';
/** The exported model's special token ids for generation. */
export const GENERATION_CONFIG_FILE = 'generation_config.json';
/** The TRL export's tokenizer files: the special tokens by role. */
export const SPECIAL_TOKENS_MAP_FILE = 'special_tokens_map.json';
/** PEFT's LoRA adapter folder (export --format hf --peft). */
export const PEFT_CONFIG_FILE = 'adapter_config.json';
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';

// ---- Shapes other parts read ----

/**
 * The parts of a run's config.json that the extension, the language server and the benchmarks
 * read. Every field is optional and read defensively: a run is readable at any moment, and runs
 * of other kinds (the demo's) record fewer. The trainer writes more than this.
 */
export interface RunConfigView {
  /** 'sft', 'grpo', 'demo'... the metrics phase the run's steps are logged under. */
  kind?: unknown;
  preset?: unknown;
  backend?: { used?: unknown };
  budget?: { steps?: number; minutes?: number };
  /** A GRPO run: the SFT run it started from. */
  from?: { run?: unknown };
  /** A run built from a user's world (`worldRecord` in store/worldFolder.ts). */
  world?: { name?: unknown; dir?: unknown; id?: unknown; source?: { files?: { path?: unknown; sha256?: unknown }[] } | null };
  model?: { maxSeq?: unknown };
  sftMaxLen?: unknown;
  data?: { names?: unknown };
}

/** world.json (WORLD_MANIFEST): what the world was made from and how; store/worldFolder.ts writes and checks it. */
export interface WorldManifest {
  format: typeof WORLD_FORMAT;
  name: string;
  source: { kind: 'facts' | 'docs' | 'folder'; files: { path: string; sha256: string }[] };
  made: {
    by: string;
    seed: number;
    distractors?: number;
    shapes?: string[];
    /** A fact world's surface forms (the user's, or the plain defaults); absent: the textbook's (a world built before worlds had their own). */
    templates?: string[];
    split: { train: number; heldout: number; dev: number };
    created: string;
  };
  counts: { passages: number; facts?: number; tasks: Record<string, Record<string, number>> };
  overlap: { excluded: number; exact: number; swapped: number };
  /** Tasks the stub teacher cannot solve, by reason (no_hints, fact_not_in_corpus, gold_differs, outside_grammar). */
  unsolvable: Record<string, number>;
  /** With a tool list (tools.json): its tool line and the system prompt it makes. */
  tools?: { line: string; system_prompt: string };
  /** sha256 of each world file as written (worlds written before this field have none). */
  files?: Record<string, string>;
  /** A fact world's reading splits: derived worlds from reserved seeds (docs/worlds.md). */
  fresh?: Record<'fresh-values' | 'fresh-entities', FreshSpec> & { 'dev-entities'?: FreshSpec };
}

/** A fact world's splits of derived worlds; dev-entities is absent from worlds built before it (derived from fresh-entities' spec then). */
export type FreshName = 'fresh-values' | 'fresh-entities' | 'dev-entities';
export interface FreshSpec {
  /** core/derivedWorlds.ts DerivedKind: which world a reserved seed derives. */
  kind: 'values' | 'entities';
  seeds: number[];
  tasks_per_world: number;
}

/** data/source.json as the editor writes it: the traces a run was trained on. */
export interface RunSourceView {
  traces?: unknown;
}
