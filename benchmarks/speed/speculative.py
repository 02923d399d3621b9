"""(6b) The embedded model with and without draftless n-gram speculative decoding: speed and answers.

    nice -n 5 python benchmarks/speed/speculative.py --out benchmarks/results/speculative.json

Two private servers of the embedded model start side by side, the same in every setting but
``speculative`` (``none`` against ``--kind``, default ``ngram-simple``; see
``rlmkit/local/server_process.py``), each with ``--threads`` llama.cpp threads and one slot. Every
prompt goes to both at once, so whatever else loads the machine loads both alike, greedy
(temperature 0) with a fixed ``max_tokens`` and ``cache_prompt: false`` (each request reads its
prompt afresh). The prompts are root-model turns of a Recursive Language Model: the system prompt
built from rlmkit's own texts, a task, a turn of code and its printed REPL output, where the
model writes its next turn; such a turn often copies names, code and text it has just read.

Speed is the server's own decode rate (``timings.predicted_n`` over ``predicted_ms``: what
speculation changes; reading the prompt is the same work in both arms), per prompt and as the
median over requests; the answers are compared byte for byte. ``render_docs.py`` renders the
``speculative`` block from the results file with ``block()``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _bootstrap import RESULTS

import provenance

ARMS = ("none", "speculative")
RESULT_FILE = RESULTS / "speculative.json"


def system_prompt() -> str:
    from rlmkit.prompting import FUNCTION_DOCS, REPL_PROMPT
    from rlmkit.protocols import get_protocol

    docs = [
        FUNCTION_DOCS[name].format(sub_chars="8,000")
        for name in ("llm_query", "llm_query_batched", "SHOW_VARS")
    ]
    return REPL_PROMPT.format(
        functions="\n".join(f"- {doc}" for doc in docs),
        finish=get_protocol("submit").render_finish({"answer": "str"}),
    )


def task(variable: str, size: int, preview: str, question: str) -> str:
    return (
        "Your inputs are loaded in the REPL as variables:\n"
        f"- `{variable}` (str, {size:,} characters). Preview: {preview!r}\n"
        f"- `question` (str, {len(question)} characters): {question!r}\n\n"
        "Produce: `answer`: str.\nYou have 8 turns. Start by exploring the inputs with code."
    )


LOG_LINES = "\n".join(
    f"2026-03-0{1 + i % 9} 1{i % 10}:0{i % 6}:{10 + i:02d} {level} {svc}: {msg}"
    for i, (level, svc, msg) in enumerate(
        [
            ("INFO", "ingest", "batch 4411 accepted (1,204 rows)"),
            ("ERROR", "ingest", "batch 4412 rejected: schema mismatch on column 'amount'"),
            ("WARN", "billing", "retrying invoice 88213 after timeout"),
            ("ERROR", "billing", "invoice 88213 failed: upstream returned 502"),
            ("INFO", "ingest", "batch 4413 accepted (998 rows)"),
            ("ERROR", "ingest", "batch 4414 rejected: schema mismatch on column 'amount'"),
            ("INFO", "auth", "rotated signing key k-2026-03"),
            ("ERROR", "billing", "invoice 88240 failed: upstream returned 502"),
        ]
    )
)
CSV_ROWS = "region,month,product,units,revenue\n" + "\n".join(
    f"{region},2025-{month:02d},{product},{units},{units * price:.2f}"
    for region, month, product, units, price in [
        ("north", 1, "widget", 120, 4.5),
        ("north", 1, "gadget", 40, 19.0),
        ("south", 1, "widget", 95, 4.5),
        ("south", 2, "gadget", 61, 19.0),
        ("east", 2, "widget", 150, 4.5),
        ("west", 2, "gizmo", 12, 99.0),
        ("north", 3, "gizmo", 9, 99.0),
        ("east", 3, "gadget", 33, 19.0),
    ]
)
SOURCE = '''class RateLimiter:
    """Token bucket: `rate` tokens per second, at most `burst` saved."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.updated = time.monotonic()

    def acquire(self, n: int = 1) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False


