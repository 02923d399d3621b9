"""Sessions side by side: many questions over one loaded context (a benchmark, not a test).

    python benchmarks/speed/sessions.py [--out benchmarks/results/sessions.json] [--quick]

One scripted model (``rlmkit.testing.ScriptedServer`` on 127.0.0.1, in this process) answers every
framework; each root reply is one turn whose code is O(1) in the context size, so what grows with
the context is the framework's cost. "Framework time before the first request" runs from the call
to the first root request's arrival at the server; a call's "overhead" is its wall time minus the
time the server was busy answering it. Rows:

- ``second_call``: a session's second and later calls at 1e7 and 1e8 characters; beside it a plain
  ``rlm(...)`` call and dspy.RLM (``LocalInterpreter``: its Deno sandbox cannot start offline), each
  asked one call at a time, sending the inputs on every call (target: session <= 5 ms);
- ``ten_questions``: a session (opened, then ten calls) against ten plain calls at 1e7 (target:
  the session's total overhead at most 1/5 of the plain calls');
- ``save_restore``: a session holding a 1e8-character context and ten variables: save time and
  bytes on disk, and ``Session.load`` + the first call against the first call of a fresh session
  (target: restore at most 2x the first load);
- ``kill_between_calls``: ``kill -9`` of the worker between calls 3 and 4; call 4 must answer
  from call 3's variables;
- ``concurrent_memory``: eight sessions at 1e7 characters each, one call each at once: the host
  process's memory growth (contexts included) against the contexts' size (target: at most 2.5x);
- ``long_session``: 50 calls of one session on a model with a 16,384-token window, each call making
  a variable and answering 1,500 characters, every call remembered until compaction says otherwise:
  every call must answer, every task message stay within its share of the window, and call 50 read
  the variables of calls 1 to 49 (measured with the scripted model: it checks the session's
  bookkeeping, not what a real model makes of a compacted message).

``--only long_session`` runs that row alone and keeps the file's other rows (it records its own
provenance beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS

import provenance
import psutil

import rlmkit  # noqa: E402
from rlmkit.testing import ScriptedServer  # noqa: E402

MARK = "BENCH-SESSION"  # in every question: tells a root request from anything else


class Server(ScriptedServer):
    """Answers each root request with the code of ``self.code``, in each framework's convention;
    logs (arrived, done) of every request."""

    def __init__(self) -> None:
        super().__init__(self._respond)
        self.hits: list[tuple[float, float]] = []
        self.code = "SUBMIT(answer=str(len(context)))"
        self.hits_lock = threading.Lock()
        self.task_chars: list[int] = []  # each call's task message, as the first root request sent it

    def _respond(self, body: dict) -> str:
        first = str((body.get("messages") or [{}])[0].get("content", ""))
        if "[[ ## " in first or "generate_action" in first or "reasoning" in first and "code" in first:
            code = f"```python\n{self.code}\n```"
            return f"[[ ## reasoning ## ]]\nGo.\n\n[[ ## code ## ]]\n{code}\n\n[[ ## completed ## ]]"
        return f"```repl\n{self.code}\n```"

    def served(self, body: dict, arrived: float, done: float) -> None:
        messages = body.get("messages") or []
        with self.hits_lock:
            self.hits.append((arrived, done))
            if len(messages) == 2:  # a call's first root request: system prompt and task message
                self.task_chars.append(len(str(messages[1].get("content", ""))))

    def take(self) -> list[tuple[float, float]]:
        with self.hits_lock:
            hits, self.hits = sorted(self.hits), []
        return hits


def timed(server: Server, call) -> dict[str, float]:
    """Run ``call()``; its wall time, the time before the first request, and the overhead."""
    server.take()
    start = time.monotonic()
    result = call()
    wall = time.monotonic() - start
    hits = server.take()
    busy = sum(done - arrived for arrived, done in hits)
    first = (hits[0][0] - start) if hits else float("nan")
    return {"wall_s": wall, "before_first_request_s": first, "overhead_s": wall - busy, "result": result}


def context_of(chars: int, seed: int = 0) -> str:
    line = f"{seed:04d} GET /index.html 200 host-{seed % 7}\n"
    return (line * (chars // len(line) + 1))[:chars]


def rlm_for(server: Server) -> Any:
    lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="bench", cache=False)
    return rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=4)


# -- rows ----------------------------------------------------------------------------------------
def second_call(server: Server, sizes: list[int], calls: int) -> dict[str, Any]:
    rows = {}
    rlm = rlm_for(server)
    for size in sizes:
        context = context_of(size)
        row: dict[str, Any] = {}
        with rlm.session(context=context) as s:
            first = timed(server, lambda: s(question=f"{MARK} q0").answer)
            later = [timed(server, lambda i=i: s(question=f"{MARK} q{i}").answer) for i in range(1, calls)]
        row["session_first_call"] = _clean(first)
        row["session_later_calls"] = _summary(later)
        plain = [
            timed(server, lambda i=i, c=context: rlm(context=c, question=f"{MARK} q{i}").answer)
            for i in range(2)
        ]
        row["plain_rlm_calls"] = _summary(plain)
        row["dspy_rlm_calls"] = dspy_calls(server, context, 2)
        rows[str(size)] = row
        print(
            f"second_call {size:.0e}: {json.dumps(row['session_later_calls'])}", file=sys.stderr, flush=True
        )
    return rows


def dspy_calls(server: Server, context: str, n: int) -> dict[str, Any]:
    try:
        import dspy

        lm = dspy.LM("openai/scripted", api_base=server.url, api_key="bench", cache=False)
        with dspy.context(lm=lm):
            rlm = dspy.RLM(
                "context, question -> answer", max_iters=4, interpreter_factory=dspy.LocalInterpreter
            )
            out = [
                timed(server, lambda i=i: rlm(context=context, question=f"{MARK} q{i}").answer)
                for i in range(n)
            ]
        return _summary(out)
    except Exception as exc:  # noqa: BLE001 - a peer that cannot run here is reported, not fatal
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def ten_questions(server: Server, size: int) -> dict[str, Any]:
    rlm = rlm_for(server)
    context = context_of(size)
    plain = [
        timed(server, lambda i=i: rlm(context=context, question=f"{MARK} q{i}").answer) for i in range(10)
    ]
    opened = time.monotonic()
    with rlm.session(context=context) as s:
        open_s = time.monotonic() - opened
        session = [timed(server, lambda i=i: s(question=f"{MARK} q{i}").answer) for i in range(10)]
    plain_total = sum(r["overhead_s"] for r in plain)
    session_total = open_s + sum(r["overhead_s"] for r in session)
    return {
        "chars": size,
        "plain_total_overhead_s": plain_total,
        "session_total_overhead_s": session_total,
        "ratio": session_total / plain_total,
        "target_ratio": 0.2,
        "met": session_total / plain_total <= 0.2,
        "plain_calls": _summary(plain),
        "session_calls": _summary(session),
    }


VARIABLES = "\n".join(
    f"v{i} = [context[j:j + 40] for j in range({i} * 1000, {i} * 1000 + 2000, 40)]" for i in range(10)
)


def save_restore(server: Server, size: int, root: Path) -> dict[str, Any]:
    rlm = rlm_for(server)
    context = context_of(size)
    s = rlm.session(context=context)
    server.code = f"{VARIABLES}\nSUBMIT(answer=str(len(v9)))"
    first = timed(server, lambda: s(question=f"{MARK} make").answer)
    server.code = "SUBMIT(answer=str(len(context)))"
    directory = root / "saved"
    t0 = time.monotonic()
    s.save(directory)
    save_s = time.monotonic() - t0
    s.close()
    disk = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    server.code = "SUBMIT(answer=str(sum(len(globals()['v%d' % i]) for i in range(10))))"
    t0 = time.monotonic()
    loaded = rlmkit.Session.load(directory, rlm)
    load_s = time.monotonic() - t0
    restored = timed(server, lambda: loaded(question=f"{MARK} after").answer)
    loaded.close()
    server.code = "SUBMIT(answer=str(len(context)))"
    restore_s = load_s + restored["overhead_s"]
    return {
        "chars": size,
        "variables": 10,
        "first_call_overhead_s": first["overhead_s"],
        "save_s": save_s,
        "disk_bytes": disk,
        "load_s": load_s,
        "restore_s": restore_s,
        "restored_answer_ok": restored["result"] == "500",
        "ratio": restore_s / first["overhead_s"],
        "target_ratio": 2.0,
        "met": restore_s <= 2 * first["overhead_s"] and restored["result"] == "500",
    }


def kill_between_calls(server: Server, size: int) -> dict[str, Any]:
    rlm = rlm_for(server)
    with rlm.session(context=context_of(size)) as s:
        for i in range(1, 4):
            server.code = f"v{i} = {i} * 10\nSUBMIT(answer=str(v{i}))"
            s(question=f"{MARK} call {i}")
        os.kill(s.sandbox.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while s.worker_running and time.monotonic() < deadline:
            time.sleep(0.005)
        server.code = "SUBMIT(answer=str(v1 + v2 + v3))"
        fourth = timed(server, lambda: s(question=f"{MARK} call 4"))
    server.code = "SUBMIT(answer=str(len(context)))"
    pred = fourth["result"]
    return {
        "chars": size,
        "answer": pred.answer,
        "restored": pred.trajectory.meta.session["restored"],
        "lost": pred.trajectory.meta.session["lost"],
        "call4_overhead_s": fourth["overhead_s"],
        "met": pred.answer == "60",
    }


def concurrent_memory(server: Server, size: int, n: int) -> dict[str, Any]:
    me = psutil.Process()
    before = me.memory_info().rss
    contexts = [context_of(size, seed) for seed in range(n)]
    rlm = rlm_for(server)
    sessions = [rlm.session(context=c) for c in contexts]

    async def all_at_once() -> list[str]:
        return [p.answer for p in await asyncio.gather(*(s.acall(question=f"{MARK} q") for s in sessions))]

    peak = [me.memory_info().rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak.append(me.memory_info().rss)
            stop.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    answers = asyncio.run(all_at_once())
    stop.set()
    sampler.join()
    workers = sum(psutil.Process(s.sandbox.pid).memory_info().rss for s in sessions if s.worker_running)
    for s in sessions:
        s.close()
    grown = max(peak) - before
    return {
        "sessions": n,
        "chars_each": size,
        "contexts_bytes": n * size,
        "host_rss_growth_bytes": grown,
        "ratio": grown / (n * size),
        "target_ratio": 2.5,
        "met": grown <= 2.5 * n * size and answers == [str(size)] * n,
        "workers_rss_bytes": workers,
    }


def long_session(server: Server, calls: int, window_tokens: int) -> dict[str, Any]:
    from rlmkit.session.compaction import CHARS_PER_TOKEN, DEFAULT_COMPACT_AT

    lm = rlmkit.LM(
        "openai/scripted", api_base=server.url, api_key="bench", cache=False, window_tokens=window_tokens
    )
    rlm = rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=4)
    answer = "host-3 failed " * 107  # ~1,500 characters
    server.task_chars = []
    walls, records, answers = [], [], []
    with rlm.session(context=context_of(10**5), history_calls=calls, history_chars=10**6) as s:
        for i in range(1, calls + 1):
            last = i == calls
            reads = "SUBMIT(answer=str(sum(v for k, v in globals().items() if k.startswith('made_'))))"
            server.code = f"made_{i} = {i}\n" + (reads if last else f"SUBMIT(answer={answer!r})")
            row = timed(server, lambda i=i: s(question=f"{MARK} call {i}"))
            walls.append(row["wall_s"])
            records.append(row["result"].trajectory.meta.compaction)
            answers.append(row["result"].answer)
    server.code = "SUBMIT(answer=str(len(context)))"
    limit = int(window_tokens * DEFAULT_COMPACT_AT * CHARS_PER_TOKEN)
    final = records[-1]
    expected = str(calls * (calls + 1) // 2)
    answered = sum(1 for a in answers[:-1] if a.strip() == answer.strip()) + (answers[-1] == expected)
    return {
        "calls": calls,
        "window_tokens": window_tokens,
        "limit_chars": limit,
        "answered": answered,
        "variables_intact": answers[-1] == expected,  # call 50 summed the variables of calls 1 to 50
        "max_task_chars": max(server.task_chars),
        "last_full_chars": final.full_chars if final else None,
        "first_compacted_call": next((n for n, r in enumerate(records, 1) if r), None),
        "last_summarised_calls": len(final.summarised_calls) if final else 0,
        "last_left_out_calls": len(final.left_out_calls) if final else 0,
        "wall_median_s": statistics.median(walls),
        "model": "scripted (rlmkit.testing.ScriptedServer): measures the session, not a model's answers",
        "met": answered == calls
        and answers[-1] == expected
        and max(server.task_chars) <= limit
        and len(server.task_chars) == calls,
    }


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "result"}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("before_first_request_s", "overhead_s", "wall_s")
    return {"n": len(rows), **{f"{k[:-2]}_median_s": statistics.median(r[k] for r in rows) for k in keys},
            **{f"{k[:-2]}_max_s": max(r[k] for r in rows) for k in keys}}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "sessions.json")
    parser.add_argument("--quick", action="store_true", help="small contexts: a smoke run, not a result")
    parser.add_argument("--only", choices=["long_session"], help="run this row alone, keep the file's others")
    args = parser.parse_args(argv)
    if args.only:
        return only_long_session(args.out, argv)
    big, huge = (10**5, 10**6) if args.quick else (10**7, 10**8)
    started = time.monotonic()
    load_at_start = os.getloadavg()[0]
    results: dict[str, Any] = {}
    root = Path(tempfile.mkdtemp(prefix="rlmkit-session-bench-"))
    try:
        with Server() as server:
            results["second_call"] = second_call(server, [big, huge], calls=6)
            for row in results["second_call"].values():
                row["target_s"] = 0.005
                row["met"] = row["session_later_calls"]["before_first_request_median_s"] <= 0.005
            results["ten_questions"] = ten_questions(server, big)
            print(f"ten_questions: {results['ten_questions']['ratio']:.3f}", file=sys.stderr, flush=True)
            results["save_restore"] = save_restore(server, huge, root)
            print(f"save_restore: {results['save_restore']['ratio']:.2f}", file=sys.stderr, flush=True)
            results["kill_between_calls"] = kill_between_calls(server, big)
            results["concurrent_memory"] = concurrent_memory(server, big, 8)
            print(f"memory: {results['concurrent_memory']['ratio']:.2f}", file=sys.stderr, flush=True)
            results["long_session"] = long_session(server, calls=50, window_tokens=16_384)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["meta"] = {
        **provenance.record(__file__, sys.argv[1:] if argv is None else argv, load_at_start),
        "versions": f"rlmkit {rlmkit.__version__}, python {platform.python_version()}",
        "total_s": time.monotonic() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return results


def only_long_session(out: Path, argv: list[str] | None) -> dict[str, Any]:
    """The long-session row alone, with its own provenance, into the results file as it is."""
    load_at_start = os.getloadavg()[0]
    results = json.loads(out.read_text()) if out.exists() else {}
    with Server() as server:
        row = long_session(server, calls=50, window_tokens=16_384)
    row["meta"] = provenance.record(__file__, sys.argv[1:] if argv is None else argv, load_at_start)
    results["long_session"] = row
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"long_session: {json.dumps(row)}", file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
