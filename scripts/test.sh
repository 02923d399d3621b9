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
python3 -m pip install -q --disable-pip-version-check -e ".[local,train,dev,cluster,postgres,monty,tinker,observe]"
# verifiers' classic API (0.1.x) pins an older `datasets` than TRL needs, so its export test
# runs in a venv of its own (built once, reused). It must see the packages of the environment
# running this script: `venv --system-site-packages` would expose the *base* interpreter's
# packages when python3 is itself a venv, so a .pth file adds this environment's site dirs
# (after the venv's own, so verifiers' pins win there).
if [ ! -x .venvs/verifiers-classic/bin/python ]; then
  rm -rf .venvs/verifiers-classic
  python3 -m venv .venvs/verifiers-classic
  inner_site=$(.venvs/verifiers-classic/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' \
    > "$inner_site/outer-environment.pth"
  echo "torch==2.13.0+cpu" > .venvs/torch-pin.txt   # never pull another torch
  PIP_CONSTRAINT=.venvs/torch-pin.txt .venvs/verifiers-classic/bin/pip install -q --disable-pip-version-check verifiers==0.1.14
fi
export RLMKIT_VERIFIERS_CLASSIC_PYTHON="$PWD/.venvs/verifiers-classic/bin/python"
exec python3 -m pytest -q "$@"
