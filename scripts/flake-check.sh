#!/usr/bin/env bash
# The flake benchmark of the editor tiers (issue 34): runs the UI tier and the vsix tier N times
# on one clean clone of the committed HEAD and prints the passes, the failures by test name and
# the slowest tests. A benchmark, never a CI step (npm test does not run it).
#
#   bash scripts/flake-check.sh N [--tiers ui,vsix] [--npm-ci] [--out DIR] [--keep]
#
#   N           how many runs (each run: the UI tier, then the vsix tier)
#   --tiers     which tiers, comma-separated (default ui,vsix)
#   --npm-ci    `npm ci` in the clone (a truly clean install: slow, needs the registry); the
#               default links the clone's node_modules (and webview-ui/node_modules) to this
#               checkout's, which is what a CI cache gives too; the summary says which
#   --out DIR   where each run's evidence goes (default test-results/flake-check/<time>/)
#   --keep      keep the clone (default: deleted at the end)
#
# Uncommitted changes are not in the clone (it is HEAD, as the vsix tier packs it). The machine's
# load is the point: run it beside whatever else the machine does, and read the figures with it.
# Each run's tests.json, failures/ (screenshot, DOM, actions, code-server log) and output are kept
# under the output folder, run-K/<tier>/.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

usage() {
  echo "usage: bash scripts/flake-check.sh N [--tiers ui,vsix] [--npm-ci] [--out DIR] [--keep]" >&2
  exit 2
}

[ $# -ge 1 ] || usage
runs=$1
shift
case "$runs" in '' | *[!0-9]*) echo "flake-check: N must be a positive whole number, got '$runs'" >&2; usage ;; esac
[ "$runs" -ge 1 ] || { echo "flake-check: N must be at least 1" >&2; usage; }
tiers=ui,vsix
npm_ci=0
keep=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tiers) tiers=${2:-}; shift 2 || usage ;;
    --npm-ci) npm_ci=1; shift ;;
    --keep) keep=1; shift ;;
    --out) out=${2:-}; shift 2 || usage ;;
    *) echo "flake-check: unknown option '$1'" >&2; usage ;;
  esac
done
for t in ${tiers//,/ }; do
  case "$t" in ui | vsix) ;; *) echo "flake-check: unknown tier '$t' (ui, vsix)" >&2; usage ;; esac
done
[ -n "$out" ] || out="$repo/test-results/flake-check/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
out=$(cd "$out" && pwd)

