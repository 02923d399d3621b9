"""Child process that serves the embedded model with xllamacpp (``python -m rlmkit.local.server_process``).

Why a child process and not a thread: llama.cpp writes a line per slot event straight to
file descriptor 2, which in-process would land in the user's terminal. Here fds 1 and 2 go
to a log file, and the one line the parent needs (the listening URL) goes out on a saved
copy of the original stdout.

Two lifetimes:
- per process (no ``--state``): it blocks on stdin and exits at EOF, which also happens when
  the parent dies without cleaning up;
- per machine (``--state DIR``, see ``machine.py``): detached, it writes ``DIR/server.json``
  and serves every process on the machine until SIGTERM, or until no process registered in
  ``DIR/clients`` is alive (a ``pinned`` entry, from ``rlmkit local serve``, keeps it up).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

from rlmkit.loading import load
from rlmkit.local.server import SPECULATIVE

CLIENT_CHECK_S = 2.0  # how often a machine server looks for live clients
# The n-gram guesses, sized for a CPU: every guessed token is computed in the batch that checks it,
# so a long wrong guess costs as much as reading that many prompt tokens. A key of 8 tokens matches
# copied code and printed text, rarely chance; 16 tokens cover a copied line or two.
NGRAM_KEY = 8
NGRAM_GUESS = 16
XLLAMACPP = "rlmkit.local.server_process:serve_xllamacpp"  # the backend: llama.cpp, in this process


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rlmkit.local.server_process")
    parser.add_argument("--model", required=True)
    parser.add_argument("--log", required=True, help="file that receives llama.cpp's logs")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=16384, help="total context, shared by all slots")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--alias", default="", help="model name the server reports (not its file path)")
    parser.add_argument("--lora", default="", help="a LoRA adapter (GGUF) applied to the model")
    parser.add_argument("--state", default="", help="machine-server state directory (see machine.py)")
    parser.add_argument(
        "--speculative",
        default="none",
        choices=SPECULATIVE,
        help="draftless speculative decoding: guess the next tokens from the context (see speculate)",
    )
    parser.add_argument(
        "--backend",
        default=XLLAMACPP,
        help="package.module:function that starts serving, given (args, port); tests name a "
        "scripted one (rlmkit.testing.local_server)",
    )
    return parser.parse_args(argv)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_xllamacpp(args: argparse.Namespace, port: int) -> object:
    """Start serving the model with llama.cpp; the returned object keeps the server alive."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.lora:
        adapter = xllamacpp.CommonAdapterLoraInfo()
        adapter.path = args.lora
        adapter.scale = 1.0
        params.lora_adapters = [adapter]
    if args.alias:
        params.model_alias = {args.alias}
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.kv_unified = True  # slots share one KV pool: a long prompt may use most of n_ctx
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = port
    speculate(params, args.speculative)
    return xllamacpp.Server(params)


# Any: params is xllamacpp's CommonParams, which ships no types.
def speculate(params: Any, kind: str) -> None:
    """Turn on llama.cpp's draftless speculative decoding of ``kind`` (one of ``SPECULATIVE``).

    No draft model: the guess is the text that followed the last NGRAM_KEY tokens where they
    occurred before in the slot's context (``ngram-simple``), or that followed them every time
    (``ngram-map-k``, which also learns how much of its guesses were accepted). The model checks
    a guess in one batch and keeps the tokens it would have produced itself, so a greedy reply
    is meant to stay the same, only sooner when the model copies text it has already read.
    """
    import xllamacpp

    if kind not in SPECULATIVE:
        raise ValueError(f"unknown speculative decoding {kind!r}: one of {', '.join(SPECULATIVE)}")
    if kind == "none":
        return
    name = kind.replace("-", "_")
    params.speculative.types = [
        getattr(xllamacpp.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{name.upper()}")
    ]
    ngram = getattr(params.speculative, name)
    ngram.size_n = NGRAM_KEY
    ngram.size_m = NGRAM_GUESS


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    ready = os.fdopen(os.dup(1), "w")
    log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = sys.stderr = os.fdopen(log_fd, "w", buffering=1)
    port = args.port or _free_port()
    try:
        server = load(args.backend)(args, port)  # the object returned keeps the server alive
    except Exception as exc:  # reported to the parent through the ready line
        ready.write(json.dumps({"error": repr(exc)}) + "\n")
        ready.flush()
        raise SystemExit(1) from exc
    url = f"http://127.0.0.1:{port}/v1"
    if args.state:
        from rlmkit.local import machine

        machine.announce(args.state, url, vars(args))
    ready.write(json.dumps({"url": url}) + "\n")
    ready.flush()
    ready.close()  # a detached server must not hold its starter's pipe open
    if args.state:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while not stop.wait(CLIENT_CHECK_S):
            if machine.retire_if_unused(args.state):
                break
        machine.retire(args.state)
    else:
        sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
    del server
    os._exit(0)  # skip interpreter teardown of native threads


if __name__ == "__main__":
    main()
