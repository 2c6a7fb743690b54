// GRPO's pre-flight checks, run before the first rollout: each known way a run learns
// nothing (docs/architecture.md, "Lessons from a failed GRPO run") is checked with evidence, and the
// run refuses to start on a failure. Prompt drift (the RL prefix is not byte-identical to
// the SFT data's), specials that are not single ids, a reward that cannot rank a group,
// greedy sampling (identical rollouts, zero spread).
import * as fs from 'node:fs';
import { renderPrompt } from '../../core/distill';
import { RewardAudit, RewardSpec, auditReward, formatAudit } from '../../core/reward';
import type { Tokenizer } from '../../core/tokenizer';
import { ASST, SPECIAL_TOKENS } from '../../core/wire';
import { readInputJsonl } from '../../store/files';

export interface PreflightCheck {
  name: string;
  ok: boolean;
  /** One line: what was checked and found. */
  detail: string;
  /** On a failure: the evidence a user needs (both texts, the first differing byte, a table). */
  evidence?: string;
}

export interface PreflightReport {
  ok: boolean;
  checks: PreflightCheck[];
  audit: RewardAudit;
}

const utf8 = new TextEncoder();

/** The first byte offset where two strings' UTF-8 encodings differ (null when equal). */
export function firstDifferingByte(a: string, b: string): number | null {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return i;
  return x.length === y.length ? null : n;
}

/** A string shown with its escapes visible (newlines, tabs), for side-by-side evidence. */
function show(s: string): string {
  return JSON.stringify(s);
}

/** Text around a byte offset of a string, with a caret line under the offset. */
function around(s: string, byte: number, width = 60): { text: string; caret: string } {
  const bytes = utf8.encode(s);
  const from = Math.max(0, byte - width / 2);
  const dec = new TextDecoder();
  const before = JSON.stringify(dec.decode(bytes.slice(from, byte))).slice(1, -1);
  const after = JSON.stringify(dec.decode(bytes.slice(byte, byte + width / 2))).slice(1, -1);
  return { text: `${from > 0 ? '…' : ''}${before}${after}`, caret: ' '.repeat((from > 0 ? 1 : 0) + before.length) + '^' };
}

/**
 * Prompt drift: for every SFT transcript, the prefix before the first assistant turn must be
 * exactly what the RL rollouts render for that question with `systemPrompt`.
 */
export function checkPromptDrift(sftTracesFile: string, systemPrompt: string | undefined): PreflightCheck {
  const name = 'prompt drift: RL prefix == SFT data prefix (bytes)';
  if (!fs.existsSync(sftTracesFile)) {
    return { name, ok: false, detail: `no SFT data to compare with (${sftTracesFile} is missing)` };
  }
  const rows = readInputJsonl(sftTracesFile, 'the data file') as { task?: unknown; text?: unknown }[];
  let checked = 0;
  for (const [i, row] of rows.entries()) {
    if (typeof row !== 'object' || row === null || typeof row.task !== 'string' || typeof row.text !== 'string') continue;
    const at = row.text.indexOf(ASST);
    const sftPrefix = at < 0 ? row.text : row.text.slice(0, at);
    const rlPrefix = systemPrompt === undefined ? renderPrompt(row.task) : renderPrompt(row.task, systemPrompt);
    checked++;
    const diff = firstDifferingByte(rlPrefix, sftPrefix);
    if (diff !== null) {
      const a = around(rlPrefix, diff);
      const b = around(sftPrefix, diff);
      return {
        name,
        ok: false,
        detail: `the RL prompt differs from the SFT data at byte ${diff} (${sftTracesFile}:${i + 1}); the SFT-warmed policy would be out of distribution`,
        evidence: [
          `RL prefix  (${utf8.encode(rlPrefix).length} bytes): ${show(rlPrefix)}`,
          `SFT prefix (${utf8.encode(sftPrefix).length} bytes): ${show(sftPrefix)}`,
          `first differing byte: ${diff}`,
          `  RL : ${a.text}`,
          `       ${a.caret}`,
          `  SFT: ${b.text}`,
          `       ${b.caret}`,
        ].join('\n'),
      };
    }
  }
  if (checked === 0) return { name, ok: false, detail: `${sftTracesFile} holds no transcript to compare with` };
  return { name, ok: true, detail: `${checked} SFT prefixes equal the RL rendering byte for byte` };
}

