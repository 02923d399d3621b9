#!/usr/bin/env bash
# The README's test command: install everything the suite needs on a fresh Debian machine,
# then run the whole suite. Safe to re-run (installs are no-ops when already present).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium drives the trajectory viewer's browser tests (no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# Debian's PostgreSQL server: the tuner's tests start a throwaway one (initdb + pg_ctl in a temp dir).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
# torch first, pinned to the CPU build on local disk, so the train extra pulls no CUDA build.
python3 -m pip install -q --disable-pip-version-check torch==2.13.0
python3 -m pip install -q --disable-pip-version-check -e ".[local,train,dev,bench,cluster,postgres,monty,tinker,observe,docs,serve]"
# The verifiers export targets verifiers 0.4.x: its test pip-installs the exported environment
# package into a clean venv holding only this checkout (dspy-rlmkit), verifiers and uv (which
# verifiers runs its chat program with). `python3 -m venv` without --system-site-packages is clean
# whether python3 is the system's or itself a venv's. Re-installed when pyproject.toml changes.
vf_venv=.venvs/verifiers-v1
vf_stamp="$vf_venv/.pyproject.sha256"
if [ ! -x "$vf_venv/bin/vf-eval" ] || ! sha256sum -c --status "$vf_stamp" 2>/dev/null; then
  rm -rf "$vf_venv"
  python3 -m venv "$vf_venv"
  "$vf_venv/bin/pip" install -q --disable-pip-version-check -e . 'verifiers>=0.4,<0.5' 'setuptools>=68' uv
  sha256sum pyproject.toml > "$vf_stamp"
fi
export RLMKIT_VERIFIERS_PYTHON="$PWD/$vf_venv/bin/python"
# The docs site must build with no warning (a broken link or a docstring mkdocstrings cannot find).
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --quiet --site-dir site
# The peers (dspy 3.4.1, rlms 0.1.3) live in their own venv, benchmarks/.peers; the test of the
# benchmark's driver for them runs against it, and fails rather than skips when it is missing.
mkdir -p .venvs
python3 -c 'import sys; sys.path.insert(0, "benchmarks"); from pathlib import Path; from peers.peer_env import ensure
sys.exit(ensure(Path(".venvs/peers-setup.log")))'
export RLMKIT_REQUIRE_PEERS=1
# Lint and format are kept, not promised: a long line or an unformatted file fails the run.
python3 -m ruff check .
python3 -m ruff format --check .
# The sandbox as most users run it: its security tests and the hostile cases again as an
# unprivileged user, whose worker confines itself in a user namespace instead of a uid of its own.
# That user must reach the interpreter and this checkout: each folder above them gets o+x (enter,
# not list), e.g. a 0700 /root holding pyenv or a 0700 temp dir holding the clone.
if [ "$(id -u)" = 0 ]; then
  id rlmkit-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin rlmkit-test
  py=$(python3 -c 'import sys; print(sys.executable)')
  reach=$(python3 -c 'import os, sys; print(sys.prefix, sys.base_prefix, os.path.realpath(sys.executable))')
  for dir in $reach "$PWD"; do
    while [ "$dir" != / ]; do chmod o+x "$dir"; dir=$(dirname "$dir"); done
  done
  user_home=$(mktemp -d) && chown rlmkit-test "$user_home"
  runuser -u rlmkit-test -- env HOME="$user_home" PYTHONPATH="$PWD" PYTHONDONTWRITEBYTECODE=1 \
    "$py" -m pytest -q -p no:cacheprovider tests/test_sandbox_security.py tests/security
  rm -rf "$user_home"
fi
exec python3 -m pytest -q "$@"
