# Sourced by the session benchmarks (bench/session-fork.sh, bench/session-depth.sh):
# `make_repo DIR FILES` makes a git repository of FILES small text files, 100 to a directory,
# in one commit on `main` (git run without the user's or the system's configuration).
make_repo() { # DIR FILES
  local dir=$1 files=$2
  mkdir -p "$dir"
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C "$dir" init -q -b main
  python3 - "$dir" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "dir%d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file%d.txt" % (i % 100)), "w") as f:
        f.write("file %d\n%s\n" % (i, "\n".join(str(j) for j in range(i % 100, i % 100 + 20))))
PY
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C "$dir" add -A
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C "$dir" \
    -c user.name=bench -c user.email=bench@example.invalid commit -q -m "$files files"
}
