"""One embedded-model server per machine, shared by every process that wants it.

Several processes each starting their own llama.cpp server split 2 CPU cores between
several copies of the model (about 0.3 tok/s each). Instead the first process starts a
detached server and the others find it:

    $RLMKIT_HOME/local-server/lock          flock: one process at a time looks, starts or retires
    $RLMKIT_HOME/local-server/server.json   {"pid", "url", "ctx", "parallel", "lora", ...} of the live server
    $RLMKIT_HOME/local-server/clients/PID   processes using it; ``pinned`` keeps it up with none

The server exits on SIGTERM (``rlmkit local stop``), or once no registered process is alive
and nothing pins it. Its configuration is whatever the first process asked for; its LoRA
adapter is part of what it is, so a process wanting another adapter is told so
(``AdapterMismatch``) and serves its own.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmkit.errors import LocalModelError
from rlmkit.local.adapter import served_alias
from rlmkit.local.model_file import models_dir
from rlmkit.local.server import LocalServerConfig

PIN = "pinned"

# The machine server's state file: JSON from disk (url, pid, the arguments it was started with).
StateInfo = dict[str, Any]


def state_dir() -> Path:
    return models_dir().parent / "local-server"


@dataclass(frozen=True)
class MachineServer:
    url: str
    pid: int
    config: LocalServerConfig
    log_path: Path
    lora: Path | None = None


class AdapterMismatch(LocalModelError):
    """The machine's server runs with another LoRA adapter than the one asked for."""


@contextlib.contextmanager
def _locked(state: Path) -> Iterator[None]:
    (state / "clients").mkdir(parents=True, exist_ok=True)
    with open(state / "lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie answers kill(0) but serves nothing
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _info(state: Path) -> StateInfo | None:
    try:
        info = json.loads((state / "server.json").read_text())
    except (OSError, ValueError):
        return None
    return info if _alive(int(info["pid"])) else None


def live_clients(state: Path) -> list[str]:
    """Registered clients still alive (``pinned`` included); dead ones are removed."""
    live = []
    for entry in sorted((state / "clients").glob("*")):
        if entry.name == PIN or (entry.name.isdigit() and _alive(int(entry.name))):
            live.append(entry.name)
        else:
            entry.unlink(missing_ok=True)
    return live


# -- the server's side (called from server_process) ---------------------------------------
def announce(state: str | Path, url: str, args: dict[str, object]) -> None:
    state = Path(state)
    info = {
        "pid": os.getpid(),
        "url": url,
        **{k: args[k] for k in ("ctx", "parallel", "threads", "speculative", "backend", "log", "lora")},
    }
    tmp = state / f"server.json.{os.getpid()}"
    tmp.write_text(json.dumps(info))
    tmp.replace(state / "server.json")


def retire_if_unused(state: str | Path) -> bool:
    """Under the lock, so no process registers while the server decides to go."""
    state = Path(state)
    with _locked(state):
        if live_clients(state):
            return False
        _forget(state)
        return True


def retire(state: str | Path) -> None:
    with _locked(Path(state)):
        _forget(Path(state))


def _forget(state: Path) -> None:
    info_path = state / "server.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        if json.loads(info_path.read_text())["pid"] == os.getpid():
            info_path.unlink()


# -- the clients' side -------------------------------------------------------------------
def machine_server(
    model_path: Path,
    config: LocalServerConfig | None = None,
    *,
    backend: str | None = None,
    pin: bool = False,
    lora: Path | None = None,
) -> MachineServer:
    """The machine's server: found, or started (detached) if none is running. Registers this
    process as a client (or pins the server) so it stays up while this process lives.

    ``lora``: the GGUF adapter it must serve with; a running server with another one raises
    ``AdapterMismatch`` (before this process registers). ``backend``: what a new server runs, as
    ``package.module:function`` (default: llama.cpp; tests pass a scripted stand-in's,
    ``rlmkit.testing.local_server.SCRIPTED_BACKEND``)."""
    state, config = state_dir(), config or LocalServerConfig()
    wanted = str(lora or "")
    with _locked(state):
        info = _info(state)
        if info is not None and info.get("lora", "") != wanted:
            running = info.get("lora") or "no adapter"
            raise AdapterMismatch(
                f"the machine's model server (pid {info['pid']}) runs with {running}, not "
                f"{wanted or 'no adapter'}; `rlmkit local stop` ends it"
            )
        entry = state / "clients" / (PIN if pin else str(os.getpid()))
        entry.touch()
        if not pin:
            atexit.register(entry.unlink, missing_ok=True)
        info = info or _start(state, Path(model_path), config, backend, wanted)
    return MachineServer(
        url=info["url"],
        pid=int(info["pid"]),
        log_path=Path(info["log"]),
        config=LocalServerConfig(
            ctx=info["ctx"],
            parallel=info["parallel"],
            threads=info["threads"],
            speculative=info.get("speculative", "none"),  # a server started before the setting had none
        ),
        lora=Path(info["lora"]) if info.get("lora") else None,
    )


def _start(
    state: Path, model_path: Path, config: LocalServerConfig, backend: str | None, lora: str
) -> StateInfo:
    log_path = state.parent / "logs" / "local-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "rlmkit.local.server_process",
        "--model",
        str(model_path),
        "--log",
        str(log_path),
        *config.server_args(),
        "--alias",
        served_alias(Path(lora) if lora else None),
        "--state",
        str(state),
        "--lora",
        lora,
        *(["--backend", backend] if backend else []),  # a stand-in's, in tests; else llama.cpp
    ]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )  # its own session: Ctrl-C here does not stop it
    result: list[str] = []
    stdout = proc.stdout
    assert stdout is not None  # stdout=PIPE
    reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(config.start_timeout_s)
    threading.Thread(
        target=proc.wait, daemon=True, name="rlmkit-reap-server"
    ).start()  # no zombie when it ends
    info = _info(state) if result and '"url"' in result[0] else None
    if info is None:
        if proc.poll() is None:
            proc.kill()
        tail = (
            "\n".join(log_path.read_text(errors="replace").splitlines()[-8:])
            if log_path.exists()
            else "(no log)"
        )
        raise LocalModelError(
            f"the embedded model server did not start. Last log lines from {log_path}:\n{tail}"
        )
    return info


def status() -> StateInfo | None:
    """The live server's info with its live clients, or None."""
    state = state_dir()
    with _locked(state):
        info = _info(state)
        return None if info is None else {**info, "clients": live_clients(state)}


def stop(timeout_s: float = 15.0) -> int | None:
    """SIGTERM the machine's server and wait until it is gone; its pid, or None if none ran."""
    state = state_dir()
    with _locked(state):
        info = _info(state)
        (state / "clients" / PIN).unlink(missing_ok=True)
    if info is None:
        return None
    pid = int(info["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid):  # not our child: no wait() to block on
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    return pid
