// The asynchronous teacher interface shared by the HTTP teacher (a large model behind an
// OpenAI-compatible server) and the student teacher (self-distillation), and the one
// canonical form every teacher step is recorded in.
import { checkCall } from '../grammar';
import { JsonObject, isJsonObject, pyJsonLoads } from '../pyjson';
import { PY_SPACE_CLASS, splitOnce } from '../pystr';
import { AGENT_TOOLS } from '../tools/schemas';
import type { Teacher } from '../stubTeacher';
import { ASST, END, TOOL_CALL, parseAssistantStep, renderCall, renderCallBody } from '../wire';

/** One step with the teacher's raw reply kept beside it (rows carry it as `teacher_raw`). */
export interface TeacherReply {
  /** The step in the wire format (what the transcript records); cut at <|end|>. */
  text: string;
  raw: string;
}

/**
 * `prompt` is the wire-format transcript so far, ending in `<|assistant|>` (what the stub
 * teacher gets); the result is one assistant step. Throwing a TeacherError fails the
 * rollout (counted by its reason); any other exception is a bug and propagates.
 */
export type AsyncTeacher = (prompt: string, signal?: AbortSignal) => Promise<string | TeacherReply>;

/**
 * Short, countable reasons; anything else a teacher reports is kept as given. `over-long`:
 * a reply over the cap for max_tokens (not read further); `truncated`: a reply cut off
 * mid-body; `cancelled`: the caller's signal stopped the request in flight (not counted).
 */
export type TeacherFailure =
  | 'timeout'
  | 'refusal'
  | 'malformed'
  | 'off-grammar'
  | 'network'
  | 'truncated'
  | 'over-long'
  | 'cancelled'
  | 'context'
  | `http ${number}`;

export class TeacherError extends Error {
  constructor(
    /** Short and stable: it is a key of the failure counts. */
    readonly reason: TeacherFailure | string,
    /** What went wrong in words (the server's message, the offending text). */
    readonly detail = '',
    /** True when no later request can succeed either (a bad key, an unknown model): distillation stops. */
    readonly fatal = false,
  ) {
    super(detail ? `${reason}: ${detail}` : reason);
    this.name = 'TeacherError';
  }
}

/** A bad teacher option or setup: the caller's mistake, reported before any rollout. */
export class TeacherConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TeacherConfigError';
  }
}

/** The synchronous stub (or any sync teacher) through the async interface. */
export function asyncTeacher(teacher: Teacher): AsyncTeacher {
  return (prompt) => Promise.resolve(teacher(prompt));
}

const ANSWER_PRESENT = new RegExp(`Answer:[${PY_SPACE_CLASS}]*[^${PY_SPACE_CLASS}]`);

/**
 * A teacher's reply as the one canonical step the data records: `Thought: ...\n` then
 * either the call rendered by renderCall (key order tool, args; args in the schema's order,
 * `k` defaulted as the environment would) or `Answer: ...`. Throws TeacherError:
 * `malformed` (neither a parseable call nor an answer), `off-grammar` (a call the
 * constrained student could never emit, so the data keeps one grammar).
 */
export function canonicalStep(reply: string): string {
  let text = splitOnce(reply, END)[0];
  if (text.startsWith(ASST)) text = text.slice(ASST.length);
  let action = parseAssistantStep(text);
  if (action.kind === 'malformed') {
    // Servers often keep writing after the call ("Observation: ..."): keep its first JSON object.
    const body = firstJsonObject(splitOnce(text, TOOL_CALL)[1] ?? '');
    if (body !== null) action = parseAssistantStep(`${splitOnce(text, TOOL_CALL)[0]}${TOOL_CALL}${body}`);
  }
  if (action.kind === 'malformed') throw new TeacherError('malformed', `the tool call is not JSON of the form {"tool", "args"}: ${clip(action.raw)}`);
  if (action.kind === 'final') {
    if (!ANSWER_PRESENT.test(text)) {
      throw new TeacherError('malformed', `neither a tool call nor an "Answer:": ${clip(text)}`);
    }
    return reparses(`Thought: ${action.thought}\nAnswer: ${action.answer}`);
  }
  const args = schemaOrder(action.tool, action.args);
  const verdict = checkCall(renderCallBody(action.tool, args));
  if (!verdict.complete) {
    throw new TeacherError('off-grammar', `the call ${clip(renderCallBody(action.tool, args))} is outside the call grammar`);
  }
  return reparses(`Thought: ${action.thought}\n${renderCall(action.tool, args)}`);
}

// The recorded step must parse back to itself: a thought that swallowed the call line (an
// empty "Thought:" line) or an "Answer:" inside the thought would make the data say
// something other than what the teacher meant.
function reparses(canonical: string): string {
  const b = parseAssistantStep(splitOnce(canonical, END)[0]);
  if (b.thought === '' || b.thought.includes('<|')) throw new TeacherError('malformed', `a step needs a one-line "Thought: ..." before its call or answer: ${clip(canonical)}`);
  if (canonicalOf(b) !== canonical) throw new TeacherError('malformed', `the step does not read back as written: ${clip(canonical)}`);
  return canonical;
}

function canonicalOf(a: ReturnType<typeof parseAssistantStep>): string {
  if (a.kind === 'final') return `Thought: ${a.thought}\nAnswer: ${a.answer}`;
  if (a.kind === 'tool') return `Thought: ${a.thought}\n${renderCall(a.tool, a.args)}`;
  return '';
}

/** Args in the tool schema's property order, integer-like strings made integers, defaults filled. */
function schemaOrder(tool: string, args: JsonObject): JsonObject {
  const schema = AGENT_TOOLS.find((t) => t.name === tool);
  if (!schema) return args;
  const out: JsonObject = {};
  for (const [name, p] of Object.entries(schema.inputSchema.properties)) {
    let v = args[name];
    if (v === undefined && p.default !== undefined) v = p.default;
    if (v === undefined) continue;
    if (p.type === 'integer' && typeof v === 'string' && /^[0-9]+$/.test(v.trim())) v = Number(v.trim());
    out[name] = v;
  }
  for (const [k, v] of Object.entries(args)) if (!(k in out)) out[k] = v;
  return out;
}

/** The first balanced `{...}` of `s` (strings and escapes respected), or null. */
export function firstJsonObject(s: string): string | null {
  const start = s.indexOf('{');
  if (start < 0) return null;
  let depth = 0;
  let inString = false;
  for (let i = start; i < s.length; i++) {
    const c = s[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) {
      const body = s.slice(start, i + 1);
      try {
        return isJsonObject(pyJsonLoads(body)) ? body : null;
      } catch {
        return null;
      }
    }
  }
  return null;
}

const clip = (s: string, n = 160): string => JSON.stringify(s.length > n ? `${s.slice(0, n)}...` : s);
