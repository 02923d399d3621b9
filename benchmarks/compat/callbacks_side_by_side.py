"""What DSPy callbacks see of one run: dspy.RLM vs rlmkit.RLM, same scripted model, same code.

    python benchmarks/compat/callbacks_side_by_side.py            # prints a markdown table

Both frameworks run the benchmark's fixed 5-turn program (look, one llm_query, an 8-item
llm_query_batched, compute, SUBMIT) against the scripted OpenAI-compatible server; a callback
registered with ``dspy.context(callbacks=[...])`` counts every hook it receives. dspy.RLM
runs with ``dspy.LocalInterpreter`` (its default Deno sandbox cannot start offline).
"""

from __future__ import annotations

from collections import Counter

import _bootstrap  # noqa: F401 - the checkout and the benchmark folders on sys.path

import dspy
from dspy.utils.callback import BaseCallback
from peers.driver_base import QUESTION
from scripted_run import classify, make_responder

import rlmkit
from rlmkit.testing import ScriptedServer

CONTEXT = "BENCH-CONTEXT " + "lorem ipsum dolor sit amet " * 400


class Counting(BaseCallback):
    def __init__(self):
        self.count: Counter = Counter()
        self.tools: Counter = Counter()

    def __getattribute__(self, name):
        if name.startswith("on_") and name.endswith(("_start", "_end")):

            def hook(call_id, **kwargs):
                self.count[name] += 1
                if name in ("on_interpreter_tool_call_start", "on_tool_start"):
                    inputs = kwargs.get("inputs", {})
                    self.tools[inputs.get("tool_name") or getattr(kwargs.get("instance"), "name", "?")] += 1

            return hook
        return super().__getattribute__(name)


def run(framework: str) -> tuple[Counting, int]:
    script = make_responder(framework, "turns")
    with ScriptedServer(lambda body: script(classify(body), body)) as server:
        counting = Counting()
        with dspy.context(callbacks=[counting]):
            if framework == "dspy.RLM":
                lm = dspy.LM("openai/scripted", api_base=server.url, api_key="bench", cache=False)
                rlm = dspy.RLM(
                    "context, question -> answer", max_iters=8, interpreter_factory=dspy.LocalInterpreter
                )
                with dspy.context(lm=lm):
                    rlm(context=CONTEXT, question=QUESTION)
            else:
                lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="bench", cache=False)
                rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=8)(
                    context=CONTEXT, question=QUESTION
                )
        return counting, len(server.requests)


def main() -> None:
    results = {name: run(name) for name in ("dspy.RLM", "rlmkit")}
    hooks = sorted({hook for counting, _ in results.values() for hook in counting.count})
    print("| hook | dspy.RLM | rlmkit.RLM |\n| --- | ---: | ---: |")
    for hook in hooks:
        print(f"| `{hook}` | {results['dspy.RLM'][0].count[hook]} | {results['rlmkit'][0].count[hook]} |")
    print(f"| model requests the server received | {results['dspy.RLM'][1]} | {results['rlmkit'][1]} |")
    for name, (counting, _) in results.items():
        print(f"\n{name} tool calls seen: {dict(counting.tools)}")


if __name__ == "__main__":
    main()
