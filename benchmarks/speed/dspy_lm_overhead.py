"""Per-turn overhead of each kind of model an rlmkit.RLM takes, against one scripted
OpenAI-compatible server on 127.0.0.1 (no model time: what is left is rlmkit plus the client).

- ``model string``: ``rlmkit.LM`` over the direct HTTP/1.1 transport (rlmkit's own path);
- ``dspy.LM``: a plain ``dspy.LM``, whose settings rlmkit reads: the same direct transport;
- ``dspy.LM subclass``: called as itself (``lm.acall``: DSPy's adapter-free LM call, litellm);
- ``DummyLM``: a ``dspy.BaseLM`` with no network at all: the floor of the called-as-itself path.

Each run is ``turns`` root turns (print, then SUBMIT on the last) in the process sandbox;
the figure is the median wall time of a run divided by its turns. Run it once with this
checkout and once with another (``--label`` names the checkout) to compare them.

    PYTHONPATH=. python3 benchmarks/speed/dspy_lm_overhead.py --label branch [--runs 15 --turns 8]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _bootstrap import RESULTS

import dspy  # noqa: E402
from dspy.utils.dummies import DummyLM  # noqa: E402

import rlmkit  # noqa: E402
from rlmkit.testing.server import ScriptedServer  # noqa: E402

RESULTS = RESULTS / "dspy_lm_overhead.json"


def reply_for(turn: int, turns: int) -> str:
    code = "SUBMIT(answer=str(len(context)))" if turn >= turns else f"print({turn})"
    return f"Step {turn}.\n```repl\n{code}\n```"


def responder(turns: int):
    def answer(body: dict) -> str:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return reply_for(done + 1, turns)

    return answer


class PlainSubclass(dspy.LM):
    """A dspy.LM subclass with nothing overridden: rlmkit calls it as itself."""


def models(url: str, turns: int) -> dict[str, object]:
    key = {"api_key": "bench", "api_base": url}
    steps = [
        {"reasoning": f"Step {t}.", "code": reply_for(t, turns).split("```repl\n")[1][:-4]}
        for t in range(1, turns + 1)
    ]
    return {
        "model string": lambda: rlmkit.LM("openai/scripted", cache=False, **key),
        "dspy.LM": lambda: dspy.LM("openai/scripted", cache=False, **key),
        "dspy.LM subclass": lambda: PlainSubclass("openai/scripted", cache=False, **key),
        "DummyLM": lambda: DummyLM(steps),
    }


def measure(make_lm, turns: int, runs: int) -> dict[str, float]:
    per_turn = []
    for i in range(runs + 1):  # the first run warms imports, pools and the worker: not counted
        rlm = rlmkit.RLM("context -> answer", lm=make_lm(), max_iterations=turns + 2)
        started = time.perf_counter()
        pred = rlm(context="x" * 1000)
        elapsed = time.perf_counter() - started
        assert pred.answer == "1000" and pred.trajectory.n_turns == turns, pred.trajectory.n_turns
        if i:
            per_turn.append(elapsed / turns * 1000)
    return {
        "median_ms_per_turn": round(statistics.median(per_turn), 2),
        "min_ms_per_turn": round(min(per_turn), 2),
    }


def per_turn_by_kind(turns: int, runs: int, kinds: tuple[str, ...] | None = None) -> dict[str, dict]:
    """``measure`` for each kind of model (all of ``models`` unless ``kinds`` names some), against
    one scripted server started here; benchmarks/speed/run.py reports these beside its own tables."""
    found: dict[str, dict] = {}
    with ScriptedServer(responder(turns)) as server:
        for name, make in models(server.url, turns).items():
            if kinds is not None and name not in kinds:
                continue
            try:
                found[name] = measure(make, turns, runs)
            except Exception as exc:  # noqa: BLE001 - a checkout that cannot run this kind of model
                found[name] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="which checkout this is (e.g. main, branch)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rlmkit_root = Path(rlmkit.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(rlmkit_root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    found = per_turn_by_kind(args.turns, args.runs)
    record = json.loads(args.out.read_text()) if args.out.exists() else {"runs": {}}
    record["runs"][args.label] = {
        "command": f"PYTHONPATH=<checkout> python3 benchmarks/speed/dspy_lm_overhead.py --label {args.label} "
        f"--runs {args.runs} --turns {args.turns}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}, load {os.getloadavg()[0]:.1f}",
        "dspy_version": dspy.__version__,
        "results": found,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
