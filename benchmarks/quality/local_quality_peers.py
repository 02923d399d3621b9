"""dspy.RLM 3.4.1 and rlms 0.1.3 driving the embedded model on local_quality.py's examples.

    nice -n 10 python benchmarks/quality/local_quality_peers.py --n 5 --length 20000 --seed 1000

Same examples, scoring and row format as ``benchmarks/quality/local_quality.py`` (needle and labelled
aggregation, held-out seed 1000), same model: the machine's one embedded Qwen2.5-Coder-1.5B
server, found (or started) here; the peers get its OpenAI-compatible URL. Each peer is set up
like rlmkit's embedded default: temperature 0, every completion capped at EMBEDDED_MAX_TOKENS
(1,024), 8 iterations. dspy.RLM uses its LocalInterpreter (its default Deno sandbox cannot start
offline) and its default 50-call budget; rlms its ``local`` REPL at depth 1 (sub-calls are plain
completions). The peers run in their own venv (benchmarks/.peers, see peers/peer_env.py), where
this file is also the driver (``--driver NAME``: standard library plus that framework). One
driver per framework runs one example at a time; an example past ``--deadline`` kills it (score
0, error "deadline") and the next gets a fresh driver. With ``--pause-while FILE``, before each
example the run waits while FILE exists (so a timing benchmark can have the CPU to itself on a
shared machine). Rows are appended to ``--out``
as JSON lines; each run's trajectory goes to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from _bootstrap import RESULTS

RESULT = "@@RESULT "
FRAMEWORKS = ("dspy.RLM", "rlms")


# -- driver side (peers' venv: no rlmkit here) --------------------------------------------------
def _run_dspy(job: dict, log_path: Path) -> dict:
    import dspy

    lm = dspy.LM(
        f"openai/{job['model']}",
        api_base=job["url"],
        api_key="local",
        cache=False,
        temperature=0.0,
        max_tokens=job["max_tokens"],
    )
    dspy.configure(lm=lm)
    rlm = dspy.RLM(
        "context, question -> answer",
        max_iters=job["max_iterations"],
        interpreter_factory=dspy.LocalInterpreter,
    )
    steps: list = []
    try:
        pred = rlm(context=job["context"], question=job["question"])
        steps = pred.trajectory
    finally:  # what it did, even when it raised
        calls = [_dspy_call(h) for h in lm.history]
        log_path.write_text(json.dumps({"trajectory": steps, "calls": calls}, default=str))
    replies = [(h.get("usage") or {}).get("completion_tokens") or 0 for h in lm.history]
    return {"answer": pred.answer, "turns": len(steps), "longest_reply_tokens": max(replies, default=0)}


def _dspy_call(entry: dict) -> dict:
    return {"messages": entry.get("messages"), "outputs": entry.get("outputs"), "usage": entry.get("usage")}


def _run_rlms(job: dict, log_path: Path) -> dict:
    from rlm import RLM
    from rlm.clients.openai import OpenAIClient
    from rlm.logger import RLMLogger

    replies: list[int] = []
    track = OpenAIClient._track_cost
    OpenAIClient._track_cost = lambda self, response, model: (  # every completion's output tokens
        replies.append(response.usage.completion_tokens if response.usage else 0),
        track(self, response, model),
    )[-1]
    logger = RLMLogger(str(log_path.parent), file_name=log_path.stem)
    sampling = {"temperature": 0.0, "max_tokens": job["max_tokens"]}
    rlm = RLM(
        backend="openai",
        backend_kwargs={"model_name": job["model"], "base_url": job["url"], "api_key": "local"},
        environment="local",
        max_iterations=job["max_iterations"],
        logger=logger,
        sampling_args=sampling,
        sub_sampling_args=sampling,
    )
    answer, error = None, None
    try:
        result = rlm.completion(job["context"], root_prompt=job["question"])
        answer, error = result.response, getattr(result, "error", None)
    except Exception as exc:  # e.g. its out-of-turns fallback refused by the server: keep the turns
        error = f"{type(exc).__name__}: {exc}"
    return {
        "answer": answer,
        "turns": logger.iteration_count,
        "longest_reply_tokens": max(replies, default=0),
        "error": error,
    }


def serve_driver(name: str) -> None:
    """Answer one JSON job per stdin line with one result line; the framework's prints go to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    run = {"dspy.RLM": _run_dspy, "rlms": _run_rlms}[name]
    __import__("dspy" if name == "dspy.RLM" else "rlm")  # imported before the clock starts
    out.write(RESULT + json.dumps({"ready": name}) + "\n")
    for line in sys.stdin:
        job = json.loads(line)
        try:
            result = run(job, Path(job["log_path"]))
        except Exception as exc:  # noqa: BLE001 - the row records it, scored 0
            result = {
                "answer": None,
                "turns": 0,
                "longest_reply_tokens": 0,
                "error": f"{type(exc).__name__}: {exc}",
            }
        result["error"] = (result.get("error") or "")[:200] or None
        out.write(RESULT + json.dumps(result, default=str) + "\n")


