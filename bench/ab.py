#!/usr/bin/env python3
# Interleaved A/B timing for a noisy machine: `bench/ab.py ROUNDS "CMD A" "CMD B" ...` runs every
# command once per round, in turn, and prints each median and the median of the per-round
# differences against the first command (robust to load that drifts during the run).
import os, subprocess, sys, time, statistics, json
# Interleaved A/B: each round runs every command once, in turn; reports medians and the median
# of the per-round differences against the first command (robust to load drifting).
n = int(sys.argv[1]); cmds = [c.split() for c in sys.argv[2:]]
times = [[] for _ in cmds]
dn = open(os.devnull, "wb")
for _ in range(10):
    for c in cmds: subprocess.run(c, stdout=dn, stderr=dn)
for _ in range(n):
    for i, c in enumerate(cmds):
        t = time.perf_counter(); subprocess.run(c, stdout=dn, stderr=dn); times[i].append(time.perf_counter() - t)
for i, c in enumerate(cmds):
    d = [b - a for a, b in zip(times[0], times[i])]
    print(f"median {statistics.median(times[i])*1000:6.2f} ms  paired diff vs first {statistics.median(d)*1000:+6.2f} ms  {' '.join(c)[-70:]}")
