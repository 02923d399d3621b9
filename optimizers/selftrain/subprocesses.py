"""Stage commands as subprocesses: run to their end, and stopped with the run that started
them. A stage is a verb of rlmkit (an evaluation holding a model server and sandboxes); left
running after its parent stopped, it would hold the CPU and the model server on, orphaned."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

_RUNNING: set[subprocess.Popen] = set()  # stage commands running now, in any thread


def run_subprocess(command: list[str]) -> int:
    """Run one stage's command to its end and return its exit status. Stopped meanwhile (Ctrl-C,
    or SIGTERM under ``exit_on_sigterm``), it stops the command too: see ``stop_subprocesses``."""
    with subprocess.Popen(command) as child:
        _RUNNING.add(child)
        try:
            return child.wait()
        except BaseException:
            stop_subprocesses()
            raise
        finally:
            _RUNNING.discard(child)


def stop_subprocesses() -> None:
    """SIGTERM every stage command running, so each shuts its own model server and sandboxes,
    and wait for it (a minute, then SIGKILL): nothing runs on orphaned. The stop reaches the main
    thread only, so one that waits on commands running in other threads calls this itself."""
    running = list(_RUNNING)
    for child in running:
        child.terminate()
    for child in running:
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()


@contextlib.contextmanager
def subprocesses_stopped_on_exit() -> Iterator[None]:
    """Around a wait on stages running in other threads: stopped, their commands stop too."""
    try:
        yield
    except BaseException:
        stop_subprocesses()
        raise
