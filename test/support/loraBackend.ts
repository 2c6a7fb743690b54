// A child process for test/unit/lora.test.ts: three LoRA steps of a tiny Qwen2-shaped model
// on the backend named on the command line (the async step, as the trainer takes it on
// webgpu), then the adapters and the merged model's logits as one JSON line. A child, because
// Dawn reads the Vulkan driver's environment at start and the backend is the process's.
//
//   node --require tsx/cjs test/support/loraBackend.ts wasm|cpu|webgpu
import { initBackend, type BackendAsk } from '../../trainer/model/backend';
import { LoraModel, parseLoraSpec } from '../../trainer/model/lora';
import { IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';

const cfg: ModelConfig = { vocab: 23, dModel: 16, layers: 2, heads: 4, kvHeads: 2, mlp: 24, maxSeq: 32, ropeBase: 10000, qkvBias: true, tiedHead: false, headDim: 6 };

async function main(): Promise<void> {
  const info = await initBackend(process.argv[2] as BackendAsk);
  const base = StackModel.create(cfg, 3).exportWeights();
  const lora = LoraModel.create(StackModel.fromWeights(cfg, base), parseLoraSpec('2,4,q,v,down'), { dir: '', files: [] }, 1);
  const tr = new Trainer(lora, { lr: 0.05 });
  const rng = makeRng(5);
  const inputIds = Int32Array.from({ length: 24 }, () => Math.floor(rng.uniform() * cfg.vocab));
  const labels = Int32Array.from({ length: 24 }, (_, i) => (i % 3 ? Math.floor(rng.uniform() * cfg.vocab) : IGNORE));
  const losses: number[] = [];
  for (let k = 0; k < 3; k++) losses.push((await tr.stepAsync({ inputIds, labels, batch: 2, seq: 12 })).loss);
  const adapters = await lora.exportWeightsAsync();
  const logits = await lora.net.logitsAsync(inputIds.slice(0, 12), 1, 12);
  const out = {
    backend: info.used,
    adapter: info.adapter?.description ?? null,
    optimizer: tr.adam.mode,
    losses,
    adapters: Object.fromEntries(Object.entries(adapters).map(([k, v]) => [k, Array.from(v)])),
    logits: Array.from(logits),
  };
  console.log(JSON.stringify(out));
  tr.dispose();
  lora.dispose();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
