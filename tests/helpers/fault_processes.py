"""The processes the run-fault tests kill: a model server and an RLM host, each its own process.

    python -m tests.helpers.fault_processes server PORT DIE_AT_TURN   # prints its port once it listens
    python -m tests.helpers.fault_processes host API_BASE LOG_DIR      # one run; its answer on stdout
    python -m tests.helpers.fault_processes full-disk LOG_DIR OUT      # one run, its log on a disk that fills

The model is scripted by root turn (``REPLIES``): look at the context, print the worker's pid,
then SUBMIT its length. ``server`` kills itself with SIGKILL when asked for root turn
``DIE_AT_TURN`` (-1: never), in the middle of that request, as a crashed provider does.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

REPLIES = [
    "```repl\nimport os\nprint('worker', os.getpid(), len(context))\n```",
    "```repl\nimport os\nprint('worker', os.getpid(), context[:5])\n```",
    "```repl\nSUBMIT(answer=len(context))\n```",
]
CONTEXT = "the run's inputs " * 10
NO_TMPFS = 77  # full-disk's exit status where this machine lets it mount no tmpfs of its own


def root_turn(body: dict) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def serve(port: int, die_at_turn: int) -> None:
    from rlmkit.testing.server import ScriptedServer, is_root_request

    def responder(body: dict) -> str:
        turn = root_turn(body) if is_root_request(body) else 0
        if turn == die_at_turn:
            os.kill(os.getpid(), signal.SIGKILL)
        return REPLIES[min(turn, len(REPLIES) - 1)]

    with ScriptedServer(responder, port=port) as server:
        print(server.port, flush=True)
        threading.Event().wait()  # until killed


def run_host(api_base: str, log_dir: str) -> None:
    import rlmkit

    lm = rlmkit.LM("openai/scripted", api_base=api_base, api_key="test-key", cache=False)
    rlm = rlmkit.RLM("context -> answer: int", lm=lm, max_iterations=4, log_dir=log_dir)
    print(rlm(context=CONTEXT).answer, flush=True)


def full_disk(log_dir: str, out: str) -> None:
    """A run whose log directory is a 256 KiB tmpfs, filled up while the run waits for its third
    reply: the two turns before it are logged, the rest cannot be. Writes what it saw to ``out``."""
    import rlmkit
    from rlmkit.sandbox.worker_side import confine
    from rlmkit.testing import ScriptedServer, is_root_request

    os.makedirs(log_dir, exist_ok=True)
    try:  # its own mount namespace (via a user one if not root), for a tmpfs of its own
        confine.enter_namespaces(net=False, mounts=True)
        confine.private_workdir(log_dir, 256 * 1024, None)
    except (confine.StepFailed, OSError) as exc:
        print(f"no private tmpfs here: {exc}", flush=True)
        sys.exit(NO_TMPFS)
    os.chdir(os.path.dirname(out))
    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger("rlmkit").addHandler(handler)
    big = [  # turns whose log lines are larger than a page, so a full disk tears them
        "```repl\nprint('a' * 10000)\n```",
        "```repl\nprint('b' * 10000)\n```",
        "```repl\nprint('c' * 10000)\n```",
        "```repl\nSUBMIT(answer=len(context))\n```",
    ]

    def responder(body: dict) -> str:
        turn = root_turn(body) if is_root_request(body) else 0
        if turn == 2:
            _fill(os.path.join(log_dir, "filler"))
        return big[min(turn, len(big) - 1)]

    with ScriptedServer(responder) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test-key", cache=False)
        rlm = rlmkit.RLM("context -> answer: int", lm=lm, max_iterations=5, log_dir=log_dir)
        pred = rlm(context=CONTEXT)
    (log,) = [name for name in os.listdir(log_dir) if name.endswith(".jsonl")]
    with open(os.path.join(log_dir, log), "rb") as src, open(out + ".jsonl", "wb") as dst:
        dst.write(src.read())  # the tmpfs goes with this process: the reader gets a copy
    report = {
        "answer": pred.answer,
        "turns": [t.model_dump(mode="json") for t in pred.trajectory.turns],
        "warnings": warnings,
    }
    with open(out, "w") as fh:
        json.dump(report, fh)


def _fill(path: str) -> None:
    """Write until the disk refuses (ENOSPC): from here every page is taken."""
    chunk = b"x" * 65536
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError:
            return


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "host":
        run_host(sys.argv[2], sys.argv[3])
    else:
        full_disk(sys.argv[2], sys.argv[3])
