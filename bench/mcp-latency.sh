#!/usr/bin/env bash
# `run` of /bin/true through `cordon mcp` over stdio, from the client's call to its result,
# against `cordon run -- /bin/true` itself (issue 37: within 2 ms, median of 200). Both
# sandboxed and recorded in the run history (the defaults), measured alternately in one
# Python process so that both see the same machine:
#
# - cordon run: `subprocess.run([cordon, "run", "--", "/bin/true"])`, from the call to its
#   exit (what an agent composing shell commands pays);
# - MCP, raw: a `tools/call` line written to the server's stdin until its answer line is read
#   (what the server costs: the client does nothing but write and read a line);
# - MCP, SDK: `ClientSession.call_tool` of the official Python SDK (`mcp` from PyPI), which
#   also checks the result against the tool's output schema: what an agent built on it pays.
#
#   bench/mcp-latency.sh                   # builds release; needs the SDK (scripts/test's
#                                          # need_mcp_python puts it in target/test-tools)
#   RUNS=500 bench/mcp-latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cordon
CORDON=${CARGO_TARGET_DIR:-$PWD/target}/release/cordon
PYTHON=${CORDON_TEST_MCP_PYTHON:-$PWD/target/test-tools/mcp-python-2.3.0/bin/python}
[ -x "$PYTHON" ] || { echo "no MCP Python SDK at $PYTHON: run scripts/test once" >&2; exit 1; }
RUNS=${RUNS:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CORDON_HOME=$work/home
mkdir -p "$work/repo"
cd "$work/repo"
"$CORDON" doctor >/dev/null || { echo "cordon doctor: this host cannot sandbox" >&2; exit 1; }

"$PYTHON" - "$CORDON" "$RUNS" <<'PY'
import json, statistics, subprocess, sys, time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

cordon, runs = sys.argv[1], int(sys.argv[2])
CALL = {"name": "run", "arguments": {"argv": ["/bin/true"]}}


def cordon_run():
    start = time.perf_counter()
    subprocess.run([cordon, "run", "--", "/bin/true"], check=True)
    return time.perf_counter() - start


class Raw:
    """A bare JSON-RPC client on the server's stdin and stdout."""

    def __init__(self):
        self.p = subprocess.Popen([cordon, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.p.stdin.write(json.dumps(message).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            answer = json.loads(self.p.stdout.readline())
            if answer.get("id") == self.next:
                return answer

    def call(self):
        start = time.perf_counter()
        answer = self.request("tools/call", CALL)
        took = time.perf_counter() - start
        assert answer["result"]["structuredContent"]["exit_code"] == 0, answer
        return took

    def close(self):
        self.p.stdin.close()
        self.p.wait()


async def sdk_calls(n):
    params = StdioServerParameters(command=cordon, args=["mcp"])
    times = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(10):
                await session.call_tool(CALL["name"], CALL["arguments"])
            for _ in range(n):
                start = time.perf_counter()
                result = await session.call_tool(CALL["name"], CALL["arguments"])
                times.append(time.perf_counter() - start)
                assert result.structured_content["exit_code"] == 0
    return times


raw = Raw()
for _ in range(10):  # warm both: caches, the run history, the server's first call
    cordon_run()
    raw.call()
cli, mcp = [], []
for _ in range(runs):
    cli.append(cordon_run())
    mcp.append(raw.call())
raw.close()
sdk = anyio.run(sdk_calls, runs)


def line(name, times):
    ms = sorted(t * 1000 for t in times)
    q = statistics.quantiles(ms, n=10)
    print(f"{name:<34} median {statistics.median(ms):6.2f} ms   p10 {q[0]:6.2f}   p90 {q[-1]:6.2f}")
    return statistics.median(ms)


print(f"{runs} calls each, alternating (cordon run / raw MCP), then the SDK's")
base = line("cordon run -- /bin/true", cli)
served = line("MCP run /bin/true (raw JSON-RPC)", mcp)
via_sdk = line("MCP run /bin/true (Python SDK)", sdk)
print(f"MCP (raw) - cordon run: {served - base:+.2f} ms   MCP (SDK) - cordon run: {via_sdk - base:+.2f} ms")
PY
