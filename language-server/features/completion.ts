// Completion: the nine special tokens (replacing a partly typed `<|...`), and tool-call
// skeletons built from the tools' MCP `inputSchema`s in the canonical spelling, as
// snippets whose placeholders are the arguments (the tools of the document's grammar: a run's
// world may leave calc out). Ordered by what is legal at the cursor:
// the token the wire format expects next comes first (`<|assistant|>` after a user turn,
// `<|end|>` inside an open turn, `<|tool_result|>` after a call), the other turn markers
// next, and `<|bos|>`/`<|eos|>`/`<|pad|>` (never inside a transcript) last.
import { CompletionItem, CompletionItemKind, InsertTextFormat, MarkupKind } from 'vscode-languageserver';
import { ASST, BOS, END, EOS, PAD, SPECIAL_TOKENS, SYS, TOOL_CALL, TOOL_RESULT, USER } from '../../core/wire';
import { TranscriptAnalysis, turnAt } from '../analysis/transcript';
import { AGENT_TOOLS, skeleton } from '../analysis/toolSchemas';
import type { Unit } from '../documents';

const SPECIAL_DOCS: Record<string, string> = {
  '<|bos|>': 'beginning of sequence (not used inside transcripts)',
  '<|eos|>': 'end of sequence (not used inside transcripts)',
  '<|pad|>': 'padding (never in a transcript)',
  '<|end|>': 'closes a turn; after an assistant turn it is supervised (the model learns to stop)',
  '<|system|>': 'opens the system prompt (masked)',
  '<|user|>': "opens the user's question (masked)",
  '<|assistant|>': 'opens an assistant turn: the marker is masked, the content supervised',
  '<|tool_call|>': 'starts a tool call inside an assistant turn (supervised)',
  '<|tool_result|>': "opens a tool's observation (masked)",
};

const snippetEscape = (s: string): string => s.replace(/[\\$}]/g, '\\$&');

export function completionsAt(unit: Unit, offset: number): CompletionItem[] {
  const a = unit.analysis;
  const before = a.text.slice(Math.max(0, offset - 30), offset);
  const m = /<\|?[A-Za-z_]*\|?$/.exec(before);
  const prefixLen = m ? m[0].length : 0;
  const range = unit.toRange(offset - prefixLen, offset);
  const items: CompletionItem[] = [];
  const rank = specialRanks(a, offset - prefixLen);
  SPECIAL_TOKENS.forEach((tok, i) => {
    items.push({
      label: tok,
      kind: CompletionItemKind.Keyword,
      detail: 'special token',
      documentation: SPECIAL_DOCS[tok] ?? '',
      sortText: `${rank.get(tok) ?? 5}${i}`,
      ...(rank.get(tok) === 0 ? { preselect: true } : {}),
      filterText: tok,
      textEdit: { range, newText: unit.escape(tok) },
    });
  });
  // Tool-call skeletons inside an assistant turn (or anywhere the turn is still open).
  const turn = turnAt(a, Math.max(0, offset - 1)) ?? turnAt(a, offset);
  const afterCallMarker = a.text.slice(0, offset).endsWith(TOOL_CALL);
  const insideAssistant = turn?.role === 'assistant' && (!turn.terminated || offset < turn.end);
  if (turn === null || turn.role === 'assistant') {
    // Only the tools of the document's grammar (a run's world may leave calc out).
    const tools = new Set(unit.tokenizer.grammar.map((t) => t.tool));
    AGENT_TOOLS.forEach((tool, i) => {
      if (!tools.has(tool.name)) return;
      const sk = skeleton(tool);
      // Snippet text: literal pieces escaped for the document, then for the snippet syntax.
      let snippet = '';
      let at = 0;
      sk.holes.forEach(([s, e], h) => {
        snippet += snippetEscape(unit.escape(sk.body.slice(at, s)));
        snippet += `\${${h + 1}:${snippetEscape(unit.escape(sk.body.slice(s, e)))}}`;
        at = e;
      });
      snippet += snippetEscape(unit.escape(sk.body.slice(at)));
      const lead = afterCallMarker ? '' : snippetEscape(unit.escape(TOOL_CALL));
      const full = `${lead}${snippet}${snippetEscape(unit.escape(END))}$0`;
      items.push({
        label: `${tool.name} call`,
        kind: CompletionItemKind.Snippet,
        detail: `${TOOL_CALL}${sk.body}${END}`,
        documentation: {
          kind: MarkupKind.Markdown,
          value: `${tool.description}\n\nCanonical spelling (key order tool, args; separators \`, \` and \`: \`), from the tool's \`inputSchema\`:\n\n\`\`\`json\n${JSON.stringify(tool.inputSchema, null, 2)}\n\`\`\``,
        },
        sortText: `${insideAssistant ? 2 : 6}${i}`,
        filterText: afterCallMarker ? `${tool.name}` : `${TOOL_CALL}${tool.name}`,
        insertTextFormat: InsertTextFormat.Snippet,
        textEdit: { range, newText: full },
      });
    });
  }
  return items;
}

/**
 * Sort rank per special token at `offset` (0 first): what the wire format expects next,
 * then the other legal markers, then the tokens that never appear inside a transcript.
 */
export function specialRanks(a: TranscriptAnalysis, offset: number): Map<string, number> {
  const rank = new Map<string, number>([
    [END, 3],
    [SYS, 3],
    [USER, 3],
    [ASST, 3],
    [TOOL_CALL, 3],
    [TOOL_RESULT, 3],
    [BOS, 9],
    [EOS, 9],
    [PAD, 9],
  ]);
  const open = a.turns.find((t) => offset >= t.contentStart && offset <= t.contentEnd);
  if (open) {
    // Inside a turn's content: close it; an assistant turn may also call a tool (once).
    rank.set(END, 0);
    if (open.role === 'assistant' && open.call === null) rank.set(TOOL_CALL, 1);
    return rank;
  }
  // Between turns: the marker of the turn that comes next.
  const prev = [...a.turns].reverse().find((t) => t.end <= offset);
  const next =
    prev === undefined
      ? SYS
      : prev.role === 'system'
        ? USER
        : prev.role === 'user' || prev.role === 'tool_result'
          ? ASST
          : prev.role === 'assistant' && prev.call !== null
            ? TOOL_RESULT
            : USER;
  rank.set(next, 0);
  return rank;
}
