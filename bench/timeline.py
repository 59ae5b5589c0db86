#!/usr/bin/env python3
# Where a short run's time goes, from the kernel's own events: for every run of PROGRAM (its
# execve), the median time after it of each fork, exec and exit among its descendants.
#
#   perf record -e sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit \
#     -a -o sched.data -- sh -c 'for i in $(seq 300); do PROGRAM ARGS; done'
#   perf script -i sched.data -F comm,pid,cpu,time,event,trace > sched.txt
#   bench/timeline.py sched.txt PROGRAM      # PROGRAM as its absolute path
import sys, re, statistics, collections
ev = []
for l in open(sys.argv[1]):
    m = re.match(r'\s*(.+?)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+sched:(\w+):\s*(.*)', l)
    if m:
        comm, pid, t, name, rest = m.groups()
        ev.append((float(t), comm, int(pid), name, rest))
runs = []
live = {}  # pid -> run
for t, comm, pid, name, rest in ev:
    if name == 'sched_process_exec' and rest.startswith('filename=' + sys.argv[2] + ' '):
        r = {'t0': t, 'ev': [], 'root': pid}; runs.append(r); live[pid] = r; continue
    r = live.get(pid)
    if r is None: continue
    if name == 'sched_process_fork':
        child = int(rest.split('child_pid=')[1].split()[0]); live[child] = r
        r['ev'].append((t, f'fork by {"root" if pid == r["root"] else comm}'))
    elif name == 'sched_process_exec':
        r['ev'].append((t, 'exec ' + rest.split('filename=')[1].split()[0]))
    elif name == 'sched_process_exit':
        r['ev'].append((t, f'exit {"root" if pid == r["root"] else comm}'))
seqs = collections.defaultdict(list)
for r in runs:
    for i, (t, what) in enumerate(r['ev']):
        seqs[(i, what)].append((t - r['t0']) * 1000)
for k in sorted(seqs):
    v = seqs[k]
    if len(v) > len(runs) * 0.5:
        print(f"{k[0]:2d} {k[1]:<30} median {statistics.median(v):6.3f} ms  (n={len(v)})")
