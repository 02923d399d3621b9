"""A stand-in for the embedded model's server, so the lifecycle of ``rlmkit.local`` (one server per
machine, its clients, pinning, stopping) is tested without a model file or llama.cpp:

    machine_server(Path("unused.gguf"), backend=SCRIPTED_BACKEND)

The server process (``rlmkit.local.server_process``) starts whatever ``--backend`` names, so it
never imports this module itself.
"""

from __future__ import annotations

import argparse

from rlmkit.models.chat_server import ChatServer

SCRIPTED_BACKEND = "rlmkit.testing.local_server:serve_scripted"


def serve_scripted(args: argparse.Namespace, port: int) -> ChatServer:
    """A chat server on ``port`` that answers every request "ok"."""
    return ChatServer(lambda body: "ok", port=port).start()


__all__ = ["SCRIPTED_BACKEND", "serve_scripted"]
