"""The scripted root model: the same Python code for every framework, written in each one's convention.

A request is classified by what it carries (no per-run state in the server):
- ``root``: an RLM request ("REPL" in its first message) whose text holds the root question marker;
- ``child``: an RLM request without it (a child RLM made by ``rlm_query``/a sub-agent);
- ``sub``: anything else (``llm_query`` and friends), answered with a short text.
Which step comes next is read from the ``# BENCHSTEP k`` comments already in the request's history,
so the same responder serves sequential and concurrent runs alike.
"""

from __future__ import annotations

import json
import re

from peers.driver_base import QUESTION

ROOT_MARK = QUESTION.split()[0]
_STEP = re.compile(r"# BENCHSTEP (\d+)")

# Turn k of the fixed 5-turn run; the last step finishes (see FINISH). Every step is O(1) in the
# context size, so what grows with the context is the framework's cost, not the model's code.
TURN_STEPS = [
    "print(len(context)); print(context[:100])",
    "r = llm_query('BENCH-SUB summarise: ' + context[:1000]); print(r)",
    (
        "rs = llm_query_batched(['BENCH-SUB chunk %d: ' % i + context[i * 100:(i + 1) * 100] "
        "for i in range(8)])\nprint(rs)"
    ),
    "answer_text = str(len(rs)) + ' ' + r[:12]; print(answer_text)",
]

FINISH = {
    "rlmkit": "SUBMIT(answer=answer_text)",
    "dspy.RLM": "SUBMIT(answer=answer_text)",
    "rlms": "answer['content'] = answer_text\nanswer['ready'] = True",
}


def subcall_steps(n: int) -> list[str]:
    # A first turn that only looks at the context, so the fan-out turn (the second) times sub-calls,
    # not whatever a framework still does to get its REPL ready after the first request.
    return [
        "print(len(context))",
        f"rs = llm_query_batched(['BENCH-SUB %d' % i for i in range({n})])\n"
        "answer_text = str(len(rs)); print(answer_text)",
    ]


def depth2_steps(framework: str, children: int) -> list[str]:
    """The root fans out ``children`` child RLMs at once."""
    if framework == "dspy.RLM":  # no rlm_query: its sandboxed dspy facade builds sub-RLMs; threads fan out
        code = (
            "import dspy\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "def child(i):\n"
            "    return dspy.RLM('context, query -> answer')"
            "(context='BENCH-CHILD %d' % i, query='BENCH-CHILD %d' % i).answer\n"
            f"with ThreadPoolExecutor({children}) as pool:\n"
            f"    rs = list(pool.map(child, range({children})))\n"
            "answer_text = str(len(rs)); print(rs)"
        )
        return [code]
    return [
        f"rs = rlm_query_batched(['BENCH-CHILD %d' % i for i in range({children})])\n"
        "answer_text = str(len(rs)); print(rs)"
    ]


CHILD_STEPS = ["a = llm_query('BENCH-SUB child question')\nanswer_text = a"]


def scenario_steps(scenario: str, framework: str, n: int = 0) -> list[str]:
    if scenario == "turns":
        return TURN_STEPS
    if scenario == "subcalls":
        return subcall_steps(n)
    if scenario == "depth2":
        return depth2_steps(framework, n)
    raise ValueError(f"unknown scenario {scenario!r}")


def reply(framework: str, code: str, step: int) -> str:
    """``code`` as a model reply in ``framework``'s convention."""
    code = f"# BENCHSTEP {step}\n{code}"
    if framework == "dspy.RLM":  # ChatAdapter fields of generate_action: reasoning, code
        return (
            f"[[ ## reasoning ## ]]\nStep {step}.\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n"
            "[[ ## completed ## ]]"
        )
    return f"```repl\n{code}\n```"


def request_text(body: dict) -> str:
    return json.dumps(body.get("messages", []))


def classify(body: dict) -> str:
    messages = body.get("messages") or [{}]
    if "REPL" not in str(messages[0].get("content", "")):
        return "sub"
    return "root" if ROOT_MARK in request_text(body) else "child"


def make_responder(framework: str, scenario: str, n: int = 0):
    steps = scenario_steps(scenario, framework, n)
    finish = FINISH[framework]

    def script(kind: str, body: dict) -> str:
        if kind == "sub":
            return "ok"
        plan = steps if kind == "root" else CHILD_STEPS
        plan = plan + [finish]
        if kind == "child":  # one turn: the sub-call and the answer together
            plan = [CHILD_STEPS[0] + "\n" + finish]
        seen = [int(k) for k in _STEP.findall(request_text(body))]
        step = min(max(seen) + 1 if seen else 0, len(plan) - 1)
        return reply(framework, plan[step], step)

    return script
