#!/usr/bin/env bash
# cordon verify on a small crate (examples/rust-hello) against running the same stages
# directly on a fresh copy, in one hyperfine run. Needs hyperfine (apt-get install hyperfine).
#
#   bench/verify-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon
CORDON=$PWD/target/release/cordon
REPO=$PWD
export CORDON_HOME
CORDON_HOME=$(mktemp -d)
trap 'rm -rf "$CORDON_HOME"' EXIT
# The same five stages cordon detects, offline after the fetch, on a fresh copy of HEAD.
DIRECT='d=$(mktemp -d) && git -C '"$REPO"' archive HEAD examples/rust-hello | tar -x -C "$d" && cd "$d/examples/rust-hello" && cargo fetch -q && cargo fmt --all --check && cargo clippy -q --offline --all-targets -- -D warnings && cargo build -q --offline --all-targets && cargo test -q --offline >/dev/null && cd / && rm -rf "$d"'
hyperfine --warmup 2 --runs 15 --export-json /tmp/cordon-bench-verify.json \
  -n "stages run directly" "bash -c '$DIRECT'" \
  -n "cordon verify" "$CORDON verify --project examples/rust-hello --repo $REPO"
python3 - <<'PY'
import json
r = {x["command"]: x for x in json.load(open("/tmp/cordon-bench-verify.json"))["results"]}
d, c = r["stages run directly"]["median"], r["cordon verify"]["median"]
print(f"median direct {d*1000:.0f} ms, cordon verify {c*1000:.0f} ms, overhead {100*(c-d)/d:+.1f}%")
PY
