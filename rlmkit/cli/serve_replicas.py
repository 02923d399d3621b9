"""``rlmkit serve PROGRAM --replicas N [--ray ADDRESS]``: the program's replicas on Ray Serve, one
address in front of them (``rlmkit.serve.replicas``).

--ray local (the default) starts a Ray instance on this machine for the server's life; 'auto',
host:port or ray://host:10001 joins a running cluster, as ``rlmkit eval --ray`` does. The
replicas share their sessions through one sessions directory: on a cluster, --sessions-dir must
be a folder every node sees (a shared filesystem); on this machine a new folder is made when
none is given.
"""

from __future__ import annotations

import signal
import tempfile
import threading
from typing import Any

from rlmkit.cli.common import console, exit_on_error
from rlmkit.errors import ConfigError, install_hint

LOCAL = "local"


def serve_replicas(
    load: Any, *, name: str, replicas: int, ray_address: str, host: str, port: int, options: dict[str, Any]
) -> None:
    """Serve until SIGTERM or Ctrl-C; ``load`` makes the program in each replica's process."""
    with exit_on_error():
        if replicas < 1:
            raise ConfigError(f"--replicas must be 1 or more, got {replicas}")
        if not options.get("sessions_dir"):
            if ray_address != LOCAL:
                raise ConfigError(
                    "replicas on a cluster share sessions through --sessions-dir: give a folder every "
                    "node sees (a shared filesystem)"
                )
            options = {**options, "sessions_dir": tempfile.mkdtemp(prefix="rlmkit-sessions-")}
        try:
            import ray

            from rlmkit.serve.replicas.deployment import runtime_env, start
        except ModuleNotFoundError as exc:
            missing = f"--replicas runs on Ray Serve ({exc.name} is missing)"
            raise ConfigError(f"{missing}: {install_hint('cluster')}") from exc
        ray.init(
            address=None if ray_address == LOCAL else ray_address,
            include_dashboard=False if ray_address == LOCAL else None,
            runtime_env=runtime_env(),  # the replicas import what this process does
        )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        with exit_on_error():
            url = start(load, name=name, replicas=replicas, host=host, port=port, options=options)
        console.print(
            f"serving {name!r} at {url}/v1 on {replicas} replica(s)"
            + ("  (API key required)" if options.get("api_key") else "")
            + f"; sessions shared in {options['sessions_dir']}"
        )
        stop.wait()
    finally:
        from ray import serve

        serve.shutdown()  # each replica ends its sessions, every one saved in the directory
        ray.shutdown()
