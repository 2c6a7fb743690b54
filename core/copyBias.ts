// A copy bias for decoding: while the student is in the middle of a word that begins like a
// word of the user's question, the tokens that continue that question word get their logits
// raised by a fixed amount. A pointer-generator's copy distribution with a constant gate,
// applied at decoding only: a 2-layer student starts an unseen name right and then drifts into
// pieces of names it was trained on ("Nioxnem" -> "Nioxkrm"); the bias keeps it on the name it
// is copying. With `stop` it also keeps a copied name whole: inside a name of the question the
// tokens that drift from it or end it early are lowered by the same amount ("Raostfa" ->
// "Raosfa", "Peost" -> "Peos"), and past its end nothing runs on ("Marmar" -> "Marmarmar...",
// "Mifa" -> "Mifa-40M"). Why they are on by default and what they measured: docs/decisions.md,
// "A copy bias" and "A copy stop".

/** Letters and digits: what a name is made of (a hyphen joins parts: "Stack-100M"). */
const WORD_CHAR = /[\p{L}\p{N}]/u;
const QUESTION_WORD = /[\p{L}\p{N}]+(?:-[\p{L}\p{N}]+)*/gu;
const TRAILING_WORD = /[\p{L}\p{N}][\p{L}\p{N}-]*$/u;
const LEADING_WORD = /^[\p{L}\p{N}]*/u;
/** What separates two words: spaces, punctuation, quotes. */
const LEADING_GAP = /^[^\p{L}\p{N}]+/u;
/** A token that goes on with the word it follows: letters, digits, or a hyphen that joins ("-40M", "-"). */
const RUNS_ON = /^(?:[\p{L}\p{N}]|-(?:[\p{L}\p{N}]|$))/u;

/** The words of a question a decoder may copy ("Stack-100M" is one word, so is "RoPE"). */
export function questionWords(question: string): string[] {
  return [...new Set(question.match(QUESTION_WORD) ?? [])];
}

/** The word the text ends in the middle of ('' after a space or punctuation). */
export function trailingWord(text: string): string {
  return TRAILING_WORD.exec(text)?.[0] ?? '';
}

/** What each token's text starts with, computed once per vocabulary: decoding asks at every step. */
interface TokenShape {
  /** It starts with a letter or digit. */
  wordFirst: boolean;
  /** Its leading letters and digits, after any leading spaces and punctuation. */
  lead: string;
}
const SHAPES = new WeakMap<readonly (string | null)[], (TokenShape | null)[]>();
function shapesOf(tokenStrings: readonly (string | null)[]): (TokenShape | null)[] {
  let shapes = SHAPES.get(tokenStrings);
  if (!shapes) {
    shapes = tokenStrings.map((s) => (s ? { wordFirst: WORD_CHAR.test(s[0]!), lead: LEADING_WORD.exec(s.replace(LEADING_GAP, ''))![0] } : null));
    SHAPES.set(tokenStrings, shapes);
  }
  return shapes;
}

/** Every prefix of every question word ('' too): "begins a question word" is one lookup. */
function prefixesOf(words: readonly string[]): Set<string> {
  const out = new Set<string>(['']);
  for (const w of words) for (let n = 1; n <= w.length; n++) out.add(w.slice(0, n));
  return out;
}

/**
 * The ids of tokens that continue the copying of a question word the text is in:
 * - in the middle of one (`partial` begins a longer question word): the tokens whose text is
 *   a prefix of the word's rest, or holds all of the rest and then leaves the word;
 * - at the end of a whole one: the tokens that leave the word there (an unseen name copied
 *   whole and then run on: "Jyndpimonimon..."), into nothing or into the start of a
 *   question word (a name the question does not hold: "of Silramar" for "of Rasil");
 * - after punctuation (`partial` empty, the text not empty): the tokens that start a
 *   question word ('"query": "' then a name).
 * Nothing at the start of a turn, in the middle of a word no question word begins with, or
 * when the text ends in a space.
 */
export function copyContinuations(tokenStrings: readonly (string | null)[], words: readonly string[], partial: string, lastChar = '', stop = false): number[] {
  const out: number[] = [];
  if (partial === '' && (lastChar === '' || /\s/u.test(lastChar))) return out;
  const rests = partial === '' ? [] : words.filter((w) => w.length >= partial.length && w.startsWith(partial)).map((w) => w.slice(partial.length));
  if (partial !== '' && rests.length === 0) return out;
  const shapes = shapesOf(tokenStrings);
  const prefixes = prefixesOf(words);
  const wholeWord = rests.includes('');
  for (let id = 0; id < tokenStrings.length; id++) {
    const s = tokenStrings[id];
    const shape = shapes[id];
    if (!s || !shape) continue;
    // After punctuation: the tokens that start a question word.
    if (partial === '') {
      if (shape.wordFirst && prefixes.has(shape.lead)) out.push(id);
      continue;
    }
    // At the end of a whole question word: the tokens that leave it, into nothing or a question
    // word (with `stop`, a hyphen does not leave a word: it joins "Mifa" to "-40M").
    if (wholeWord && !shape.wordFirst && prefixes.has(shape.lead) && !(stop && RUNS_ON.test(s))) {
      out.push(id);
      continue;
    }
    // In the middle of one: the rest's prefix, or all of the rest and then out of the word.
    for (const rest of rests) {
      if (rest === '') continue;
      if (rest.startsWith(s)) {
        out.push(id);
        break;
      }
      if (s.startsWith(rest) && s.length > rest.length && !WORD_CHAR.test(s[rest.length]!)) {
        const after = s.slice(rest.length).replace(LEADING_GAP, '');
        if (prefixes.has(LEADING_WORD.exec(after)![0])) {
          out.push(id);
          break;
        }
      }
    }
  }
  return out;
}