def wait_for(limiter: RateLimiter, n: int = 1, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not limiter.acquire(n):
        if time.monotonic() > deadline:
            return False
        time.sleep(1 / limiter.rate)
    return True'''
PROSE = (
    "Chapter 3. The ferry left Harwick at dawn. Margit Olsen stood at the rail with the letter from "
    "her brother folded twice in her coat. 'He says the lighthouse keeper, Anders Voll, has not been "
    "seen since the storm,' she told the captain. The captain, a broad man named Pieter Haas, only "
    "nodded. On the island the keeper's cottage was locked; through the window Margit saw the logbook "
    "open at the entry for the ninth of November. The last line read: 'Lamp failed 02:10. Went up to "
    "mend it. Someone on the rocks below, waving a red lantern.'"
)


def transcript(context_name: str, excerpt: str, question: str, first_code: str, printed: str) -> list[dict]:
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": task(context_name, 40_000 + len(excerpt) * 31, excerpt[:40], question)},
        {"role": "assistant", "content": f"Let me look at the input first.\n```repl\n{first_code}\n```"},
        {"role": "user", "content": f"REPL output:\n{printed}\n\n[turn 1 of 8 done]"},
    ]


PROMPTS: dict[str, list[dict]] = {
    "log errors": transcript(
        "logs",
        LOG_LINES,
        "Which batch numbers were rejected, and why?",
        "print(len(logs))\nprint(logs[:1200])",
        f"41,382\n{LOG_LINES}",
    ),
    "csv totals": transcript(
        "sales",
        CSV_ROWS,
        "What was the total revenue per region?",
        "lines = sales.splitlines()\nprint(len(lines))\nprint('\\n'.join(lines[:9]))",
        f"1,318\n{CSV_ROWS}",
    ),
    "code question": transcript(
        "source",
        SOURCE,
        "What does wait_for return when the limiter never refills in time?",
        "import re\nstart = source.find('class RateLimiter')\nprint(source[start:start + 1400])",
        SOURCE,
    ),
    "prose names": transcript(
        "novel",
        PROSE,
        "Who was last seen before the storm, and what did the logbook's last line say?",
        "idx = novel.find('lighthouse')\nprint(idx)\nprint(novel[idx - 300:idx + 600])",
        f"18,204\n{PROSE}",
    ),
    "chunked answers": transcript(
        "report",
        PROSE,
        "List every person named in the report with their role.",
        "chunks = [report[i:i + 8000] for i in range(0, len(report), 8000)]\n"
        "names = llm_query_batched([f'List each person named and their role:\\n{c}' for c in chunks])\n"
        "for i, n in enumerate(names):\n    print(i, n)",
        "0 Margit Olsen: passenger, sister of the letter's writer; Pieter Haas: ferry captain\n"
        "1 Anders Voll: lighthouse keeper, missing since the storm\n"
        "2 Pieter Haas: ferry captain; Margit Olsen: searches the cottage\n"
        "3 Anders Voll: keeper; an unnamed person on the rocks with a red lantern\n"
        "4 (no people named)",
    ),
    "schema errors": transcript(
        "logs",
        LOG_LINES,
        "How many ERROR lines does each service have?",
        "errors = [line for line in logs.splitlines() if ' ERROR ' in line]\nprint(len(errors))\n"
        "print('\\n'.join(errors[:10]))",
        "4\n" + "\n".join(line for line in LOG_LINES.splitlines() if " ERROR " in line),
    ),
}


def ask(url: str, messages: list[dict], max_tokens: int) -> dict[str, Any]:
    import httpx

    body = {
        "model": "local",
        "messages": messages,
        "temperature": 0,
        "max_tokens": max_tokens,
        "cache_prompt": False,
    }
    response = httpx.post(f"{url}/chat/completions", json=body, timeout=1800)
    response.raise_for_status()
    reply = response.json()
    timings = reply.get("timings") or {}
    return {
        "text": reply["choices"][0]["message"]["content"],
        "tokens": int(timings.get("predicted_n", reply["usage"]["completion_tokens"])),
        "prompt_tokens": int(reply["usage"]["prompt_tokens"]),
        "decode_ms": round(float(timings.get("predicted_ms", 0.0)), 1),
        "drafted": int(timings.get("draft_n", 0)),
        "accepted": int(timings.get("draft_n_accepted", 0)),
    }


def tok_s(row: dict[str, Any]) -> float:
    return row["tokens"] / (row["decode_ms"] / 1000) if row["decode_ms"] else 0.0


def measure(urls: dict[str, str], rounds: int, max_tokens: int) -> list[dict[str, Any]]:
    rows = []
    with ThreadPoolExecutor(len(ARMS)) as pool:
        for round_ in range(rounds):
            for name, messages in PROMPTS.items():
                sent = [pool.submit(ask, urls[arm], messages, max_tokens) for arm in ARMS]
                replies = {arm: future.result() for arm, future in zip(ARMS, sent)}
                for arm, reply in replies.items():
                    rows.append({"round": round_, "prompt": name, "arm": arm, **reply})
                    print(
                        f"round {round_} {name:15s} {arm:11s} {reply['tokens']:4d} tokens "
                        f"{tok_s(reply):6.2f} tok/s, {reply['accepted']}/{reply['drafted']} guesses kept",
                        flush=True,
                    )
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {(r["round"], r["prompt"], r["arm"]): r for r in rows}
    pairs = sorted({(r["round"], r["prompt"]) for r in rows})
    identical = [by[(k, p, "none")]["text"] == by[(k, p, "speculative")]["text"] for k, p in pairs]
    median = {arm: statistics.median(tok_s(r) for r in rows if r["arm"] == arm) for arm in ARMS}
    spec = [r for r in rows if r["arm"] == "speculative"]
    drafted = sum(r["drafted"] for r in spec)
    return {
        "median_tok_s": {arm: round(v, 2) for arm, v in median.items()},
        "ratio": round(median["speculative"] / median["none"], 3),
        "pair_ratios_median": round(
            statistics.median(tok_s(by[(k, p, "speculative")]) / tok_s(by[(k, p, "none")]) for k, p in pairs),
            3,
        ),
        "identical": sum(identical),
        "pairs": len(pairs),
        "drafted": drafted,
        "accepted": sum(r["accepted"] for r in spec),
        "acceptance": round(sum(r["accepted"] for r in spec) / drafted, 3) if drafted else None,
    }


def block(results: dict[str, Any] | None = None) -> str:
    """The docs block (docs/guide/models.md): the stamp, a row per prompt, the verdict."""
    r = results or json.loads(RESULT_FILE.read_text())
    s, rows = r["summary"], r["rows"]
    rate = s["median_tok_s"]
    lines = [
        provenance.stamp(r["meta"]),
        "",
        f"Two servers of the embedded model, llama.cpp threads {r['server']['threads']} and one slot each, "
        f'`speculative="none"` against `speculative="{r["kind"]}"`; {len(PROMPTS)} RLM root turns '
        f"x {r['rounds']} rounds, each sent to both at once, greedy, at most {r['max_tokens']} tokens. "
        "Decode rate as the server measures it (tokens generated over generation time).",
        "",
        "| prompt | tokens | tok/s off | tok/s on | on / off | drafted / accepted | same answer |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name in dict.fromkeys(row["prompt"] for row in rows):
        off = [row for row in rows if row["prompt"] == name and row["arm"] == "none"]
        on = [row for row in rows if row["prompt"] == name and row["arm"] == "speculative"]
        rate_off = statistics.median(tok_s(row) for row in off)
        rate_on = statistics.median(tok_s(row) for row in on)
        same = sum(a["text"] == b["text"] for a, b in zip(off, on))
        lines.append(
            f"| {name} | {on[0]['tokens']} | {rate_off:.2f} | {rate_on:.2f} | {rate_on / rate_off:.2f}x "
            f"| {sum(row['drafted'] for row in on)} / {sum(row['accepted'] for row in on)} "
            f"| {same} of {len(off)} |"
        )
    lines += [
        "",
        f"**Median decode rate: {rate['none']:.2f} tok/s off, {rate['speculative']:.2f} "
        f"tok/s on ({s['ratio']:.2f}x; median of the per-request ratios {s['pair_ratios_median']:.2f}x). "
        f"{s['identical']} of {s['pairs']} replies byte-identical between the arms**; "
        f"{s['accepted']} of {s['drafted']} guessed tokens accepted.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kind", default="ngram-simple", help="the speculative arm's setting")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads per server")
    parser.add_argument("--rounds", type=int, default=3, help="times each prompt goes to both servers")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    from rlmkit.local import LocalServer, LocalServerConfig, ensure_model

    load_start = os.getloadavg()[0]
    model = ensure_model()
    kinds = {"none": "none", "speculative": args.kind}
    logs = Path(tempfile.mkdtemp(prefix="rlmkit-speculative-"))
    servers = {
        arm: LocalServer(
            model,
            LocalServerConfig(ctx=4096, parallel=1, threads=args.threads, speculative=kind),
            logs / f"{arm}.log",
        )
        for arm, kind in kinds.items()
    }
    try:
        urls = {arm: server.start().url for arm, server in servers.items()}
        rows = measure(urls, args.rounds, args.max_tokens)
    finally:
        for server in servers.values():
            server.stop()
    result = {
        "meta": provenance.record(__file__, sys.argv[1:] if argv is None else argv, load_start),
        "kind": args.kind,
        "server": {"threads": args.threads, "parallel": 1, "ctx": 4096},
        "rounds": args.rounds,
        "max_tokens": args.max_tokens,
        "summary": summarise(rows),
        "rows": rows,
    }
    print(block(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
