#!/usr/bin/env bash
# What a session's layer depth costs a user (issue 40: "flatten past a depth you measure to
# matter"). One 3,000-file repository; sessions whose trees stand on 1, 2, 4, 8, 16 and 32
# frozen layers (forks of forks: before each fork the chain's tip edits a file at the top and
# one in a directory of the tree, so each layer holds a few files and directories, as an
# agent's would). For each depth, in the same run:
#   start: `cordon session exec ID --read-only -- /bin/true` (the overlay's mount and the
#          sandbox's start);
#   find:  `find . -type f | wc -l` read-only (a lookup of every name through every layer);
#   read:  `git status --porcelain` then `cat` of every file, read-only.
# Then the merge's own cost: a fork that merges 8 layers against the same fork without.
# Medians of RUNS rounds (each round runs every command once, interleaved in a random order,
# after two warm-up rounds), each as a ratio against depth 1 of the same run.
#
#   bench/session-depth.sh                      # builds release, RUNS=20
#   CORDON=target/release/cordon RUNS=30 DEPTHS="1 2 4 8 16 32" bench/session-depth.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --release -q -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="${CARGO_TARGET_DIR:-$root/target}/release/cordon"
fi
CORDON=$(realpath "$CORDON")
RUNS=${RUNS:-20}
DEPTHS=${DEPTHS:-1 2 4 8 16 32}
FILES=${FILES:-3000}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null CORDON_HOME="$work/home"
# The chain below forks more than today's threshold: no automatic flattening in this script.
export CORDON_FLATTEN_DEPTH=1000
ident=(-c user.name=bench -c user.email=bench@example.invalid)

source "$root/bench/make-repo.sh"
repo="$work/repo"
make_repo "$repo" "$FILES"
cd "$repo"

echo "cordon: $CORDON"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  kernel: $(uname -r)  cpus: $(nproc)  files: $FILES"
echo "load before: $(uptime)"
# The chain: its tip is forked after each edit; the fork is the next tip. A session of the
# chain at depth d is kept for each depth measured.
tip=$("$CORDON" session create 2>/dev/null)
depth=0
declare -A at
for target in $DEPTHS; do
  while [ "$depth" -lt "$target" ]; do
    dirn=$((depth % (FILES / 100)))
    "$CORDON" session exec "$tip" -- sh -c "echo $depth > top$depth.txt; echo $depth >> dir$dirn/file1.txt; git add -A; git ${ident[*]} commit -qm d$depth" >/dev/null
    tip=$("$CORDON" session fork "$tip" 2>/dev/null)
    depth=$((depth + 1))
  done
  at[$target]=$tip
  got=$("$CORDON" session show "$tip" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("layers", [])))')
  [ "$got" = "$target" ] || { echo "session at depth $target has $got layers" >&2; exit 1; }
done

# Interleaved: each round runs every depth's command once, in a new random order, so that
# the load of this shared machine drifts over all depths alike.
python3 - "$CORDON" "$RUNS" "$work" $DEPTHS -- $(for d in $DEPTHS; do echo "${at[$d]}"; done) <<'PY'
import json, random, statistics, subprocess, sys, time
cordon, runs, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
cut = rest.index("--")
depths, ids = rest[:cut], rest[cut + 1:]
what = {
    "start": ["/bin/true"],
    "find": ["sh", "-c", "find . -type f | wc -l"],
    "read": ["sh", "-c", "git status --porcelain >/dev/null; find . -path ./.git -prune -o -type f -exec cat {} + >/dev/null"],
}
times = {(w, d): [] for w in what for d in depths}
jobs = [(w, d, i) for w in what for d, i in zip(depths, ids)]
for r in range(runs + 2):
    random.shuffle(jobs)
    for w, d, i in jobs:
        t = time.perf_counter()
        subprocess.run([cordon, "session", "exec", i, "--read-only", "--"] + what[w],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if r >= 2:  # two warm-up rounds
            times[(w, d)].append(time.perf_counter() - t)
json.dump({f"{w} {d}": v for (w, d), v in times.items()}, open(f"{work}/times.json", "w"))
print("%6s  %18s  %18s  %18s" % ("depth", "start ms (ratio)", "find ms (ratio)", "read ms (ratio)"))
for d in depths:
    row = "%6s" % d
    for w in what:
        m = statistics.median(times[(w, d)]) * 1000
        b = statistics.median(times[(w, depths[0])]) * 1000
        row += "  %10.1f (%5.2fx)" % (m, m / b)
    print(row)
PY
echo "load after: $(uptime)"

# The merge itself: a fork of a session standing on 8 layers (a fresh fork of the depth-8
# session, made untimed with flattening off, so each timed fork merges the same 8 layers)
# with the default flatten depth, against the same fork with flattening off, same run.
if [[ " $DEPTHS " == *" 8 "* ]]; then
  FLAT_RUNS=${FLAT_RUNS:-20}
  prepare="sh -c 'CORDON_FLATTEN_DEPTH=1000 $CORDON session fork ${at[8]} > $work/current 2>/dev/null'"
  hyperfine --style none --runs "$FLAT_RUNS" --prepare "$prepare" --export-json "$work/flat.json" \
    "env -u CORDON_FLATTEN_DEPTH $CORDON session fork \$(cat $work/current)" >/dev/null 2>&1
  hyperfine --style none --runs "$FLAT_RUNS" --prepare "$prepare" --export-json "$work/noflat.json" \
    "env CORDON_FLATTEN_DEPTH=1000 $CORDON session fork \$(cat $work/current)" >/dev/null 2>&1
  eval "$prepare"
  merged=$(env -u CORDON_FLATTEN_DEPTH "$CORDON" session fork "$(cat "$work/current")" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); f=r["flattened"]; print("%d layers merged in %d ms (its own timer), depth now %d" % (len(f["replaced"]), f["duration_ms"], r["depth"]))')
  median() { python3 -c 'import json,sys,statistics; r=json.load(open(sys.argv[1]))["results"][0]["times"]; print("%.1f" % (statistics.median(r)*1000))' "$1"; }
  a=$(median "$work/flat.json"); b=$(median "$work/noflat.json")
  printf 'fork that merges 8 layers: median %s ms; the same fork without merging: %s ms (%.2fx; %s runs)\n' \
    "$a" "$b" "$(python3 -c "print($a/$b)")" "$FLAT_RUNS"
  echo "one more: $merged"
  echo "load after the merge: $(uptime)"
fi
