#!/usr/bin/env bash
# Installs what the unit tests run in Python, from Debian (the only Python packages these
# machines may install): python3 (the reference differential tests, the exported
# reward.py) and python3-jinja2 (the exported chat template rendered by real Jinja2, as
# transformers does). Idempotent: nothing happens when both import; `apt-get update` runs
# only when the package lists do not know them. It never fails the test run: when it cannot
# install, it says why, and the tests that need them say so themselves.
set -uo pipefail

if /usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1; then
  echo "python: $(/usr/bin/python3 --version), jinja2 $(/usr/bin/python3 -c 'import jinja2; print(jinja2.__version__)') (already installed)"
  exit 0
fi
not_installed() {
  echo "python: NOT INSTALLED: $*; tests that need python3/jinja2 will say so" >&2
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
if ! apt-cache policy python3-jinja2 2>/dev/null | grep -Eq 'Candidate: [0-9]'; then
  "${SUDO[@]}" apt-get update -qq >"$log" 2>&1 || not_installed "apt-get update failed: $(tail -3 "$log" | tr '\n' ' ')"
fi
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3 python3-jinja2 >"$log" 2>&1 ||
  not_installed "apt-get install python3 python3-jinja2 failed: $(tail -3 "$log" | tr '\n' ' ')"
/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1 || not_installed "installed, but /usr/bin/python3 cannot import jinja2"
echo "python: $(/usr/bin/python3 --version), jinja2 (installed)"
