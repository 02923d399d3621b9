"""Host side: REPL sandboxes, where the root model's code runs.

``make_sandbox(name, limits)`` builds one by name:
- ``process`` (default): a confined worker process per run (see ``worker_side/confine.py`` for
  what is and is not a security boundary; ``sandbox.protections`` says what is active here). Its
  conversation with the worker is ``host.WorkerHost``'s; ``process.py`` only launches it (forked
  by a fork server, through ``fork_server_client.py``), and a run takes it pre-started from a pool
  (``pool.py``).

The files here run on the host; what runs inside the worker process lives in ``worker_side/``
(the worker, the fork server, the confinement, session snapshots), and the host starts it by
path. Of it the host imports only what both ends speak: ``wire``, ``textbuf`` and ``cells``.
- ``inline``: ``exec`` in the host process, for debugging only. No isolation at all.
- ``monty``: pydantic-monty's Rust interpreter (optional extra ``monty``), when installed.
"""

from __future__ import annotations

from rlmkit.errors import ConfigError
from rlmkit.loading import load
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits

# name -> "module:class" of a Sandbox taking ``limits``; imported only when that backend is used.
# A new backend on the worker host is a launcher file (see ``host.py``) and one line here.
BACKENDS = {
    "process": "rlmkit.sandbox.process:ProcessSandbox",
    "inline": "rlmkit.sandbox.inline:InlineSandbox",
    "monty": "rlmkit.sandbox.monty:MontySandbox",
}


def sandbox_backend(name: str = "process") -> type[Sandbox]:
    """The class of backend ``name`` (imported now, nothing started); ConfigError for an unknown name."""
    try:
        spec = BACKENDS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown sandbox {name!r}; known: {', '.join(BACKENDS)}") from None
    return load(spec)


def make_sandbox(name: str = "process", limits: SandboxLimits | None = None) -> Sandbox:
    """A new, unstarted sandbox of backend ``name``; ConfigError for an unknown name."""
    return sandbox_backend(name)(limits)


__all__ = [
    "BACKENDS",
    "CellResult",
    "HostFunction",
    "Sandbox",
    "SandboxLimits",
    "make_sandbox",
    "sandbox_backend",
]
