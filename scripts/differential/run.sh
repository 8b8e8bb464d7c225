#!/usr/bin/env bash
# Differential test of the Rust `orders replay` binary against the Python reference.
#
#   scripts/differential/run.sh [--no-build] [differential.py options...]
#
# Creates the venv ${TOOLCALL_VENV:-target/venv} (relative to the repository root)
# if it is missing, installs pydantic v2 in it, builds `orders` in release mode
# unless --no-build is given, and runs differential.py with the other options
# (see `scripts/differential/run.sh --no-build --help`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

build=1
args=()
for arg in "$@"; do
  if [[ "$arg" == "--no-build" ]]; then
    build=0
  else
    args+=("$arg")
  fi
done

venv="${TOOLCALL_VENV:-target/venv}"
if [[ "$venv" != /* ]]; then
  venv="$root/$venv"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'pydantic>=2,<3'

if (( build )); then
  cargo build -p orders --release
fi

exec "$venv/bin/python" "$here/differential.py" ${args[@]+"${args[@]}"}
