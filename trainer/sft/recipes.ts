// SFT recipes: the knobs that decide what a small student learns in minutes on a CPU.
// Plain SFT learns the format but not to copy; copy-span loss weights, a first-turn
// curriculum and many small optimiser steps teach the copying (docs/results.md, "The recipe
// knobs"). Recorded whole in each run's config.
import type { SpanKind } from '../../core/spans';
import type { PoolName } from '../../core/trainingPool';
import type { TaskKind } from '../../core/types';
import type { ToolEnv } from '../../core/env';
import type { StubTeacherOptions } from '../../core/stubTeacher';
import { topHitHolds } from '../../core/worlds';

/**
 * Counterfactual-value augmentation: training worlds with the seed's entities and
 * attributes but every value resampled (core/worlds.ts), distilled by the stub teacher
 * (which reads values from observations). Their seeds never meet an evaluation split's.
 */
export interface Augmentation {
  /** Share of examples drawn from the fresh worlds (the rest from the seed world). */
  share: number;
  /** Number of fresh training worlds. */
  worlds: number;
  /** Tasks per shape from each fresh world. */
  perShape: number;
  /**
   * Worlds with new entity names (and resampled values) added to the fresh draws, their
   * seeds apart from the RL pools' and the evaluation splits': names the student must copy
   * from the question and the corpus because it cannot have learnt them.
   */
  entityWorlds?: number;
  /**
   * Copies of the counterfactual worlds' transcripts, each with every entity renamed by
   * names drawn for it alone (shaped like the table's own, apart from every name an
   * evaluation split or RL pool uses): no name recurs, so none can be remembered; the student
   * must copy it from the question and the corpus (docs/decisions.md, "New names").
   */
  ownNames?: number;
  /**
   * Share of those copies whose names are kin: made of a few syllables drawn for the copy, so
   * the names of one question share pieces ("Junpe", "Junmida") and a copy cannot tell them
   * apart by their last piece (docs/decisions.md, "Kin names").
   */
  ownNamesKin?: number;
  /**
   * The copies' names are varied: kin names never repeat a syllable back to back (a student
   * trained on "Venven" loops: "Loholvenvenven"), and a name's number is one digit longer or
   * shorter a third of the time each ("Junpe-40M" beside "Stack-100M": copied digit by digit,
   * not completed to the table's usual width). docs/decisions.md, "Pair copies".
   */
  ownNamesVaried?: boolean;
  /**
   * Share of the copies drawn from two-name transcripts that ask the same attribute of both
   * names ("add the publication year of A to the publication year of B"): there only the
   * name's place in the question tells which to search second (docs/decisions.md, "Pair copies").
   */
  ownNamesSameAttribute?: number;
  /**
   * A fresh world's compares: as many whose winner differs from the seed world's as whose
   * winner is the same (core/worlds.ts balancedCompares). Drawn plainly, 3 in 4 keep the
   * seed's winner, so naming the remembered winner of a pair pays most of the time.
   */
  balanceCompares?: boolean;
}

export interface CurriculumPhase {
  /** Share of the budget (steps or time) this phase takes; the phases sum to 1. */
  fraction: number;
  /**
   * 'first': system + user + the first assistant turn only; 'each': one example per
   * assistant turn (the transcript cut after it); 'all': whole transcripts.
   */
  turns: 'first' | 'each' | 'all';
  /** Sequences per optimiser step in this phase. */
  batch: number;
}

export interface Recipe {
  name: string;
  description: string;
  pool: PoolName;
  /** Loss weight multiplier on copy spans (entity/attribute, query, expression, answer). */
  copyWeight: number;
  /** Extra multipliers per span kind. */
  kindWeights: Partial<Record<SpanKind, number>>;
  /** Extra multipliers on one kind's copy spans only (the thought's: the entity and attribute of "I need", the values of "Now I compute"). */
  copyKindWeights?: Partial<Record<SpanKind, number>>;
  curriculum: CurriculumPhase[];
  /**
   * Sampling weight per task shape (lookup, double, sum, compare). Absent: examples are
   * drawn in proportion to how many each shape has (the pool's natural mix).
   */
  shapeWeights?: Partial<Record<TaskKind, number>>;
  augment?: Augmentation;
  /** The stub teacher searches with k = 1 when the top hit states the fact (else k = 2). */
  teacherTopHit?: boolean;
  /** The stub teacher restates each fact it found at the start of its next thought (core/stubTeacher.ts). */
  teacherNotes?: boolean;
  /** A compare's last thought reads the calculator's sign and names the winner before answering (core/stubTeacher.ts). */
  teacherVerdict?: boolean;
}

