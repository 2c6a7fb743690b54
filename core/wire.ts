// The ReAct wire format: special tokens, tool-call rendering and the parse of one
// assistant step. These strings and spacings are byte-identical across distillation,
// SFT, serving and RL; change nothing here without changing the model's data.
import { JsonObject, JsonValue, isJsonObject, pyJsonDumps, pyJsonLoads } from './pyjson';
import { PY_SPACE_CLASS, pyStrip, splitOnce } from './pystr';

export const BOS = '<|bos|>';
export const EOS = '<|eos|>';
export const PAD = '<|pad|>';
export const END = '<|end|>';
export const SYS = '<|system|>';
export const USER = '<|user|>';
export const ASST = '<|assistant|>';
export const TOOL_CALL = '<|tool_call|>';
export const TOOL_RESULT = '<|tool_result|>';

/** The harness's forced-answer text when the agent runs out of steps (never the policy's). */
export const FORCED_ANSWER_TEXT = 'Thought: I must answer now.\nAnswer:';
/** The harness's observation for a call whose JSON did not parse (the guard "FormatError"). */
export const FORMAT_ERROR =
  'FormatError: the tool call is not valid JSON of the form {"tool": "search"|"calc", "args": {...}}';
/** The harness's observation for a call made twice (the guard "RepeatedCall"). */
export const REPEATED_CALL = 'RepeatedCall: this exact call was already made; its result is above. Answer or try another call.';

/** The nine reserved special tokens, in their reserved-id order (ids 0..8). */
export const SPECIAL_TOKENS = [BOS, EOS, PAD, END, SYS, USER, ASST, TOOL_CALL, TOOL_RESULT] as const;
export type SpecialToken = (typeof SPECIAL_TOKENS)[number];

export type ToolArgs = JsonObject;

export type Action =
  | { kind: 'tool'; thought: string; tool: string; args: ToolArgs }
  /** A call whose JSON did not parse (or had no "tool"): the harness answers with an error. */
  | { kind: 'malformed'; thought: string; raw: string }
  | { kind: 'final'; thought: string; answer: string };

/** The seed's `__malformed__` tool name, kept for rendering and diagnostics. */
export const MALFORMED_TOOL = '__malformed__';

// Python: re.search(r"Thought:\s*(.*?)(?:\n|$)", text); `.` excludes only \n, and `$`
// also matches before a final \n.
const THOUGHT_RE = new RegExp(`Thought:[${PY_SPACE_CLASS}]*([^\\n]*?)(?:\\n|$)`);
// Python: re.compile(r"Answer:\s*(.+?)\s*$", re.DOTALL), searched: the first `Answer:`
// whose remainder is non-blank; `$` matches at the end or before a final \n.
const ANSWER_RE = new RegExp(`Answer:[${PY_SPACE_CLASS}]*([^]+?)[${PY_SPACE_CLASS}]*$`);

/**
 * Parse ONE assistant emission (thought + optional tool call OR answer), as the seed's
 * `parse_assistant_step`. `text` is what the model generated up to (excluding) <|end|>.
 */
export function parseAssistantStep(text: string): Action {
  const tm = THOUGHT_RE.exec(text);
  const thought = tm ? pyStrip(tm[1]!) : '';

  const afterCall = splitOnce(text, TOOL_CALL)[1];
  if (afterCall !== undefined) {
    const payload = pyStrip(splitOnce(afterCall, END)[0]);
    try {
      const obj = pyJsonLoads(payload);
      // Python indexes obj["tool"]: a non-dict or a missing key raises, i.e. malformed.
      if (isJsonObject(obj) && Object.prototype.hasOwnProperty.call(obj, 'tool')) {
        const tool = obj['tool']!;
        const args = Object.prototype.hasOwnProperty.call(obj, 'args') ? obj['args']! : {};
        return toolAction(thought, tool, args, payload);
      }
    } catch {
      // fall through: malformed
    }
    return { kind: 'malformed', thought, raw: payload };
  }

  const am = ANSWER_RE.exec(text);
  if (am) return { kind: 'final', thought, answer: pyStrip(am[1]!) };

  // No tool call, no answer: the classic small-model derailment. The whole emission
  // becomes the (probably wrong) final answer so the loop halts.
  return { kind: 'final', thought, answer: pyStrip(text) };
}

// The seed keeps any JSON value as tool name and args and crashes later when they are
// not a string and a dict; we call such a step malformed instead (a documented deviation).
function toolAction(thought: string, tool: JsonValue, args: JsonValue, raw: string): Action {
  if (typeof tool !== 'string' || !isJsonObject(args)) return { kind: 'malformed', thought, raw };
  return { kind: 'tool', thought, tool, args };
}

/** `<|tool_result|>obs<|end|>` */
export function renderToolResult(observation: string): string {
  return `${TOOL_RESULT}${observation}${END}`;
}

/** The JSON body of a call: key order (tool, args), separators ", " and ": ", ASCII-escaped. */
export function renderCallBody(tool: string, args: ToolArgs): string {
  return pyJsonDumps({ tool, args }, { itemSeparator: ', ', keySeparator: ': ' });
}

/** `<|tool_call|>{"tool": ..., "args": {...}}<|end|>` — one grammar for the model to learn. */
export function renderCall(tool: string, args: ToolArgs): string {
  return `${TOOL_CALL}${renderCallBody(tool, args)}${END}`;
}

/** The assistant turns of a transcript: the text between each <|assistant|> and its <|end|>. */
export function assistantTurns(text: string): string[] {
  const out: string[] = [];
  let i = text.indexOf(ASST);
  while (i >= 0) {
    const start = i + ASST.length;
    const end = text.indexOf(END, start);
    out.push(text.slice(start, end < 0 ? text.length : end));
    i = end < 0 ? -1 : text.indexOf(ASST, end);
  }
  return out;
}
