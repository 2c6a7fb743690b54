// A copy bias for decoding: while the student is in the middle of a word that begins like a
// word of the user's question, the tokens that continue that question word get their logits
// raised by a fixed amount. A pointer-generator's copy distribution with a constant gate,
// applied at decoding only: a 2-layer student starts an unseen name right and then drifts into
// pieces of names it was trained on ("Nioxnem" -> "Nioxkrm"); the bias keeps it on the name it
// is copying. Why it is on by default and what it measured: docs/decisions.md, "A copy bias".

/** Letters and digits: what a name is made of (a hyphen joins parts: "Stack-100M"). */
const WORD_CHAR = /[\p{L}\p{N}]/u;
const QUESTION_WORD = /[\p{L}\p{N}]+(?:-[\p{L}\p{N}]+)*/gu;
const TRAILING_WORD = /[\p{L}\p{N}][\p{L}\p{N}-]*$/u;
const LEADING_WORD = /^[\p{L}\p{N}]*/u;
/** What separates two words: spaces, punctuation, quotes. */
const LEADING_GAP = /^[^\p{L}\p{N}]+/u;

/** The words of a question a decoder may copy ("Stack-100M" is one word, so is "RoPE"). */
export function questionWords(question: string): string[] {
  return [...new Set(question.match(QUESTION_WORD) ?? [])];
}

/** The word the text ends in the middle of ('' after a space or punctuation). */
export function trailingWord(text: string): string {
  return TRAILING_WORD.exec(text)?.[0] ?? '';
}

/** Its leading letters and digits begin a question word (or it has none). */
function beginsQuestionWord(text: string, words: readonly string[]): boolean {
  const lead = LEADING_WORD.exec(text)![0];
  return lead === '' || words.some((w) => w.startsWith(lead));
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
export function copyContinuations(tokenStrings: readonly (string | null)[], words: readonly string[], partial: string, lastChar = ''): number[] {
  const out: number[] = [];
  if (partial === '') {
    if (lastChar === '' || /\s/u.test(lastChar)) return out;
    for (let id = 0; id < tokenStrings.length; id++) {
      const s = tokenStrings[id];
      if (s && WORD_CHAR.test(s[0]!) && beginsQuestionWord(s, words)) out.push(id);
    }
    return out;
  }
  const rests = words.filter((w) => w.length >= partial.length && w.startsWith(partial)).map((w) => w.slice(partial.length));
  if (rests.length === 0) return out;
  for (let id = 0; id < tokenStrings.length; id++) {
    const s = tokenStrings[id];
    if (!s) continue;
    for (const rest of rests) {
      if (rest !== '' && rest.startsWith(s)) {
        out.push(id);
        break;
      }
      if (s.startsWith(rest) && s.length > rest.length) {
        const after = s.slice(rest.length);
        if (!WORD_CHAR.test(after[0]!) && beginsQuestionWord(after.replace(LEADING_GAP, ''), words)) {
          out.push(id);
          break;
        }
      }
    }
  }
  return out;
}

/** One episode's copy bias: the question's words, the token texts and the strength. */
export class CopyBias {
  private readonly words: string[];

  constructor(
    private readonly tokenStrings: readonly (string | null)[],
    question: string,
    readonly strength: number,
  ) {
    this.words = questionWords(question);
  }

  /** Raises, in place, the logits of the tokens that continue the word `textSoFar` ends in. */
  apply(logits: Float32Array, textSoFar: string): void {
    if (this.strength === 0) return;
    for (const id of copyContinuations(this.tokenStrings, this.words, trailingWord(textSoFar), textSoFar.slice(-1))) {
      if (id < logits.length && logits[id] !== -Infinity) logits[id]! += this.strength;
    }
  }
}
