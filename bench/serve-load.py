#!/usr/bin/env python3
"""Load test of `cordon serve`: N short `run` jobs from C concurrent clients across P projects.

Starts a real server (temp home, loopback, ephemeral port), creates one token per project,
submits the jobs (each client waits for its job's `end` event over SSE before the next),
then checks from the recorded start/end times that the global `workers` and each project's
`concurrency` were never exceeded, and reports throughput, per-job overhead (attempt time
minus the program's own run time) and API latency under load.

Usage: bench/serve-load.py [JOBS] [CLIENTS] [PROJECTS]   (CORDON_BIN: the binary to use;
default target/release/cordon)

Many machines: with WORKER_PROCS=N the server runs `--no-workers` and N `cordon worker`
processes (SLOTS each, default 2) run the jobs; CORDON_STORE (a postgres:// URL) is the store
they all share (default: the temp home's SQLite file). WORKERS sets the policy's global limit.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CORDON_BIN", os.path.join(ROOT, "target", "release", "cordon"))
JOBS, CLIENTS, PROJECTS = (int(a) for a in (sys.argv[1:] + ["500", "20", "5"][len(sys.argv) - 1:])[:3])
WORKERS = int(os.environ.get("WORKERS", "4"))
CONCURRENCY = 2
WORKER_PROCS = int(os.environ.get("WORKER_PROCS", "0"))
SLOTS = int(os.environ.get("SLOTS", "2"))


def ms(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def max_overlap(spans):
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    best = now = 0
    for _, d in points:
        now += d
        best = max(best, now)
    return best


def main():
    work = tempfile.mkdtemp(prefix="cordon-serve-load-")
    home = os.path.join(work, "home")
    policy = os.path.join(work, "cordon-server.toml")
    with open(policy, "w") as f:
        f.write(f'workers = {WORKERS}\n[projects."*"]\nconcurrency = {CONCURRENCY}\nallow = [["true"]]\n')
    env = dict(os.environ, CORDON_HOME=home)
    tokens = {}
    for p in range(PROJECTS):
        out = subprocess.run([BIN, "token", "create", "--project", f"p{p}"], env=env,
                             capture_output=True, text=True, check=True)
        tokens[f"p{p}"] = out.stdout.strip()
    serve = [BIN, "serve", "--listen", "127.0.0.1:0", "--config", policy]
    if WORKER_PROCS:
        serve.append("--no-workers")
    server = subprocess.Popen(serve, env=env, stdout=subprocess.PIPE, text=True)
    workers = []
    for w in range(WORKER_PROCS):
        proc = subprocess.Popen([BIN, "worker", "--config", policy, "--slots", str(SLOTS),
                                 "--name", f"bench-{w}"],
                                env=dict(env, CORDON_HOME=os.path.join(work, f"home-{w}")),
                                stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        workers.append(proc)
    line = server.stdout.readline()
    host, port = line.strip().rsplit("http://", 1)[1].split(":")
    latencies, ids, lock = [], [], threading.Lock()

    def client(n):
        project = f"p{n % PROJECTS}"
        auth = {"Authorization": f"Bearer {tokens[project]}", "Content-Type": "application/json"}
        for _ in range(n, JOBS, CLIENTS):
            body = json.dumps({"project": project, "type": "run", "inputs": {"argv": ["true"]}})
            conn = http.client.HTTPConnection(host, int(port))
            t0 = time.perf_counter()
            conn.request("POST", "/v1/jobs", body, auth)
            answer = conn.getresponse()
            job = json.loads(answer.read())
            took = time.perf_counter() - t0
            assert answer.status == 201, job
            conn.close()
            conn = http.client.HTTPConnection(host, int(port))
            conn.request("GET", f"/v1/jobs/{job['id']}/events", headers=auth)
            stream = conn.getresponse()
            for raw in stream:
                if raw.startswith(b"event: end"):
                    break
            conn.close()
            with lock:
                latencies.append(took)
                ids.append((project, job["id"]))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    jobs = []
    for project, job_id in ids:
        conn = http.client.HTTPConnection(host, int(port))
        conn.request("GET", f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {tokens[project]}"})
        jobs.append(json.loads(conn.getresponse().read()))
        conn.close()
    for proc in workers + [server]:
        proc.terminate()
        proc.wait()
    states = {}
    for j in jobs:
        states[j["state"]] = states.get(j["state"], 0) + 1
    spans = [(ms(j["started_at"]), ms(j["finished_at"])) for j in jobs]
    per_project = {p: max_overlap([(ms(j["started_at"]), ms(j["finished_at"])) for j in jobs if j["project"] == p])
                   for p in tokens}
    overhead = sorted(ms(j["finished_at"]) - ms(j["started_at"]) - j["result"]["duration_ms"] for j in jobs)
    lat = sorted(latencies)
    print(f"jobs: {len(jobs)} {states}; wall {wall:.1f} s; {len(jobs) / wall:.1f} jobs/s")
    print(f"most running at once: {max_overlap(spans)} (workers = {WORKERS}); per project: "
          f"{per_project} (concurrency = {CONCURRENCY})")
    print(f"overhead per job (attempt time - program time): p50 {statistics.median(overhead):.1f} ms, "
          f"p99 {overhead[int(len(overhead) * 0.99) - 1]:.1f} ms")
    print(f"POST /v1/jobs latency under load: p50 {statistics.median(lat) * 1000:.1f} ms, "
          f"p99 {lat[int(len(lat) * 0.99) - 1] * 1000:.1f} ms")
    ok = (len(jobs) == JOBS and states.get("succeeded") == JOBS and max_overlap(spans) <= WORKERS
          and all(v <= CONCURRENCY for v in per_project.values()))
    print("limits held, every job succeeded" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
