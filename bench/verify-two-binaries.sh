#!/usr/bin/env bash
# Two cordon binaries (BEFORE, AFTER: e.g. main's release build and a branch's) against a
# package's own test command in a developer's warm checkout: a crate as published on
# crates.io (`cargo test -q`) or, as `pypi:NAME`, an sdist from PyPI (`python3 -m pytest -q
# -p no:cacheprovider`), committed on `main`; each binary's cold verify (a trusted build, its
# own CORDON_HOME), then RUNS interleaved rounds of native, BEFORE and AFTER on the unchanged
# commit (warm), medians. With ONELINE=1 (crates), also RUNS rounds of a one-line edit (a
# comment appended to src/lib.rs, uncommitted): incremental `cargo test -q` against each
# binary's verify of the edited checkout. Interleaving keeps a shared machine's load swings
# out of the ratios. With TIMELINE=1, AFTER's last warm report's phases are printed.
# Usage: BEFORE=/path/cordon AFTER=/path/cordon RUNS=7 bench/verify-two-binaries.sh [pypi:]NAME VERSION
set -euo pipefail
name=${1:?package name} ver=${2:?version} runs=${RUNS:-7}
before=${BEFORE:?a cordon binary} after=${AFTER:?a cordon binary}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; echo $((($(date +%s%N) - s) / 1000000)); }
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { cut -d' ' -f"$2" "$1" | med; }
mkdir -p "$w/src"
case $name in
  pypi:*)
    name=${name#pypi:}
    native=(python3 -m pytest -q -p no:cacheprovider)
    python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
      -d "$w/dl" "$name==$ver" >&2
    tar xzf "$w/dl/$name-$ver.tar.gz" -C "$w/src" --strip-components=1
    ignore='__pycache__/\n.pytest_cache/\n'
    ;;
  *)
    native=(cargo test -q)
    curl -fsSL "https://static.crates.io/crates/$name/$name-$ver.crate" | tar xz -C "$w/src" --strip-components=1
    ignore='target/\n'
    ;;
esac
label="${native[*]}"
cp -r "$w/src" "$w/repo"
printf "$ignore" >>"$w/repo/.gitignore"
git -C "$w/repo" init -q -b main && git -C "$w/repo" add -A
git -C "$w/repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m published
cp -r "$w/repo" "$w/dev"
(cd "$w/dev" && "${native[@]}" >/dev/null 2>&1) || true
verify() { (cd "$w/repo" && CORDON_HOME="$w/home-$1" ms "$2" verify); }
echo "$name cold verify: before $(verify before "$before") ms, after $(verify after "$after") ms"
for i in $(seq "$runs"); do
  echo "$(cd "$w/dev" && ms "${native[@]}") $(verify before "$before") $(verify after "$after")"
done >"$w/warm"
echo "$name unchanged, $runs interleaved rounds, medians: $label $(col "$w/warm" 1) ms, before $(col "$w/warm" 2) ms, after $(col "$w/warm" 3) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${TIMELINE:-0}" = 1 ]; then
  (cd "$w/repo" && CORDON_HOME="$w/home-after" "$after" verify --json 2>/dev/null || true) |
    jq -r '"after, one more warm verify: " + ([.timeline[] | "\(.phase)\(if .stage then " " + .stage else "" end) \(.duration_ms)"] | join(", ")) + " ms"'
fi
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
