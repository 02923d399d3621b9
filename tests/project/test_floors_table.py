"""The floors table of docs/how-it-is-built.md, checked against the imports.

Each row of the table is a floor, the first row the highest. A module stands on the row whose
package names it most closely (``rlmkit/run/`` holds ``rlmkit.run.loop``; ``rlmkit/settings.py``
is ``rlmkit.settings``); it may import modules on its own floor and below, never above. The
table is the plan a reader trusts, so a module that reaches up, or one the table does not place,
fails here with the row and the import that break it. Imports under ``if TYPE_CHECKING:`` do not
count: they name a type for readers and checkers and never run (``events.py`` names the run's
``RunSpec`` so; the run imports ``events``).
"""

from __future__ import annotations

import re

from tests.project.test_layering import ROOT, imported_names, modules

PAGE = ROOT / "docs" / "how-it-is-built.md"
PACKAGES = ("rlmkit", "programs", "optimizers", "signatures")
# Modules the table does not place, on purpose: the package's own face (``import rlmkit`` loads
# its names lazily, by string, from the rooms below) and ``python -m rlmkit``.
UNPLACED = {"rlmkit", "rlmkit.__main__"}


def table_rows(markdown: str) -> list[list[str]]:
    """The floors table's rows, highest first: each row the module prefixes its packages cell names.

    A bare name (``budget.py`` after ``rlmkit/settings.py``) is in the folder of the name before it."""
    section = markdown.split("## The floors", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        # the header and the |---| line are no floors; a row with an empty first cell is one
        if not line.startswith("|") or len(cells) < 3 or cells[0] == "floor" or set(cells[1]) <= {"-", " "}:
            continue
        folder = ""
        names = []
        for token in re.findall(r"`([^`]+)`", cells[1]):
            if "/" in token.rstrip("/"):
                folder = token.rstrip("/").rpartition("/")[0] + "/"
            else:
                token = folder + token
            names.append(token.removesuffix("/").removesuffix(".py").replace("/", "."))
        rows.append(names)
    return rows


def floor_of(module: str, rows: list[list[str]]) -> int | None:
    """The row of the closest name that holds ``module`` (a longer prefix wins), or None."""
    best: tuple[int, int] | None = None
    for index, names in enumerate(rows):
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > best[0]:
                    best = (len(name), index)
    return None if best is None else best[1]


def violations(rows: list[list[str]], graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up the table, and every module the table does not place."""
    found = []
    for module in sorted(graph):
        floor = floor_of(module, rows)
        if floor is None:
            if module not in UNPLACED:
                found.append(f"{module}: on no row of the floors table")
            continue
        for target in sorted(graph[module]):
            above = floor_of(target, rows)
            if above is not None and above < floor:
                found.append(
                    f"{module} (row {floor + 1}: {', '.join(rows[floor])}) imports {target}, "
                    f"higher up (row {above + 1}: {', '.join(rows[above])})"
                )
    return found


def whole_graph() -> dict[str, set[str]]:
    known = {name: path for package in PACKAGES for name, path in modules(package).items()}
    return {
        name: {target for target in imported_names(path, set(known), runtime_only=True) if target in known}
        - {name}
        for name, path in known.items()
    }


def test_the_table_parses_into_its_floors():
    rows = table_rows(PAGE.read_text())
    assert rows[0] == ["programs", "optimizers"]
    assert rows[-1] == ["rlmkit.errors", "rlmkit.trajectory"]
    assert len(rows) >= 8
    budget_row = next(names for names in rows if "rlmkit.budget" in names)
    assert "rlmkit.loading" in budget_row  # a bare `loading.py` is rlmkit's, as `rlmkit/budget.py` is


def test_no_module_imports_one_on_a_higher_floor():
    problems = violations(table_rows(PAGE.read_text()), whole_graph())
    assert problems == [], "\n".join(problems)


def test_the_check_reports_a_module_reaching_up_and_one_left_out():
    """The check itself can fail: a table with a floor put wrong, and a graph with an import up."""
    rows = [["rlmkit.cli"], ["rlmkit.run"], ["rlmkit.errors"]]
    good = {"rlmkit.cli.lm": {"rlmkit.run.loop", "rlmkit.errors"}, "rlmkit.run.loop": {"rlmkit.errors"}}
    assert violations(rows, {**good, "rlmkit.errors": set()}) == []
    reaching_up = {**good, "rlmkit.errors": {"rlmkit.run.loop"}}
    assert violations(rows, reaching_up) == [
        "rlmkit.errors (row 3: rlmkit.errors) imports rlmkit.run.loop, higher up (row 2: rlmkit.run)"
    ]
    left_out = {**good, "rlmkit.errors": set(), "rlmkit.view.render": set()}
    assert violations(rows, left_out) == ["rlmkit.view.render: on no row of the floors table"]


def test_a_page_with_a_floor_put_wrong_fails():
    """The real graph against the real page with one row moved: settings.py above the run fails."""
    text = PAGE.read_text()
    settings_line = next(line for line in text.splitlines() if "`rlmkit/settings.py`" in line)
    lines = [line for line in text.splitlines() if line != settings_line]
    top = next(i for i, line in enumerate(lines) if "`rlmkit/cli/`" in line)
    moved = "\n".join(lines[: top + 1] + [settings_line] + lines[top + 1 :])
    problems = violations(table_rows(moved), whole_graph())
    assert any(p.startswith("rlmkit.run.") and "imports rlmkit.settings" in p for p in problems), problems
