// Loading a Hugging Face folder at a real model's size (issue 29): a SmolLM2-135M-shaped
// random folder (hidden 576, 30 layers, 9/3 heads, MLP 1536, vocab 49152, BF16, tied, two
// shards) written by test/support/hf_reference.py --smol with PyTorch's reference logits,
// then: the header-only check (model inspect), the load (BF16 -> float32, transposes), the
// model build, the full-sequence logits against PyTorch's (and both against a float64
// forward: float32's own noise at this depth), and a decoding step.
//
//   npx tsx bench/hfLoad.ts [--backend wasm|cpu] [--keep DIR]      (needs Debian's python3-torch)
//
// Prints figures, and the JSON object as the last line.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BackendAsk, initBackend } from '../trainer/model/backend';
import { inspectHfFolder, loadHfFolder } from '../trainer/hf/hfModel';
import { StackModel } from '../trainer/model/model';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (k: string): string | undefined => {
    const i = args.indexOf(k);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const backend = (opt('--backend') ?? 'wasm') as BackendAsk;
  const keep = opt('--keep');
  const root = keep ?? fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hfload-'));
  const dir = path.join(root, 'smollm2-135m-shape-bf16');
  const python = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  const figures: Record<string, unknown> = { backend, loadavg: os.loadavg()[0], cpus: os.cpus().length };
  try {
    if (!fs.existsSync(path.join(dir, 'reference.json'))) {
      const t0 = Date.now();
      const g = spawnSync(python, [path.join(__dirname, '..', 'test', 'support', 'hf_reference.py'), '--smol', root], { encoding: 'utf8' });
      if (g.status !== 0) throw new Error(`hf_reference.py --smol failed (python3-torch installed?): ${g.stderr.trim().split('\n').pop()}`);
      figures['generate_s'] = (Date.now() - t0) / 1000;
    }
    const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8')) as { ids: number[]; logits: number[][]; logits64?: number[][] };
    figures['bytes_on_disk'] = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors')).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    let t = performance.now();
    const info = inspectHfFolder(dir);
    figures['inspect_ms'] = Math.round(performance.now() - t);
    figures['params'] = info.params;
    const rss0 = process.memoryUsage().rss;
    t = performance.now();
    const folder = loadHfFolder(dir);
    figures['load_s'] = +((performance.now() - t) / 1000).toFixed(2);
    figures['load_rss_mb'] = Math.round((process.memoryUsage().rss - rss0) / 1e6);
    await initBackend(backend);
    t = performance.now();
    const model = StackModel.fromWeights(folder.model, folder.weights);
    figures['build_s'] = +((performance.now() - t) / 1000).toFixed(2);
    const T = ref.ids.length;
    const V = folder.model.vocab;
    model.logits(Int32Array.from(ref.ids.slice(0, 2)), 1, 2); // warm-up (kernels, transposes)
    t = performance.now();
    const got = model.logits(Int32Array.from(ref.ids), 1, T);
    figures['forward_ms'] = Math.round(performance.now() - t);
    let max = 0;
    let mag = 0;
    ref.logits.forEach((row, p) =>
      row.forEach((v, j) => {
        max = Math.max(max, Math.abs(got[p * V + j]! - v));
        mag = Math.max(mag, Math.abs(v));
      }),
    );
    figures['positions'] = T;
    figures['max_abs_logit_diff'] = max;
    if (ref.logits64) {
      // How far float32 itself is from exact arithmetic here: PyTorch's float32 and the lab's, each against float64.
      let torch32 = 0;
      let lab = 0;
      ref.logits64.forEach((row, p) =>
        row.forEach((v, j) => {
          torch32 = Math.max(torch32, Math.abs(ref.logits[p]![j]! - v));
          lab = Math.max(lab, Math.abs(got[p * V + j]! - v));
        }),
      );
      figures['torch_f32_vs_f64'] = torch32;
      figures['lab_vs_f64'] = lab;
    }
    figures['max_abs_logit'] = +mag.toFixed(3);
    const cache = model.newCache();
    model.prefill(ref.ids.slice(0, T - 1), cache);
    t = performance.now();
    const last = model.step(ref.ids[T - 1]!, cache);
    figures['decode_step_ms'] = Math.round(performance.now() - t);
    let maxStep = 0;
    ref.logits[T - 1]!.forEach((v, j) => (maxStep = Math.max(maxStep, Math.abs(last[j]! - v))));
    figures['decode_max_abs_logit_diff'] = maxStep;
    figures['peak_rss_mb'] = Math.round(process.memoryUsage().rss / 1e6);
    cache.dispose();
    model.dispose();
  } finally {
    if (!keep) fs.rmSync(root, { recursive: true, force: true });
  }
  for (const [k, v] of Object.entries(figures)) console.log(`${k.padEnd(28)} ${String(v)}`);
  console.log(JSON.stringify(figures));
}

main().catch((err: unknown) => {
  console.error(`bench/hfLoad: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