/** Every special token is one id in the tokenizer the checkpoint was trained with. */
export function checkSpecialTokens(tokenizer: Tokenizer, expectedSha?: string, actualSha?: string): PreflightCheck {
  const name = 'special tokens are single ids';
  const bad: string[] = [];
  for (const s of SPECIAL_TOKENS) {
    const ids = tokenizer.encode(s);
    if (ids.length !== 1 || ids[0] !== tokenizer.specialIds[s]) bad.push(`${s} -> [${ids.join(', ')}]`);
  }
  if (expectedSha !== undefined && actualSha !== undefined && expectedSha !== actualSha) {
    return {
      name,
      ok: false,
      detail: 'the tokenizer is not the one the checkpoint was trained with',
      evidence: `trained with sha256 ${expectedSha}\nfound        sha256 ${actualSha}`,
    };
  }
  if (bad.length) return { name, ok: false, detail: `${bad.length} special token(s) split into several ids`, evidence: bad.join('\n') };
  return { name, ok: true, detail: `${SPECIAL_TOKENS.length} specials, one id each (${SPECIAL_TOKENS.map((s) => tokenizer.specialIds[s]).join(', ')})` };
}

export function checkSampling(temperature: number, groupSize: number): PreflightCheck {
  const name = 'sampled rollouts (temperature > 0, group >= 2)';
  if (!(temperature > 0)) {
    return {
      name,
      ok: false,
      detail:
        `temperature ${temperature} is greedy: in a deterministic environment a greedy policy produces ${groupSize} identical ` +
        'trajectories, every group has zero reward spread, every advantage is 0 and there is no gradient. Use --temperature 0.8.',
    };
  }
  if (groupSize < 2) return { name, ok: false, detail: `group size ${groupSize}: a group-relative advantage needs at least 2 rollouts` };
  return { name, ok: true, detail: `temperature ${temperature}, ${groupSize} rollouts per task` };
}

export function runPreflight(o: {
  sftTracesFile: string;
  systemPrompt: string | undefined;
  tokenizer: Tokenizer;
  tokenizerSha?: { expected: string; actual: string };
  reward: RewardSpec;
  temperature: number;
  groupSize: number;
  maxSteps: number;
}): PreflightReport {
  const audit = auditReward(o.reward, { maxSteps: o.maxSteps });
  const checks: PreflightCheck[] = [
    checkPromptDrift(o.sftTracesFile, o.systemPrompt),
    checkSpecialTokens(o.tokenizer, o.tokenizerSha?.expected, o.tokenizerSha?.actual),
    checkSampling(o.temperature, o.groupSize),
    {
      name: `reward audit (${audit.reward})`,
      ok: audit.ok,
      detail: audit.ok
        ? `group std ${audit.std.toFixed(3)}; correct > wrong, efficient > wasteful`
        : audit.checks.filter((c) => !c.ok).map((c) => `${c.name} failed (${c.detail})`).join('; '),
      ...(audit.ok ? {} : { evidence: formatAudit(audit) }),
    },
  ];
  return { ok: checks.every((c) => c.ok), checks, audit };
}

export function formatPreflight(r: PreflightReport): string {
  const lines = ['Pre-flight checks:'];
  for (const c of r.checks) {
    lines.push(`  ${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail}`);
    if (!c.ok && c.evidence) lines.push(...c.evidence.split('\n').map((l) => `        ${l}`));
  }
  // A failed audit's evidence already carries its warnings.
  if (r.audit.ok) for (const w of r.audit.warnings) lines.push(`  WARN  ${w}`);
  return lines.join('\n');
}
