# Sourced by the sandbox start-up benchmarks (bench/sandbox-start.sh,
# bench/sandbox-start-floor.sh): builds the release binary, sets CORDON (its absolute path)
# and RUNS (default 300), makes a throw-away work directory with a fresh CORDON_HOME and runs
# from a directory of its own inside it (the landlock tier refuses a working directory that
# holds CORDON_HOME: it cannot hide what it cannot unmount), checks that the host can
# sandbox, and removes everything on exit. `start_busy` pins `yes > /dev/null` to CPU 0
# until the script ends.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -q -p cordon
CORDON=$(realpath "${CARGO_TARGET_DIR:-$PWD/target}/release/cordon")
RUNS=${RUNS:-300}
work=$(mktemp -d)
busy=
cleanup() {
  [ -n "$busy" ] && kill "$busy" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
start_busy() {
  taskset -c 0 yes >/dev/null &
  busy=$!
}
mkdir "$work/cwd"
cd "$work/cwd"
export CORDON_HOME=$work/home
"$CORDON" doctor >/dev/null || { echo "cordon doctor: this host cannot sandbox" >&2; exit 1; }
