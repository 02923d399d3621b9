"""The serving tables (docs/guide/serving.md), from ``benchmarks/results/serve.json``:
``render_docs.py`` calls ``render`` for the page's ``serve`` block."""

from __future__ import annotations

from typing import Any

import provenance


def ms(value: float) -> str:
    return f"{value:.2f} ms"


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def responses_rows(over: dict[str, Any]) -> list[str]:
    """The Responses API's rows, in a result that measured them."""
    rows = []
    for suffix, what in (("_responses", "whole response"), ("_responses_streamed", "streamed")):
        if f"over_http{suffix}" in over:
            took, added = over[f"over_http{suffix}"], over[f"added{suffix}"]
            rows.append(
                f"| Responses API, {what} | {ms(took['median_ms'])} | {ms(took['p99_ms'])} "
                f"| {ms(added['median_ms'])} | {ms(added['p99_ms'])} |"
            )
    return rows


def render(r: dict[str, Any]) -> str:
    over, conc, bad = r["overhead"], r["concurrency"], r["bad_input"]
    local, plain, streamed = over["in_process"], over["over_http"], over["over_http_streamed"]
    added, added_stream, cpu = over["added"], over["added_streamed"], over["cpu_mean"]
    lines = [
        f"{provenance.stamp(r['meta'])} Versions: {r['meta']['versions']}.",
        "",
        f"Overhead, {local['n']} calls of each kind, interleaved (scripted model, process sandbox):",
        "",
        "| call | median | p99 | added median | added p99 |",
        "|---|---|---|---|---|",
        f"| in process, `rlm(...)` | {ms(local['median_ms'])} | {ms(local['p99_ms'])} | | |",
        f"| chat completions, whole response | {ms(plain['median_ms'])} | {ms(plain['p99_ms'])} "
        f"| {ms(added['median_ms'])} | {ms(added['p99_ms'])} |",
        f"| chat completions, streamed | {ms(streamed['median_ms'])} | {ms(streamed['p99_ms'])} "
        f"| {ms(added_stream['median_ms'])} | {ms(added_stream['p99_ms'])} |",
        *responses_rows(over),
        "",
        f"CPU per call (mean): {ms(cpu['in_process_ms'])} in process, {ms(cpu['server_ms'])} in the "
        f"server process: {ms(cpu['added_ms'])} added by serving (the sandbox worker, a process of "
        "its own either way, is in neither). On a loaded machine (the load average is in the stamp) "
        "waiting for a core shows in every figure here, most in the p99s: a run of the benchmark "
        "is one sample of that machine's state.",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| overhead <= 3 ms median, <= 5 ms p99 (whole responses) | chat completions "
        f"{ms(added['median_ms'])} median, {ms(added['p99_ms'])} p99"
        + (
            f"; Responses {ms(over['added_responses']['median_ms'])} median, "
            f"{ms(over['added_responses']['p99_ms'])} p99"
            if "added_responses" in over
            else ""
        )
        + f" | {verdict(over['met'])} |",
    ]
    bursts = conc["bursts"]
    done = ", ".join(f"{b['completed']}/{conc['requests']}" for b in bursts)
    mixed = sum(b["mixed_up"] for b in bursts)
    failed = sum(len(b["failed"]) for b in bursts)
    walls = ", ".join(f"{b['wall_s']:.2f} s" for b in bursts)
    lines.append(
        f"| {conc['requests']} concurrent streams: all complete, none mixed up, memory back within 10% "
        f"| {len(bursts)} bursts: {done} complete ({walls}), {mixed} mixed up, {failed} failed; server "
        f"memory {conc['rss_warm_bytes'] / 2**20:.0f} MiB warm, {conc['rss_growth']:+.1%} after "
        f"| {verdict(conc['met'])} |"
    )
    wrong = [kind for kind, row in bad["kinds"].items() if not row["ok"]]
    before, after = bad["before"], bad["after"]
    lines.append(
        f"| bad input ({bad['per_kind']} of each kind): documented status, still serving, nothing leaked "
        f"| {len(bad['kinds']) - len(wrong)}/{len(bad['kinds'])} kinds answered as documented"
        + (f" (not: {', '.join(wrong)})" if wrong else "")
        + f"; a good call after: {'answered' if bad['serves_after'] else 'failed'}; server child processes "
        f"{before['children']} before, {after['children']} after; live sessions {after['sessions']} "
        f"| {verdict(bad['met'])} |"
    )
    lines += ["", "| bad input | status expected | statuses got |", "|---|---|---|"]
    for kind, row in bad["kinds"].items():
        lines.append(f"| {kind} | {row['expected']} | {', '.join(map(str, row['got']))} |")
    if "replicas" in r:
        lines += ["", *replicas_rows(r["replicas"])]
    return "\n".join(lines)


def replicas_rows(rep: dict[str, Any]) -> list[str]:
    """``rlmkit serve --replicas`` (replicas_bench.py): its own stamp, throughput, a killed replica."""
    n, one, two, killed = rep["requests"], rep["one"], rep["two"], rep["killed_mid_session"]

    def per_s(layout: dict[str, Any]) -> str:
        return ", ".join(f"{b['per_s']:.0f}" for b in layout["bursts"])

    def done(layout: dict[str, Any]) -> str:
        bursts = layout["bursts"]
        mixed = sum(b["mixed_up"] for b in bursts)
        failed = sum(len(b["failed"]) for b in bursts)
        counts = ", ".join(f"{b['completed']}/{n}" for b in bursts)
        return f"{counts} complete, {mixed} mixed up, {failed} failed"

    return [
        f"Replicas on Ray Serve (`rlmkit serve --replicas`): {provenance.stamp(rep['meta'])} "
        f"Ray {rep['meta']['ray']}.",
        "",
        f"| layout | {n} concurrent streams, requests/s per burst | median | answers |",
        "|---|---|---|---|",
        f"| 1 replica | {per_s(one)} | {one['median_per_s']:.0f} | {done(one)} |",
        f"| 2 replicas | {per_s(two)} | {two['median_per_s']:.0f} | {done(two)} |",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| 2 replicas vs 1 under {n} concurrent streams: nothing lost or mixed up | throughput ratio "
        f"{rep['ratio']:.2f}x; {'every answer its own request' if rep['all_answered'] else 'answers lost'} "
        f"| {verdict(rep['all_answered'])} |",
        f"| a replica killed between two calls of a session: the session answers, its variables kept "
        f"| {'answered' if killed['answered'] else 'not answered'} by "
        f"{'another replica' if killed['answered_by_another'] else 'the same replica'} in "
        f"{killed['seconds_to_answer']:.2f} s; REPL variable "
        f"{'intact' if killed['variables_kept'] else 'lost'} "
        f"| {verdict(killed['met'])} |",
    ]
