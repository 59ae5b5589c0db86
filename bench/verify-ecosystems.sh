#!/usr/bin/env bash
# Warm verification of npm and Python projects against the developer's own test command after
# the same one-line edit, in the same run (the counterparts of bench/verify-overhead.sh).
#
#   npm:     a package with one dependency from the npm registry (semver, locked) and 40
#            `node --test` tests. Developer: `npm test` in a checkout whose node_modules is
#            installed. cordon: zero-config plan (npm install — skipped, node_modules from the
#            trusted cache —, node --check, npm test).
#   Python:  a package with one dependency (packaging, pinned; its wheel committed under
#            wheels/, installed without network) in a virtual environment and 40 pytest tests. Developer: `.venv/bin/python -m pytest -q` in a
#            checkout whose .venv is made. cordon: cordon.toml — a setup stage making .venv
#            (`outputs = [".venv"]`, `inputs = [requirements.txt, pyproject.toml, wheels/**]`: skipped,
#            .venv from the trusted cache), compileall, pytest.
#
# Each candidate is verified with `cordon verify --patch` after one trusted verification of the
# commit (the warm-up, timed once). Developer and cordon alternate RUNS times (default 10);
# wall and CPU (perf stat task-clock, children included) medians, ratios and exit statuses are
# printed. Usage: bench/verify-ecosystems.sh   (needs git, node/npm, python3 with venv and
# pip, network to the npm registry and PyPI on the host)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${CORDON:-}" ]; then
  cargo build --quiet --release -p cordon --manifest-path "$root/Cargo.toml"
  CORDON="$root/target/release/cordon"
fi
runs="${RUNS:-10}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export CORDON_HOME="$work/home"

have_perf=$(command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1 && echo 1 || true)
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $((($(date +%s%N) - s) / 1000000)); }
measure() { # name command...: appends "wall cpu exit-status" to $work/name.txt
  local name=$1; shift
  local s rc=0; s=$(date +%s%N)
  if [ -n "$have_perf" ]; then
    perf stat -x, -e task-clock -o "$work/perf.txt" "$@" >/dev/null 2>&1 || rc=$?
  else
    "$@" >/dev/null 2>&1 || rc=$?
  fi
  local wall=$((($(date +%s%N) - s) / 1000000))
  local cpu; cpu=$( [ -n "$have_perf" ] && grep task-clock "$work/perf.txt" | cut -d, -f1 | cut -d. -f1 || echo 0)
  echo "$wall $cpu $rc" >> "$work/$name.txt"
}
commit_all() { git -C "$1" add -A && git -C "$1" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "$2"; }
# The one-line edit of FILE in repository REPO, as a patch in $work/NAME.diff.
edit() { # repo file name line
  local copy="$work/edit-$3"
  cp -r "$1" "$copy"
  sed -i "1i $4" "$copy/$2"
  git -C "$copy" diff > "$work/$3.diff"
  rm -rf "$copy"
}

# --- npm ---------------------------------------------------------------------------------
npm_repo="$work/npm"
mkdir -p "$npm_repo/lib" "$npm_repo/test"
cat > "$npm_repo/package.json" <<'JSON'
{
  "name": "bench-app",
  "version": "1.0.0",
  "private": true,
  "main": "lib/index.js",
  "dependencies": { "semver": "7.6.3" },
  "scripts": { "test": "node --test test/" }
}
JSON
cat > "$npm_repo/lib/index.js" <<'JS'
const semver = require("semver");
exports.newest = (versions) => versions.filter((v) => semver.valid(v)).sort(semver.rcompare)[0];
exports.satisfies = (v, range) => semver.satisfies(v, range);
JS
for i in $(seq 1 40); do
  cat > "$npm_repo/test/t$i.test.js" <<JS
const test = require("node:test");
const assert = require("node:assert");
const app = require("../lib/index.js");
test("newest $i", () => assert.strictEqual(app.newest(["1.0.$i", "0.9.0", "x"]), "1.0.$i"));
test("range $i", () => assert.ok(app.satisfies("1.2.$i", "^1.0.0")));
JS
done
printf 'node_modules/\n' > "$npm_repo/.gitignore"
(cd "$npm_repo" && npm install --silent --no-audit --no-fund >/dev/null)
rm -rf "$npm_repo/node_modules"
git -C "$npm_repo" init -q -b main && commit_all "$npm_repo" npm
edit "$npm_repo" lib/index.js npm-one '// a one-line change'
cp -r "$npm_repo" "$work/npm-dev"
(cd "$work/npm-dev" && npm ci --silent --no-audit --no-fund >/dev/null)

# --- Python ------------------------------------------------------------------------------
py_repo="$work/py"
mkdir -p "$py_repo/app" "$py_repo/tests"
cat > "$py_repo/pyproject.toml" <<'TOML'
[project]
name = "bench-app"
version = "1.0.0"

