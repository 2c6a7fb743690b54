#!/usr/bin/env bash
# The whole test suite, every tier, as the README's test command runs it:
#   0. install the test tools (Chromium, code-server) idempotently: scripts/setup-vscode-test.sh
#   1. type check (Node side and webviews), lint (eslint: the import boundaries, floating promises)
#   2. build   3. unit tests (mocha: core, CLI, tokenizer, grammar ...;
#      the TextMate tests borrow code-server's vscode-textmate)
#   4. the language server over stdio and through headless Neovim (test/lsp)
#   5. VS Code integration tests in a real VS Code (code-server + Chromium).
#   6. UI tests of the panels in a real VS Code (Playwright: palette, webviews, screenshots).
#   7. the packed .vsix: packed from a clean clone, installed, the flow driven (Playwright).
# Ends with one line "tests: N passed, N failed[, N skipped]" summed over the tiers.
set -uo pipefail
cd "$(dirname "$0")/.."

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
passed=0; failed=0; skipped=0; status=0

# Reads mocha's closing lines ("N passing", "N failing", "N pending") from a tier's log.
count() {
  local log=$1 p f s
  p=$(grep -Eo '^ *[0-9]+ passing' "$log" | tail -1 | grep -Eo '[0-9]+' || true)
  f=$(grep -Eo '^ *[0-9]+ failing' "$log" | tail -1 | grep -Eo '[0-9]+' || true)
  s=$(grep -Eo '^ *[0-9]+ pending' "$log" | tail -1 | grep -Eo '[0-9]+' || true)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
}

tier() {
  local name=$1; shift
  echo
  echo "=== ${name} ==="
  local start=$SECONDS
  "$@" 2>&1 | tee "$log_dir/$name.log"
  local rc=${PIPESTATUS[0]}
  count "$log_dir/$name.log"
  echo "=== ${name}: exit ${rc}, $((SECONDS - start)) s ==="
  if [ "$rc" -ne 0 ]; then
    status=1
    # A tier that died before reporting its tests still counts as a failure.
    if ! grep -Eq '^ *[0-9]+ failing' "$log_dir/$name.log"; then failed=$((failed + 1)); fi
  fi
}

tier setup bash scripts/setup-vscode-test.sh
tier typecheck npx tsc -p tsconfig.json --noEmit
tier typecheck-webview npx tsc -p webview-ui/tsconfig.json --noEmit
tier lint npx eslint .
tier build node scripts/build.mjs
# Python from Debian for the reference and export tests (idempotent; says why when it cannot).
tier unit bash -c 'bash scripts/setup-python-test.sh; exec npx mocha'
# The language server over real stdio and through headless Neovim (installed idempotently;
# without it the Neovim test is reported pending, with the reason).
tier lsp bash -c 'bash scripts/setup-neovim.sh; AGENT_LAB_SKIP_BUILD=1 exec npx mocha --config test/lsp/.mocharc.json'
tier vscode env AGENT_LAB_SKIP_BUILD=1 bash scripts/test-vscode.sh
# The panels as a person uses them (Playwright in code-server; screenshots in test-results/ui/).
tier ui env AGENT_LAB_SKIP_BUILD=1 bash scripts/test-ui.sh
# The .vsix as a user gets it (packs HEAD from a clean clone; screenshots in test-results/vsix/).
tier vsix bash scripts/test-vsix.sh

echo
line="tests: ${passed} passed, ${failed} failed"
[ "$skipped" -gt 0 ] && line="${line}, ${skipped} skipped"
echo "$line"
exit $status
