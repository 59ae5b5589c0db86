#!/usr/bin/env bash
# Sandboxed start against bubblewrap, idle and beside one busy CPU, in one hyperfine run each:
# `cordon run -- /bin/true` (recorded in the run history, the default), `--no-record` and
# the landlock tier (`--isolation landlock`),
# against `bwrap --unshare-all` doing less (no Landlock, no seccomp, no constructed root) and
# bare `/bin/true`. The busy case pins `yes > /dev/null` to CPU 0 while hyperfine runs.
# Needs hyperfine and bubblewrap (apt-get install -y hyperfine bubblewrap).
#
#   bench/sandbox-start.sh                     # builds release, prints medians and ratios
#   OTHER=/path/to/another/cordon bench/sandbox-start.sh   # adds another build to both runs
#   RUNS=500 bench/sandbox-start.sh
set -euo pipefail
source "$(dirname "$0")/sandbox-setup.sh"

commands=(
  "$CORDON run -- /bin/true"
  "$CORDON run --no-record -- /bin/true"
  "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true"
  "/bin/true"
  "$CORDON run --isolation landlock -- /bin/true"
)
if [ -n "${OTHER:-}" ]; then
  commands+=("$OTHER run -- /bin/true")
fi

measure() {
  local name=$1
  hyperfine -N --warmup 30 --runs "$RUNS" --export-json "$work/$name.json" "${commands[@]}" >/dev/null
  python3 - "$work/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
med = [x["median"] * 1000 for x in r]
rec, norec, bwrap, true = med[:4]
print(f"{sys.argv[2]}: cordon run (recorded) {rec:.2f} ms, --no-record {norec:.2f} ms, "
      f"bwrap {bwrap:.2f} ms, /bin/true {true:.2f} ms (medians of {len(r[0]['times'])})")
print(f"{sys.argv[2]}: recorded / bwrap = {rec / bwrap:.2f}; --no-record / bwrap = {norec / bwrap:.2f}")
print(f"{sys.argv[2]}: landlock tier (recorded) {med[4]:.2f} ms = {med[4] / bwrap:.2f} x bwrap, "
      f"{med[4] / rec:.2f} x the namespace tier")
if len(med) > 5:
    print(f"{sys.argv[2]}: other build (recorded) {med[5]:.2f} ms = {med[5] / bwrap:.2f} x bwrap")
PY
}

measure idle
start_busy
measure busy
