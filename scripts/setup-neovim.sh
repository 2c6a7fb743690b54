#!/usr/bin/env bash
# Installs headless Neovim for the language server's independent-client test
# (test/lsp/neovim.test.ts): Debian's `neovim` package (0.7.2 on bookworm). Idempotent, and
# never fails the test run: without it the Neovim test reports itself pending, with the reason.
cd "$(dirname "$0")/.." || exit 0
bash scripts/apt-install.sh neovim 'command -v nvim' neovim
command -v nvim >/dev/null 2>&1 && echo "neovim: $(nvim --version | head -1)"
exit 0