head=$(git rev-parse HEAD) || { echo "flake-check: not a git checkout" >&2; exit 1; }
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "flake-check: note: uncommitted changes are not in the clone (it is HEAD $head)" >&2
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/agent-lab-flake-XXXXXX")
clone="$scratch/clone"
cleanup() {
  if [ "$keep" = 1 ]; then echo "flake-check: clone kept: $clone"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'echo "flake-check: interrupted" >&2; exit 130' INT TERM

t_all=$(date +%s)
git clone --quiet --no-hardlinks "$repo" "$clone" || { echo "flake-check: git clone failed" >&2; exit 1; }
git -C "$clone" checkout --quiet --detach "$head" || { echo "flake-check: $head is not in the clone" >&2; exit 1; }
if [ "$npm_ci" = 1 ]; then
  deps="npm ci in the clone"
  (cd "$clone" && npm ci --no-audit --no-fund >"$out/npm-ci.log" 2>&1) || { echo "flake-check: npm ci failed (see $out/npm-ci.log)" >&2; exit 1; }
else
  deps="node_modules linked to $(readlink -f "$repo/node_modules")"
  [ -d "$repo/node_modules" ] || { echo "flake-check: $repo/node_modules is missing: run npm ci here, or pass --npm-ci" >&2; exit 1; }
  ln -s "$(readlink -f "$repo/node_modules")" "$clone/node_modules"
  [ -d "$repo/webview-ui/node_modules" ] && ln -s "$(readlink -f "$repo/webview-ui/node_modules")" "$clone/webview-ui/node_modules"
fi
# The UI tier runs dist/: built once here, then every run skips the build (AGENT_LAB_SKIP_BUILD=1).
(cd "$clone" && npm run --silent build >"$out/build.log" 2>&1) || { echo "flake-check: npm run build failed in the clone (see $out/build.log)" >&2; exit 1; }

echo "flake-check: $runs run(s) of the ${tiers//,/ and } tier(s) on a clean clone of $head ($deps)"
echo "flake-check: evidence in $out"
for ((k = 1; k <= runs; k++)); do
  line="run $k/$runs:"
  for t in ${tiers//,/ }; do
    dest="$out/run-$k/$t"
    mkdir -p "$dest"
    start=$(date +%s)
    if [ "$t" = ui ]; then
      (cd "$clone" && AGENT_LAB_SKIP_BUILD=1 bash scripts/test-ui.sh >"$dest/output.log" 2>&1)
    else
      (cd "$clone" && bash scripts/test-vsix.sh >"$dest/output.log" 2>&1)
    fi
    rc=$?
    secs=$(($(date +%s) - start))
    echo "$rc $secs" >"$dest/status"
    # What the tier left: its per-test lines and the failures' evidence (screenshots are kept only for failures).
    [ -f "$clone/test-results/$t/tests.json" ] && cp "$clone/test-results/$t/tests.json" "$dest/"
    [ -d "$clone/test-results/$t/failures" ] && cp -r "$clone/test-results/$t/failures" "$dest/"
    counts=$(grep -E '^\s+[0-9]+ (passing|failing|pending)' "$dest/output.log" | tr -s ' ' | tr '\n' ',' | sed 's/^ //; s/,$//; s/, /, /g')
    if [ "$rc" = 0 ]; then line="$line $t green (${counts:-?}) in ${secs}s;"; else line="$line $t RED (exit $rc; ${counts:-no report}) in ${secs}s;"; fi
  done
  echo "$line"
done

# The summary: runs green per tier, failures by test, the slowest tests (from each run's tests.json).
node - "$out" "$runs" "$tiers" "$(($(date +%s) - t_all))" <<'EOF'
const fs = require('fs');
const path = require('path');
const [out, runs, tiers, wall] = process.argv.slice(2);
const n = Number(runs);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : 0; };
console.log(`\nflake-check summary (${n} run(s), ${wall} s wall in all)`);
for (const tier of tiers.split(',')) {
  let green = 0;
  const secs = [];
  const failed = new Map();
  const times = new Map();
  const noReport = [];
  for (let k = 1; k <= n; k++) {
    const dir = path.join(out, `run-${k}`, tier);
    const [rc, s] = fs.readFileSync(path.join(dir, 'status'), 'utf8').trim().split(' ').map(Number);
    secs.push(s);
    if (rc === 0) green++;
    const file = path.join(dir, 'tests.json');
    if (!fs.existsSync(file)) {
      noReport.push(k);
      continue;
    }
    for (const t of JSON.parse(fs.readFileSync(file, 'utf8'))) {
      if (t.state === 'failed') failed.set(t.title, [...(failed.get(t.title) ?? []), k]);
      if (t.state === 'passed') times.set(t.title, [...(times.get(t.title) ?? []), t.ms]);
    }
    if (rc !== 0 && ![...failed.values()].some((ks) => ks.includes(k))) noReport.push(k);
  }
  console.log(`\n${tier}: ${green} of ${n} runs green; a run took ${Math.min(...secs)}–${Math.max(...secs)} s (median ${median(secs)} s)`);
  if (failed.size === 0 && noReport.length === 0) console.log('  failures by test: none');
  else {
    console.log('  failures by test:');
    for (const [title, ks] of [...failed].sort((a, b) => b[1].length - a[1].length)) console.log(`    ${ks.length}x  ${title}  (run ${ks.join(', ')})`);
    for (const k of noReport) console.log(`    run ${k}: the tier failed without a failing test (did not start, or was killed): see run-${k}/${tier}/output.log`);
  }
  const slow = [...times].map(([title, ms]) => ({ title, med: median(ms), max: Math.max(...ms) })).sort((a, b) => b.med - a.med).slice(0, 5);
  console.log('  slowest tests (median, max over the green runs of each test):');
  for (const t of slow) console.log(`    ${(t.med / 1000).toFixed(1)} s  ${(t.max / 1000).toFixed(1)} s  ${t.title}`);
}
console.log(`\nevidence: ${out}/run-K/<tier>/ (output.log, tests.json, failures/)`);
EOF
