// Live access to the seed's Python reference, for differential tests on cases no golden
// file holds. The reference lives in ../shared/seeds/reference beside the repository (as
// laid out for sessions and for CI). When python3 or the reference is missing, callers
// skip with this module's reason, so the output says what did not run.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';

export const repoRoot = path.resolve(__dirname, '..', '..');
export const referenceDir = path.resolve(repoRoot, '..', 'shared', 'seeds', 'reference');

let cachedReason: string | null | undefined;

/** null when the reference can run here; otherwise why it cannot. */
export function referenceUnavailable(): string | null {
  if (cachedReason !== undefined) return cachedReason;
  if (!existsSync(path.join(referenceDir, 'stacklm', 'agent', 'corpus.py'))) {
    cachedReason = `the Python reference is not at ${referenceDir}`;
  } else {
    const probe = spawnSync('python3', ['-c', 'import sys; print(sys.version_info[:2])'], { encoding: 'utf8' });
    cachedReason = probe.status === 0 ? null : 'python3 is not available';
  }
  return cachedReason;
}

/**
 * Runs a Python program with the reference importable and returns its stdout parsed as
 * JSON. The program reads `INPUT` (the JSON-decoded `input`) and must print one JSON value.
 */
export function runReference<T>(program: string, input: unknown = null): T {
  const prelude = 'import json, sys\nINPUT = json.loads(sys.stdin.read())\n';
  const out = execFileSync('python3', ['-c', prelude + program], {
    cwd: referenceDir,
    env: { ...process.env, PYTHONPATH: referenceDir, PYTHONHASHSEED: '0' },
    input: JSON.stringify(input),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(out) as T;
}