/** A name: a question word with a capital letter ("Marmar", "Stack-100M"); "the" and "100" are not. */
const NAME_LIKE = /\p{Lu}/u;
const RUNS_ON_IDS = new WeakMap<readonly (string | null)[], number[]>();

/**
 * The ids of tokens that run on past a whole name of the question that no other question word
 * extends (`partial` is "Marmar" and the question holds nothing longer that begins with it):
 * letters, digits or a joining hyphen. Nothing anywhere else: a word with no capital ("the",
 * "100": "then", "1000" are words of their own) or in the middle of a name is never lowered.
 */
export function copyOverruns(tokenStrings: readonly (string | null)[], words: readonly string[], partial: string): number[] {
  if (partial === '' || !NAME_LIKE.test(partial) || !words.includes(partial)) return [];
  if (words.some((w) => w.length > partial.length && w.startsWith(partial))) return [];
  let ids = RUNS_ON_IDS.get(tokenStrings);
  if (!ids) {
    ids = [];
    for (let id = 0; id < tokenStrings.length; id++) {
      const s = tokenStrings[id];
      if (s && RUNS_ON.test(s)) ids.push(id);
    }
    RUNS_ON_IDS.set(tokenStrings, ids);
  }
  return ids;
}

/** `partial` is a proper beginning of a name of the question, and no question word itself. */
function insideName(words: readonly string[], partial: string): boolean {
  return partial !== '' && !words.includes(partial) && words.some((w) => NAME_LIKE.test(w) && w.length > partial.length && w.startsWith(partial));
}

/**
 * The ids of tokens that leave a name of the question before its end or drift from it, given
 * the tokens that continue it (copyContinuations): inside a name of two letters or more ("Peos"
 * of "Peost", "Raos" of "Raostfa"), every token that is not one of them ("Peos" + " publication",
 * "Raos" + "fa"); after its first letter only, the tokens that leave the word ("V" + " publication"
 * for "Vennu": one letter begins a word of the transcript's own as often as a name).
 */
export function copyDrifts(tokenStrings: readonly (string | null)[], words: readonly string[], partial: string, continuations: readonly number[]): number[] {
  if (!insideName(words, partial)) return [];
  const keep = new Set(continuations);
  const out: number[] = [];
  for (let id = 0; id < tokenStrings.length; id++) {
    const s = tokenStrings[id];
    if (!s || keep.has(id)) continue;
    if (partial.length >= 2 || !RUNS_ON.test(s)) out.push(id);
  }
  return out;
}

// ---- numbers copied from what the tools returned (`values`) -----------------------------------
// A student that remembers a value writes it where the corpus said another: the fresh-values
// split's "memorised" failures. The numbers a calc expression or a final answer holds come from
// the question ("multiplied by 2") or from an observation (a passage's value, a calc result), so
// there, digits that begin no such number, or run past the end of one, are lowered (by twice the
// bias's strength, NUMBER_PENALTY_FACTOR).

/** Standalone numbers of a text: "2019", not the "100" of "Stack-100M". */
const STANDALONE_NUMBER = /(?<![\p{L}\p{N}-])\p{Nd}+(?![\p{L}\p{N}])/gu;
const LEADING_DIGITS = /^\p{Nd}*/u;
const TRAILING_DIGITS = /\p{Nd}*$/u;

/** The standalone numbers of a text (question, observation). */
export function numbersIn(text: string): string[] {
  return text.match(STANDALONE_NUMBER) ?? [];
}

/**
 * The digits a turn ends in when it is writing a number of a calc expression or of its final
 * answer ('' at a place where one may start), or null anywhere else (a thought, a search, the
 * JSON of a call around the expression): only there do the numbers have to be copied.
 */
export function numberSlot(turnText: string): string | null {
  const line = turnText.slice(turnText.lastIndexOf('\n') + 1);
  const calc = /"expr":\s*"([^"]*)$/.exec(turnText);
  const answer = /^Answer:(.*)$/.exec(line);
  const inside = calc?.[1] ?? answer?.[1];
  if (inside === undefined) return null;
  const digits = TRAILING_DIGITS.exec(inside)![0];
  // Digits glued to a letter or hyphen belong to a name ("Stack-100M"), not to a number.
  // A hyphen after a letter joins a name; after a digit, a space or nothing it subtracts.
  const head = inside.slice(0, inside.length - digits.length);
  const glued = /\p{L}$/u.test(head) || /\p{L}-$/u.test(head);
  return glued ? null : digits;
}

