// LoRA against full fine-tuning on one generated Llama-shaped model (issue 29): trainable
// parameter counts, and the optimiser step's time (forward + backward + update, one thread)
// as the median of several steps after a warm-up, for full fine-tuning, LoRA r=8 on every
// target and LoRA r=8 on q,v. Also the counts at SmolLM2-135M's shape (no weights built).
//
//   npx tsx bench/lora.ts [--backend wasm|cpu] [--steps N] [--warmup N]
//
// Prints figures, and the JSON object as the last line. A shared machine's load shows in
// `loadavg`: compare the rows of one run, not runs of different days.
import * as os from 'node:os';
import { BackendAsk, initBackend } from '../trainer/model/backend';
import { LoraModel, countLoraParams, parseLoraSpec } from '../trainer/model/lora';
import { Batch, IGNORE, ModelConfig, StackModel, countParams, makeRng } from '../trainer/model/model';
import { Trainer } from '../trainer/model/optim';

/** The generated model timed here: Llama-shaped (GQA 3:1, SwiGLU, tied), small enough for a CPU. */
const BENCH: ModelConfig = { vocab: 2048, dModel: 192, layers: 6, heads: 6, kvHeads: 2, mlp: 512, maxSeq: 512, ropeBase: 10000, normEps: 1e-6 };
const SMOL: ModelConfig = { vocab: 49152, dModel: 576, layers: 30, heads: 9, kvHeads: 3, mlp: 1536, maxSeq: 2048, ropeBase: 100000, normEps: 1e-5 };

function batchOf(cfg: ModelConfig, rows: number, seq: number, seed: number): Batch {
  const rng = makeRng(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq);
  for (let i = 0; i < rows * seq; i++) {
    inputIds[i] = Math.floor(rng.uniform() * cfg.vocab);
    labels[i] = i % seq < seq / 4 ? IGNORE : Math.floor(rng.uniform() * cfg.vocab); // a prompt, then supervised tokens
  }
  return { inputIds, labels, batch: rows, seq };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (k: string): string | undefined => {
    const i = args.indexOf(k);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const backend = (opt('--backend') ?? 'wasm') as BackendAsk;
  const steps = Number(opt('--steps') ?? 5);
  const warmup = Number(opt('--warmup') ?? 2);
  await initBackend(backend);
  const base = StackModel.create(BENCH, 1).exportWeights();
  const batch = batchOf(BENCH, 4, 256, 2);
  const figures: Record<string, unknown> = {
    backend,
    loadavg: os.loadavg()[0],
    cpus: os.cpus().length,
    model: BENCH,
    batch: '4 x 256 tokens, 3/4 supervised',
    smollm2_135m_shape: { full: countParams(SMOL), lora_r8_all: countLoraParams(SMOL, parseLoraSpec('8,16')), lora_r8_qv: countLoraParams(SMOL, parseLoraSpec('8,16,q,v')) },
  };
  // The three trainers step in turn (round-robin), so that a shared machine's load falls on each alike.
  const arms = (
    [
      ['full', null],
      ['lora r=8 all', '8,16'],
      ['lora r=8 q,v', '8,16,q,v'],
    ] as const
  ).map(([name, spec]) => {
    const net = StackModel.fromWeights(BENCH, base);
    const model = spec ? LoraModel.create(net, parseLoraSpec(spec), { dir: '', files: [] }, 3) : net;
    return { name, model, tr: new Trainer(model, { lr: 1e-3, parallel: 0 }), ms: [] as number[], grads: [] as number[] };
  });
  for (let k = 0; k < warmup + steps; k++) {
    for (const a of arms) {
      const t0 = performance.now();
      const r = a.tr.step(batch);
      if (k >= warmup) {
        a.ms.push(performance.now() - t0);
        a.grads.push(r.ms.grads);
      }
    }
  }
  const rows: Record<string, unknown>[] = [];
  for (const a of arms) {
    const trainable = a.model instanceof LoraModel ? a.model.paramCount() : countParams(BENCH);
    const row = { name: a.name, trainable, step_ms: median(a.ms), grads_ms: median(a.grads), steps: a.ms.map((x) => Math.round(x)) };
    rows.push(row);
    console.log(`${a.name.padEnd(14)} ${String(trainable).padStart(9)} trainable  step ${row.step_ms.toFixed(0)} ms (forward+backward ${row.grads_ms.toFixed(0)} ms), median of ${steps}`);
    a.tr.dispose();
    a.model.dispose();
  }
  figures['params'] = countParams(BENCH);
  figures['rows'] = rows;
  console.log(`SmolLM2-135M shape: ${JSON.stringify(figures['smollm2_135m_shape'])}`);
  console.log(JSON.stringify(figures));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
