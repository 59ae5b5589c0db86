#!/usr/bin/env python3
# Regenerates crates/cordon/startup-order.txt: the functions a short `cordon run` executes, in
# the order the linker should place them (crates/cordon/build.rs hands the file to lld as
# `--symbol-ordering-file` for release builds on x86_64 Linux).
#
# Why: the release executable has 12 MB of code, and a `cordon run -- /bin/true` touches
# about a thousand functions spread across it. Each page-cache fault maps 64 KiB of code; with
# the functions scattered, the front of an unsandboxed run took 57 such faults, packed
# together it takes 15 (BENCHMARKS.md, "Sandbox start-up, round five"). A stale file only
# costs speed: names the linker does not find are ignored.
#
# How: the exact list of functions the front executes comes from callgrind (valgrind cannot
# follow the sandbox's set-up, whose Landlock and mount_setattr calls it does not know, so
# this covers the CLI, the policy and the recording); the sandbox's PID 1, which runs in a
# clone of cordon, is sampled with `perf record` over many sandboxed runs. Names are kept
# only if the executable defines them. Needs valgrind and perf.
#
#   bench/startup-order.py            # builds release, rewrites crates/cordon/startup-order.txt
#   RUNS=2000 bench/startup-order.py  # more sandboxed runs sampled (default 1000)
import collections, os, re, subprocess, sys, tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out_path = os.path.join(root, "crates", "cordon", "startup-order.txt")
runs = int(os.environ.get("RUNS", "1000"))

subprocess.run(["cargo", "build", "--release", "-q", "-p", "cordon"], cwd=root, check=True)
host = re.search(r"^host: (\S+)", subprocess.run(["rustc", "-vV"], capture_output=True, text=True).stdout, re.M).group(1)
target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
cordon = os.path.join(target_dir, host, "release", "cordon")

defined = set()
for line in subprocess.run(["nm", cordon], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        defined.add(parts[2])

work = tempfile.TemporaryDirectory(prefix="cordon-order-")  # removed on exit, even on failure
work_dir = work.name
env = dict(os.environ, CORDON_HOME=os.path.join(work_dir, "home"))
commands = [
    ["run", "--no-sandbox", "--no-record", "--", "/bin/true"],
    ["run", "--no-sandbox", "--", "/bin/true"],
    ["run", "--no-record", "--", "/bin/true"],
    ["run", "--", "/bin/true"],
]

ordered, seen = [], set()
def add(name):
    if name in defined and name not in seen:
        seen.add(name)
        ordered.append(name)

# What runs before `main` and callgrind does not name: the entry points (its "(below main)"),
# and the resolvers of the C library's indirect functions (memcpy, strcmp, ...), every one of
# which the static start calls, once per R_X86_64_IRELATIVE relocation. Each left where the
# linker put it costs a page-cache fault of its own (64 KiB mapped) at every start.
for name in ["cordon_entry", "_start", "__libc_start_main_impl", "__libc_start_call_main", "frame_dummy",
             "register_tm_clones", "deregister_tm_clones", "__do_global_dtors_aux"]:
    add(name)
by_address = {}
for line in subprocess.run(["nm", cordon], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        by_address.setdefault(int(parts[0], 16), parts[2])
for line in subprocess.run(["readelf", "-rW", cordon], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) >= 4 and parts[2] == "R_X86_64_IRELATIVE" and int(parts[3], 16) in by_address:
        add(by_address[int(parts[3], 16)])

# Under valgrind the C library skips the vDSO (valgrind offers none) and picks the string
# functions for valgrind's CPU: the vDSO's set-up, and the variants this kind of machine picks
# (valgrind's is AVX2; AVX-512 and EVEX ones are added) of every string function callgrind saw,
# are added by name.
VDSO_SETUP = ["setup_vdso", "_dl_new_object", "_dl_add_to_namespace_list", "_dl_setup_hash",
              "dl_vdso_vsym", "_dl_lookup_symbol_x", "do_lookup_x", "check_match", "_dl_name_match_p",
              "pthread_mutex_lock", "___pthread_mutex_lock", "__pthread_mutex_lock",
              "pthread_mutex_unlock", "___pthread_mutex_unlock", "__pthread_mutex_unlock_usercnt",
              "_dl_important_hwcaps", "_dl_init_static_tls", "_dl_allocate_tls_init"]
STRING_VARIANT = re.compile(r"^(__(?:mem|str|stp|wmem|wcs|raw)\w*?)_(?:avx2|avx|evex|avx512|sse2|sse4_1|sse4_2|sse42|ssse3|erms)")
# The child that executes the program shares cordon's memory (`clone(CLONE_VM|CLONE_VFORK)`,
# crates/cordon-exec/src/spawn.rs), and callgrind does not follow it: its functions, and the
# C library's calls it makes, by name.
CHILD_LIBC = ["__libc_sigaction", "sigaction", "__sigaction", "pthread_sigmask", "__pthread_sigmask",
              "setsid", "__setsid", "prctl", "__prctl", "dup2", "__dup2", "chdir", "__chdir", "execve",
              "__execve", "_exit", "_Exit", "syscall", "__errno_location", "__libc_current_sigrtmax",
              "__libc_current_sigrtmin"]

def add_front(profile):
    names = []
    with open(profile) as f:
        for line in f:
            m = re.match(r"c?fn=\(\d+\) (\S+)", line)
            if m:
                names.append(m.group(1))
    for name in names:
        add(name)
        m = STRING_VARIANT.match(name)
        if m:
            for other in sorted(defined):
                if other.startswith(m.group(1) + "_") and ("evex" in other or "avx512" in other):
                    add(other)

# The front, exactly: callgrind names every function executed, first use first. The first
# command (unsandboxed, unrecorded) comes first, then the child and the vDSO set-up that every
# command runs, then what the other commands add.
for i, args in enumerate(commands):
    profile = os.path.join(work_dir, f"callgrind.{i}")
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={profile}", cordon, *args],
                   cwd=work_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    add_front(profile)
    if i == 0:
        for name in VDSO_SETUP + sorted(n for n in defined if "cordon_exec5spawn" in n) + CHILD_LIBC:
            add(name)
front = len(ordered)

# The sandbox's PID 1 (a clone of cordon), sampled; by name, so that a new sampling changes
# the file only where it found other functions.
samples = os.path.join(work_dir, "perf.data")
loop = f'for i in $(seq {runs}); do "{cordon}" run --no-record -- /bin/true; "{cordon}" run -- /bin/true; done'
subprocess.run(["perf", "record", "-q", "-F", "40000", "-e", "cpu-clock", "-o", samples, "--", "sh", "-c", loop],
               cwd=work_dir, env=env, stdout=subprocess.DEVNULL, check=True)
report = subprocess.run(["perf", "report", "-i", samples, "--comm", "cordon", "--no-demangle", "--sort", "sym",
                         "-q", "-g", "none"], capture_output=True, text=True, check=True).stdout
counts = collections.Counter()
for line in report.splitlines():
    m = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
    if m:
        counts[m.group(2)] += float(m.group(1))
for name in sorted(counts):
    add(name)

with open(out_path, "w") as f:
    f.write("\n".join(ordered) + "\n")
print(f"{out_path}: {len(ordered)} functions ({front} from callgrind, {len(ordered) - front} sampled)")
