#!/usr/bin/env bash
# `cordon verify` on published packages it has never seen (issue 33): two crates from crates.io,
# two sdists from PyPI, one npm package, each committed as it was published into a fresh git
# repository on `main`. For each:
#
#   verdicts   the baseline, then three faults injected as uncommitted edits of the checkout
#              (what a developer or an agent has): a semantic bug (must block, in a test stage),
#              a syntax error (must block, as a compile failure) and an unused variable (must
#              pass; where a lint stage runs, as a new finding of that optional stage);
#   cold/warm  the first verification (a trusted build: dependencies fetched, everything
#              built) against the second of the same, unchanged commit (goal: ≥ 3× faster);
#   native     the project's own test command in a developer's warm checkout against a warm
#              `cordon verify` of the unchanged commit, alternating in one hyperfine run
#              (goals: ≤ 1.3× for the crates and sdists, ≤ 2× for the npm package);
#   one line   for the small crate with real dependencies (serde_path_to_error: serde, itoa;
#              serde_derive, serde_json for its tests): a one-line edit, then the developer's
#              incremental `cargo test` against `cordon verify` of the edited checkout, in one
#              hyperfine run (goal: ≤ 1.5×).
#
# Prints a Markdown table (also in $OUT, default bench-verify-real-projects.md in the current
# directory). Usage: RUNS=10 bench/verify-real-projects.sh. Needs git, cargo, python3 with
# pytest, node/npm, hyperfine, curl, and the registries (crates.io, PyPI, npm); CORDON names a
# cordon binary (default: a release build of this checkout, with its helper).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --quiet --release -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="$root/target/release/cordon"
fi
runs="${RUNS:-10}"
out="${OUT:-$PWD/bench-verify-real-projects.md}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export CORDON_HOME="$work/home"
# Node parses NODE_EXTRA_CA_CERTS at every start where it is set; the sandbox never has it.
unset NODE_EXTRA_CA_CERTS
for tool in git cargo python3 npm hyperfine curl jq; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing" >&2; exit 1; }
done

say() { printf '== %s\n' "$*" >&2; }
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; echo $((($(date +%s%N) - s) / 1000000)); }

# --- fetching: each package as published ---------------------------------------------------
fetch_crate() { # name version -> the directory
  local dir="$work/src/$1"
  mkdir -p "$dir"
  curl -fsSL "https://static.crates.io/crates/$1/$1-$2.crate" | tar xz -C "$dir" --strip-components=1
  echo "$dir"
}
fetch_sdist() { # name version
  local dir="$work/src/$1"
  mkdir -p "$dir" "$work/dl"
  python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$work/dl" "$1==$2" >&2
  tar xzf "$work/dl/$1-$2.tar.gz" -C "$dir" --strip-components=1
  echo "$dir"
}
fetch_npm() { # name version
  local dir="$work/src/$1"
  mkdir -p "$dir"
  (cd "$work" && npm pack --silent "$1@$2" >/dev/null)
  tar xzf "$work/$1-$2.tgz" -C "$dir" --strip-components=1
  echo "$dir"
}
# A repository of `src` on main, and a developer's copy of it.
commit() { # src name
  local repo="$work/repo/$2"
  mkdir -p "$work/repo" "$work/dev"
  cp -r "$1" "$repo"
  printf 'target/\nnode_modules/\n__pycache__/\n.pytest_cache/\n' >> "$repo/.gitignore"
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "$2 as published"
  cp -r "$repo" "$work/dev/$2"
  echo "$repo"
}

