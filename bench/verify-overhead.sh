#!/usr/bin/env bash
# Warm verification against the developer's own incremental build, in the same run.
#
# The crate: semver (38 tests; its dev-dependency criterion comes from crates.io), from the
# cargo registry (fetched through a throw-away crate when missing). Both sides start from the
# same commit and make the same one-line edit to src/lib.rs:
#
#   developer:  a checkout whose target/ is warm at the commit; apply the edit; `cargo test`
#   cordon:     after one trusted verification of the commit (the warm-up, timed once),
#               `cordon verify --patch one-line.diff` (workspace, patch, fetch, fmt, build,
#               test, clippy in the sandbox, report, recorded)
#
# Also, in the same loop: the developer running the same five stages directly (incremental),
# and cordon verify with --stages cargo-build,cargo-test (the work `cargo test` does, plus
# building the benches). All four alternate RUNS times (default 10); wall-time and CPU-time
# medians (perf stat task-clock, children included), the ratios to `cargo test` and each
# command's exit statuses are printed (`--stages` exits 1: the stages not run count as not
# passed).
# Usage: bench/verify-overhead.sh            (needs git, cargo with network for crates.io)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --quiet --release -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="$root/target/release/cordon"
fi
runs="${RUNS:-10}"
# The developer builds with Cargo's defaults (incremental debug builds), whatever this shell
# says; cordon's detected stages turn incremental compilation off themselves.
unset CARGO_INCREMENTAL
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/semver-1.* 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$src" ]; then
  cargo new -q --lib "$work/fetch" && (cd "$work/fetch" && cargo add -q semver@1 && cargo fetch -q)
  src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/semver-1.* | sort -V | tail -1)
fi
echo "crate: $src"
repo="$work/repo"
cp -r "$src" "$repo"
rm -f "$repo/.cargo_vcs_info.json"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m semver
cp -r "$repo" "$work/edit"
sed -i '1i // a one-line change' "$work/edit/src/lib.rs"
git -C "$work/edit" diff > "$work/one-line.diff"
rm -rf "$work/edit"
cp -r "$repo" "$work/dev"
export CORDON_HOME="$work/home"

# Wall time in ms, and CPU time (task-clock of the command and its children, steadier than
# wall time on a shared machine) when perf is there.
have_perf=$(command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1 && echo 1 || true)
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $((($(date +%s%N) - s) / 1000000)); }
measure() { # name command...: appends "wall cpu exit-status" to $work/name.txt
  local name=$1; shift
  local s rc=0; s=$(date +%s%N)
  if [ -n "$have_perf" ]; then
    perf stat -x, -e task-clock -o "$work/perf.txt" "$@" >/dev/null 2>&1 || rc=$?
  else
    "$@" >/dev/null 2>&1 || rc=$?
  fi
  local wall=$((($(date +%s%N) - s) / 1000000))
  local cpu; cpu=$( [ -n "$have_perf" ] && grep task-clock "$work/perf.txt" | cut -d, -f1 | cut -d. -f1 || echo 0)
  echo "$wall $cpu $rc" >> "$work/$name.txt"
}
echo "developer's cold cargo test: $(cd "$work/dev" && ms cargo test) ms"
echo "cordon verify of the commit (trusted build, cold, makes the cache): $(ms "$CORDON" verify --repo "$repo") ms"
"$CORDON" verify --repo "$repo" --patch "$work/one-line.diff" --explain | sed -n '/Build caches:/,$p'

# The same stages cordon runs, run directly by the developer (incremental, on the host).
STAGES='cargo fetch -q && cargo fmt --all --check; cargo build -q --offline --all-targets && cargo test -q --offline && cargo clippy -q --offline --all-targets -- -D warnings; true'
for name in dev stages cordon cordon-bt; do : > "$work/$name.txt"; done
reset_dev() { # the developer's checkout back at the commit, built (untimed), then the same edit
  (cd "$work/dev" && git checkout -q src/lib.rs && cargo test -q >/dev/null 2>&1 \
    && cargo clippy -q --all-targets >/dev/null 2>&1; git apply "$work/one-line.diff")
}
for _ in $(seq 1 "$runs"); do
  reset_dev
  (cd "$work/dev" && measure dev cargo test)
  reset_dev
  (cd "$work/dev" && measure stages sh -c "$STAGES")
  measure cordon "$CORDON" verify --repo "$repo" --patch "$work/one-line.diff"
  measure cordon-bt "$CORDON" verify --repo "$repo" --patch "$work/one-line.diff" --stages cargo-build,cargo-test
done
python3 - "$work" <<'PY'
import statistics, sys
w = sys.argv[1]
def load(name):
    rows = [tuple(int(x) for x in line.split()) for line in open(f"{w}/{name}.txt")]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
names = {
    "dev": "developer: incremental cargo test",
    "stages": "developer: the five stages directly",
    "cordon": "cordon verify --patch (warm, all stages)",
    "cordon-bt": "cordon verify --patch --stages build,test",
}
res = {k: load(k) for k in names}
base_w, base_c = statistics.median(res["dev"][0]), statistics.median(res["dev"][1])
for k, label in names.items():
    wall, cpu, rcs = res[k]
    mw, mc = statistics.median(wall), statistics.median(cpu)
    ratio_c = f"{mc / base_c:5.2f}" if base_c else "  n/a"
    codes = ",".join(f"{c}x{rcs.count(c)}" for c in sorted(set(rcs)))
    print(f"{label:45s} wall median {mw:6.0f} ms (min {min(wall):5d})  cpu median {mc:6.0f} ms   ratio to cargo test: wall {mw / base_w:5.2f}  cpu {ratio_c}  exit {codes}")
PY