[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"
TOML
printf 'packaging==24.1\n' > "$py_repo/requirements.txt"
# The wheel comes with the repository (wheels/, fetched here by the host's pip): the install
# needs no network, so neither side depends on how this machine reaches PyPI.
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$py_repo/wheels" -r "$py_repo/requirements.txt"
cat > "$py_repo/app/__init__.py" <<'PY'
from packaging.version import Version


def newest(versions):
    return str(max(Version(v) for v in versions))
PY
for i in $(seq 1 20); do
  cat > "$py_repo/tests/test_$i.py" <<PY
import app


def test_newest_$i():
    assert app.newest(["1.0.$i", "0.9.0"]) == "1.0.$i"


def test_order_$i():
    assert app.newest(["0.$i.0", "0.$i.1"]) == "0.$i.1"
PY
done
cat > "$py_repo/cordon.toml" <<'TOML'
[[stage]]
name = "venv"
category = "setup"
run = ["sh", "-c", "python3 -m venv --system-site-packages .venv && .venv/bin/python -m pip install -q --disable-pip-version-check --no-index --find-links wheels -r requirements.txt"]
outputs = [".venv"]
inputs = ["requirements.txt", "pyproject.toml", "wheels/**"]

[[stage]]
name = "compile"
category = "compile"
run = ["python3", "-m", "compileall", "-q", "app"]

[[stage]]
name = "pytest"
category = "test"
run = [".venv/bin/python", "-m", "pytest", "-q"]
TOML
printf '.venv/\n__pycache__/\n' > "$py_repo/.gitignore"
git -C "$py_repo" init -q -b main && commit_all "$py_repo" py
edit "$py_repo" app/__init__.py py-one '# a one-line change'
cp -r "$py_repo" "$work/py-dev"
(cd "$work/py-dev" && python3 -m venv --system-site-packages .venv \
  && .venv/bin/python -m pip install -q --disable-pip-version-check --no-index --find-links wheels -r requirements.txt)

echo "cordon verify of the npm commit (trusted build, makes the cache): $(ms "$CORDON" verify --repo "$npm_repo") ms"
echo "cordon verify of the Python commit (trusted build, makes the cache): $(ms "$CORDON" verify --repo "$py_repo") ms"
for r in npm py; do
  "$CORDON" verify --repo "$work/$r" --patch "$work/$r-one.diff" --explain | sed -n '/Build caches:/,$p'
done

# This VM sets NODE_EXTRA_CA_CERTS for its TLS proxy: every node start then parses a CA bundle
# (≈ 25 ms each; `node --test` starts one per file). The sandbox's environment never has it, so
# for a like-for-like comparison the developer's side runs without it too (the installs above
# needed it).
unset NODE_EXTRA_CA_CERTS
reset() { # dev checkout back at the commit, tests run once (untimed), then the same edit
  (cd "$1" && git checkout -q . && "${@:3}" >/dev/null 2>&1; git apply "$2")
}
for name in npm-dev npm-cordon py-dev py-cordon; do : > "$work/$name.txt"; done
for _ in $(seq 1 "$runs"); do
  reset "$work/npm-dev" "$work/npm-one.diff" npm test
  (cd "$work/npm-dev" && measure npm-dev npm test)
  measure npm-cordon "$CORDON" verify --repo "$npm_repo" --patch "$work/npm-one.diff"
  reset "$work/py-dev" "$work/py-one.diff" .venv/bin/python -m pytest -q
  (cd "$work/py-dev" && measure py-dev .venv/bin/python -m pytest -q)
  measure py-cordon "$CORDON" verify --repo "$py_repo" --patch "$work/py-one.diff"
done
# One candidate verification of each, as a report: which stages ran and which were skipped.
for r in npm py; do
  "$CORDON" verify --repo "$work/$r" --patch "$work/$r-one.diff" --json 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sys.argv[1], r["overall"], [(s["name"], s["status"], s["duration_ms"]) for s in r["stages"]])' "$r"
done
python3 - "$work" <<'PY'
import statistics, sys
w = sys.argv[1]
def load(name):
    rows = [tuple(int(x) for x in line.split()) for line in open(f"{w}/{name}.txt")]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
for eco, dev_label in (("npm", "npm test"), ("py", "pytest")):
    dw, dc, drc = load(f"{eco}-dev")
    cw, cc, crc = load(f"{eco}-cordon")
    bw, bc = statistics.median(dw), statistics.median(dc)
    for label, wall, cpu, rcs in ((f"developer: {dev_label}", dw, dc, drc), ("cordon verify --patch (warm)", cw, cc, crc)):
        mw, mc = statistics.median(wall), statistics.median(cpu)
        codes = ",".join(f"{c}x{rcs.count(c)}" for c in sorted(set(rcs)))
        ratio_c = f"{mc / bc:5.2f}" if bc else "  n/a"
        print(f"{eco:3s} {label:32s} wall median {mw:6.0f} ms (min {min(wall):5d})  cpu median {mc:6.0f} ms  ratio: wall {mw / bw:5.2f} cpu {ratio_c}  exit {codes}")
PY
