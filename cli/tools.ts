// The one-shot tools of `agent-lab`: the loss mask of a transcript file, the call
// grammar's verdict, the calculator, BM25 search over the default corpus, and the reward
// audit. Each prints its result; a verdict or an observation is exit 0.
import { CliError, ParsedArgs, UsageError, intOption } from './args';
import { checkCall } from '../core/grammar';
import { segment } from '../core/lossMask';
import { DEFAULT_REWARD_TEXT, RewardSpecError, auditReward, formatAudit, parseRewardSpec } from '../core/reward';
import { calc } from '../core/tools/calc';
import { Bm25Retriever } from '../core/tools/retrieval';
import { buildCorpus } from '../core/world';
import { templatesFor } from '../core/worldTools';
import { INPUT_LIMITS, readInputText } from '../store/files';
import { readWorldFolder } from '../store/worldFolder';

/** A `.transcript` holds one transcript; one trailing newline (editors add it) is ignored. */
export function readTranscriptFile(file: string): string {
  // A regular file under the size cap (a FIFO or /dev/zero would hang); invalid UTF-8 is said.
  const text = readInputText(file, 'the transcript', INPUT_LIMITS.transcript);
  if (text.endsWith('\r\n')) return text.slice(0, -2);
  if (text.endsWith('\n')) return text.slice(0, -1);
  return text;
}

export function cmdMask(a: ParsedArgs): void {
  const segments = segment(readTranscriptFile(a.positional!));
  if (a.options['json']) {
    console.log(JSON.stringify(segments));
    return;
  }
  let sup = 0;
  let total = 0;
  for (const [text, s] of segments) {
    total += text.length;
    if (s) sup += text.length;
    console.log(`${s ? 'SUPERVISED' : 'masked    '} ${JSON.stringify(text)}`);
  }
  console.log(`${segments.length} segments; ${sup}/${total} characters supervised`);
}

export function cmdGrammar(a: ParsedArgs): void {
  const world = a.options['world'] !== undefined ? readWorldFolder(a.options['world'] as string) : null;
  const verdict = checkCall(a.positional!, world?.tools ? templatesFor(world.tools) : undefined);
  if (a.options['json']) {
    console.log(JSON.stringify(verdict));
    return;
  }
  if (verdict.complete) console.log('accepted: a complete call');
  else if (verdict.accepted) console.log(`accepted so far, incomplete; next legal: ${verdict.expected.join(' ')}`);
  else console.log(`rejected at character ${verdict.rejectedAt}; legal there: ${verdict.expected.map((c) => JSON.stringify(c)).join(' ')}`);
}

export function cmdCalc(a: ParsedArgs): void {
  console.log(calc(a.positional!));
}

export function cmdSearch(a: ParsedArgs): void {
  const retriever = new Bm25Retriever(buildCorpus());
  const hits = retriever.search(a.positional ?? '', intOption(a, 'k', 2));
  console.log(JSON.stringify(hits.map((h) => ({ doc_id: h.passage.docId, score: h.score }))));
}

/** `audit-reward [--reward R] [--max-steps N] [--json]`: the synthetic group, scored; fails on a reward that cannot rank it. */
export function cmdAuditReward(a: ParsedArgs): void {
  let spec;
  try {
    spec = parseRewardSpec((a.options['reward'] as string | undefined) ?? DEFAULT_REWARD_TEXT);
  } catch (err) {
    if (err instanceof RewardSpecError) throw new UsageError(err.message);
    throw err;
  }
  const audit = auditReward(spec, { maxSteps: intOption(a, 'max-steps', 6) });
  if (a.options['json']) {
    console.log(JSON.stringify({ ...audit, rows: audit.rows.map(({ transcript: _t, ...r }) => r) }));
  } else console.log(formatAudit(audit));
  if (!audit.ok) throw new CliError(`the reward '${audit.reward}' fails the audit: ${audit.checks.filter((c) => !c.ok).map((c) => c.name).join('; ')}`);
}
