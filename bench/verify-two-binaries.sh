#!/usr/bin/env bash
# Two cordon binaries (BEFORE, AFTER: e.g. main's release build and a branch's) against a
# crate's own `cargo test -q` in a developer's warm checkout: the crate as published on
# crates.io, committed on `main`; each binary's cold verify (a trusted build, its own
# CORDON_HOME), then RUNS interleaved rounds of native, BEFORE and AFTER on the unchanged
# commit (warm), medians. With ONELINE=1, also RUNS rounds of a one-line edit (a comment
# appended to src/lib.rs, uncommitted): incremental `cargo test -q` against each binary's
# verify of the edited checkout. Interleaving keeps a shared machine's load swings out of
# the ratios. Usage: BEFORE=/path/cordon AFTER=/path/cordon RUNS=7 bench/verify-two-binaries.sh CRATE VERSION
set -euo pipefail
name=${1:?crate name} ver=${2:?version} runs=${RUNS:-7}
before=${BEFORE:?a cordon binary} after=${AFTER:?a cordon binary}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; echo $((($(date +%s%N) - s) / 1000000)); }
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { cut -d' ' -f"$2" "$1" | med; }
mkdir -p "$w/src"
curl -fsSL "https://static.crates.io/crates/$name/$name-$ver.crate" | tar xz -C "$w/src" --strip-components=1
cp -r "$w/src" "$w/repo"
printf 'target/\n' >>"$w/repo/.gitignore"
git -C "$w/repo" init -q -b main && git -C "$w/repo" add -A
git -C "$w/repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m published
cp -r "$w/repo" "$w/dev"
(cd "$w/dev" && cargo test -q >/dev/null 2>&1)
verify() { (cd "$w/repo" && CORDON_HOME="$w/home-$1" ms "$2" verify); }
echo "$name cold verify: before $(verify before "$before") ms, after $(verify after "$after") ms"
for i in $(seq "$runs"); do
  echo "$(cd "$w/dev" && ms cargo test -q) $(verify before "$before") $(verify after "$after")"
done >"$w/warm"
echo "$name unchanged, $runs interleaved rounds, medians: cargo test $(col "$w/warm" 1) ms, before $(col "$w/warm" 2) ms, after $(col "$w/warm" 3) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${ONELINE:-0}" = 1 ]; then
  for i in $(seq "$runs"); do
    echo "// one more line" >>"$w/dev/src/lib.rs"
    n=$(cd "$w/dev" && ms cargo test -q)
    echo "// one more line" >>"$w/repo/src/lib.rs"
    b=$(verify before "$before")
    echo "// one more line" >>"$w/repo/src/lib.rs"
    echo "$n $b $(verify after "$after")"
  done >"$w/one"
  echo "$name one-line edit, $runs interleaved rounds, medians: cargo test $(col "$w/one" 1) ms, before $(col "$w/one" 2) ms, after $(col "$w/one" 3) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
fi
