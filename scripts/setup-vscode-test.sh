#!/usr/bin/env bash
# Installs what the VS Code integration tier needs, idempotently:
#   - Debian packages: chromium (the browser that drives code-server), libkrb5-dev
#     (headers for code-server's `kerberos` module), ripgrep (VS Code's search binary),
#     libvulkan1 (the Vulkan loader: with chromium's SwiftShader driver, the software
#     WebGPU adapter that test/unit/webgpu.test.ts runs on);
#   - code-server 4.100.3 from npm (VS Code 1.100.3, the newest that runs on Node 20),
#     with its postinstall done by hand (its own postinstall downloads from outside the
#     npm registry, which is not reachable here). Recipe: docs/architecture.md, "Testing tiers".
#
# code-server goes into a cache OUTSIDE the repository so that fresh clones reuse it:
#   ${AGENT_LAB_TOOLS:-$HOME/.cache/agent-lab}/code-server-4.100.3
# A marker file is written last; without it the install is redone from scratch.
# Prints the code-server root (the folder holding node_modules/code-server) as its last
# line, "CODE_SERVER_ROOT=<dir>", for scripts that want it.
#
# Needs: Debian, root (or sudo) for apt-get, Node 20 + npm, the npm registry.
set -euo pipefail

VERSION=4.100.3
TOOLS="${AGENT_LAB_TOOLS:-$HOME/.cache/agent-lab}"
DEST="$TOOLS/code-server-$VERSION"
MARKER="$DEST/.agent-lab-installed"
RECIPE_REV=1   # bump when the recipe below changes, to force a reinstall

say() { echo "[setup-vscode-test] $*"; }
die() { echo "[setup-vscode-test] ERROR: $*" >&2; exit 1; }

# ---------------------------------------------------------------- Debian packages
APT_PACKAGES=(chromium libkrb5-dev ripgrep libvulkan1)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
  SUDO=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "not root and no sudo; install ${missing[*]} by hand"
    SUDO=(sudo)
  fi
  say "apt-get update (missing: ${missing[*]})"
  "${SUDO[@]}" apt-get update -qq >/dev/null || die "apt-get update failed"
  say "apt-get install -y ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
else
  say "Debian packages present: ${APT_PACKAGES[*]}"
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium missing after install"
[ -x /usr/bin/rg ] || die "/usr/bin/rg missing after install"

# ---------------------------------------------------------------- code-server
# One installer at a time per cache (two test runs starting together must not interleave).
mkdir -p "$TOOLS"
if command -v flock >/dev/null; then
  exec 9>"$TOOLS/.code-server-$VERSION.lock"
  flock -w 600 9 || die "another install holds $TOOLS/.code-server-$VERSION.lock for more than 10 minutes"
fi
if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$VERSION rev$RECIPE_REV" ]; then
  say "code-server $VERSION already installed in $DEST"
  echo "CODE_SERVER_ROOT=$DEST"
  exit 0
fi

command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" = 20 ] || say "warning: code-server $VERSION wants Node 20; this is $(node --version)"

# Node's headers, for the native modules (no download: offline).
NODEDIR=""
for cand in /usr /usr/local "$(dirname "$(dirname "$(command -v node)")")"; do
  if [ -f "$cand/include/node/node_api.h" ]; then NODEDIR="$cand"; break; fi
done
if [ -z "$NODEDIR" ]; then
  v="$(node -p 'process.versions.node')"
  for cand in "$HOME/.cache/node-gyp/$v" "$HOME/.node-gyp/$v"; do
    if [ -f "$cand/include/node/node_api.h" ]; then NODEDIR="$cand"; break; fi
  done
fi
[ -n "$NODEDIR" ] || die "Node headers not found (looked in /usr/include/node, ~/.cache/node-gyp); install Debian's nodejs dev headers (libnode-dev) or node-gyp's headers"
say "Node headers: $NODEDIR/include/node"

start=$(date +%s)
say "installing code-server $VERSION into $DEST (about a minute)"
rm -rf "$DEST"
mkdir -p "$DEST"
LOG="$DEST/install.log"
run() { # run a step quietly, show the log tail on failure
  local what="$1"; shift
  say "  $what"
  if ! "$@" >>"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    die "step failed: $what (full log: $LOG)"
  fi
}
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false npm_config_loglevel=error

cd "$DEST"
echo '{"name":"agent-lab-code-server","private":true}' > package.json
run "npm install --ignore-scripts code-server@$VERSION" npm install --ignore-scripts --no-save "code-server@$VERSION"
run "npm rebuild argon2" env npm_config_nodedir="$NODEDIR" npm rebuild argon2

VS="$DEST/node_modules/code-server/lib/vscode"
[ -d "$VS" ] || die "$VS missing"
cd "$VS"
run "lib/vscode: npm install --omit=dev --ignore-scripts" npm install --omit=dev --ignore-scripts
mkdir -p node_modules/@vscode/ripgrep/bin
cp /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
say "  copied /usr/bin/rg into @vscode/ripgrep"
# node-pty's last rebuild step downloads something and fails offline after pty.node is
# built; that is harmless, so this step's status is checked by its products instead.
say "  lib/vscode: npm rebuild node-pty @vscode/spdlog kerberos native-watchdog @vscode/deviceid @parcel/watcher"
npm_config_nodedir="$NODEDIR" npm rebuild node-pty @vscode/spdlog kerberos native-watchdog @vscode/deviceid @parcel/watcher >>"$LOG" 2>&1 \
  || say "  (npm rebuild reported an error; checking the built modules)"
for m in node-pty @vscode/spdlog kerberos native-watchdog @vscode/deviceid @parcel/watcher; do
  node -e "require('$m')" >>"$LOG" 2>&1 || { tail -n 40 "$LOG" >&2; die "native module does not load: $m (log: $LOG)"; }
done
say "  native modules load: node-pty @vscode/spdlog kerberos native-watchdog @vscode/deviceid @parcel/watcher"
ln -sfn node_modules node_modules.asar
ln -sfn code-linux.sh bin/remote-cli/code-server
ln -sfn browser-linux.sh bin/helpers/browser.sh
say "  symlinks: node_modules.asar, bin/remote-cli/code-server, bin/helpers/browser.sh"
cd "$VS/extensions"
run "lib/vscode/extensions: npm install --omit=dev" npm install --omit=dev

cd "$DEST"
"$DEST/node_modules/.bin/code-server" --version >>"$LOG" 2>&1 || { tail -n 20 "$LOG" >&2; die "code-server --version failed"; }
echo "$VERSION rev$RECIPE_REV" > "$MARKER"
say "code-server $VERSION installed in $(( $(date +%s) - start )) s ($(du -sh "$DEST" | cut -f1))"
echo "CODE_SERVER_ROOT=$DEST"