# -- orchestrator side (rlmkit's venv) ----------------------------------------------------------
class Driver:
    """A framework's driver process in the peers' venv, in its own process group (killable whole)."""

    def __init__(self, name: str, stderr_path: Path):
        from peers.peer_env import PYTHON

        self.proc = subprocess.Popen(
            [str(PYTHON), __file__, "--driver", name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_path.open("a"),
            text=True,
            start_new_session=True,
        )
        if self.read(180.0) is None:
            self.kill()
            raise RuntimeError(f"the {name} driver did not start; see {stderr_path}")

    def read(self, timeout: float) -> dict | None:
        """The next result line, or None at the timeout or if the driver died."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            if not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            line = self.proc.stdout.readline()
            if not line:
                return None
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT) :])
        return None

    def run(self, job: dict, timeout: float) -> dict | None:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self.read(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def wait_while_exists(flag: Path | None) -> None:
    while flag is not None and flag.exists():
        time.sleep(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--n", type=int, default=5, help="examples per suite")
    parser.add_argument("--length", type=int, default=20_000, help="context characters")
    parser.add_argument("--seed", type=int, default=1000, help="held-out seed (>= 1000)")
    parser.add_argument("--suites", default="needle,aggregation")
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds per example, then killed")
    parser.add_argument("--out", type=Path, default=RESULTS / "local_quality.jsonl")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/local_quality_peers"))
    parser.add_argument(
        "--pause-while", type=Path, default=None, help="before each example, wait while this file exists"
    )
    args = parser.parse_args()
    if args.driver:
        return serve_driver(args.driver)

    import provenance
    from local_quality import SUITES, result_row, table

    from programs.tasks import generate
    from rlmkit.local import EMBEDDED_MAX_TOKENS, ensure_model, machine_server
    from rlmkit.local.server import MODEL_ALIAS

    server = machine_server(ensure_model())  # the machine's one server; this process keeps it up
    args.log_dir.mkdir(parents=True, exist_ok=True)
    per_suite = [
        generate(suite, n=args.n, length=args.length, seed=args.seed, **SUITES.get(suite, {}))
        for suite in args.suites.split(",")
    ]
    first_line, load_at_start = provenance.lines_in(args.out) + 1, os.getloadavg()[0]
    rows = []
    for name in args.frameworks.split(","):
        driver = None
        for batch in zip(*per_suite):  # suites alternate, as in local_quality.py
            for example in batch:
                wait_while_exists(args.pause_while)
                driver = driver or Driver(name, args.log_dir / f"{name}.stderr")
                job = {
                    **example.inputs,
                    "url": server.url,
                    "model": MODEL_ALIAS,
                    "max_tokens": EMBEDDED_MAX_TOKENS,
                    "max_iterations": args.max_iterations,
                    "log_path": str(args.log_dir / f"{name}-{example.id}.json"),
                }
                started = time.monotonic()
                result = driver.run(job, args.deadline)
                seconds = time.monotonic() - started
                if result is None:  # past the deadline (or the driver died): a fresh one next time
                    driver.kill()
                    driver = None
                    error = "deadline" if seconds >= args.deadline else "driver died"
                    result = {"answer": None, "turns": 0, "longest_reply_tokens": 0, "error": error}
                row = result_row(
                    example,
                    name,
                    result["answer"],
                    seconds,
                    result["turns"],
                    result["longest_reply_tokens"],
                    result["error"],
                )
                rows.append(row)
                print(json.dumps(row, default=str), flush=True)
                with args.out.open("a") as handle:
                    handle.write(json.dumps(row, default=str) + "\n")
        driver and driver.kill()
    if rows:
        run = provenance.record(__file__, sys.argv[1:], load_at_start)
        provenance.record_rows(args.out, first_line, first_line + len(rows) - 1, run)
    table(rows, args.suites.split(","), args.length)


if __name__ == "__main__":
    main()
