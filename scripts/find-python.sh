#!/bin/sh
# Print the path of a Python >= 3.12 interpreter, or fail with a clear message.
# Looks at $PYTHON, then python3.13/python3.12/python3 on PATH, then pyenv's installed versions.
# (A pyenv shim such as python3.12 may exist on PATH but refuse to run; each candidate is tried.)
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
root="${PYENV_ROOT:-$HOME/.pyenv}"
for cand in "${PYTHON:-}" python3.12 python3.13 python3 \
    "$root"/versions/3.12*/bin/python "$root"/versions/3.13*/bin/python \
    "$root"/versions/3.1[4-9]*/bin/python /usr/local/bin/python3.13 /usr/local/bin/python3.12 \
    /usr/bin/python3.13 /usr/bin/python3.12; do
  [ -n "$cand" ] || continue
  if ok "$cand"; then
    if command -v "$cand" >/dev/null 2>&1; then command -v "$cand"; else echo "$cand"; fi
    exit 0
  fi
done
echo "error: bayes_activeeval needs Python >= 3.12 (ArviZ 1.x requires it), and none was found." >&2
echo "       Install one (e.g. 'pyenv install 3.12') or run 'make PYTHON=/path/to/python3.12 ...'." >&2
exit 1
