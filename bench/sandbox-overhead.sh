#!/usr/bin/env bash
# Sandbox start-up overhead: `cordon run -- /bin/true` with the full default policy (user,
# mount, pid, ipc, uts, cgroup and net namespaces, pivot_root into a constructed root,
# Landlock, seccomp, no capabilities) against bubblewrap doing less, and bare /bin/true, in
# one hyperfine run. `cordon run --no-sandbox` is measured too, to separate the CLI's own cost
# from the sandbox's, next to the least any program that runs another pays (examples/
# spawn_floor.rs of cordon-exec: start, `Command::status`, exit, built the same way). Needs
# hyperfine and bubblewrap (apt-get install -y hyperfine bubblewrap).
#
#   bench/sandbox-overhead.sh         # builds release, prints the medians for BENCH_RESULTS.md
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon -p cordon-sandbox-init
cargo build --release -q -p cordon-exec --example spawn_floor
RELEASE=${CARGO_TARGET_DIR:-$PWD/target}/$(rustc -vV | sed -n "s/^host: //p")/release
CORDON=$RELEASE/cordon
FLOOR=$RELEASE/examples/spawn_floor
RUNS=${RUNS:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CORDON_HOME=$work/home

"$CORDON" doctor >/dev/null || { echo "cordon doctor: this host cannot sandbox" >&2; exit 1; }
hyperfine -N --warmup 30 --runs "$RUNS" --export-json "$work/bench.json" \
  "$CORDON run --no-record -- /bin/true" \
  "$CORDON run --no-sandbox --no-record -- /bin/true" \
  "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true" \
  "/bin/true" \
  "$CORDON run -- /bin/true" \
  "$FLOOR /bin/true"
python3 - "$work/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
for x in r:
    print(f"{x['command']:<90} median {x['median'] * 1000:6.2f} ms  mean {x['mean'] * 1000:6.2f} ms  min {x['min'] * 1000:6.2f} ms")
c, n, b, t, rec, floor = (x["median"] for x in r)
print(f"cordon / bwrap median ratio: {c / b:.2f}; recorded / bwrap: {rec / b:.2f}; the sandbox's own share (sandboxed - --no-sandbox): {(c - n) * 1000:.2f} ms")
print(f"over /bin/true: --no-sandbox {(n - t) * 1000:+.2f} ms, spawn_floor {(floor - t) * 1000:+.2f} ms; --no-sandbox over spawn_floor {(n - floor) * 1000:+.2f} ms")
PY
