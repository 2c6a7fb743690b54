// `agent-lab bench train` against PyTorch at its best (bench/train.ts, bench/torch_train.py):
// with every core PyTorch runs with OpenBLAS single-threaded and with OpenBLAS's pool, the
// faster one is compared, the BLAS each process loaded is named, and `--runs N` gives the
// medians of N whole comparisons. Needs /usr/bin/python3 with torch
// (scripts/setup-python-test.sh); without it the test says so and is pending.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { formatTrainBenchRuns, runTrainBenchRuns } from '../../bench/train';

function torchPython(): boolean {
  return spawnSync(process.env['AGENT_LAB_PYTHON'] ?? '/usr/bin/python3', ['-c', 'import torch'], { timeout: 60000 }).status === 0;
}

describe('bench train: PyTorch with OpenBLAS single-threaded and with its pool, --runs', function () {
  this.timeout(600000);

  it('compares with the faster BLAS setting, names the BLAS and its threads, and takes medians over runs', async function () {
    if (!torchPython()) {
      console.log('      (pending: no python3 with torch here; bash scripts/setup-python-test.sh installs python3-torch and libopenblas0-pthread)');
      this.skip();
    }
    const lines: string[] = [];
    const r = await runTrainBenchRuns(2, { backend: 'wasm', threads: 1, steps: 1, rounds: 1, warmup: 0, log: (l) => lines.push(l) });
    assert.equal(r.runs, 2);
    assert.equal(r.results.length, 2);
    for (const x of r.results) {
      const tb = x.all_threads.torch_blas!;
      assert.ok(tb.single && tb.pool, JSON.stringify(x.all_threads));
      const best = (v: { matched: number; natural: number }): number => Math.max(v.matched, v.natural);
      // the figure compared is the faster setting's
      assert.equal(x.torch_tokens_per_s, Math.max(best(tb.single), best(tb.pool)));
      assert.equal(tb.torch_best, best(tb.single) >= best(tb.pool) ? 'single' : 'pool');
      // (the ratio is of the unrounded medians)
      assert.ok(Math.abs(x.ratio! - x.tokens_per_s / x.torch_tokens_per_s!) < 0.005, `${x.ratio} vs ${x.tokens_per_s} / ${x.torch_tokens_per_s}`);
      // the BLAS each process ran, with the thread settings it was given
      const single = x.torch!.blas.single!;
      const pool = x.torch!.blas.pool!;
      assert.equal(single.env['OPENBLAS_NUM_THREADS'], '1');
      assert.equal(pool.env['OPENBLAS_NUM_THREADS'], '2');
      assert.equal(single.env['OMP_NUM_THREADS'], '2');
      assert.ok(single.variant.length > 0 && single.torch_blas_info.length > 0, JSON.stringify(single));
      if (single.variant.startsWith('openblas')) {
        assert.equal(single.openblas_threads, 1);
        // OpenBLAS's serial build has no pool to size
        if (pool.variant !== 'openblas-serial') assert.equal(pool.openblas_threads, 2);
        assert.match(single.openblas_config ?? '', /OpenBLAS/);
      }
      assert.ok(x.loss_check && x.loss_check.abs_diff < 1e-4, JSON.stringify(x.loss_check));
      // one thread each: tokens per CPU-second beside tokens per second
      const cpu = x.one_thread!.cpu!;
      assert.ok(cpu.tokens_per_cpu_s > 0 && cpu.torch_tokens_per_cpu_s! > 0, JSON.stringify(x.one_thread));
      assert.ok(Math.abs(cpu.ratio! - cpu.tokens_per_cpu_s / cpu.torch_tokens_per_cpu_s!) < 0.005);
      assert.equal(x.torch!.blas.one!.env['OPENBLAS_NUM_THREADS'], '1');
    }
    const ratios = r.results.map((x) => x.ratio!).sort((a, b) => a - b);
    assert.equal(r.median.ratio, Math.round(((ratios[0]! + ratios[1]!) / 2) * 1000) / 1000);
    assert.equal(r.torch_best.single + r.torch_best.pool, 2);
    assert.ok(r.median.one_thread && r.median.one_thread.cpu_ratio! > 0);
    const text = formatTrainBenchRuns(r).join('\n');
    assert.match(text, /median of 2 runs: ours \d+ tokens\/s, PyTorch at its best \d+: ratio [\d.]+/);
    assert.match(text, /OpenBLAS single-threaded \(OPENBLAS_NUM_THREADS=1\) \d+, OpenBLAS's pool beside torch's \d+/);
    assert.match(text, /BLAS: \S+ \(1 BLAS thread\)/);
  });
});
