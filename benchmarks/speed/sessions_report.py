"""The sessions table (docs/guide/sessions.md), from ``benchmarks/results/sessions.json``:
``render_docs.py`` calls ``render`` for the page's ``sessions`` block."""

from __future__ import annotations

from typing import Any

import provenance


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def render(r: dict[str, Any]) -> str:
    lines = [
        f"{provenance.stamp(r['meta'])} Versions: {r['meta']['versions']}.",
        "",
        "| context | session, later calls: before the first request | plain `rlm(...)` | dspy.RLM | target |",
        "|---|---|---|---|---|",
    ]
    for size, row in r["second_call"].items():
        dspy_row = row["dspy_rlm_calls"]
        dspy_cell = dspy_row.get("error") or ms(dspy_row["before_first_request_median_s"])
        lines.append(
            f"| {int(size):.0e} chars | {ms(row['session_later_calls']['before_first_request_median_s'])} "
            f"(max {ms(row['session_later_calls']['before_first_request_max_s'])}) "
            f"| {ms(row['plain_rlm_calls']['before_first_request_median_s'])} | {dspy_cell} "
            f"| <= 5 ms: {verdict(row['met'])} |"
        )
    lines += ["", "Call overhead (wall time minus the model's time), median:", "",
              "| context | session, later call | plain call | dspy.RLM |", "|---|---|---|---|"]  # fmt: skip
    for size, row in r["second_call"].items():
        dspy_row = row["dspy_rlm_calls"]
        lines.append(
            f"| {int(size):.0e} chars | {ms(row['session_later_calls']['overhead_median_s'])} "
            f"| {ms(row['plain_rlm_calls']['overhead_median_s'])} "
            f"| {dspy_row.get('error') or ms(dspy_row['overhead_median_s'])} |"
        )
    ten, sr, kill, mem = (
        r["ten_questions"],
        r["save_restore"],
        r["kill_between_calls"],
        r["concurrent_memory"],
    )
    lines += [
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| ten questions at {ten['chars']:.0e} chars: session overhead <= 1/5 of ten plain calls "
        f"| {ms(ten['session_total_overhead_s'])} against {ms(ten['plain_total_overhead_s'])} "
        f"({ten['ratio']:.2f}) | {verdict(ten['met'])} |",
        f"| save and restore, {sr['chars']:.0e} chars + {sr['variables']} variables: "
        "restore <= 2x the first load "
        f"| save {ms(sr['save_s'])}, {sr['disk_bytes'] / 1e6:.1f} MB on disk; restore {ms(sr['restore_s'])} "
        f"against a first load of {ms(sr['first_call_overhead_s'])} ({sr['ratio']:.2f}x) "
        f"| {verdict(sr['met'])} |",
        f"| kill -9 between calls 3 and 4: call 4 answers from call 3's variables "
        f"| answer {kill['answer']!r}, restored: {kill['restored']}, lost: {len(kill['lost'])}, "
        f"call 4 overhead {ms(kill['call4_overhead_s'])} | {verdict(kill['met'])} |",
        f"| {mem['sessions']} concurrent sessions at {mem['chars_each']:.0e} chars: "
        "host memory <= 2.5x the contexts "
        f"| +{mem['host_rss_growth_bytes'] / 1e6:.0f} MB for {mem['contexts_bytes'] / 1e6:.0f} MB "
        f"of contexts ({mem['ratio']:.2f}x); the workers hold {mem['workers_rss_bytes'] / 1e6:.0f} MB "
        f"| {verdict(mem['met'])} |",
    ]
    if "long_session" in r:
        lines += ["", *long_session(r["long_session"])]
    return "\n".join(lines)


def long_session(row: dict[str, Any]) -> list[str]:
    """The long-session row, with its own stamp when it was measured on its own (``--only``)."""
    window = f"{row['window_tokens']:,}-token window"
    shortened = row["last_summarised_calls"] + row["last_left_out_calls"]
    return [
        *([f"{provenance.stamp(row['meta'])}", ""] if "meta" in row else []),
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| {row['calls']} calls of one session on a {window}, scripted model: every call answered, "
        f"every task message <= {row['limit_chars']:,} characters, "
        f"call {row['calls']} reads the variables of calls 1 to {row['calls']} "
        f"| {row['answered']} of {row['calls']} answered; largest task message {row['max_task_chars']:,} "
        f"characters; variables intact: {'yes' if row['variables_intact'] else 'no'}; compaction from call "
        f"{row['first_compacted_call']}, at the last call {shortened} earlier calls shortened "
        f"({row['last_left_out_calls']} left out); median call {ms(row['wall_median_s'])} "
        f"| {verdict(row['met'])} |",
    ]