const COPY_ENLARGED: Recipe = {
  name: 'copy-enlarged',
  description: 'the copy recipe on every task the fact table makes (held-out overlaps excluded)',
  pool: 'enlarged',
  copyWeight: 5,
  kindWeights: {},
  curriculum: [
    { fraction: 0.25, turns: 'first', batch: 4 },
    { fraction: 0.75, turns: 'all', batch: 2 },
  ],
};
const BALANCED: Partial<Record<TaskKind, number>> = { lookup: 0.15, double: 0.2, sum: 0.4, compare: 0.25 };

/** reader-k1-fresh-compare's draw of shapes: compares at 0.4 of the examples (the shape whose sign must be read). */
const COMPARE_HEAVY: Recipe['shapeWeights'] = { lookup: 0.1, double: 0.15, sum: 0.35, compare: 0.4 };

const READER_K1_ANSWER: Recipe = {
  ...COPY_ENLARGED,
  name: 'reader-k1-answer',
  description:
    'reader-answer with the teacher searching k=1 when the top hit states the fact (97% of searches): one passage, one value after "is", no same-attribute distractor to tell apart',
  shapeWeights: BALANCED,
  augment: { share: 0.5, worlds: 40, perShape: 40 },
  kindWeights: { answer: 3 },
  teacherTopHit: true,
};

