// `agent-lab model inspect|logits --base DIR`: a Hugging Face model folder as the lab sees it
// (trainer/hf/hfModel.ts). `inspect` checks the config and every weight's name, shape and dtype
// without reading the weights; `logits` runs the model on given ids and prints every
// position's float32 logits, the handle a parity check against transformers needs.
// A folder the lab cannot read or compute is bad input: one line naming the file and the
// field, exit 2, nothing written.
import { BadInputError, ParsedArgs, UsageError } from './args';
import { BackendAsk, initBackend } from '../trainer/model/backend';
import { InputError } from '../store/files';
import { HfModelFolder, hfModelFromFolder, hfTokenizerKind, inspectHfFolder, ownTokenizerOf } from '../trainer/hf/hfModel';
import { headDimOf, normEpsOf } from '../trainer/model/model';
import { SPECIAL_TOKENS } from '../core/tokenizer';

export const MODEL_USAGE =
  'agent-lab model inspect --base DIR [--json]      a Hugging Face model folder: architecture, parameters, dtypes, tokenizer\n' +
  '  agent-lab model logits --base DIR --ids 1,2,3 [--backend B] [--json]      every position\'s logits: {"shape": [T, V], "logits": [[...]]}';

function asBadInput<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    if (err instanceof InputError) throw new BadInputError(err.message);
    throw err;
  }
}

function describe(f: HfModelFolder): Record<string, unknown> {
  const m = f.model;
  const tok = asBadInput(() => hfTokenizerKind(f.dir));
  return {
    dir: f.dir,
    architecture: f.architecture,
    supported: true,
    parameters: f.params,
    dtypes: f.dtypes,
    files: f.files,
    config: {
      vocab: m.vocab,
      hidden: m.dModel,
      layers: m.layers,
      heads: m.heads,
      kvHeads: m.kvHeads,
      headDim: headDimOf(m),
      mlp: m.mlp,
      maxPositions: m.maxSeq,
      ropeTheta: m.ropeBase,
      rmsNormEps: normEpsOf(m),
      qkvBias: m.qkvBias === true,
      tiedHead: m.tiedHead !== false,
    },
    model: m,
    tokenizer:
      tok.kind === 'lab'
        ? { kind: 'lab', file: tok.file, vocab: tok.tokenizer.vocabSize, specials: Object.fromEntries(SPECIAL_TOKENS.map((s, i) => [s, i])) }
        : tok.kind === 'foreign'
          ? hfTokenizerInfo(f, tok.file)
          : { kind: 'absent', file: tok.file },
  };
}

/** A model's own Hugging Face tokenizer as `train sft --base` would take it: reported, never refused, by inspect. */
function hfTokenizerInfo(f: HfModelFolder, file: string): Record<string, unknown> {
  try {
    const own = ownTokenizerOf(f.dir, f, file);
    const n = own.added.length;
    return {
      kind: 'hf',
      file,
      added: own.added,
      note: `the model's own tokenizer: train sft --base uses it${n ? `, adding the ${n} wire-format special(s) it lacks as tokens ${own.added[0]!.id}..${own.added[n - 1]!.id}` : ' (it holds the wire-format specials)'}`,
    };
  } catch (err) {
    return { kind: 'hf', file, problem: (err as Error).message, note: 'train sft --base refuses it' };
  }
}

export async function cmdModel(a: ParsedArgs): Promise<void> {
  const base = a.options['base'] as string | undefined;
  if (base === undefined) throw new UsageError("missing required option '--base'", MODEL_USAGE);
  if (a.positional === 'inspect') {
    if (a.options['ids'] !== undefined) throw new UsageError('--ids is for model logits', MODEL_USAGE);
    const info = describe(asBadInput(() => inspectHfFolder(base)));
    if (a.options['json']) console.log(JSON.stringify(info));
    else {
      const c = info['config'] as Record<string, unknown>;
      console.log(`${info['architecture'] as string}: ${(info['parameters'] as number).toLocaleString('en-US')} parameters, ${(info['dtypes'] as string[]).join('+')}, ${info['files'] as number} file(s)`);
      console.log(`  ${Object.entries(c).map(([k, v]) => `${k} ${String(v)}`).join(', ')}`);
      const t = info['tokenizer'] as Record<string, unknown>;
      console.log(`  tokenizer: ${t['kind'] as string}${t['note'] ? ` (${t['note'] as string})` : ''}`);
    }
    return;
  }
  const idsText = a.options['ids'];
  if (typeof idsText !== 'string' || !/^\d+(,\d+)*$/.test(idsText)) throw new UsageError('--ids needs token ids separated by commas, e.g. --ids 1,2,3', MODEL_USAGE);
  const ids = idsText.split(',').map(Number);
  const folder = asBadInput(() => inspectHfFolder(base)); // every check before a byte of weights is read
  const V = folder.model.vocab;
  const bad = ids.find((id) => id >= V);
  if (bad !== undefined) throw new UsageError(`--ids: token id ${bad} is not below the vocabulary size ${V}`, MODEL_USAGE);
  if (ids.length > folder.model.maxSeq) throw new UsageError(`--ids: ${ids.length} ids exceed max_position_embeddings ${folder.model.maxSeq}`, MODEL_USAGE);
  await initBackend(((a.options['backend'] as string | undefined) ?? 'auto') as BackendAsk);
  const { model } = asBadInput(() => hfModelFromFolder(base));
  try {
    const flat = await model.logitsAsync(Int32Array.from(ids), 1, ids.length);
    const rows = Array.from({ length: ids.length }, (_, t) => Array.from(flat.subarray(t * V, (t + 1) * V)));
    if (a.options['json']) console.log(JSON.stringify({ shape: [ids.length, V], logits: rows }));
    else rows.forEach((r, t) => console.log(`${t}\t${ids[t]}\targmax ${r.reduce((best, x, j) => (x > r[best]! ? j : best), 0)}\t${r.slice(0, 8).map((x) => x.toFixed(4)).join(' ')}${V > 8 ? ' ...' : ''}`));
  } finally {
    model.dispose();
  }
}
