#!/usr/bin/env bash
# Workspace creation, in one run on one 3,000-file repository (30 directories x 100 files):
#
#   git worktree add --detach + git worktree remove --force      the baseline
#   cordon workspace create --strategy git-worktree + remove     the fallback strategy
#   cordon workspace create --strategy overlay + remove          the default, base tree warm
#   cordon workspace create --strategy overlay (create alone)    what "<= 10 ms" is about
#
# plus, once each: the first overlay create (it checks the base tree out), and the disk an
# overlay workspace and a worktree take.
#
# Usage: bench/workspace-create.sh [hyperfine options...]   (needs git, hyperfine, cargo)
# RUNS=N sets hyperfine's runs (default 40); CORDON=path uses a built cordon.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --quiet --release -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="$root/target/release/cordon"
fi
runs="${RUNS:-40}"

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
export CORDON_HOME="$work/home"
"$CORDON" doctor | grep -E "overlay workspaces|workspaces are made as" || true

# The first overlay workspace of a commit checks its base tree out (once per commit).
start=$(date +%s%N)
first=$("$CORDON" workspace create --repo "$repo" --strategy overlay --persistent 2>/dev/null)
echo "first overlay create (base tree checked out): $((($(date +%s%N) - start) / 1000000)) ms"
# du counts a file with several links once, at its first name: listing the bases first, the
# workspace's own line is what it adds (its git index is the base's, hard-linked).
echo "disk of one overlay workspace beyond its base: $(du -sk "$CORDON_HOME/bases" "$CORDON_HOME/workspaces/$first" | tail -1 | cut -f1) KiB"
wt=$("$CORDON" workspace create --repo "$repo" --strategy git-worktree --persistent 2>/dev/null)
echo "disk of one git worktree workspace: $(du -sk "$CORDON_HOME/workspaces/$wt" | cut -f1) KiB"
"$CORDON" workspace remove "$wt" >/dev/null

# "create alone" leaves a workspace per run: each is removed before the next run, untimed
# (every cordon command first reads the records of the workspaces there are).
cat > "$work/cleanup.sh" <<CLEANUP
#!/bin/sh
for f in "$CORDON_HOME"/workspaces/*.json; do
  id=\$(basename "\$f" .json)
  [ "\$id" = "$first" ] || "$CORDON" workspace remove "\$id" >/dev/null 2>&1
done
CLEANUP
chmod +x "$work/cleanup.sh"

hyperfine -N --warmup 3 --runs "$runs" --prepare "$work/cleanup.sh" --export-json "$work/create.json" "$@" \
  -n "git worktree add + remove" \
  "sh -c 'git -C $repo worktree add -q --detach $work/raw HEAD && git -C $repo worktree remove --force $work/raw'" \
  -n "cordon git-worktree create + remove" \
  "sh -c 'id=\$($CORDON workspace create --repo $repo --strategy git-worktree 2>/dev/null) && $CORDON workspace remove \$id >/dev/null'" \
  -n "cordon overlay create + remove" \
  "sh -c 'id=\$($CORDON workspace create --repo $repo --strategy overlay 2>/dev/null) && $CORDON workspace remove \$id >/dev/null'" \
  -n "cordon overlay create" \
  "$CORDON workspace create --repo $repo --strategy overlay --persistent"

python3 - "$work/create.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["git worktree add + remove"]["median"]
for name, x in r.items():
    print(f"{name:40s} median {x['median']*1000:8.1f} ms  mean {x['mean']*1000:8.1f} ms  min {x['min']*1000:7.1f} ms  ratio to git {x['median']/base:6.3f}")
PY
