#!/usr/bin/env python3
"""How fast a job's end reaches a live-log (SSE) subscriber of `cordon serve`, and what the
service adds over `cordon run` for a `run` of /bin/true.

    bench/live-log-latency.py --cordon NEW [--baseline OLD] [--postgres URL] [-n 200]

For every binary (NEW, and OLD when given) and store (SQLite in a fresh home, and a fresh
PostgreSQL database on the cluster of URL when given) it starts one `cordon serve`, then
interleaves the servers job by job, n times:

- latency: a `sh -c 'sleep 0.2'` job is submitted and its live log opened at once; the time
  the `end` event arrives minus the job's `finished_at` (written by the worker, before the
  end event, on the same machine's clock, to the millisecond).
- overhead: a `run` of ["true"], from the submission to its `end` event ("job"), minus the
  wall time of `cordon run` of `true` with the job's default limits (`--memory 4GiB --pids
  1024 --output-limit 1MiB`: a job always runs with limits, and moving a process into a
  memory or pids cgroup has a kernel cost of its own, see docs/operations.md) measured right
  before it ("run"; same binary, same machine); the medians of both are printed too.

Prints medians and 90th percentiles (milliseconds). Needs python3 and, for PostgreSQL, psql.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

POLICY = """workers = 2
[projects.p]
max_timeout = "60s"
allow = [["sh", "*"], ["true"]]
"""

# The limits a job of POLICY runs with (the job service's defaults).
JOB_LIMITS = ["--memory", "4GiB", "--pids", "1024", "--output-limit", "1MiB"]


class Server:
    def __init__(self, name, cordon, home, store=None):
        self.name, self.cordon, self.home = name, cordon, home
        os.makedirs(home, exist_ok=True)
        self.policy = os.path.join(home, "cordon-server.toml")
        with open(self.policy, "w") as f:
            f.write(POLICY)
        self.env = dict(os.environ, CORDON_HOME=home)
        if store:
            self.env["CORDON_STORE"] = store
        self.proc = subprocess.Popen(
            [cordon, "serve", "--listen", "127.0.0.1:0", "--config", self.policy],
            env=self.env, stdout=subprocess.PIPE, stderr=open(os.path.join(home, "serve.log"), "w"))
        line = self.proc.stdout.readline().decode()
        self.addr = line.strip().rsplit("http://", 1)[1]
        self.token = subprocess.check_output(
            [cordon, "token", "create", "--project", "p", "--scope", "submit,read"],
            env=self.env).decode().strip()
        self.latency, self.overhead, self.direct, self.e2e = [], [], [], []

    def conn(self):
        host, port = self.addr.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=60)

    def call(self, method, path, body=None):
        c = self.conn()
        c.request(method, path, body=json.dumps(body) if body else None,
                  headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        return data

    def until_end(self, job_id):
        """Opens the live log; returns the time its `end` event arrived."""
        c = self.conn()
        c.request("GET", f"/v1/jobs/{job_id}/events", headers={"Authorization": f"Bearer {self.token}"})
        r = c.getresponse()
        event = None
        while True:
            line = r.fp.readline()
            if not line:
                raise RuntimeError(f"{self.name}: the live log of {job_id} ended without `end`")
            line = line.decode().rstrip("\r\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "end":
                at = time.time()
                c.close()
                return at

    def submit(self, argv):
        return self.call("POST", "/v1/jobs", {"project": "p", "type": "run", "inputs": {"argv": argv}})["id"]

    def measure_latency(self):
        job = self.submit(["sh", "-c", "sleep 0.2"])
        arrived = self.until_end(job)
        finished = self.call("GET", f"/v1/jobs/{job}")["finished_at"]
        ended = datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp()
        self.latency.append((arrived - ended) * 1000)

    def measure_overhead(self):
        start = time.time()
        subprocess.run([self.cordon, "run", *JOB_LIMITS, "--", "true"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        direct = time.time() - start
        start = time.time()
        self.until_end(self.submit(["true"]))
        e2e = time.time() - start
        self.direct.append(direct * 1000)
        self.e2e.append(e2e * 1000)
        self.overhead.append((e2e - direct) * 1000)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cordon", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--postgres")
    ap.add_argument("-n", type=int, default=200)
    args = ap.parse_args()
    binaries = [("new", args.cordon)] + ([("baseline", args.baseline)] if args.baseline else [])
    tmp = tempfile.mkdtemp(prefix="cordon-bench-")
    servers, databases = [], []
    for label, cordon in binaries:
        servers.append(Server(f"{label}/sqlite", cordon, os.path.join(tmp, f"{label}-sqlite")))
        if args.postgres:
            db = f"cordon_bench_{label}_{os.getpid()}"
            subprocess.run(["psql", "-qAtc", f"DROP DATABASE IF EXISTS {db}", args.postgres], check=True)
            subprocess.run(["psql", "-qAtc", f"CREATE DATABASE {db}", args.postgres], check=True)
            databases.append(db)
            base, query = args.postgres.split("?", 1) if "?" in args.postgres else (args.postgres, "")
            url = base.rsplit("/", 1)[0] + "/" + db + ("?" + query if query else "")
            servers.append(Server(f"{label}/postgres", cordon, os.path.join(tmp, f"{label}-pg"), url))
    try:
        for i in range(args.n):
            for s in servers:
                s.measure_latency()
            for s in servers:
                s.measure_overhead()
            if (i + 1) % 50 == 0:
                print(f"  {i + 1}/{args.n}", file=sys.stderr)
    finally:
        for s in servers:
            s.stop()
        for db in databases:
            subprocess.run(["psql", "-qAtc", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", args.postgres])
    print(f"{'server':<20} {'end→SSE p50':>12} {'p90':>8} {'overhead p50':>13} {'p90':>8} "
          f"{'run p50':>8} {'job p50':>8}   (ms, n={args.n})")
    for s in servers:
        print(f"{s.name:<20} {statistics.median(s.latency):>12.1f} {pct(s.latency, 0.9):>8.1f} "
              f"{statistics.median(s.overhead):>13.1f} {pct(s.overhead, 0.9):>8.1f} "
              f"{statistics.median(s.direct):>8.1f} {statistics.median(s.e2e):>8.1f}")


if __name__ == "__main__":
    main()
