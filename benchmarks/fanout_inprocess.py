"""rlmkit's fan-out with the model in process (``FunctionLM``): the sub-call dispatch alone, no HTTP.

    python benchmarks/fanout_inprocess.py [N ...]      # default: 1 8 16 64

A run of two turns: the first looks at the context (the sandbox worker is ready after it), the
second sends N ``llm_query`` sub-calls that each sleep 200 ms. Prints the second turn's code
cell time (best of 3) and its ratio to the ideal ceil(N / 16) x 200 ms.
"""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rlmkit
from rlmkit.testing import FunctionLM

LATENCY_S, CONCURRENCY = 0.2, 16


def model_for(n: int):
    steps = ["```repl\nprint(len(context))\n```",
             f"```repl\nr = llm_query_batched([str(i) for i in range({n})])\nprint(len(r))\n```",
             "```repl\nSUBMIT(answer='ok')\n```"]  # fmt: skip

    async def model(messages):
        if messages[0]["role"] == "system" and "SUBMIT" in messages[0]["content"]:  # the root
            return steps[min(sum(m["role"] == "assistant" for m in messages), 2)]
        await asyncio.sleep(LATENCY_S)
        return "x"

    return model


def main(counts: list[int]) -> None:
    for n in counts:
        rlm = rlmkit.RLM("context -> answer", lm=FunctionLM(model_for(n), max_concurrency=CONCURRENCY),
                         max_concurrency=CONCURRENCY)  # fmt: skip
        cells = [rlm(context="abc").trajectory.turns[1].blocks[0].duration_s for _ in range(3)]
        ideal = math.ceil(n / CONCURRENCY) * LATENCY_S
        print(f"N={n:4d}  cell {min(cells):.3f} s = {min(cells) / ideal:.2f}x ideal")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 8, 16, 64])
