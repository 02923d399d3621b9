"""The security table's harness guards (``security_table.py``): each hostile case's host runs
in a fresh pids cgroup and memory cgroup, with a private tmpfs as its working and temp dir; after
the case the driver reads which limit was hit and kills whatever is left in the cgroup.
Standard library only: the guard and the hosts also run under the peers' venv.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _bootstrap import ROOT as REPO

PIDS_MAX, MEMORY_MAX, DISK_MAX = 128, 6 * 1024**3, 256 * 1024**2  # memory above rlmkit's own 4 GiB
CGROUP = Path("/sys/fs/cgroup")


def load_module(name: str, path: Path):
    """Import a stdlib-only module by path (the peers' venv has no rlmkit dependencies)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_guard(cgroups: list[str], workdir: str, host_cmd: list[str], user: list[int] | None = None) -> int:
    """The guard process: joins the case's cgroups, mounts its tmpfs, runs the host (as ``user``,
    a (uid, gid), when given), returns its code."""
    for group in cgroups:
        Path(group, "cgroup.procs").write_text(str(os.getpid()))
    confine = load_module("rlmkit_confine", REPO / "rlmkit" / "sandbox" / "worker_side" / "confine.py")
    confine.enter_namespaces(False, True)  # a private mount namespace (we are root)
    confine.private_workdir(workdir, DISK_MAX, None)
    os.chmod(workdir, 0o755)  # like /tmp for a worker that drops to its own uid (mode=0700 by default)
    if user:
        os.chown(workdir, *user)
    env = {**os.environ, "TMPDIR": workdir, "HOME": workdir}
    ids = {"user": user[0], "group": user[1], "extra_groups": []} if user else {}
    return subprocess.call(
        host_cmd,
        **ids,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def make_cgroups(tag: str) -> dict[str, Path]:
    memory_root = CGROUP / "memory" / _own_cgroup("memory").lstrip("/")
    groups = {"pids": CGROUP / "pids" / tag, "memory": memory_root / tag}
    for path in groups.values():
        path.mkdir()
    (groups["pids"] / "pids.max").write_text(str(PIDS_MAX))
    (groups["memory"] / "memory.limit_in_bytes").write_text(str(MEMORY_MAX))
    return groups


def _own_cgroup(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


def kill_group(groups: dict[str, Path]) -> None:
    """SIGKILL every process left in the case's cgroup (by pid), then remove the cgroups."""
    procs = groups["pids"] / "cgroup.procs"
    for _ in range(100):
        pids = [int(p) for p in procs.read_text().split()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    for path in groups.values():
        try:
            path.rmdir()
        except OSError:
            time.sleep(0.2)
            path.rmdir()


def guard_hits(groups: dict[str, Path]) -> list[str]:
    hits = []
    events = (
        (groups["pids"] / "pids.events").read_text().split()
        if (groups["pids"] / "pids.events").exists()
        else []
    )
    if events[:1] == ["max"] and int(events[1]) > 0:
        hits.append(f"forked until the harness's {PIDS_MAX}-process limit")
    if int((groups["memory"] / "memory.failcnt").read_text()) > 0:
        hits.append(f"hit the harness's {MEMORY_MAX // 2**30} GiB memory limit")
    return hits