# --- verdicts --------------------------------------------------------------------------------
# verify REPO NAME -> the report in $work/NAME.json, the wall time in ms on stdout
verify() {
  local s rc=0
  s=$(date +%s%N)
  (cd "$1" && "$CORDON" verify --json >"$work/$2.json" 2>"$work/$2.err") || rc=$?
  echo $((($(date +%s%N) - s) / 1000000))
}
# summary NAME: "PASSED" / "BLOCKED by STAGE (category): reason" / "ERROR: reason", and the
# optional stages that failed with their new findings.
summary() {
  jq -r '
    (if .overall == "pass" then "PASSED"
     elif .overall == "fail" then "BLOCKED by \(.failure.stage) (\(.failure.category)): \(.failure.reason)"
     else "ERROR: \(.failure.reason // "?")" end)
    + ([.stages[] | select(.required | not) | select(.status != "pass" and .status != "skipped")
        | " ⚠ \(.name): \(.baseline.new // (.findings | length)) new"] | join(""))' "$work/$1.json" \
    | cut -c1-170 | sed 's/|/\\|/g'
}
# check NAME WANT: WANT is pass | test | compile | lint (pass with a new lint finding)
check() {
  local got
  got=$(jq -r '
    if .overall == "pass" then
      (if any(.stages[]; (.required | not) and .status == "fail" and (.baseline.new // 0) > 0)
       then "lint" else "pass" end)
    elif .overall == "fail" then .failure.category else "error" end' "$work/$1.json")
  if [ "$got" = "$2" ] || { [ "$2" = "pass" ] && [ "$got" = "lint" ]; }; then echo "right"; else echo "**WRONG** (wanted $2, got $got)"; fi
}

# fault REPO NAME KIND WANT FILE EDIT: EDIT (a command run in REPO) changes the checkout;
# verifies; restores.
fault() {
  local repo=$1 name=$2 kind=$3 want=$4
  shift 4
  (cd "$repo" && "$@")
  local t
  t=$(verify "$repo" "$name-$kind")
  git -C "$repo" checkout -q -- .
  echo "| $name | $kind | $(summary "$name-$kind") | $(check "$name-$kind" "$want") | ${t} ms |" >>"$work/faults.md"
}

# --- timing ----------------------------------------------------------------------------------
# median NAME (of hyperfine's $work/NAME.json), in ms, per command
medians() { jq -r '[.results[].median * 1000 | round] | @tsv' "$work/$1.hf.json"; }

# native NAME REPO DEV NATIVE-COMMAND: hyperfine of the developer's command in DEV against
# `cordon verify` of the unchanged commit in REPO.
native() {
  hyperfine -N --style none --warmup 1 --runs "$runs" --export-json "$work/$1.hf.json" \
    --command-name native --command-name cordon \
    "sh -c 'cd $3 && $4'" "sh -c 'cd $2 && $CORDON verify'" >/dev/null 2>&1 || {
      say "hyperfine failed for $1 (a command exited non-zero)"; return 1; }
}

row() { # name native-ms cordon-ms cold-ms warm-ms goal
  local ratio cw
  ratio=$(awk -v a="$3" -v b="$2" 'BEGIN { printf "%.2f", a / b }')
  cw=$(awk -v a="$4" -v b="$5" 'BEGIN { printf "%.1f", a / b }')
  echo "| $1 | $2 ms | $3 ms | **${ratio}×** (goal ≤ $6×) | $4 ms | $5 ms | **${cw}×** |" >>"$work/times.md"
}

printf '| package | fault | verdict | right? | verify |\n|---|---|---|---|---:|\n' >"$work/faults.md"
printf '| package | native (median) | warm verify (median) | warm / native | cold verify | 2nd verify | cold / 2nd |\n|---|---:|---:|---:|---:|---:|---:|\n' >"$work/times.md"

# project NAME SRC NATIVE GOAL PREPARE-DEV: commits SRC, prepares the developer's copy, runs
# baseline (cold, then warm), the native comparison. Faults are run by the caller.
project() {
  local name=$1 src=$2 cmd=$3 goal=$4 prep=$5 repo cold warm
  repo=$(commit "$src" "$name")
  say "$name: prepare the developer's copy ($prep)"
  (cd "$work/dev/$name" && sh -c "$prep" >/dev/null 2>&1)
  say "$name: cold verify"
  cold=$(verify "$repo" "$name-cold")
  echo "| $name | baseline | $(summary "$name-cold") | $(check "$name-cold" pass) | ${cold} ms |" >>"$work/faults.md"
  say "$name: second verify"
  warm=$(verify "$repo" "$name-warm")
  echo "| $name | baseline, again | $(summary "$name-warm") | $(check "$name-warm" pass) | ${warm} ms |" >>"$work/faults.md"
  say "$name: native vs warm, $runs runs each"
  if native "$name" "$repo" "$work/dev/$name" "$cmd"; then
    read -r n c < <(medians "$name")
    row "$name" "$n" "$c" "$cold" "$warm" "$goal"
  fi
  echo "$repo"
}

# --- the packages ------------------------------------------------------------------------------
say "fetching"
semver_src=$(fetch_crate semver 1.0.26)          # benches need nightly (#![feature(test)])
sptoe_src=$(fetch_crate serde_path_to_error 0.1.17) # serde, itoa; serde_json in tests
six_src=$(fetch_sdist six 1.17.0)                 # setup.cfg [tool:pytest], test_six.py
idna_src=$(fetch_sdist idna 3.10)                 # pyproject.toml, tests/test_*.py
minimist_src=$(fetch_npm minimist 1.2.6)          # tap, no lockfile

cargo_prep='cargo test -q'
semver=$(project semver "$semver_src" 'cargo test -q' 1.3 "$cargo_prep" | tail -1)
fault "$semver" semver semantic test sed -i '0,/if ver.major != cmp.major {/s//if ver.major == cmp.major {/' src/eval.rs
fault "$semver" semver syntax compile sh -c 'echo "pub fn cordon_broken( {" >> src/lib.rs'
fault "$semver" semver unused lint sh -c 'printf "\npub fn cordon_probe() -> u32 {\n    let unused = 1;\n    2\n}\n" >> src/lib.rs'

sptoe=$(project serde_path_to_error "$sptoe_src" 'cargo test -q' 1.3 "$cargo_prep" | tail -1)
fault "$sptoe" serde_path_to_error semantic test sed -i 's/separator = "\.";/separator = "\/";/' src/path.rs
fault "$sptoe" serde_path_to_error syntax compile sh -c 'echo "pub fn cordon_broken( {" >> src/lib.rs'
fault "$sptoe" serde_path_to_error unused lint sh -c 'printf "\npub fn cordon_probe() -> u32 {\n    let unused = 1;\n    2\n}\n" >> src/lib.rs'

py_cmd='python3 -m pytest -q -p no:cacheprovider'
six=$(project six "$six_src" "$py_cmd" 1.3 true | tail -1)
fault "$six" six semantic test sed -i '0,/return s.encode("latin-1")/s//return s.encode("utf-8")/' six.py
fault "$six" six syntax compile sh -c 'echo "def cordon_broken(:" >> six.py'
fault "$six" six unused pass sh -c 'printf "\n\ndef cordon_probe():\n    unused = 1\n    return 2\n" >> six.py'

idna=$(project idna "$idna_src" "$py_cmd" 1.3 true | tail -1)
# (label[2:4] alone is no fault: the test's "aa--" also ends with a hyphen and still raises.)
fault "$idna" idna semantic test sed -i 's/    if label\[0\] == "-" or label\[-1\] == "-":/    if label[0] == "-":/' idna/core.py
fault "$idna" idna syntax compile sh -c 'echo "def cordon_broken(:" >> idna/core.py'
fault "$idna" idna unused pass sh -c 'printf "\n\ndef cordon_probe():\n    unused = 1\n    return 2\n" >> idna/core.py'

minimist=$(project minimist "$minimist_src" 'npm test --silent' 2 'npm install --no-audit --no-fund --silent; rm -f package-lock.json' | tail -1)
# (isNumber's first line alone is no fault: the regular expressions below it still match.)
fault "$minimist" minimist semantic test sed -i 's/^function isNumber (x) {$/function isNumber (x) {\n    return false;/' index.js
fault "$minimist" minimist syntax compile sh -c 'echo "function cordonBroken( {" >> index.js'
fault "$minimist" minimist unused pass sh -c 'printf "\nfunction cordonProbe () { var unused = 1; return 2; }\n" >> index.js'

# --- the one-line patch of the small crate with real dependencies ------------------------------
say "serde_path_to_error: one-line edit, incremental cargo test vs cordon verify, $runs runs each"
dev="$work/dev/serde_path_to_error"
edit='echo "// one more line" >> src/lib.rs'
hyperfine -N --style none --warmup 1 --runs "$runs" --export-json "$work/one-line.hf.json" \
  --command-name 'cargo test' --command-name 'cordon verify' \
  --prepare "sh -c 'cd $dev && $edit'" "sh -c 'cd $dev && cargo test -q'" \
  --prepare "sh -c 'cd $sptoe && $edit'" "sh -c 'cd $sptoe && $CORDON verify'" >/dev/null 2>&1
git -C "$sptoe" checkout -q -- .
read -r dev_ms cordon_ms < <(jq -r '[.results[].median * 1000 | round] | @tsv' "$work/one-line.hf.json")

{
  echo "Verdicts (each fault an uncommitted edit of the checkout; \`verify\` is its wall time):"
  echo
  cat "$work/faults.md"
  echo
  echo "Unchanged commit: the project's own test command in a warm developer's checkout against \`cordon verify\` (warm), medians of $runs alternating runs; cold is the first verification (a trusted build), 2nd the next one of the same commit:"
  echo
  cat "$work/times.md"
  echo
  echo "One-line edit of serde_path_to_error (medians of $runs alternating runs): incremental \`cargo test\` $dev_ms ms, \`cordon verify\` $cordon_ms ms: **$(awk -v a="$cordon_ms" -v b="$dev_ms" 'BEGIN { printf "%.2f", a / b }')×** (goal ≤ 1.5×)."
  echo
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs."
} | tee "$out"
