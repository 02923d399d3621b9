"""scripts/setup.sh and scripts/test.sh, the README's two commands.

Stubs stand in for python3 (its venv module present or missing), apt-get and `id`, so each
path of setup.sh runs in a second: the venv works; Debian without python3-venv as a user (a
clear message, nothing installed) and as root (apt-get installs it, then the set-up goes on); a
Python too old.

Then both scripts against Debian's own /usr/bin/python3 (the real interpreter, PEP 668's
externally managed one) in a clean environment (``env -i PATH=/usr/bin:/bin``), as root and as an
ordinary user, in their check-only mode (``RLMKIT_CHECK_ONLY=1``: the venv is made, nothing is
installed, the suite is not run), or for real where they must stop before installing anything:
setup.sh makes .venv from it; test.sh runs with that .venv, never the system interpreter; the
system packages this machine lacks are named, as the apt-get root would run or as the exact
`sudo apt-get install` line a user is given. What is not covered here: the installs themselves.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
VENV_PYTHON_STUB = """#!/usr/bin/env bash
echo "venv-python $*" >> "$STUB_LOG"
# asked where the model's engine is installed: a folder holding one extension, when there is one
if [ "$1" = -c ] && [ -n "${STUB_ENGINE:-}" ]; then echo "$STUB_ENGINE"; fi
"""
LDD_STUB = """#!/usr/bin/env bash
printf '\\tlibc.so.6 => /lib/libc.so.6 (0x1)\\n\\tlibgomp.so.1 => not found\\n'
"""
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
    for script in ("setup.sh", "debian.sh"):
        shutil.copy2(ROOT / "scripts" / script, repo / "scripts" / script)
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
    assert [call for call in calls if call.startswith("venv-python -m")] == [
        "venv-python -m pip install --disable-pip-version-check --progress-bar on -e .[local]"
    ]  # RLMKIT_SKIP_DEMO: installed, no demo


def test_a_python_older_than_3_11_is_refused_before_anything_happens(checkout):
    done, calls = setup(checkout, venv_module=True, STUB_OLD="1")
    assert done.returncode == 1 and "needs Python 3.11 or newer" in done.stderr
    assert all(call.startswith("python3 -c") or call.startswith("python3 --version") for call in calls)


# -- the real Debian python3, a clean environment -----------------------------------------------
DEBIAN_PYTHON = "/usr/bin/python3"
CLEAN_PATH = "/usr/bin:/bin"
NOBODY = 65534


def _externally_managed(python: str) -> bool:
    check = (
        "import os, sys, sysconfig; sys.exit(not os.path.exists("
        "os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
    )
    return os.path.exists(python) and subprocess.run([python, "-c", check], check=False).returncode == 0


debian_python = pytest.mark.skipif(
    not _externally_managed(DEBIAN_PYTHON), reason=f"no externally managed {DEBIAN_PYTHON} on this machine"
)


def _debian_version() -> str:
    return subprocess.run(
        [DEBIAN_PYTHON, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def _dpkg_installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return "ok installed" in done.stdout


def missing_for_tests() -> list[str]:
    """What test.sh should find missing here, worked out apart from the script."""
    missing = [] if shutil.which("chromium", path=CLEAN_PATH) else ["chromium"]
    missing += [] if glob.glob("/usr/lib/postgresql/*/bin/initdb") else ["postgresql"]
    return missing + ([] if ctypes.util.find_library("gomp") else ["libgomp1"])


@pytest.fixture
def fresh():
    """A checkout holding the scripts, in a folder an ordinary user may enter and write."""
    top = Path(tempfile.mkdtemp(prefix="rlmkit-setup-"))
    top.chmod(0o777)
    (top / "scripts").mkdir()
    for script in ("setup.sh", "test.sh", "debian.sh"):
        shutil.copy2(ROOT / "scripts" / script, top / "scripts" / script)
    for path in (top, top / "scripts"):
        path.chmod(0o777)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def run_clean(top: Path, script: str, *, as_user: bool, check_only: bool) -> subprocess.CompletedProcess:
    """``env -i PATH=/usr/bin:/bin bash scripts/<script>`` in ``top``: as this process's user, or
    (``as_user`` while root) as nobody."""
    env = ["env", "-i", f"PATH={CLEAN_PATH}", f"HOME={top}", *(["RLMKIT_CHECK_ONLY=1"] if check_only else [])]
    demote = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    command = [*(demote if as_user and os.getuid() == 0 else []), *env, "bash", f"scripts/{script}"]
    return subprocess.run(command, cwd=top, capture_output=True, text=True, timeout=120, check=False)


@debian_python
@pytest.mark.skipif(os.getuid() != 0, reason="root's path: apt-get installs what is missing")
def test_as_root_setup_makes_the_venv_and_test_uses_it_with_debians_python(fresh):
    venv_package = f"python{_debian_version()}-venv"
    setup = run_clean(fresh, "setup.sh", as_user=False, check_only=True)
    assert setup.returncode == 0, setup.stderr
    if not _dpkg_installed(venv_package):  # root would install it first; nothing is made before
        assert f"would install with apt-get: {venv_package}" in setup.stdout
        assert not (fresh / ".venv").exists()
        return
    venv_python = fresh / ".venv" / "bin" / "python"
    prefixes = subprocess.run(
        [str(venv_python), "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert prefixes == [str(fresh / ".venv"), "/usr"]  # a venv of Debian's own python3
    assert "would install rlmkit into it with [local]" in setup.stdout

    test = run_clean(fresh, "test.sh", as_user=False, check_only=True)
    assert test.returncode == 0, test.stderr
    missing = missing_for_tests()
    told = [line for line in test.stdout.splitlines() if "would install with apt-get" in line]
    assert told == ([f"test: would install with apt-get: {' '.join(missing)}"] if missing else [])
    assert test.stdout.splitlines()[-1].endswith(f"the suite with {venv_python}")  # never /usr/bin/python3
    # and, as root, the security tests again as an unprivileged user: runuser found on a clean PATH
    assert "again as rlmkit-test (/usr/sbin/runuser)" in test.stdout


@debian_python
def test_as_a_user_each_script_runs_or_stops_with_the_exact_apt_command_before_installing(fresh):
    venv_package = f"python{_debian_version()}-venv"
    has_venv = _dpkg_installed(venv_package)
    missing = missing_for_tests()
    # for real where it must stop (nothing is installed before the stop), else check-only
    test = run_clean(fresh, "test.sh", as_user=True, check_only=not missing and has_venv)
    expected = missing + ([] if has_venv else [venv_package])
    if expected:
        assert test.returncode == 1
        assert test.stderr.splitlines()[-1] == (
            f"test: install them, then run this again:  sudo apt-get install {' '.join(expected)}"
        )
        assert not (fresh / ".venv").exists()  # it stopped before making anything
    else:
        assert test.returncode == 0, test.stderr
        assert "would make .venv" in test.stdout

    setup = run_clean(fresh, "setup.sh", as_user=True, check_only=True)
    if has_venv and "libgomp1" not in missing:
        assert setup.returncode == 0, setup.stderr
        assert (fresh / ".venv" / "bin" / "python").exists()
        test = run_clean(fresh, "test.sh", as_user=True, check_only=True)
        if not missing:
            assert test.stdout.splitlines()[-1].endswith(f"the suite with {fresh}/.venv/bin/python")
    else:
        assert setup.returncode == 1 and "sudo apt-get install" in setup.stderr.splitlines()[-1]


def test_a_library_the_models_engine_links_and_this_system_lacks_is_named(checkout, tmp_path):
    engine = tmp_path / "xllamacpp"
    engine.mkdir()
    (engine / "xllamacpp.abi3.so").write_bytes(b"")
    (checkout[1] / "ldd").write_text(LDD_STUB)
    (checkout[1] / "ldd").chmod(0o755)
    done, calls = setup(checkout, venv_module=True, STUB_ENGINE=str(engine))
    assert done.returncode == 1
    assert "needs shared libraries this system lacks: libgomp.so.1" in done.stderr
    assert "venv-python -m rlmkit demo" not in calls  # no demo on an engine that cannot load
