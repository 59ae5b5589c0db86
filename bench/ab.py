#!/usr/bin/env python3
# Interleaved A/B timing for a noisy machine: `bench/ab.py ROUNDS "CMD A" "CMD B" ...` runs every
# command once per round, in turn, and prints each median and the median of the per-round
# differences against the first command (robust to load that drifts during the run).
# `bench/ab.py --rotate ROUNDS ...` starts each round at the next command, so that each command
# opens a round equally often (but still follows the same command within a round: see
# `--shuffle`, which also moves the teardown of a sandbox, whose namespaces go away after the
# tool has exited, onto a random next command).
import os, subprocess, sys, time, statistics, json
# Interleaved A/B: each round runs every command once, in turn; reports medians and the median
# of the per-round differences against the first command (robust to load drifting).
# `--shuffle` runs the commands of each round in a random order (seeded, so repeatable):
# with `--rotate` every command still follows the same one (its predecessor in the list), and
# a tool whose teardown outlives it (bwrap's namespaces, freed by kernel workers after it has
# exited) slows whichever command comes next, by up to 0.5 ms beside a busy CPU (BENCHMARKS.md,
# round eight).
import random
argv = sys.argv[1:]
rotate = shuffle = False
while argv and argv[0] in ("--rotate", "--shuffle"):
    rotate |= argv[0] == "--rotate"; shuffle |= argv[0] == "--shuffle"
    argv = argv[1:]
rng = random.Random(16)
n = int(argv[0]); cmds = [c.split() for c in argv[1:]]; labels = list(argv[1:])
# Leading NAME=VALUE words set the command's environment (one binary, a behaviour switched by
# a variable: two copies of one executable can differ by 0.1 ms, see BENCHMARKS.md round seven).
envs = []
for c in cmds:
    e = dict(os.environ)
    while c and "=" in c[0] and not c[0].startswith("/"):
        k, v = c.pop(0).split("=", 1); e[k] = v
    envs.append(e)
times = [[] for _ in cmds]
dn = open(os.devnull, "wb")
for _ in range(10):
    for c, e in zip(cmds, envs): subprocess.run(c, stdout=dn, stderr=dn, env=e)
for r in range(n):
    start = r % len(cmds) if rotate else 0
    order = [(start + k) % len(cmds) for k in range(len(cmds))]
    if shuffle:
        rng.shuffle(order)
    for i in order:
        c = cmds[i]
        t = time.perf_counter(); subprocess.run(c, stdout=dn, stderr=dn, env=envs[i]); times[i].append(time.perf_counter() - t)
for i, c in enumerate(cmds):
    d = [b - a for a, b in zip(times[0], times[i])]
    print(f"median {statistics.median(times[i])*1000:6.2f} ms  paired diff vs first {statistics.median(d)*1000:+6.2f} ms  {labels[i][-70:]}")
