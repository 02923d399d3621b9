"""The house plan's arrows, checked from the source: the runtime imports nothing built on it,
and the runtime's modules import each other without a cycle (lazy imports inside functions count:
a cycle hidden in a function is still two modules that cannot be understood apart)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UPPER_PACKAGES = ("programs", "optimizers", "signatures")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}


def imported_names(path: Path, known: set[str] = frozenset(), *, runtime_only: bool = False) -> set[str]:
    """Every module name an import statement in the file names, lazy imports included.

    ``from pkg import sub`` counts as importing ``pkg.sub`` alone when that is one of ``known``'s
    modules (the package's ``__init__`` is then only the way in), else as importing ``pkg``.
    ``runtime_only`` leaves out imports under ``if TYPE_CHECKING:``, which name types for readers
    and checkers and never run."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if runtime_only and id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(base)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    known = modules(package)
    return {
        name: {target for target in imported_names(path, set(known)) if target in known} - {name}
        for name, path in known.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (depth-first search with three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_runtime_imports_no_package_built_on_it():
    offenders = [
        f"{name} imports {target}"
        for name, path in modules("rlmkit").items()
        for target in imported_names(path)
        if target.split(".")[0] in UPPER_PACKAGES
    ]
    assert offenders == []


def test_optimizers_import_no_program_outside_their_command_line_wiring():
    offenders = [
        f"{name} imports {target}"
        for name, path in modules("optimizers").items()
        if not name.startswith("optimizers.cli")
        for target in imported_names(path)
        if target.split(".")[0] == "programs"
    ]
    assert offenders == []


def test_the_runtime_has_no_import_cycle():
    assert find_cycle(import_graph("rlmkit")) is None


@pytest.mark.parametrize(
    ("graph", "cyclic"),
    [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True), ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, False)],
)
def test_the_cycle_finder_finds_cycles(graph, cyclic):
    assert (find_cycle(graph) is not None) is cyclic


def test_relative_imports_resolve_to_module_names():
    assert "rlmkit.errors" in imported_names(ROOT / "rlmkit" / "budget.py")


def test_the_ground_floor_imports_nothing_above_it():
    ground = {"rlmkit.errors", "rlmkit.trajectory"}
    graph = import_graph("rlmkit")
    assert {name: sorted(graph[name] - ground) for name in ground} == {name: [] for name in ground}


def test_the_model_layer_lives_in_one_package():
    stray = [
        p.name
        for p in (ROOT / "rlmkit").glob("*.py")
        if p.stem in {"lm", "lm_cache", "lm_limits", "prices", "defaults"}
    ]
    assert stray == [] and (ROOT / "rlmkit" / "models" / "transports").is_dir()


def outside_imports(prefix: str) -> dict[str, list[str]]:
    """For each module under ``prefix``, the ``rlmkit`` modules it imports from outside ``prefix``."""
    graph = import_graph("rlmkit")
    return {
        name: sorted(t for t in targets if not t.startswith(prefix))
        for name, targets in graph.items()
        if name == prefix or name.startswith(prefix + ".")
    }


def test_the_model_layer_imports_only_the_ground_floor_below_it():
    below = {"rlmkit.errors", "rlmkit.trajectory", "rlmkit.concurrency.sync_loop"}
    offenders = {name: sorted(set(t) - below) for name, t in outside_imports("rlmkit.models").items()}
    assert {name: t for name, t in offenders.items() if t} == {}


def test_the_model_contract_imports_only_the_ground_floor():
    assert outside_imports("rlmkit.models.contract") == {"rlmkit.models.contract": ["rlmkit.trajectory"]}


def test_the_embedded_model_stands_on_the_model_layer_and_never_chooses_a_model():
    below = ("rlmkit.models", "rlmkit.errors", "rlmkit.loading")
    offenders = {
        name: [t for t in targets if not t.startswith(below)]
        for name, targets in outside_imports("rlmkit.local").items()
    }
    assert {name: t for name, t in offenders.items() if t} == {}


def test_model_selection_sits_above_the_model_layer_and_the_embedded_model():
    graph = import_graph("rlmkit")
    assert {"rlmkit.models.lm", "rlmkit.local"} <= graph["rlmkit.model_choice"]
    users = sorted(name for name, targets in graph.items() if "rlmkit.model_choice" in targets)
    assert not [name for name in users if name.startswith(("rlmkit.models", "rlmkit.local"))]


def test_production_code_serves_and_trains_without_the_test_helpers():
    """Rollouts, served checkpoints and the runtime use ``rlmkit.models.chat_server``; ``rlmkit.testing``
    (the scripted server, the fakes) is imported by tests, benchmarks and demos only."""
    production = {**modules("rlmkit"), **modules("optimizers")}
    offenders = [
        f"{name} imports {target}"
        for name, path in production.items()
        if not name.startswith(("rlmkit.testing", "optimizers.tuner.scripted"))
        for target in imported_names(path)
        if target == "rlmkit.testing" or target.startswith("rlmkit.testing.")
    ]
    assert offenders == []


WORKER_SIDE = "rlmkit.sandbox.worker_side"


def worker_side_modules() -> dict[str, Path]:
    return {name: path for name, path in modules("rlmkit").items() if name.startswith(WORKER_SIDE)}


def test_the_sandbox_worker_side_imports_only_the_standard_library_and_itself():
    """What runs inside the worker process starts under ``python -I -S``: no site-packages, and its
    own folder is the only other place it finds modules (siblings by bare name, ``import wire``).
    The one exception is optional: a session's snapshots use cloudpickle from the folder the host
    names, and the standard pickle without it."""
    own = worker_side_modules()
    siblings = {name.rpartition(".")[2] for name in own}
    offenders = [
        f"{name} imports {target}"
        for name, path in own.items()
        for target in imported_names(path, set(own))
        if target.split(".")[0] not in sys.stdlib_module_names
        and target not in siblings | {"cloudpickle"}
        and not (target == WORKER_SIDE or target.startswith(WORKER_SIDE + "."))
    ]
    assert offenders == []


def test_the_sandbox_host_side_starts_the_worker_side_by_path_and_imports_only_what_both_speak():
    """The host never imports the worker's own modules (its entry, the fork server, the confinement,
    session snapshots): it starts them by path. Of that folder it imports the files both ends of the
    pipe speak, and only those."""
    from rlmkit.sandbox import process
    from rlmkit.sandbox.worker_side import BOTH_SIDES

    both = {f"{WORKER_SIDE}.{name}" for name in BOTH_SIDES}
    production = {**modules("rlmkit"), **modules("optimizers"), **modules("programs")}
    known = set(production)
    offenders = [
        f"{name} imports {target}"
        for name, path in production.items()
        if not name.startswith(WORKER_SIDE)
        for target in imported_names(path, known)
        if (target == WORKER_SIDE or target.startswith(WORKER_SIDE + ".")) and target not in both
    ]
    assert offenders == []
    assert Path(process.WORKER) == ROOT / "rlmkit" / "sandbox" / "worker_side" / "worker.py"
    assert set(worker_side_modules()) >= both | {f"{WORKER_SIDE}.worker", f"{WORKER_SIDE}.fork_server"}


def test_the_call_tree_runs_from_specs_and_never_reaches_back_into_the_module():
    """``run.start.run_tree`` starts child runs from ``RunSpec.child()``: nothing in the run's room
    (the loop, the sub-calls, the call tree) imports the ``RLM`` module or anything that stands
    above it (sessions, serving, the CLI, the viewer)."""
    graph = import_graph("rlmkit")
    room = [name for name in graph if name == "rlmkit.run" or name.startswith("rlmkit.run.")]
    above = ("rlmkit.rlm", "rlmkit.session", "rlmkit.serve", "rlmkit.cli", "rlmkit.view")
    offenders = {name: sorted(t for t in graph[name] if t.startswith(above)) for name in room}
    assert len(room) > 10 and {name: t for name, t in offenders.items() if t} == {}
    assert "rlmkit.run.start" in graph["rlmkit.rlm"] and "rlmkit.run.start" in graph["rlmkit.session.session"]


def test_the_faces_reach_the_run_only_through_the_rlm_module_and_sessions():
    """The CLI, the server and the viewer call the public ``RLM`` / ``Session`` API; none of them
    imports a module of the run's room."""
    graph = import_graph("rlmkit")
    faces = [name for name in graph if name.startswith(("rlmkit.cli", "rlmkit.serve", "rlmkit.view"))]
    offenders = {name: sorted(t for t in graph[name] if t.startswith("rlmkit.run")) for name in faces}
    assert len(faces) > 10 and {name: t for name, t in offenders.items() if t} == {}


def test_the_runtime_root_holds_the_face_and_the_ground_only():
    """``rlmkit/`` itself keeps the ``RLM`` module and what every room stands on; each room's
    modules live in its own folder, so a newcomer sees which files are one conversation."""
    root = sorted(path.name for path in (ROOT / "rlmkit").glob("*.py"))
    assert len(root) <= 12, root


def test_nothing_built_on_the_runtime_subclasses_the_rlm_module():
    """Programs and optimizers change a run through its spec (``RLM.child_lm``, the knobs), never
    by overriding how the module builds its runs."""
    offenders = [
        f"{name}: class {node.name}"
        for package in UPPER_PACKAGES
        for name, path in modules(package).items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).split(".")[-1] == "RLM" for base in node.bases)
    ]
    assert offenders == []


def test_tests_of_product_code_import_no_benchmark_script():
    """The release path is product code: the tests of ``optimizers/`` (tests/training) reach it
    without putting a benchmark folder on ``sys.path``; only tests/benchmarks run benchmark scripts."""
    reaching = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests" / "training").rglob("*.py"))
        if '"benchmarks" / "training"' in (text := path.read_text())
        and ("sys.path" in text or "syspath_prepend" in text)
    ]
    assert reaching == []
