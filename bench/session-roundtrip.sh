#!/usr/bin/env bash
# A session's round trip — `cordon session push` (a new session), one commit in it,
# `cordon session pull` (fast-forward of the checked-out branch) — against the same by hand:
# `git bundle create` / `git clone` / commit / `git bundle create` / `git fetch` /
# `git merge --ff-only`, on a 3,000-file repository, interleaved run by run.
# Usage: bench/session-roundtrip.sh [RUNS]   (needs git, cargo; CORDON_BIN to skip the build)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
bin="${CORDON_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p cordon --manifest-path "$root/Cargo.toml"
  bin="$CARGO_TARGET_DIR/release/cordon"
fi
runs="${1:-15}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
mkdir -p "$repo"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null CORDON_HOME="$work/home"
id_args=(-c user.name=bench -c user.email=bench@example.invalid)
git -C "$repo" init -q -b main
for d in $(seq 0 29); do
  mkdir -p "$repo/dir$d"
  for f in $(seq 0 99); do
    printf 'file %s/%s\n%s\n' "$d" "$f" "$(seq "$f" $((f + 20)))" > "$repo/dir$d/file$f.txt"
  done
done
git -C "$repo" add -A
git -C "$repo" "${id_args[@]}" commit -q -m "3000 files"
base="$(git -C "$repo" rev-parse HEAD)"
echo "files in HEAD: $(git -C "$repo" ls-files | wc -l)"

by_hand() {
  git -C "$repo" bundle create -q "$work/out.bundle" main
  git clone -q -b main "$work/out.bundle" "$work/clone"
  echo change >> "$work/clone/dir0/file0.txt"
  git -C "$work/clone" "${id_args[@]}" commit -q -am "one commit"
  git -C "$work/clone" bundle create -q "$work/back.bundle" main "^$base"
  git -C "$repo" bundle verify -q "$work/back.bundle" 2>/dev/null
  git -C "$repo" fetch -q --no-tags "$work/back.bundle" "+main:refs/manual/back"
  git -C "$repo" merge -q --ff-only refs/manual/back
}

with_cordon() {
  id="$("$bin" session push --repo "$repo" 2>/dev/null)"
  tree="$CORDON_HOME/sessions/$id/tree"
  echo change >> "$tree/dir0/file0.txt"
  git -C "$tree" "${id_args[@]}" commit -q -am "one commit"
  "$bin" session pull "$id" --repo "$repo" 2>/dev/null
}

reset() {
  git -C "$repo" reset -q --hard "$base"
  rm -rf "$work/clone" "$work/out.bundle" "$work/back.bundle"
  git -C "$repo" update-ref -d refs/manual/back 2>/dev/null || true
  for s in "$CORDON_HOME"/sessions/*/; do
    [ -d "$s" ] && "$bin" session remove "$(basename "$s")" >/dev/null 2>&1 || true
  done
  rm -rf "$CORDON_HOME/sessions"
  for r in $(git -C "$repo" for-each-ref --format='%(refname)' refs/cordon); do
    git -C "$repo" update-ref -d "$r"
  done
}

ms() { local s; s=$(date +%s%N); "$@" >/dev/null; echo $((($(date +%s%N) - s) / 1000000)); }
: > "$work/hand.txt"; : > "$work/cordon.txt"
for _ in $(seq 1 "$runs"); do
  reset; sync; ms by_hand >> "$work/hand.txt"
  reset; sync; ms with_cordon >> "$work/cordon.txt"
done
for name in hand cordon; do
  sort -n "$work/$name.txt" | awk -v n="$name" '{a[NR]=$1; s+=$1} END {printf "%-7s min %5d ms  median %5d ms  mean %5d ms  (%d runs)\n", n, a[1], a[int((NR+1)/2)], s/NR, NR}'
done
