#!/usr/bin/env bash
# What recording a run in the history costs (issue 16, "Recording"): in one hyperfine run,
# `cordon run --no-sandbox --no-record -- /bin/true` (the baseline) against the same recorded,
# the sandboxed run recorded and not, bwrap and bare /bin/true; then user-space instruction
# counts with callgrind (deterministic on a noisy machine). Each store is a throw-away
# CORDON_HOME that the warm-up runs fill, so the figures include the amortised checkpoints.
# Needs hyperfine, valgrind, bubblewrap (apt-get install -y hyperfine valgrind bubblewrap).
#
#   bench/record-overhead.sh                 # builds release, prints medians and ratios
#   BEFORE=/path/to/old/cordon bench/record-overhead.sh   # adds an A/B against another build
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon
CORDON=${CARGO_TARGET_DIR:-$PWD/target}/release/cordon
RUNS=${RUNS:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CORDON_HOME=$work/home

commands=(
  "$CORDON run --no-sandbox --no-record -- /bin/true"
  "$CORDON run --no-sandbox -- /bin/true"
  "$CORDON run --no-record -- /bin/true"
  "$CORDON run -- /bin/true"
  "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true"
  "/bin/true"
)
if [ -n "${BEFORE:-}" ]; then
  commands+=("env CORDON_HOME=$work/before-home $BEFORE run --no-sandbox -- /bin/true")
fi
hyperfine -N --warmup 30 --runs "$RUNS" --export-json "$work/bench.json" "${commands[@]}"
python3 - "$work/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
med = [x["median"] * 1000 for x in r]
for x, m in zip(r, med):
    print(f"{m:7.2f} ms  {x['command']}")
base, rec, sb, sbrec, bwrap = med[:5]
print(f"recording adds {rec - base:.2f} ms unsandboxed ({rec / base:.2f}x), "
      f"{sbrec - sb:.2f} ms sandboxed; recorded sandboxed / bwrap = {sbrec / bwrap:.2f}")
if len(med) > 6:
    print(f"before: recording added {med[6] - base:.2f} ms (run through env: +exec of env)")
PY

echo "== user-space instructions (callgrind, 3 runs each, store already warm) =="
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for label in no-record record; do
  flag=()
  [ "$label" = no-record ] && flag=(--no-record)
  for _ in 1 2 3; do
    printf '%s %s\n' "$label" "$(count "$CORDON" run --no-sandbox "${flag[@]}" -- /bin/true)"
  done
done
if [ -n "${BEFORE:-}" ]; then
  for _ in 1 2 3; do
    printf 'before-record %s\n' \
      "$(CORDON_HOME=$work/before-home count "$BEFORE" run --no-sandbox -- /bin/true)"
  done
fi