export const RECIPES: Record<string, Recipe> = {
  plain: {
    name: 'plain',
    description: 'plain SFT on whole transcripts of the seed split (the baseline)',
    pool: 'seed',
    copyWeight: 1,
    kindWeights: {},
    curriculum: [{ fraction: 1, turns: 'all', batch: 2 }],
  },
  copy: {
    name: 'copy',
    description: 'x5 loss on copy spans; first quarter on first-turn-only examples (batch 4); seed split',
    pool: 'seed',
    copyWeight: 5,
    kindWeights: {},
    curriculum: [
      { fraction: 0.25, turns: 'first', batch: 4 },
      { fraction: 0.75, turns: 'all', batch: 2 },
    ],
  },
  'copy-enlarged': COPY_ENLARGED,
  // The reading experiments (docs/results.md, "Reading or remembering"): copy-enlarged plus one knob each.
  balanced: {
    ...COPY_ENLARGED,
    name: 'balanced',
    description: 'copy-enlarged with shape-balanced sampling (lookup .15, double .2, sum .4, compare .25)',
    shapeWeights: BALANCED,
  },
  reader: {
    ...COPY_ENLARGED,
    name: 'reader',
    description: 'balanced, with half of the examples from 40 counterfactual-value worlds (values must be read, not remembered)',
    shapeWeights: BALANCED,
    augment: { share: 0.5, worlds: 40, perShape: 40 },
  },
  'reader-fresh': {
    ...COPY_ENLARGED,
    name: 'reader-fresh',
    description: 'reader with three quarters of the examples from the counterfactual-value worlds',
    shapeWeights: BALANCED,
    augment: { share: 0.75, worlds: 40, perShape: 40 },
  },
  'reader-k1': {
    ...COPY_ENLARGED,
    name: 'reader-k1',
    description: 'reader, with the teacher searching k=1 when the top hit states the fact (one passage to copy from)',
    shapeWeights: BALANCED,
    augment: { share: 0.5, worlds: 40, perShape: 40 },
    teacherTopHit: true,
  },
  'answer-heavy': {
    ...COPY_ENLARGED,
    name: 'answer-heavy',
    description: 'copy-enlarged with the answer span weighted x3 more (x15 in all): the held-out misses are answers not copied from the calculator',
    kindWeights: { answer: 3 },
  },
  'balanced-answer': {
    ...COPY_ENLARGED,
    name: 'balanced-answer',
    description: 'answer-heavy with shape-balanced sampling: double and lookup are 3.7% of the natural mix and fail at every budget',
    shapeWeights: BALANCED,
    kindWeights: { answer: 3 },
  },
  'reader-answer': {
    ...COPY_ENLARGED,
    name: 'reader-answer',
    description: 'reader (balanced, half counterfactual-value worlds) with the answer span weighted x3 more',
    shapeWeights: BALANCED,
    augment: { share: 0.5, worlds: 40, perShape: 40 },
    kindWeights: { answer: 3 },
  },
  'reader-compute': {
    ...COPY_ENLARGED,
    name: 'reader-compute',
    description: 'reader-answer with the thought\'s copies weighted x3 more: "Now I compute A+B" is where the values are read from the observations',
    shapeWeights: BALANCED,
    augment: { share: 0.5, worlds: 40, perShape: 40 },
    kindWeights: { answer: 3 },
    copyKindWeights: { thought: 3 },
  },
  'reader-k1-answer': READER_K1_ANSWER,
  'reader-k1-verdict': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-verdict',
    description:
      'reader-k1-answer with a compare\'s last thought reading the sign ("-9 is below zero, so B is larger."): on fresh worlds compares were answered with the seed world\'s winner after a correct calculation',
    teacherVerdict: true,
  },
  'reader-k1-fresh': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-fresh',
    description: 'reader-k1-answer with three quarters of the examples from the counterfactual-value worlds (less to remember, more to read)',
    augment: { share: 0.75, worlds: 40, perShape: 40 },
  },
  'reader-k1-fresh-compare': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-fresh-compare',
    description: 'reader-k1-fresh drawing compares at 0.4 of the examples (0.25 in the balanced mix): the weakest shape, whose sign must be read, not remembered',
    augment: { share: 0.75, worlds: 40, perShape: 40 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-own-names': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-own-names',
    description:
      "reader-k1-fresh-compare with a copy of each counterfactual transcript whose entities carry names of their own (6,400 at the default size: no name recurs, so new names are copied, not remembered)",
    augment: { share: 0.75, worlds: 40, perShape: 40, ownNames: 6400 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-own-names-kin': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-own-names-kin',
    description: 'reader-k1-own-names whose copies, half of them, carry kin names: the names of one question share syllables, so each is copied whole, not by its last piece',
    augment: { share: 0.75, worlds: 40, perShape: 40, ownNames: 6400, ownNamesKin: 0.5 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-own-names-pairs': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-own-names-pairs',
    description:
      'reader-k1-own-names-kin whose names are varied (no syllable twice in a row, numbers of other widths) and whose copies are drawn, two in five, from questions asking one attribute of two names',
    augment: { share: 0.75, worlds: 40, perShape: 40, ownNames: 6400, ownNamesKin: 0.5, ownNamesVaried: true, ownNamesSameAttribute: 0.4 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-names-own-kin': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-names-own-kin',
    description: 'reader-k1-names-own whose renamed copies, half of them, carry kin names (names of one question that share syllables)',
    augment: { share: 0.75, worlds: 40, perShape: 40, entityWorlds: 20, ownNames: 6400, ownNamesKin: 0.5 },
  },
  'reader-k1-own-names-half': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-own-names-half',
    description: 'reader-k1-own-names with half as many renamed copies (3,200): more of the fresh draws keep the table\'s names',
    augment: { share: 0.75, worlds: 40, perShape: 40, ownNames: 3200 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-names-own': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-names-own',
    description: 'reader-k1-names (20 new-name worlds, the natural mix of shapes) with 6,400 renamed copies of its counterfactual transcripts, names of their own',
    augment: { share: 0.75, worlds: 40, perShape: 40, entityWorlds: 20, ownNames: 6400 },
  },
  'reader-k1-balanced': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-balanced',
    description: "reader-k1-fresh-compare whose fresh compares flip the seed world's winner half the time: the pair no longer tells the answer, the calculator's sign does",
    augment: { share: 0.75, worlds: 40, perShape: 40, balanceCompares: true },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-names': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-names',
    description: 'reader-k1-fresh with 20 worlds of new entity names (apart from every name evaluation and RL use) among the fresh draws, a third of them: names to copy, not to remember',
    augment: { share: 0.75, worlds: 40, perShape: 40, entityWorlds: 20 },
  },
  'reader-k1-compare-names': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-compare-names',
    description:
      'reader-k1-fresh-compare with 6 worlds of new entity names among its 46 fresh worlds (measured: fresh-entities 0.056, dev 0.86; a tenth of the examples teaches no copying)',
    augment: { share: 0.75, worlds: 40, perShape: 40, entityWorlds: 6 },
    shapeWeights: COMPARE_HEAVY,
  },
  'reader-k1-fresh-verdict': {
    ...READER_K1_ANSWER,
    name: 'reader-k1-fresh-verdict',
    description: 'reader-k1-fresh with the verdict thought of reader-k1-verdict (a compare reads the sign before naming the winner)',
    augment: { share: 0.75, worlds: 40, perShape: 40 },
    teacherVerdict: true,
  },
  notes: {
    ...COPY_ENLARGED,
    name: 'notes',
    description: 'copy-enlarged, the teacher restating each fact it found ("The X of Y is V.") before its next step',
    teacherNotes: true,
  },
  'reader-notes': {
    ...COPY_ENLARGED,
    name: 'reader-notes',
    description: 'reader (balanced, half counterfactual-value worlds), the teacher restating each fact it found',
    shapeWeights: BALANCED,
    augment: { share: 0.5, worlds: 40, perShape: 40 },
    teacherNotes: true,
  },
};
export const RECIPE_NAMES = Object.keys(RECIPES);

