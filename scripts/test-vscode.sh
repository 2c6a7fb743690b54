#!/usr/bin/env bash
# The VS Code integration tier: the extension's tests in a real VS Code (code-server
# 4.100.3 in headless Chromium; see docs/architecture.md "Testing tiers").
#   1. scripts/setup-vscode-test.sh  (idempotent: Debian packages + code-server in a cache)
#   2. npm run build                 (unless AGENT_LAB_SKIP_BUILD=1)
#   3. test/vscode/runCodeServer.ts  (exits with the tests' exit code)
# Whatever cannot run is said on a line starting "VS Code tier: NOT RUN" and the script
# exits non-zero: a tier that did not run never counts as passed.
set -uo pipefail
cd "$(dirname "$0")/.."

not_run() {
  echo "VS Code tier: NOT RUN: $*" >&2
  exit 1
}

start=$(date +%s)
bash scripts/setup-vscode-test.sh || not_run "scripts/setup-vscode-test.sh failed (see above)"
if [ "${AGENT_LAB_SKIP_BUILD:-0}" != 1 ]; then
  npm run --silent build || not_run "npm run build failed"
fi
[ -x node_modules/.bin/tsx ] || not_run "node_modules/.bin/tsx missing: run npm ci"

# The launcher bounds its own waits (AGENT_LAB_VSCODE_TIMEOUT_S, default 300 s); the outer
# timeout is the last resort if the launcher itself hangs.
limit=$(( ${AGENT_LAB_VSCODE_TIMEOUT_S:-300} + 120 ))
timeout --kill-after=15 "$limit" node_modules/.bin/tsx test/vscode/runCodeServer.ts
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "VS Code tier: FAILED: the launcher was killed after ${limit} s" >&2
elif [ "$rc" = 0 ]; then
  echo "VS Code tier: passed in $(( $(date +%s) - start )) s"
else
  echo "VS Code tier: FAILED (exit $rc) in $(( $(date +%s) - start )) s; logs in test-results/" >&2
fi
exit "$rc"
