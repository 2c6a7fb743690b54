// The environment: dispatch a parsed action to a real tool and render the observation,
// as the seed's ToolEnv. Observations are strings; errors are observations, never throws.
import { calc } from './tools/calc';
import { Bm25Retriever } from './tools/retrieval';
import type { Passage } from './types';
import { Action, MALFORMED_TOOL } from './wire';
import { pyInt, pyStr } from './pyvalue';

export const SYSTEM_PROMPT =
  'You are a narrow research assistant. Think, then either call a tool or give a final answer. Tools: search(query,k), calc(expr).';

/** Default `k` when a search call omits it, as the seed's `args.get("k", 2)`. */
export const DEFAULT_SEARCH_K = 2;

export class ToolEnv {
  readonly retriever: Bm25Retriever;

  /**
   * `systemPrompt`: what a trajectory in this world starts with; a user's world with its
   * own tool list says its own tool line (core/worldTools.ts systemPromptFor).
   */
  constructor(
    corpus: readonly Passage[],
    readonly systemPrompt: string = SYSTEM_PROMPT,
  ) {
    this.retriever = new Bm25Retriever(corpus);
  }

  runTool(action: Action): string {
    if (action.kind === 'final') throw new Error('runTool: a final answer is not a tool call');
    if (action.kind === 'malformed') return `ToolError: unknown or malformed tool '${MALFORMED_TOOL}'`;
    const { tool, args } = action;
    if (tool === 'calc') return calc(pyStr(args['expr'] ?? ''));
    if (tool === 'search') {
      const query = args['query'] ?? '';
      const k = pyInt(args['k'] ?? DEFAULT_SEARCH_K);
      // The seed would raise here (str methods on a non-string, int() of garbage); a
      // model's bad argument is an observation the policy can learn from instead.
      if (typeof query !== 'string') return `ToolError: search query must be a string, got ${pyStr(query)}`;
      if (k === null) return `ToolError: search k must be an integer, got ${pyStr(args['k']!)}`;
      const clamped = k > 1_000_000n ? 1_000_000 : k < -1_000_000n ? -1_000_000 : Number(k);
      const hits = this.retriever.search(query, clamped);
      if (hits.length === 0) return 'NoResults';
      return hits.map((h, i) => `[${i + 1}] ${h.passage.text}`).join(' ');
    }
    return `ToolError: unknown or malformed tool '${tool}'`;
  }
}
