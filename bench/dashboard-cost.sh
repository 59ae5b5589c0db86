#!/usr/bin/env bash
# What the dashboard costs. (1) The CLI that carries it: binary size, and `cordon --version`
# (what every invocation pays to load the binary) of a baseline build against this one —
# user-space instructions by callgrind (deterministic), task-clock and page faults by perf
# stat, wall time by hyperfine. (2) The pages: `GET /` (the jobs table, 50 rows) and a
# failed verify's page against the API's `GET /v1/jobs?limit=50` (the same rows as JSON), on
# a release `cordon serve` with 60 jobs in its store. Needs hyperfine, valgrind, perf, curl.
#
#   bench/dashboard-cost.sh BASELINE_CORDON [CORDON]   # CORDON defaults to target/release/cordon
#
# The baseline is a release build of the commit before the dashboard (e.g. `git archive main
# | tar -x -C /tmp/base && cargo build --release --target-dir ...` there).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: bench/dashboard-cost.sh BASELINE_CORDON [CORDON]}
NEW=${2:-$PWD/target/release/cordon}
[ -x "$BASE" ] && [ -x "$NEW" ] || { echo "no binary at $BASE or $NEW" >&2; exit 2; }
WORK=$(mktemp -d)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
# The median of each command of a hyperfine JSON export, and its ratio to the first.
medians() {
  python3 - "$1" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
first = results[0]["median"]
for r in results:
    print(f"{r['command']:45} median {r['median'] * 1000:8.2f} ms  ratio {r['median'] / first:.2f}")
PY
}

# Both from the same directory, so where a file lies does not change how it faults in.
cp "$BASE" "$WORK/cordon-baseline"
cp "$NEW" "$WORK/cordon-this"
BASE=$WORK/cordon-baseline
NEW=$WORK/cordon-this

echo "== binary size (bytes) =="
printf 'baseline %s\nthis     %s\n' "$(stat -c %s "$BASE")" "$(stat -c %s "$NEW")"

echo "== cordon --version: user-space instructions (callgrind, 3 runs each) =="
for which in baseline this; do
  bin=$BASE
  [ "$which" = this ] && bin=$NEW
  for _ in 1 2 3; do
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$bin" --version 2>&1 >/dev/null \
      | sed -n 's/.*Collected : //p'
  done | sort -n | sed -n 2p | sed "s|^|$which median: |"
done

echo "== cordon --version: perf stat -r 50 =="
for bin in "$BASE" "$NEW"; do
  perf stat -r 50 -e task-clock,page-faults "$bin" --version 2>&1 >/dev/null \
    | grep -E "task-clock|page-faults" | sed "s|^|$bin: |"
done

echo "== cordon --version: hyperfine =="
hyperfine -N --warmup 30 --runs 300 --export-json "$WORK/version.json" \
  -n baseline "$BASE --version" -n this "$NEW --version" >/dev/null
medians "$WORK/version.json"

echo "== pages: GET / and a failed verify's page against GET /v1/jobs?limit=50 =="
export CORDON_HOME=$WORK/home
cat >"$WORK/policy.toml" <<'EOF'
workers = 4
[projects.bench]
concurrency = 4
allow = [["sh", "*"], ["git", "clone", "*"], ["python3", "*"]]
EOF
"$NEW" serve --listen 127.0.0.1:0 --config "$WORK/policy.toml" >"$WORK/serve.out" 2>"$WORK/serve.err" &
SERVER=$!
for _ in $(seq 100); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(sed -n 's/.*listening on //p' "$WORK/serve.out")
TOKEN=$("$NEW" token create --project bench --scope submit,read 2>/dev/null)
AUTH="Authorization: Bearer $TOKEN"
submit() { curl -sf -H "$AUTH" -d "$1" "$URL/v1/jobs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
wait_end() { curl -sN -H "$AUTH" "$URL/v1/jobs/$1/events" | grep -q '^event: end'; }
mkdir -p "$WORK/repo/demo" "$WORK/repo/tests"
printf '[project]\nname = "demo"\nversion = "0.1"\n' >"$WORK/repo/pyproject.toml"
printf 'def add(a, b):\n    return a * b\n' >"$WORK/repo/demo/__init__.py"
printf 'import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\nimport demo\n\ndef test_add():\n    assert demo.add(2, 3) == 5\n' \
  >"$WORK/repo/tests/test_demo.py"
git -C "$WORK/repo" init -q -b main
git -C "$WORK/repo" add -A
git -C "$WORK/repo" -c user.name=b -c user.email=b@b commit -qm init
CLONE=$(submit '{"project":"bench","type":"repo.clone","inputs":{"url":"'"$WORK/repo"'"}}')
wait_end "$CLONE"
VERIFY=$(submit '{"project":"bench","type":"verify","inputs":{"workspace":{"from_job":"'"$CLONE"'"}}}')
for i in $(seq 58); do submit '{"project":"bench","type":"run","inputs":{"argv":["sh","-c","echo '"$i"'"]}}' >/dev/null; done
wait_end "$VERIFY"
LAST=$(submit '{"project":"bench","type":"run","inputs":{"argv":["sh","-c","echo last"]}}')
wait_end "$LAST"
COOKIE=$(curl -s -D - -o /dev/null --data-urlencode "token=$TOKEN" -d next=/ "$URL/login" \
  | sed -n 's/^set-cookie: \(cordon_dash=[0-9a-f]*\).*/\1/p')
[ -n "$COOKIE" ] || { echo "no login cookie" >&2; exit 1; }
ROWS=$(curl -s -H "Cookie: $COOKIE" "$URL/" | grep -o 'data-job=' | wc -l)
echo "GET / renders $ROWS rows"
# 100 requests on one kept-alive connection per run, so curl's own start-up does not drown
# the server's time: the times below are per 100 requests.
times100() { local out=''; for _ in $(seq 100); do out+=" $1 -o /dev/null"; done; echo "$out"; }
hyperfine -N --warmup 3 --runs 30 --export-json "$WORK/pages.json" \
  -n "API GET /v1/jobs?limit=50 x100" "curl -sf -H '$AUTH' $(times100 "$URL/v1/jobs?limit=50")" \
  -n "dashboard GET / x100" "curl -sf -H 'Cookie: $COOKIE' $(times100 "$URL/")" \
  -n "dashboard GET /jobs/(failed verify) x100" "curl -sf -H 'Cookie: $COOKIE' $(times100 "$URL/jobs/$VERIFY")" \
  >/dev/null
medians "$WORK/pages.json"

echo "page sizes (bytes): / $(curl -s -H "Cookie: $COOKIE" "$URL/" | wc -c), job $(curl -s -H "Cookie: $COOKIE" "$URL/jobs/$VERIFY" | wc -c), API list $(curl -s -H "$AUTH" "$URL/v1/jobs?limit=50" | wc -c)"
