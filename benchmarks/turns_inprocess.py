"""rlmkit's time per turn with the model in process (``FunctionLM``): the framework alone, no HTTP.

    nice -n 19 python benchmarks/turns_inprocess.py [--size 100000] [--runs 10]

The benchmark's own 5-turn script (``scripts.py``: inspect, 1 sub-call, a batch of 8, aggregate,
finish) at ``--size`` characters, with a JSONL log, through the sync API. A turn is from one
root request to the next (the last: to the end of the run). Turn 1 also waits for the sandbox
worker to start (the first request goes out while it starts), so it is printed apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE / "peers")]

from peers.driver_base import QUESTION, make_context

import rlmkit
from rlmkit import events as ev
from scripts import classify, make_responder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    respond = make_responder("rlmkit", "turns")
    lm = rlmkit.FunctionLM(lambda messages: respond(classify({"messages": messages}), {"messages": messages}))
    context = make_context(args.size)
    first, rest = [], []
    with tempfile.TemporaryDirectory() as logs:
        for run in range(args.runs + 2):  # two warm-up runs
            starts: list[float] = []
            rlm = rlmkit.RLM("context, question -> answer", lm=lm, log_dir=logs)

            def turn_started(event, starts=starts):
                if type(event) is ev.TurnStarted:
                    starts.append(time.perf_counter())

            with ev.listen(turn_started):
                assert rlm(context=context, question=QUESTION).answer == "8 ok"
            edges = starts + [time.perf_counter()]
            turns = [(b - a) * 1000 for a, b in zip(edges, edges[1:], strict=False)]
            if run >= 2:
                first.append(turns[0])
                rest += turns[1:]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs at {args.size:,} characters")
    print(f"turn 1 (waits for the worker): median {statistics.median(first):.1f} ms")
    print(
        f"turns 2-5: median {statistics.median(rest):.1f} ms, all 5: {statistics.median(first + rest):.1f} ms"
    )


if __name__ == "__main__":
    main()
