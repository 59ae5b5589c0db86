#!/usr/bin/env bash
# The cost of `--credential`: one large HTTPS download through the proxy's intercepting path
# (TLS terminated with the run's authority, the header added, the response searched for the
# credential, TLS again to the server) against the same download through a plain CONNECT
# tunnel (the program's TLS end to end), and made directly on the host. The server is a local
# HTTPS server (Python's ssl) with a certificate of the script's own authority, which cordon
# trusts as the host's trust store through the test-only network hooks (see
# crates/cordon-proxy/src/hooks.rs): the binary is built with `cordon-proxy/test-hooks`.
# Needs hyperfine, curl, openssl and python3.
#
#   bench/credential-proxy.sh                 # builds release (with the test hooks), prints medians
#   SIZE_MIB=100 RUNS=5 bench/credential-proxy.sh
#   CORDON=PATH bench/credential-proxy.sh     # a binary built with the test hooks already
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CORDON:-}" ]; then
  cargo build --release -q -p cordon --features cordon-proxy/test-hooks
  CORDON=${CARGO_TARGET_DIR:-$PWD/target}/release/cordon
fi
RUNS=${RUNS:-5}
SIZE_MIB=${SIZE_MIB:-100}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server"; rm -rf "$work"' EXIT
mkdir -p "$work/www" "$work/run"
head -c "$((SIZE_MIB << 20))" /dev/urandom > "$work/www/big"

# The script's authority and the server's certificate for api.test.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=bench authority" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=api.test" \
  -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.test\nextendedKeyUsage=serverAuth\n' > "$work/ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 2 -extfile "$work/ext" -out "$work/server.pem" 2>/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$port" "$work" <<'PY' &
import http.server, ssl, sys, os
port, work = int(sys.argv[1]), sys.argv[2]
class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=os.path.join(work, "www"), **k)
    def log_message(self, *a):
        pass
    def copyfile(self, source, outputfile):
        while chunk := source.read(1 << 20):
            outputfile.write(chunk)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(work, "server.pem"), os.path.join(work, "server.key"))
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
httpd.serve_forever()
PY
server=$!
until curl -s -o /dev/null --cacert "$work/ca.pem" --resolve "api.test:$port:127.0.0.1" \
  "https://api.test:$port/"; do :; done
cd "$work/run"
export CORDON_HOME=$work/home
export CORDON_TEST_NETWORK_HOOKS="loopback;api.test=127.0.0.1;trust=$work/ca.pem"
export BENCH_KEY=bench-credential-0123456789abcdef
url="https://api.test:$port/big"
allow="--network allow=api.test:$port"

hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/bulk.json" \
  -n direct "curl -s -o /dev/null --cacert $work/ca.pem --resolve api.test:$port:127.0.0.1 $url" \
  -n tunnel "$CORDON run --no-record $allow --ro $work/ca.pem -- curl -s -o /dev/null --cacert $work/ca.pem $url" \
  -n intercepted "$CORDON run --no-record $allow --credential api.test:$port=BENCH_KEY -- curl -s -o /dev/null $url"
python3 - "$work/bulk.json" "$SIZE_MIB" <<'PY'
import json, sys
bulk = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
mib = int(sys.argv[2])
for name, x in bulk.items():
    print(f"{name:<12} median {x['median']:6.3f} s  {mib / x['median']:7.0f} MiB/s")
ratio = bulk["tunnel"]["median"] / bulk["intercepted"]["median"]
print(f"intercepted / tunnel throughput: {ratio:.0%}")
PY
