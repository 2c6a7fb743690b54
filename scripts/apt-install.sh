#!/usr/bin/env bash
# Installs Debian packages for a test tier, idempotently and without ever failing the run:
#   bash scripts/apt-install.sh LABEL 'CHECK COMMAND' PACKAGE...
# Nothing happens when CHECK COMMAND succeeds; `apt-get update` runs only when the package
# lists do not know the first package yet. When it cannot install, it says why on stderr
# (the tests that need the tool report themselves pending or failing with that reason).
set -uo pipefail
label=$1; check=$2; shift 2

if bash -c "$check" >/dev/null 2>&1; then
  echo "$label: already installed"
  exit 0
fi
not_installed() {
  echo "$label: NOT INSTALLED: $*" >&2
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
if ! apt-cache policy "$1" 2>/dev/null | grep -Eq 'Candidate: [0-9]'; then
  "${SUDO[@]}" apt-get update -qq >"$log" 2>&1 || not_installed "apt-get update failed: $(tail -3 "$log" | tr '\n' ' ')"
fi
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1 ||
  not_installed "apt-get install $* failed: $(tail -3 "$log" | tr '\n' ' ')"
bash -c "$check" >/dev/null 2>&1 || not_installed "apt-get installed $*, but '$check' still fails"
echo "$label: installed ($*)"
