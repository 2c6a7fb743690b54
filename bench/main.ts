// The benchmarks' entry point: `agent-lab bench lsp|grammar|train|decode` (cli/bench.ts) runs its
// development bundle dist/bench.js, or this file through tsx when there is none, with the
// checked request as one JSON argument. Figures go to stdout; with
// --json the JSON object is the last line. Errors end the process as the CLI's do: one line,
// exit 1 (the stack with AGENT_LAB_DEBUG=1).
import { CliError } from '../cli/args';
import type { BenchRequest } from '../cli/bench';
import { InputError } from '../store/files';

export async function runBench(r: BenchRequest): Promise<void> {
  if (r.target === 'grammar') {
    const { runGrammarBench } = await import('./grammar'); // loads js-tiktoken's ranks only here
    const result = runGrammarBench({ log: (line) => console.log(line) });
    if (r.json) console.log(JSON.stringify(result));
    return;
  }
  if (r.target === 'decode') {
    // `bench decode [--json] [--rounds N]`: KV-cache decoding beside PyTorch's (bench/decode.ts).
    const { formatDecodeBench, runDecodeBench } = await import('./decode');
    const result = await runDecodeBench({
      ...(r.rounds !== undefined ? { rounds: r.rounds } : {}),
      ...(r.backend !== undefined ? { backend: r.backend } : {}),
      log: (line) => (r.json ? console.error(line) : console.log(line)),
    });
    if (!r.json) for (const line of formatDecodeBench(result)) console.log(line);
    console.log(JSON.stringify(result));
    return;
  }
  if (r.target === 'train' && r.profile) {
    // `bench train --profile`: one SFT and one GRPO step by phase and by op (bench/trainProfile.ts).
    const { formatTrainProfile, runTrainProfile } = await import('./trainProfile');
    const result = await runTrainProfile({
      ...(r.iterations !== undefined ? { steps: r.iterations } : {}),
      ...(r.backend !== undefined ? { backend: r.backend } : {}),
      ...(r.warmup !== undefined ? { warmup: r.warmup } : {}),
      log: (line) => (r.json ? console.error(line) : console.log(line)),
    });
    if (!r.json) for (const line of formatTrainProfile(result)) console.log(line);
    console.log(JSON.stringify(result));
    return;
  }
  if (r.target === 'train') {
    // `bench train [--json] [--iterations N]`: N = measured steps per side per round (default 8).
    const { formatTrainBench, formatTrainBenchRuns, runTrainBench, runTrainBenchRuns } = await import('./train'); // loads tfjs only here
    const opts = {
      ...(r.iterations !== undefined ? { steps: r.iterations } : {}),
      ...(r.backend !== undefined ? { backend: r.backend } : {}),
      ...(r.rounds !== undefined ? { rounds: r.rounds } : {}),
      ...(r.warmup !== undefined ? { warmup: r.warmup } : {}),
      ...(r.model !== undefined ? { model: r.model } : {}),
      log: (line: string) => (r.json ? console.error(line) : console.log(line)),
    };
    if (r.runs !== undefined && r.runs > 1) {
      // `--runs N`: N whole comparisons, the medians of their figures
      const runs = await runTrainBenchRuns(r.runs, opts);
      if (!r.json) for (const line of formatTrainBenchRuns(runs)) console.log(line);
      console.log(JSON.stringify(runs));
      return;
    }
    const result = await runTrainBench(opts);
    if (!r.json) for (const line of formatTrainBench(result)) console.log(line);
    console.log(JSON.stringify(result));
    return;
  }
  const { formatLspBench, runLspBench } = await import('./lsp');
  const figures = await runLspBench({
    large: r.large,
    ...(r.iterations !== undefined ? { iterations: r.iterations } : {}),
    log: (line) => console.error(line),
  });
  if (!r.json) for (const line of formatLspBench(figures)) console.log(line);
  console.log(JSON.stringify(figures));
}

/**
 * The process entry: runs the JSON request, ends with the CLI's exit codes and one-line
 * errors. Called by `node -e` on dist/bench.js and by the block below under tsx (a bundle
 * is not started as the main module: bench/grammar.ts has a main block of its own).
 */
export function runBenchProcess(requestJson: string): void {
  const request = JSON.parse(requestJson) as BenchRequest;
  runBench(request).then(
    () => {},
    (err: unknown) => {
      const debug = Boolean(process.env['AGENT_LAB_DEBUG']);
      if (err instanceof CliError || err instanceof InputError) console.error(`agent-lab bench: ${err.message}`);
      else {
        const text = err instanceof Error ? (debug ? (err.stack ?? err.message) : `${err.name}: ${err.message.split('\n')[0]}`) : String(err);
        console.error(`agent-lab: internal error: ${text}${debug ? '' : ' (AGENT_LAB_DEBUG=1 shows where)'}`);
      }
      process.exitCode = 1;
    },
  );
}

if (require.main === module) runBenchProcess(process.argv[2] ?? '{}');
