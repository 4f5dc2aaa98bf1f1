#!/usr/bin/env bash
# Create .venv (if missing) and install reportflow into it. Usage: scripts/setup.sh [extras]
#
# Quiet and quick when nothing changed: the install is editable (source edits need no
# reinstall), so it is redone only when pyproject.toml, the requested extras or the
# interpreter change. A stamp in .venv records what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
stamp=.venv/.reportflow-installed
log=.venv/pip.log

fail() { echo "setup: $*" >&2; exit 1; }

if ! command -v "$python" >/dev/null 2>&1; then
  fail "$python not found: install Python 3.11 or newer (Debian: apt-get install python3 python3-venv)"
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  fail "reportflow needs Python 3.11 or newer, $python is $("$python" -c 'import platform; print(platform.python_version())'): install a newer Python, or set PYTHON=python3.11"
fi

if [ ! -x .venv/bin/python ]; then
  if ! "$python" -m venv .venv >/dev/null 2>&1; then
    rm -rf .venv
    fail "'$python -m venv' is not available: install it (Debian/Ubuntu: apt-get install python3-venv), then run this again"
  fi
fi

# What an install depends on: the project file, the extras and the interpreter.
want="$(cat pyproject.toml; echo "extras=$extras"; .venv/bin/python -c 'import sys; print(sys.version)')"
want_hash=$(printf '%s' "$want" | .venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
# An install with extras also satisfies a plain one (scripts/test.sh, then scripts/demo.sh).
plain_hash=$(printf '%s' "$(cat pyproject.toml; echo "extras="; .venv/bin/python -c 'import sys; print(sys.version)')" \
  | .venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ -f "$stamp" ] && [ -x .venv/bin/reportflow ]; then
  if grep -qx "$want_hash" "$stamp" || { [ -z "$extras" ] && grep -qx "$plain_hash" "$stamp"; }; then
    exit 0
  fi
fi

echo "installing reportflow${extras:+ with [$extras]} into .venv"
target="."
[ -n "$extras" ] && target=".[$extras]"
if ! .venv/bin/python -m pip install --disable-pip-version-check -e "$target" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  fail "pip install failed (full log: $log); check the network or the package index, then run this again"
fi
# Record this install; a plain install's hash is kept too, since it is a subset of this one.
{ echo "$want_hash"; [ -n "$extras" ] && echo "$plain_hash"; true; } >"$stamp"
