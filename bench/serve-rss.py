#!/usr/bin/env python3
"""The resident memory of the API process of `cordon serve` before and after large
submissions (issue 39: after five 3.9 MiB submissions it went from 22 to 88 MB and stayed).

    bench/serve-rss.py --cordon BIN [-n 50] [--size 4190000] [--dir DIR]

Starts `cordon serve --no-workers` (the API process alone) on a fresh SQLite home under DIR,
reads VmRSS from /proc after a warm-up request, submits n `run` jobs whose body is about
--size bytes (one long argument; the default body limit is 4 MiB), waits 2 s, and reads VmRSS
again. Prints both and their ratio.
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cordon", required=True)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--size", type=int, default=4 * 1024 * 1024 - 4096)
    ap.add_argument("--dir")
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="cordon-rss-", dir=args.dir)
    policy = os.path.join(home, "cordon-server.toml")
    with open(policy, "w") as f:
        f.write('[projects.p]\nallow = [["sh", "*"]]\nmax_queued = 100000\n')
    env = dict(os.environ, CORDON_HOME=home)
    proc = subprocess.Popen([args.cordon, "serve", "--no-workers", "--listen", "127.0.0.1:0",
                             "--config", policy], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        addr = proc.stdout.readline().decode().strip().rsplit("http://", 1)[1]
        host, port = addr.rsplit(":", 1)
        token = subprocess.check_output([args.cordon, "token", "create", "--project", "p"],
                                        env=env, stderr=subprocess.DEVNULL).decode().strip()

        def post(body):
            c = http.client.HTTPConnection(host, int(port), timeout=120)
            c.request("POST", "/v1/jobs", body=body, headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            return r.status

        small = json.dumps({"project": "p", "type": "run", "inputs": {"argv": ["sh", "-c", "true"]}})
        assert post(small) == 201
        time.sleep(1)
        before = rss_kib(proc.pid)
        frame = json.dumps({"project": "p", "type": "run", "inputs": {"argv": ["sh", "-c", "true", ""]}})
        filler = "x" * (args.size - len(frame))
        body = json.dumps({"project": "p", "type": "run", "inputs": {"argv": ["sh", "-c", "true", filler]}})
        statuses = [post(body) for _ in range(args.n)]
        time.sleep(2)
        after = rss_kib(proc.pid)
        print(f"body {len(body)} bytes x {args.n} (answers: {sorted(set(statuses))})")
        print(f"VmRSS before {before / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
              f"ratio {after / before:.2f}")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
