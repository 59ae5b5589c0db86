#!/usr/bin/env python3
"""Whether a fork's cost depends on the tree or on the home (issue 40), interleaved.

Three homes, made first: a 3,000-file repository, a 30,000-file one, and the 3,000-file one
with 400 more sessions in its home. Then ROUNDS rounds; each round, in a new random order,
times one `cordon session fork` in each home (of a fresh fork that has just written a file,
untimed, so that every timed fork freezes a layer). Prints the medians.

    python3 bench/session-fork-sizes.py [ROUNDS]     # CORDON=path (default: target/release)
"""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = os.environ.get("CORDON", os.path.join(ROOT, "target/release/cordon"))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
WORK = tempfile.mkdtemp()


def sh(cmd, env, cwd):
    return subprocess.run(cmd, shell=True, env=env, cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def make(name, files, extra):
    root = os.path.join(WORK, name)
    repo = os.path.join(root, "repo")
    os.makedirs(repo)
    env = dict(os.environ, CORDON_HOME=os.path.join(root, "home"),
               GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    sh("git init -q -b main", env, repo)
    for i in range(files):
        d = os.path.join(repo, "dir%d" % (i // 100))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%d.txt" % (i % 100)), "w") as f:
            f.write("%d\n" % i)
    sh("git add -A && git -c user.name=a -c user.email=a@a commit -qm init", env, repo)
    src = sh(f"{C} session create 2>/dev/null", env, repo).strip()
    for _ in range(extra // 100):
        sh(f"{C} session fork {src} --count 100", env, repo)
    return env, repo, src


try:
    print("load before:", os.getloadavg())
    cases = {"3,000 files": make("a", 3000, 0), "30,000 files": make("b", 30000, 0),
             "3,000 files, 400 more sessions": make("c", 3000, 400)}
    times = {k: [] for k in cases}
    for _ in range(ROUNDS):
        order = list(cases)
        random.shuffle(order)
        for k in order:
            env, repo, src = cases[k]
            f = sh(f"{C} session fork {src} 2>/dev/null", env, repo).strip()
            sh(f"{C} session exec {f} -- sh -c 'date +%N > w.txt'", env, repo)
            t = time.perf_counter()
            sh(f"{C} session fork {f}", env, repo)
            times[k].append(time.perf_counter() - t)
    for k, v in times.items():
        print("%-32s median %6.1f ms (%d runs)" % (k, statistics.median(v) * 1000, len(v)))
    print("load after:", os.getloadavg())
finally:
    shutil.rmtree(WORK, ignore_errors=True)