/**
 * The ids of tokens that would write a number that none of `numbers` is, at a number slot whose
 * digits so far are `partial`: digits that begin no such number, digits that run past the end of
 * one, or (inside a number no shorter one ends at) a token that ends it early.
 */
export function numberDrifts(tokenStrings: readonly (string | null)[], numbers: ReadonlySet<string>, partial: string): number[] {
  const prefixes = new Set<string>();
  for (const n of numbers) for (let k = 1; k <= n.length; k++) prefixes.add(n.slice(0, k));
  if (partial !== '' && !prefixes.has(partial)) return []; // already off every number: nothing to copy
  // Digits that make `written`: wrong unless they begin a number, and (ended inside the token) are one.
  const wrong = (written: string, ended: boolean) => !prefixes.has(written) || (ended && !numbers.has(written));
  const out: number[] = [];
  for (let id = 0; id < tokenStrings.length; id++) {
    const s = tokenStrings[id];
    if (!s) continue;
    const lead = LEADING_DIGITS.exec(s)![0];
    if (lead !== '') {
      if (wrong(partial + lead, lead.length < s.length)) out.push(id);
      continue;
    }
    // The token ends the digits so far (wrong if they are no whole number), then may start a
    // number after spaces or an operator (" 2019", "+10").
    if (partial !== '' && !numbers.has(partial)) {
      out.push(id);
      continue;
    }
    const gap = /^[^\p{L}\p{N}]+/u.exec(s)?.[0] ?? '';
    const next = LEADING_DIGITS.exec(s.slice(gap.length))![0];
    if (gap !== '' && next !== '' && !/["\n]/.test(gap) && wrong(next, gap.length + next.length < s.length)) out.push(id);
  }
  return out;
}

/**
 * A number that is no number of the question or the tools is lowered by twice the bias's
 * strength: the strongest that lost no dev task (removing it outright made the student repeat a
 * number it could not finish: "2025-4608-4608-..."). docs/decisions.md, "A number copy".
 */
export const NUMBER_PENALTY_FACTOR = 2;

/** One episode's copy bias: the question's words, the token texts and the strength. */
export class CopyBias {
  private readonly words: string[];

  constructor(
    private readonly tokenStrings: readonly (string | null)[],
    question: string,
    readonly strength: number,
    /** Also keep a copied name whole: no drift, no early end, nothing past its end (copyDrifts, copyOverruns). */
    readonly stop = false,
    /** Also copy numbers: a calc expression's and an answer's numbers are the question's or the tools' (numberDrifts). */
    readonly values = false,
  ) {
    this.words = questionWords(question);
    if (values) for (const n of numbersIn(question)) this.numbers.add(n);
  }

  /** The numbers a calc expression or an answer may hold: the question's and, as they come, the observations'. */
  private readonly numbers = new Set<string>();

  /** An observation the harness returned: its numbers may be copied from now on. */
  observe(observation: string): void {
    if (this.values) for (const n of numbersIn(observation)) this.numbers.add(n);
  }

  /**
   * Raises, in place, the logits of the tokens that continue the word `textSoFar` ends in; with
   * `stop`, also lowers those that drift from a name of the question or leave it early
   * (copyDrifts) and removes those that run on past its end (copyOverruns).
   */
  apply(logits: Float32Array, textSoFar: string): void {
    if (this.strength === 0) return;
    if (this.values && this.numbers.size > 0) {
      const slot = numberSlot(textSoFar);
      if (slot !== null) {
        for (const id of numberDrifts(this.tokenStrings, this.numbers, slot)) {
          if (id < logits.length && logits[id] !== -Infinity) logits[id]! -= NUMBER_PENALTY_FACTOR * this.strength;
        }
      }
    }
    const partial = trailingWord(textSoFar);
    const continuations = copyContinuations(this.tokenStrings, this.words, partial, textSoFar.slice(-1), this.stop);
    for (const id of continuations) {
      if (id < logits.length && logits[id] !== -Infinity) logits[id]! += this.strength;
    }
    if (!this.stop) return;
    for (const id of copyDrifts(this.tokenStrings, this.words, partial, continuations)) {
      if (id < logits.length && logits[id] !== -Infinity) logits[id]! -= this.strength;
    }
    // A name ends where the question's ends: nothing in this format writes more of it (unless
    // the grammar left nothing else: then the bias stays out of its way).
    const overruns = copyOverruns(this.tokenStrings, this.words, partial).filter((id) => id < logits.length && logits[id] !== -Infinity);
    if (overruns.length === 0) return;
    const before = overruns.map((id) => logits[id]!);
    for (const id of overruns) logits[id] = -Infinity;
    if (!logits.some((x) => x !== -Infinity)) overruns.forEach((id, i) => (logits[id] = before[i]!));
  }
}
