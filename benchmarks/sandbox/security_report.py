"""The security table's report (``security_table.py``): the markdown written to
``benchmarks/results/security.md``, from the rows the cases produced."""

from __future__ import annotations

import os
import time

import provenance
from security_guard import DISK_MAX, MEMORY_MAX, PIDS_MAX

COLUMNS = {
    "rlmkit": "rlmkit, host as root",
    "rlmkit-user": "rlmkit, host as a user",
    "rlms": "rlms `LocalREPL`",
    "dspy": "dspy `LocalInterpreter` (documented as not a sandbox)",
}


def write_table(
    rows: dict[str, list[dict]],
    frameworks: list[str],
    case_order: list[str],
    timeout: float,
    command: str,
    cell_timeout: float,
    prompt_output_max: int,
) -> str:
    """The markdown of ``benchmarks/results/security.md``: one row per case that ran, in
    ``case_order``, one column per framework, and how each was judged."""
    cases = [name for name in case_order if any(r["case"] == name for fw in rows.values() for r in fw)]
    lines = [
        "| case | " + " | ".join(COLUMNS.get(fw, fw) for fw in frameworks) + " |",
        "| --- |" + " --- |" * len(frameworks),
    ]
    for case in cases:
        cells = []
        for fw in frameworks:
            row = next(r for r in rows[fw] if r["case"] == case)
            mark = "contained" if row["contained"] else "**NOT contained**"
            secs = f">{timeout:.0f} s" if row["hung"] else f"{row['seconds']:.2f} s"
            cells.append(f"{mark}: {row['outcome']} ({secs})")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    totals = ", ".join(f"{fw} {sum(r['contained'] for r in rows[fw])}/{len(rows[fw])}" for fw in frameworks)
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "\n".join(
        [
            "# Hostile code: rlmkit vs the rlms and DSPy local interpreters",
            "",
            (
                f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
                f"({os.uname().sysname} {os.uname().release}, {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
                f"as {'root' if os.geteuid() == 0 else 'a user'}), commit {provenance.commit()}, "
                f"load average {os.getloadavg()[0]:.1f} at the end. Contained: {totals}."
            ),
            "",
            (
                "Each cell: outcome (time to contain: the cell's duration when contained, else the wall time "
                "until the harness stopped it). rlmkit = `rlmkit.RLM`, default process sandbox, "
                f"cell_timeout={cell_timeout:g} s, its host run as root (the worker takes a uid of its own) "
                "and as an unprivileged user who owns the bait files (the worker stays that user, in a user "
                "namespace: only Landlock, seccomp and the namespaces keep it from them); "
                "rlms = rlms 0.1.3 `LocalREPL`; dspy = dspy 3.4.1 "
                f"`LocalInterpreter(execution_timeout={cell_timeout:g})`, which dspy documents as not a "
                'security sandbox ("A subprocess is not a security sandbox": '
                "https://dspy.ai/api/tools/LocalInterpreter/, and the class docstring in "
                "`dspy/primitives/local_interpreter.py`). dspy's default Deno/Pyodide "
                "sandbox was not run: its first start needs deno.land and npm."
            ),
            "",
            (
                "Output is judged for all three at one boundary, what reaches the root model's next prompt "
                f"(more than {prompt_output_max:,} characters of one cell's output: not contained): "
                "rlmkit's as its scripted server received it; the peers' by passing the REPL result "
                "through the function their own loop builds that prompt with (rlms 0.1.3 "
                "`rlm.utils.parsing.format_iteration`, 20,000 characters per block; dspy 3.4.1 "
                "`REPLHistory` with `dspy.RLM`'s default `max_output_chars`, 10,000). A secret counts as "
                "shown when it is in that prompt text."
            ),
            "",
            *lines,
            "",
            (
                f"Harness guards (never part of a framework): each host runs in its own pids cgroup "
                f"({PIDS_MAX} tasks), memory cgroup ({MEMORY_MAX // 2**30} GiB) and a "
                f"{DISK_MAX // 2**20} MiB tmpfs as working and temp dir, and is killed after "
                f"{timeout:.0f} s. Hitting any of them counts as "
                "not contained. `allocate_64_gib` is refused by the kernel's overcommit check on this "
                f"{memory_gib:.0f} GiB machine for every framework; only rlmkit sets a memory "
                "limit of its own (4 GiB address space)."
            ),
            "",
        ]
    )
