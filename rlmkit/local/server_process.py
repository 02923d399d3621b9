"""Child process that serves the embedded model with xllamacpp (``python -m rlmkit.local.server_process``).

Why a child process and not a thread: llama.cpp writes a line per slot event straight to
file descriptor 2, which in-process would land in the user's terminal. Here fds 1 and 2 go
to a log file, and the one line the parent needs (the listening URL) goes out on a saved
copy of the original stdout. The child lives exactly as long as its parent: it blocks on
stdin and exits at EOF, which also happens when the parent dies without cleaning up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rlmkit.local.server_process")
    parser.add_argument("--model", required=True)
    parser.add_argument("--log", required=True, help="file that receives llama.cpp's logs")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=16384, help="total context, shared by all slots")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--alias", default="", help="model name the server reports (not its file path)")
    return parser.parse_args(argv)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    ready = os.fdopen(os.dup(1), "w")
    log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = sys.stderr = os.fdopen(log_fd, "w", buffering=1)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = {args.alias}
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.kv_unified = True  # slots share one KV pool: a long prompt may use most of n_ctx
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = args.port or _free_port()
    try:
        server = xllamacpp.Server(params)
    except Exception as exc:  # reported to the parent through the ready line
        ready.write(json.dumps({"error": repr(exc)}) + "\n")
        ready.flush()
        raise SystemExit(1) from exc
    ready.write(json.dumps({"url": f"http://127.0.0.1:{params.port}/v1"}) + "\n")
    ready.flush()
    sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
    del server
    os._exit(0)  # skip interpreter teardown of native threads


if __name__ == "__main__":
    main()
