#!/usr/bin/env bash
# The cost of `cordon session fork` (issue 40), with its baselines measured in the same run:
#   1. `session fork ID --count 1` and `--count 8` on a 3,000-file and a 30,000-file
#      repository (each timed fork is of a fresh fork that has just written a file, untimed,
#      so that every fork freezes a layer: the costly path), against `git worktree add` and
#      `session create` of the same repository (hyperfine through a shell, its start
#      subtracted);
#   2. the disk a fork adds before it writes (du of $CORDON_HOME before and after 8 forks);
#   3. `session compare` of 4 forks of a small Rust crate that each change one line, against
#      one warm `cordon verify` of one such change (the trusted build cache made first).
# Medians from hyperfine's JSON. Needs hyperfine, git, cargo, python3. What a deep layer
# stack costs the programs in a session: bench/session-depth.sh.
#
#   bench/session-fork.sh                    # builds release, RUNS=50 BASE_RUNS=10 CMP_RUNS=5
#   CORDON=PATH RUNS=20 bench/session-fork.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --release -q -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="${CARGO_TARGET_DIR:-$root/target}/release/cordon"
fi
RUNS=${RUNS:-50}
BASE_RUNS=${BASE_RUNS:-10}
CMP_RUNS=${CMP_RUNS:-5}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null CORDON_HOME="$work/home"
ident=(-c user.name=bench -c user.email=bench@example.invalid)

median() { python3 -c 'import json,sys,statistics; r=json.load(open(sys.argv[1]))["results"][0]["times"]; print("%.1f" % (statistics.median(r)*1000))' "$1"; }

source "$root/bench/make-repo.sh"

echo "cordon: $CORDON"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  kernel: $(uname -r)  cpus: $(nproc)"
for files in 3000 30000; do
  repo="$work/repo-$files"
  make_repo "$repo" "$files"
  cd "$repo"
  echo "== $files files ($(git ls-files | wc -l) in HEAD)"
  src=$("$CORDON" session create 2>/dev/null)
  "$CORDON" session exec "$src" -- sh -c 'echo dirty >> dir0/file0.txt; echo new > untracked.txt' >/dev/null
  # Each timed fork is of a fresh fork of the source that has just written a file (untimed):
  # every timed fork freezes a layer, and the stack stays two layers deep whatever the run.
  prepare="sh -c 'f=\$($CORDON session fork $src 2>/dev/null) && $CORDON session exec \$f -- sh -c \"date +%N > w.txt\" >/dev/null && echo \$f > $work/current'"
  hyperfine --style none --runs "$RUNS" --prepare "$prepare" \
    --export-json "$work/fork1.json" "$CORDON session fork \$(cat $work/current) --count 1" >/dev/null
  hyperfine --style none --runs "$RUNS" --prepare "$prepare" \
    --export-json "$work/fork8.json" "$CORDON session fork \$(cat $work/current) --count 8" >/dev/null
  # Disk: 8 forks of a session that wrote, du before and after (the freeze is a rename).
  eval "$prepare" >/dev/null
  before=$(du -sk "$CORDON_HOME" | cut -f1)
  "$CORDON" session fork "$(cat "$work/current")" --count 8 >/dev/null 2>&1
  after=$(du -sk "$CORDON_HOME" | cut -f1)
  hyperfine -N --style none --runs "$BASE_RUNS" \
    --prepare "sh -c 'git -C $repo worktree remove --force $work/wt 2>/dev/null; true'" \
    --export-json "$work/wt.json" "git -C $repo worktree add -q --detach $work/wt" >/dev/null 2>&1
  git -C "$repo" worktree remove --force "$work/wt"
  hyperfine -N --style none --runs "$BASE_RUNS" \
    --export-json "$work/create.json" "$CORDON session create --repo $repo" >/dev/null 2>&1
  printf '  session fork --count 1   median %7s ms  (%s runs)\n' "$(median "$work/fork1.json")" "$RUNS"
  printf '  session fork --count 8   median %7s ms  (%s runs)\n' "$(median "$work/fork8.json")" "$RUNS"
  printf '  disk added per fork      %7s KiB (du of CORDON_HOME, 8 forks)\n' "$(( (after - before) / 8 ))"
  printf '  git worktree add         median %7s ms  (%s runs)\n' "$(median "$work/wt.json")" "$BASE_RUNS"
  printf '  session create           median %7s ms  (%s runs)\n' "$(median "$work/create.json")" "$BASE_RUNS"
  for s in $("$CORDON" session list --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)["sessions"]))'); do
    "$CORDON" session remove --discard "$s" >/dev/null 2>&1 || true
  done
  "$CORDON" gc >/dev/null 2>&1 || true
  cd "$root"
done

# compare: 4 candidates of a small Rust crate, each one line, against one warm verify.
crate="$work/crate"
mkdir -p "$crate/src"
printf '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n' > "$crate/Cargo.toml"
python3 - "$crate/src/lib.rs" <<'PY'
import sys
fns = "\n".join("pub fn f%d(x: u64) -> u64 {\n    x.wrapping_mul(%d).rotate_left(%d) ^ %d\n}\n" % (i, i + 3, i % 63, i) for i in range(400))
tests = "\n".join("    #[test]\n    fn t%d() {\n        assert_eq!(super::f%d(0), %d);\n    }\n" % (i, i, i) for i in range(400))
open(sys.argv[1], "w").write("pub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n\n" + fns + "\n#[cfg(test)]\nmod tests {\n" + tests + "}\n")
PY
printf '/target\nCargo.lock\n' > "$crate/.gitignore"
git -C "$crate" init -q -b main
git -C "$crate" add -A
git -C "$crate" "${ident[@]}" commit -q -m crate
cd "$crate"
"$CORDON" verify --committed --no-record >/dev/null 2>&1 # the trusted build cache of main
src=$("$CORDON" session create 2>/dev/null)
mapfile -t forks < <("$CORDON" session fork "$src" --count 4 2>/dev/null)
n=0
for f in "${forks[@]}"; do
  n=$((n + 1))
  "$CORDON" session exec "$f" -- sh -c "sed -i 's/^    a + b\$/    a + b + $n - $n/' src/lib.rs" >/dev/null
done
sed 's/^    a + b$/    a + b + 1 - 1/' src/lib.rs > "$work/lib.rs"
diff -u src/lib.rs "$work/lib.rs" | sed '1s|.*|--- a/src/lib.rs|;2s|.*|+++ b/src/lib.rs|' > "$work/one-line.patch" || true
hyperfine -N --style none --runs "$CMP_RUNS" --export-json "$work/verify.json" \
  "$CORDON verify --no-record --patch $work/one-line.patch" >/dev/null 2>&1
hyperfine -N --style none --runs "$CMP_RUNS" --export-json "$work/compare.json" \
  "$CORDON session compare --no-record ${forks[*]}" >/dev/null 2>&1 || true
echo "== compare (4 one-line candidates of a crate with 401 functions and 400 tests)"
printf '  one warm verify          median %7s ms  (%s runs)\n' "$(median "$work/verify.json")" "$CMP_RUNS"
printf '  session compare of 4     median %7s ms  (%s runs)\n' "$(median "$work/compare.json")" "$CMP_RUNS"
