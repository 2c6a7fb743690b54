#!/usr/bin/env bash
# Installs headless Neovim for the language server's independent-client test
# (test/lsp/neovim.test.ts): Debian's `neovim` package (0.7.2 on bookworm). Idempotent:
# nothing happens when `nvim` is already on PATH; `apt-get update` runs only when the
# package lists do not know neovim yet. It never fails the test run: when it cannot
# install, it says why, and the Neovim test reports itself pending with that reason.
set -uo pipefail

if command -v nvim >/dev/null 2>&1; then
  echo "neovim: $(nvim --version | head -1) (already installed)"
  exit 0
fi
not_installed() {
  echo "neovim: NOT INSTALLED: $*; the Neovim client test will be pending" >&2
  exit 0
}
command -v apt-get >/dev/null 2>&1 || not_installed "no apt-get on this machine"
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n); else not_installed "not root and no password-less sudo"; fi
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-cache policy neovim 2>/dev/null | grep -Eq 'Candidate: [0-9]'; then
  "${SUDO[@]}" apt-get update -qq >"$log" 2>&1 || not_installed "apt-get update failed: $(tail -3 "$log" | tr '\n' ' ')"
fi
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends neovim >"$log" 2>&1 ||
  not_installed "apt-get install neovim failed: $(tail -3 "$log" | tr '\n' ' ')"
command -v nvim >/dev/null 2>&1 || not_installed "apt-get installed neovim but nvim is not on PATH"
echo "neovim: $(nvim --version | head -1) (installed)"