/** The recipe's knobs on the stub teacher (its k, its thoughts). */
export type TeacherKnobs = Pick<Recipe, 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'>;

/** The stub teacher a recipe asks for, in a world's tool environment. */
export function stubTeacherOptions(knobs: TeacherKnobs, env: ToolEnv): StubTeacherOptions {
  return {
    ...(knobs.teacherTopHit ? { topHitHolds: topHitHolds(env) } : {}),
    ...(knobs.teacherNotes ? { restateFacts: true } : {}),
    ...(knobs.teacherVerdict ? { compareVerdict: true } : {}),
  };
}

/** The teacher knobs of a run's config.json "recipe" (absent or old: the seed's teacher). */
export function teacherKnobsOf(recipe: unknown): TeacherKnobs {
  if (typeof recipe !== 'object' || recipe === null) return {};
  const r = recipe as Record<string, unknown>;
  return {
    ...(r['teacherTopHit'] === true ? { teacherTopHit: true } : {}),
    ...(r['teacherNotes'] === true ? { teacherNotes: true } : {}),
    ...(r['teacherVerdict'] === true ? { teacherVerdict: true } : {}),
  };
}
/**
 * Picked on the mean of dev and dev-entities (200 tasks each of reserved worlds), the rule of
 * docs/decisions.md "The default recipe"; the figures of each choice are in docs/results.md.
 */
export const DEFAULT_RECIPE = 'reader-k1-own-names-pairs';

/**
 * The demo's textbook recipe: its five minutes are measured with this one (held-out >= 0.70,
 * docs/results.md); the default's renamed copies take a share of the draws a short run needs
 * for the seed world. The demo says which recipe it ran and how to run the default.
 */
export const DEMO_RECIPE = 'reader-k1-fresh-compare';

/**
 * The default of a run on a user's world (`--world`, the editor's runs on a world's traces):
 * picked on that world's dev split (elements, 8,000 steps, seed 0; docs/results.md "New names
 * made of trained pieces"): 'reader-k1-names-own' scores dev 0.80 against 0.78 for
 * 'reader-k1-own-names-half', 0.72 for 'reader-k1-own-names' and 0.68 for
 * 'reader-k1-fresh-compare'. A small table is remembered whole; names of their own make its
 * student read.
 */
export const DEFAULT_WORLD_RECIPE = 'reader-k1-names-own';

/** The recipe a run gets when none is named: a user's world's default, or the textbook's. */
export function defaultRecipeName(userWorld: boolean): string {
  return userWorld ? DEFAULT_WORLD_RECIPE : DEFAULT_RECIPE;
}

/** The demo's recipe: a user's world's default, or the textbook's short-budget one. */
export function demoRecipeName(userWorld: boolean): string {
  return userWorld ? DEFAULT_WORLD_RECIPE : DEMO_RECIPE;
}

export function getRecipe(name: string): Recipe {
  const r = RECIPES[name];
  if (!r) throw new Error(`unknown recipe '${name}' (known: ${RECIPE_NAMES.join(', ')})`);
  return r;
}

/** The phase in force at `progress` (0..1). */
export function phaseAt(recipe: Recipe, progress: number): { index: number; phase: CurriculumPhase } {
  let acc = 0;
  for (let i = 0; i < recipe.curriculum.length; i++) {
    acc += recipe.curriculum[i]!.fraction;
    if (progress < acc || i === recipe.curriculum.length - 1) return { index: i, phase: recipe.curriculum[i]! };
  }
  return { index: 0, phase: recipe.curriculum[0]! };
}
