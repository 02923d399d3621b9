"""scripts/setup.sh, set-up command 1: makes .venv, installs the checkout into it, runs the demo.

Stubs stand in for python3 (its venv module present or missing), apt-get and `id`, so each
path runs in a second: the venv works; Debian without python3-venv as a user (a clear message,
nothing installed) and as root (apt-get installs it, then the set-up goes on); a Python too old.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"

PYTHON_STUB = """#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_LOG"
if [ "$1" = -c ]; then
  [ -n "${STUB_OLD:-}" ] && exit 1
  exec "$REAL_PYTHON" "$@"
fi
if [ "$1 $2" = "-m venv" ]; then
  if [ -e "$STUB_DIR/venv-module" ]; then
    mkdir -p "$3/bin" && cp "$STUB_DIR/venv-python" "$3/bin/python" && exit 0
  fi
  mkdir -p "$3"  # what a failed venv leaves behind
  echo "The virtual environment was not created successfully because ensurepip is not available." >&2
  exit 1
fi
exit 3
"""
VENV_PYTHON_STUB = '#!/usr/bin/env bash\necho "venv-python $*" >> "$STUB_LOG"\n'
APT_STUB = """#!/usr/bin/env bash
echo "apt-get $*" >> "$STUB_LOG"
case " $* " in *" install "*) touch "$STUB_DIR/venv-module" ;; esac
"""
ID_STUB = '#!/usr/bin/env bash\necho "$STUB_UID"\n'


@pytest.fixture
def checkout(tmp_path):
    """A checkout holding the script, and a folder of stubs first on PATH."""
    repo, stubs = tmp_path / "repo", tmp_path / "stubs"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    stubs.mkdir()
    for name, text in {
        "python3": PYTHON_STUB,
        "venv-python": VENV_PYTHON_STUB,
        "apt-get": APT_STUB,
        "id": ID_STUB,
    }.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    return repo, stubs


def setup(
    checkout, *, venv_module: bool, uid: int = 1000, **env: str
) -> tuple[subprocess.CompletedProcess, list]:
    repo, stubs = checkout
    if venv_module:
        (stubs / "venv-module").touch()
    log = stubs / "log"
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "setup.sh")],
        env={
            "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(repo),
            "STUB_LOG": str(log),
            "STUB_DIR": str(stubs),
            "STUB_UID": str(uid),
            "REAL_PYTHON": sys.executable,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, log.read_text().splitlines() if log.exists() else []


def test_it_makes_the_venv_installs_the_checkout_into_it_and_runs_the_demo(checkout):
    done, calls = setup(checkout, venv_module=True)
    assert done.returncode == 0, done.stderr
    venv_calls = [call for call in calls if call.startswith("venv-python")]
    assert "python3 -m venv .venv" in calls
    assert venv_calls[0].startswith("venv-python -m pip install") and venv_calls[0].endswith("-e .[local]")
    assert "--progress-bar on" in venv_calls[0]  # pip shows each package's download
    assert venv_calls[-1] == "venv-python -m rlmkit demo"
    assert "about 1.1 GB" in done.stdout and "22 packages" in done.stdout  # the download, said up front
    assert "source .venv/bin/activate" in done.stdout


def test_without_python3_venv_a_user_is_told_the_apt_command_and_nothing_is_installed(checkout):
    done, calls = setup(checkout, venv_module=False, uid=1000)
    assert done.returncode == 1
    assert f"sudo apt-get install python{VERSION}-venv" in done.stderr
    assert not any(call.startswith(("apt-get", "venv-python")) for call in calls)
    assert not (checkout[0] / ".venv").exists()  # the failed venv is not left to confuse a re-run


def test_without_python3_venv_root_installs_it_with_apt_and_goes_on(checkout):
    done, calls = setup(checkout, venv_module=False, uid=0, RLMKIT_SKIP_DEMO="1")
    assert done.returncode == 0, done.stderr
    apt = [call for call in calls if call.startswith("apt-get")]
    assert apt[0] == "apt-get update -qq" and apt[1].endswith(f"install -y -qq python{VERSION}-venv")
    assert calls.count("python3 -m venv .venv") == 2  # failed, then made once the package is in
    assert [call for call in calls if call.startswith("venv-python")] == [
        "venv-python -m pip install --disable-pip-version-check --progress-bar on -e .[local]"
    ]  # RLMKIT_SKIP_DEMO: installed, no demo


def test_a_python_older_than_3_11_is_refused_before_anything_happens(checkout):
    done, calls = setup(checkout, venv_module=True, STUB_OLD="1")
    assert done.returncode == 1 and "needs Python 3.11 or newer" in done.stderr
    assert all(call.startswith("python3 -c") or call.startswith("python3 --version") for call in calls)
