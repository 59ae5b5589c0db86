#!/usr/bin/env bash
# Compares creating and removing a workspace with cordon-workspace against raw
# `git worktree add --detach` + `git worktree remove --force`, on a 3,000-file repository.
# Usage: bench/workspace-create.sh [hyperfine options...]   (needs git, hyperfine, cargo)
# Set WORKSPACE_BENCH_BIN to a built `workspace_bench` example to skip building it.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
bin="${WORKSPACE_BENCH_BIN:-}"   # a prebuilt example binary, to skip the build
if [ -z "$bin" ]; then
  cargo build --quiet --release -p cordon-workspace --example workspace_bench --manifest-path "$root/Cargo.toml"
  bin="$CARGO_TARGET_DIR/release/examples/workspace_bench"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
mkdir -p "$repo"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git -C "$repo" init -q -b main
for d in $(seq 0 29); do
  mkdir -p "$repo/dir$d"
  for f in $(seq 0 99); do
    printf 'file %s/%s\n%s\n' "$d" "$f" "$(seq "$f" $((f + 20)))" > "$repo/dir$d/file$f.txt"
  done
done
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "3000 files"
echo "files in HEAD: $(git -C "$repo" ls-files | wc -l)"

hyperfine --warmup 3 --min-runs 30 --prepare sync "$@" \
  -n "git worktree add --detach + remove --force" \
  "git -C '$repo' worktree add -q --detach '$work/raw' HEAD && git -C '$repo' worktree remove --force '$work/raw'" \
  -n "cordon-workspace create + remove" \
  "'$bin' '$work/home' '$repo' HEAD"

# hyperfine runs all of one command, then all of the other: on a shared machine the load can
# change in between. INTERLEAVED=N alternates the two N times and prints min/median/mean.
if [ -n "${INTERLEAVED:-}" ]; then
  ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $((($(date +%s%N) - s) / 1000000)); }
  : > "$work/raw.txt"; : > "$work/cordon.txt"
  for _ in $(seq 1 "$INTERLEAVED"); do
    sync; ms sh -c "git -C '$repo' worktree add -q --detach '$work/raw' HEAD && git -C '$repo' worktree remove --force '$work/raw'" >> "$work/raw.txt"
    sync; ms "$bin" "$work/home" "$repo" HEAD >> "$work/cordon.txt"
  done
  for name in raw cordon; do
    sort -n "$work/$name.txt" | awk -v n="$name" '{a[NR]=$1; s+=$1} END {printf "%-7s min %5d ms  median %5d ms  mean %5d ms  (%d runs)\n", n, a[1], a[int((NR+1)/2)], s/NR, NR}'
  done
fi
