"""A throwaway PostgreSQL server for tests: initdb + pg_ctl in a temp dir, 127.0.0.1 only, a free port.

Debian installs the server binaries under /usr/lib/postgresql/VERSION/bin (not on PATH);
scripts/test.sh installs the package. initdb refuses to run as root, so under root (CI) the
server runs as the ``postgres`` user the package creates (``nobody`` otherwise).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[-3]))
    return versions[-1] if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayPostgres:
    """``with ThrowawayPostgres() as pg: pg.url`` -> a SQLAlchemy URL (psycopg 3) of a fresh server."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.user = None
        if os.geteuid() == 0:
            self.user = next(u for u in ("postgres", "nobody") if _user_exists(u))
        self.dir = Path(tempfile.mkdtemp(prefix="rlmkit-pg-"))  # in /tmp: the server user can reach it
        self.data = self.dir / "data"
        self.port = _free_port()
        self.url = f"postgresql+psycopg://rlmkit@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        proc = subprocess.run(
            args,
            check=False,
            cwd=self.dir,
            user=self.user,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LC_ALL": "C"},
        )
        if proc.returncode != 0:
            log = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() else ""
            raise RuntimeError(f"{args[0]} failed: {proc.stderr or proc.stdout}\n{log[-2000:]}")

    def start(self) -> ThrowawayPostgres:
        if self.user:
            shutil.chown(self.dir, self.user)
        self._run(
            self.initdb, "-D", str(self.data), "-U", "rlmkit", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
            "-c fsync=off -c max_connections=50"
        )
        self._run(
            self.pg_ctl,
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            self._run(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ThrowawayPostgres:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
