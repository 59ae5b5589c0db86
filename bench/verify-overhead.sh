#!/usr/bin/env bash
# Warm verification against the developer's own incremental build, in the same run.
#
# The crate: semver (38 tests; its dev-dependency criterion comes from crates.io), from the
# cargo registry (fetched through a throw-away crate when missing). Both sides start from the
# same commit and make the same one-line edit to src/lib.rs:
#
#   developer:  a checkout whose target/ is warm at the commit; apply the edit; `cargo test`
#   cordon:     after one trusted verification of the commit (the warm-up, timed once),
#               `cordon verify --patch one-line.diff` (workspace, patch, fetch, fmt, build,
#               test, clippy in the sandbox, report, recorded)
#
# The two alternate RUNS times (default 10); medians and the ratio are printed.
# Usage: bench/verify-overhead.sh            (needs git, cargo with network for crates.io)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --quiet --release -p cordon -p cordon-sandbox-init --manifest-path "$root/Cargo.toml"
  CORDON="$root/target/release/cordon"
fi
runs="${RUNS:-10}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/semver-1.* 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$src" ]; then
  cargo new -q --lib "$work/fetch" && (cd "$work/fetch" && cargo add -q semver@1 && cargo fetch -q)
  src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/semver-1.* | sort -V | tail -1)
fi
echo "crate: $src"
repo="$work/repo"
cp -r "$src" "$repo"
rm -f "$repo/.cargo_vcs_info.json"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m semver
cp -r "$repo" "$work/edit"
sed -i '1i // a one-line change' "$work/edit/src/lib.rs"
git -C "$work/edit" diff > "$work/one-line.diff"
rm -rf "$work/edit"
cp -r "$repo" "$work/dev"
export CORDON_HOME="$work/home"

ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $((($(date +%s%N) - s) / 1000000)); }
echo "developer's cold cargo test: $(cd "$work/dev" && ms cargo test) ms"
echo "cordon verify of the commit (trusted build, cold, makes the cache): $(ms "$CORDON" verify --repo "$repo") ms"
"$CORDON" verify --repo "$repo" --patch "$work/one-line.diff" --explain | sed -n '/Build caches:/,$p'

: > "$work/dev.txt"; : > "$work/cordon.txt"
for _ in $(seq 1 "$runs"); do
  # The developer's checkout back at the commit, built (untimed), then the same edit.
  (cd "$work/dev" && git checkout -q src/lib.rs && cargo test -q >/dev/null 2>&1 && git apply "$work/one-line.diff")
  (cd "$work/dev" && ms cargo test) >> "$work/dev.txt"
  ms "$CORDON" verify --repo "$repo" --patch "$work/one-line.diff" >> "$work/cordon.txt"
done
python3 - "$work/dev.txt" "$work/cordon.txt" <<'PY'
import statistics, sys
dev = [int(x) for x in open(sys.argv[1])]
cor = [int(x) for x in open(sys.argv[2])]
d, c = statistics.median(dev), statistics.median(cor)
print(f"developer's incremental cargo test: median {d:.0f} ms (min {min(dev)}, max {max(dev)}, {len(dev)} runs)")
print(f"cordon verify --patch (warm):      median {c:.0f} ms (min {min(cor)}, max {max(cor)}, {len(cor)} runs)")
print(f"ratio cordon / developer: {c/d:.2f}")
PY
