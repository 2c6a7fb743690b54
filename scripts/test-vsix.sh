#!/usr/bin/env bash
# The packed-extension tier: packs the .vsix from a clean clone of HEAD, lists it, installs it
# into a fresh code-server with code-server's own --install-extension and drives the flow
# with Playwright (test/vsix/run.ts says what it checks). Screenshots in test-results/vsix/.
# Commit first: the clone packs what is committed, not the working tree.
set -uo pipefail
cd "$(dirname "$0")/.."

not_run() {
  echo "vsix tier: NOT RUN: $*" >&2
  exit 1
}

start=$(date +%s)
bash scripts/setup-vscode-test.sh >/dev/null || not_run "scripts/setup-vscode-test.sh failed (run it to see why)"
[ -x node_modules/.bin/tsx ] || not_run "node_modules/.bin/tsx missing: run npm ci"
command -v git >/dev/null || not_run "git is needed to clone the repository"
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "vsix tier: note: uncommitted changes are not in the packed clone" >&2
fi

limit=$(( ${AGENT_LAB_VSIX_TIMEOUT_S:-600} + 120 ))
timeout --kill-after=15 "$limit" node_modules/.bin/tsx test/vsix/run.ts
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "vsix tier: FAILED: the launcher was killed after ${limit} s" >&2
elif [ "$rc" = 0 ]; then
  echo "vsix tier: passed in $(( $(date +%s) - start )) s; screenshots in test-results/vsix/"
else
  echo "vsix tier: FAILED (exit $rc) in $(( $(date +%s) - start )) s; screenshots and logs in test-results/vsix/" >&2
fi
exit "$rc"
