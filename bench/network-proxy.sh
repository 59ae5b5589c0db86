#!/usr/bin/env bash
# The cost of `--network allow=...`: start-up (the proxy's socket pair and thread, the
# listener made inside and handed out) against `--network none`, and throughput of one large
# download through the proxy against the same download made directly on the host, from a
# local `python3 -m http.server`. The "internet" is the host's loopback, so this needs the
# test-only network hooks (see crates/cordon-proxy/src/hooks.rs): the binary is built with
# the `cordon-proxy/test-hooks` feature. Needs hyperfine and curl.
#
#   bench/network-proxy.sh            # builds release (with the test hooks), prints medians
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon --features cordon-proxy/test-hooks
CORDON=${CARGO_TARGET_DIR:-$PWD/target}/release/cordon
RUNS=${RUNS:-200}
SIZE_MIB=${SIZE_MIB:-512}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server"; rm -rf "$work"' EXIT
mkdir -p "$work/www" "$work/run"
head -c "$((SIZE_MIB << 20))" /dev/zero > "$work/www/big"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
server=$!
until curl -s -o /dev/null "http://127.0.0.1:$port/"; do :; done
cd "$work/run"
export CORDON_HOME=$work/home
export CORDON_TEST_NETWORK_HOOKS="loopback;origin.test=127.0.0.1"

hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$work/start.json" \
  "$CORDON run --no-record -- /bin/true" \
  "$CORDON run --no-record --network allow=origin.test:$port -- /bin/true"
hyperfine --warmup 1 --runs 5 --export-json "$work/bulk.json" \
  "curl -s -o /dev/null http://127.0.0.1:$port/big" \
  "$CORDON run --no-record --network allow=origin.test:$port -- curl -s -o /dev/null http://origin.test:$port/big" \
  "$CORDON run --no-record --network allow=origin.test:$port -- curl -s -o /dev/null -p http://origin.test:$port/big"
python3 - "$work/start.json" "$work/bulk.json" "$SIZE_MIB" <<'PY'
import json, sys
start = json.load(open(sys.argv[1]))["results"]
bulk = json.load(open(sys.argv[2]))["results"]
mib = int(sys.argv[3])
for x in start:
    print(f"{x['command']:<100} median {x['median'] * 1000:7.2f} ms")
print(f"start-up cost of the proxy: {(start[1]['median'] - start[0]['median']) * 1000:.2f} ms")
for x in bulk:
    print(f"{x['command']:<100} median {x['median']:6.2f} s  {mib / x['median']:7.0f} MiB/s")
PY
