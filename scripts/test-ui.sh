#!/usr/bin/env bash
# The UI tier: the four panels as a person uses them, in a real VS Code (code-server 4.100.3
# in headless Chromium, driven by playwright-core): test/ui/run.ts runs test/ui/*.ui.ts and
# prints mocha's "N passing / N failing" lines; screenshots and logs go to test-results/ui/.
#   1. scripts/setup-vscode-test.sh  (idempotent: Debian packages + code-server in a cache)
#   2. npm run build                 (unless AGENT_LAB_SKIP_BUILD=1)
#   3. test/ui/run.ts                (exits with the tests' exit code)
# Whatever cannot run is said on a line starting "UI tier: NOT RUN" and the script exits
# non-zero: a tier that did not run never counts as passed.
set -uo pipefail
cd "$(dirname "$0")/.."

not_run() {
  echo "UI tier: NOT RUN: $*" >&2
  exit 1
}

start=$(date +%s)
bash scripts/setup-vscode-test.sh >/dev/null || not_run "scripts/setup-vscode-test.sh failed (run it to see why)"
if [ "${AGENT_LAB_SKIP_BUILD:-0}" != 1 ]; then
  npm run --silent build || not_run "npm run build failed"
fi
[ -x node_modules/.bin/tsx ] || not_run "node_modules/.bin/tsx missing: run npm ci"

limit=$(( ${AGENT_LAB_UI_TIMEOUT_S:-480} + 120 ))
timeout --kill-after=15 "$limit" node_modules/.bin/tsx test/ui/run.ts
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "UI tier: FAILED: the launcher was killed after ${limit} s" >&2
elif [ "$rc" = 0 ]; then
  echo "UI tier: passed in $(( $(date +%s) - start )) s; screenshots in test-results/ui/"
else
  echo "UI tier: FAILED (exit $rc) in $(( $(date +%s) - start )) s; screenshots and logs in test-results/ui/" >&2
fi
exit "$rc"
