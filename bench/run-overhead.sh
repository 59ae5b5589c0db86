#!/usr/bin/env bash
# cordon run --no-sandbox: spawn overhead against bare exec, and capture throughput of a flood
# against a plain pipe, with cordon's peak RSS. Needs hyperfine (apt-get install hyperfine).
#
#   bench/run-overhead.sh            # builds release, prints the figures for BENCHMARKS.md
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon
CORDON=$PWD/target/release/cordon
SECONDS_FLOOD=${SECONDS_FLOOD:-3}
# A throw-away run history, so the benchmark does not fill the user's.
export CORDON_HOME
CORDON_HOME=$(mktemp -d)
trap 'rm -rf "$CORDON_HOME"' EXIT

echo "== spawn overhead: cordon run --no-sandbox -- /bin/true vs /bin/true =="
hyperfine -N --warmup 50 --runs 500 --export-json /tmp/cordon-bench-spawn.json \
  "$CORDON run --no-sandbox --no-record -- /bin/true" \
  "$CORDON run --no-sandbox -- /bin/true" \
  "/bin/true"
python3 - <<'PY'
import json
r = json.load(open("/tmp/cordon-bench-spawn.json"))["results"]
c, rec, b = (x["median"] * 1000 for x in r)
print(f"median bounds only {c:.2f} ms, with recording {rec:.2f} ms, bare {b:.2f} ms; "
      f"overhead {c - b:.2f} ms (bounds), {rec - b:.2f} ms (bounds + history)")
PY

echo "== flood: yes for ${SECONDS_FLOOD}s =="
# Each line: bytes moved in the window, and the peak RSS (KiB) of the measured process tree's
# top process (cordon, or the shell running the pipe).
python3 - "$CORDON" "$SECONDS_FLOOD" <<'PY'
import json, resource, subprocess, sys
cordon, secs = sys.argv[1], sys.argv[2]

def measure(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1]), before

def rss_of(argv):
    # Run argv directly (no shell) so ru_maxrss is that process's own peak.
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = __import__("os").wait4(p.pid, 0)
    return out, ru.ru_maxrss

results = {}
for _ in range(3):
    pipe_bytes, _ = measure(f"timeout {secs} yes | cat | wc -c")
    cordon_pass, _ = measure(f"{cordon} run --no-sandbox --no-record -- timeout {secs} yes | wc -c")
    out, rss = rss_of([cordon, "run", "--no-sandbox", "--no-record", "--json", "--", "timeout", secs, "yes"])
    cordon_json = json.loads(out)["stdout"]["bytes_total"]
    for k, v in (("pipe", pipe_bytes), ("passthrough", cordon_pass), ("json", cordon_json), ("rss_kib", rss)):
        results.setdefault(k, []).append(v)
med = {k: sorted(v)[1] for k, v in results.items()}
mb = lambda b: b / int(secs) / 1e6
print(f"yes | cat | wc -c             : {mb(med['pipe']):8.0f} MB/s (baseline)")
print(f"cordon run -- yes | wc -c     : {mb(med['passthrough']):8.0f} MB/s  ratio {med['passthrough'] / med['pipe']:.2f}")
print(f"cordon run --json -- yes      : {mb(med['json']):8.0f} MB/s  ratio {med['json'] / med['pipe']:.2f}")
print(f"cordon peak RSS during --json flood of {med['json'] / 1e9:.1f} GB: {med['rss_kib'] / 1024:.1f} MiB")
PY
