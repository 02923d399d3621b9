#!/usr/bin/env bash
# The README's test command: install everything the suite needs on a fresh Debian machine,
# then run the whole suite. Safe to re-run (installs are no-ops when already present).
#
# The interpreter: python3 itself where pip may install into it (a virtual environment's, as
# CI's fresh check makes one, or pyenv's); never one whose site-packages belong to the system
# (PEP 668: Debian's own python3 is EXTERNALLY-MANAGED): then the project's .venv, made by
# scripts/setup.sh if command 1 was skipped. PYTHON overrides python3.
# System packages: root installs what is missing with apt-get; anyone else gets the exact
# `sudo apt-get install ...` line before anything is installed. RLMKIT_CHECK_ONLY=1: say which
# interpreter and which packages, install and run nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debian.sh

python=${PYTHON:-python3}
externally_managed() {
  "$1" -c 'import os, sys, sysconfig
sys.exit(sys.prefix != sys.base_prefix or not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'
}
use_venv=0
if [ -z "${VIRTUAL_ENV:-}" ] && externally_managed "$python"; then
  use_venv=1
fi

# What the suite needs from Debian: chromium drives the trajectory viewer's browser tests (no
# browser download); PostgreSQL's server, the tuner's tests (initdb + pg_ctl in a temp dir);
# libgomp1, the embedded model's engine; python3.X-venv, to make .venv where it is missing.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
read -r -a libs <<< "$(missing_model_libs)"
missing+=("${libs[@]}")
if [ "$use_venv" = 1 ] && [ ! -x .venv/bin/python ]; then
  venv_package=python$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv
  if command -v dpkg-query >/dev/null 2>&1 && ! debian_installed "$venv_package"; then
    missing+=("$venv_package")
  fi
fi
install_packages test "${missing[@]}"

if [ "$use_venv" = 1 ]; then
  if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ] && [ ! -x .venv/bin/python ]; then
    echo "test: check only: would make .venv ($python is externally managed) and run with .venv/bin/python"
    exit 0
  fi
  [ -x .venv/bin/python ] || PYTHON="$python" RLMKIT_VENV_ONLY=1 bash scripts/setup.sh
  export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"  # as `activate` does: tools by name too
  python=$VIRTUAL_ENV/bin/python
fi
py=$("$python" -c 'import sys; print(sys.executable)')  # the interpreter itself, not a shim
# Root also runs the sandbox's security tests as an unprivileged user (below). useradd and runuser
# live in /usr/sbin, which a clean PATH (env -i PATH=/usr/bin:/bin, a cron job) leaves out.
if [ "$(id -u)" = 0 ]; then
  export PATH="$PATH:/usr/sbin:/sbin"
  for tool in useradd runuser; do
    command -v "$tool" >/dev/null 2>&1 || { echo "test: $tool is missing (Debian's passwd, util-linux)" >&2; exit 1; }
  done
  if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ]; then
    echo "test: check only: would run the sandbox's security tests again as rlmkit-test ($(command -v runuser))"
  fi
fi
if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ]; then
  echo "test: check only: would install the extras and run the suite with $py"
  exit 0
fi
echo "test: running with $py"

# torch first, pinned to the CPU build on local disk, so the train extra pulls no CUDA build.
"$py" -m pip install -q --disable-pip-version-check torch==2.13.0
"$py" -m pip install -q --disable-pip-version-check -e ".[local,train,dev,bench,cluster,postgres,monty,tinker,observe,docs,serve]"
# The verifiers export targets verifiers 0.4.x: its test pip-installs the exported environment
# package into a clean venv holding only this checkout (dspy-rlmkit), verifiers and uv (which
# verifiers runs its chat program with). `$py -m venv` without --system-site-packages is clean
# whether $py is the system's or itself a venv's. Re-installed when pyproject.toml changes.
vf_venv=.venvs/verifiers-v1
vf_stamp="$vf_venv/.pyproject.sha256"
if [ ! -x "$vf_venv/bin/vf-eval" ] || ! sha256sum -c --status "$vf_stamp" 2>/dev/null; then
  rm -rf "$vf_venv"
  "$py" -m venv "$vf_venv"
  "$vf_venv/bin/pip" install -q --disable-pip-version-check -e . 'verifiers>=0.4,<0.5' 'setuptools>=68' uv
  sha256sum pyproject.toml > "$vf_stamp"
fi
export RLMKIT_VERIFIERS_PYTHON="$PWD/$vf_venv/bin/python"
# The docs site must build with no warning (a broken link or a docstring mkdocstrings cannot find).
NO_MKDOCS_2_WARNING=1 "$py" -m mkdocs build --strict --quiet --site-dir site
# The peers (dspy 3.4.1, rlms 0.1.3) live in their own venv, benchmarks/.peers; the test of the
# benchmark's driver for them runs against it, and fails rather than skips when it is missing.
mkdir -p .venvs
"$py" -c 'import sys; sys.path.insert(0, "benchmarks"); from pathlib import Path; from peers.peer_env import ensure
sys.exit(ensure(Path(".venvs/peers-setup.log")))'
export RLMKIT_REQUIRE_PEERS=1
# Lint and format are kept, not promised: a long line or an unformatted file fails the run.
"$py" -m ruff check .
"$py" -m ruff format --check .
# Types are kept too: mypy --strict on rlmkit/ (its configuration is in pyproject.toml; the cache in
# .mypy_cache makes a re-run take seconds).
"$py" -m mypy
# The sandbox as most users run it: its security tests and the hostile cases again as an
# unprivileged user, whose worker confines itself in a user namespace instead of a uid of its own.
# That user must reach the interpreter and this checkout: each folder above them gets o+x (enter,
# not list), e.g. a 0700 /root holding pyenv or a 0700 temp dir holding the clone.
if [ "$(id -u)" = 0 ]; then
  id rlmkit-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin rlmkit-test
  reach=$("$py" -c 'import os, sys; print(sys.prefix, sys.base_prefix, os.path.realpath(sys.executable))')
  for dir in $reach "$PWD"; do
    while [ "$dir" != / ]; do chmod o+x "$dir"; dir=$(dirname "$dir"); done
  done
  user_home=$(mktemp -d) && chown rlmkit-test "$user_home"
  runuser -u rlmkit-test -- env HOME="$user_home" PYTHONPATH="$PWD" PYTHONDONTWRITEBYTECODE=1 \
    "$py" -m pytest -q -p no:cacheprovider tests/sandbox/test_sandbox_security.py tests/sandbox/security
  rm -rf "$user_home"
fi
exec "$py" -m pytest -q "$@"
