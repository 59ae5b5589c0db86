#!/usr/bin/env bash
# Where a sandboxed start goes, against bubblewrap, from the kernel's own process events
# (perf sched tracepoints, every command interleaved in one loop): for each command the
# median time from its execve to its exit, and for `cordon run -- /bin/true` the part spent
# in the helper (its execve to the outer helper's exit: the sandbox itself) and the part
# spent in cordon's own process before and after it. `cordon --version` is the least
# cordon's own process can cost (load, parse, exit), so
#   floor = (helper part + cordon --version) / bwrap
# is the best ratio `cordon run` can reach with this helper and this binary.
# Needs perf and bubblewrap (apt-get install -y linux-perf bubblewrap), root for -a.
#
#   bench/sandbox-start-floor.sh             # builds release, 300 rounds
#   RUNS=100 bench/sandbox-start-floor.sh
#   BUSY=1 bench/sandbox-start-floor.sh      # beside `yes > /dev/null` pinned to CPU 0
set -euo pipefail
source "$(dirname "$0")/sandbox-setup.sh"
BWRAP=$(command -v bwrap)
loop="for i in \$(seq $RUNS); do $CORDON run -- /bin/true; \
$BWRAP --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true; \
$CORDON --version >/dev/null; /bin/true; done"
[ -n "${BUSY:-}" ] && start_busy
perf record -q -e sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit \
  -a -o "$work/sched.data" -- sh -c "$loop" >/dev/null 2>&1
perf script -i "$work/sched.data" -F comm,pid,time,event,trace 2>/dev/null >"$work/sched.txt"
python3 - "$work/sched.txt" "$CORDON" "$BWRAP" <<'PY'
import re, statistics, sys
path, cordon, bwrap = sys.argv[1:]
runs, live = [], {}
for line in open(path):
    m = re.match(r'\s*(.+?)\s+(\d+)\s+([\d.]+):\s+sched:(\w+):\s*(.*)', line)
    if not m:
        continue
    comm, pid, t, event, rest = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
    if event == 'sched_process_exec' and pid not in live:
        name = rest.split('filename=')[1].split()[0]
        if name in (cordon, bwrap, '/bin/true'):
            run = {'name': name, 'root': pid, 't0': t, 'ev': []}
            runs.append(run)
            live[pid] = run
            continue
    run = live.get(pid)
    if run is None:
        continue
    if event == 'sched_process_fork':
        live[int(rest.split('child_pid=')[1].split()[0])] = run
        run['ev'].append((t, 'fork'))
    elif event == 'sched_process_exec':
        run['ev'].append((t, 'exec ' + rest.split('filename=')[1].split()[0]))
    elif event == 'sched_process_exit':
        run['ev'].append((t, 'exit root' if pid == run['root'] else 'exit ' + comm))
parts = {k: [] for k in ('bwrap', 'run', 'helper', 'before', 'after', 'version', 'true')}
for run in runs:
    end = [t for t, what in run['ev'] if what == 'exit root']
    if not end:
        continue
    total = (end[0] - run['t0']) * 1000
    if run['name'] == bwrap:
        parts['bwrap'].append(total)
    elif run['name'] == '/bin/true':
        parts['true'].append(total)
    elif not any(what == 'fork' for _, what in run['ev']):
        parts['version'].append(total)
    else:
        start = [t for t, what in run['ev'] if what.startswith('exec') and 'sandbox-init' in what]
        outer = [t for t, what in run['ev'] if what == 'exit cordon-sandbox-']
        if not start or not outer:
            continue
        parts['run'].append(total)
        parts['helper'].append((outer[-1] - start[0]) * 1000)
        parts['before'].append((start[0] - run['t0']) * 1000)
        parts['after'].append((end[0] - outer[-1]) * 1000)
med = {k: statistics.median(v) for k, v in parts.items() if v}
b = med['bwrap']
print(f"bwrap --unshare-all /bin/true  {b:.3f} ms (n={len(parts['bwrap'])})")
print(f"cordon run -- /bin/true        {med['run']:.3f} ms = {med['run'] / b:.2f} x bwrap (n={len(parts['run'])})")
print(f"  helper (the sandbox)         {med['helper']:.3f} ms = {med['helper'] / b:.2f} x bwrap")
print(f"  cordon before / after it     {med['before']:.3f} / {med['after']:.3f} ms")
print(f"cordon --version               {med['version']:.3f} ms")
print(f"/bin/true                      {med['true']:.3f} ms")
print(f"floor (helper + cordon --version) / bwrap = {(med['helper'] + med['version']) / b:.2f}")
PY
