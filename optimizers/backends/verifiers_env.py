"""verifiers export: an installable environment package that plays rlmkit's RLM loop.

    out/verifiers/<env_id>/pyproject.toml        name = env_id; depends on dspy-rlmkit, verifiers 0.4.x
    out/verifiers/<env_id>/<module>/__init__.py   Taskset + Env (verifiers' v1 API), found by id via __all__
    out/verifiers/<env_id>/<module>/data/*.jsonl  the canonical RL rows (train, validation)
    out/verifiers/<env_id>/<module>/options.json  the job's options (inputs_fn, sub_lm, ...)

The environment's logic lives in ``optimizers.backends.verifiers_v1`` and ``verifiers_runtime``
(one copy, tested); the package is a thin, pinned entry point, so ``vf-eval <env_id>`` and
prime-rl (``[orchestrator.train.source.env.taskset] id = <env_id>``) find it by name. Its
dependency dspy-rlmkit is not on the package index yet, so the install command the export
prints installs this checkout beside it (``pip install -e <checkout> out/verifiers/<env_id>``);
in an environment that already holds rlmkit, ``pip install out/verifiers/<env_id>`` is enough.
The same lines go into the package's README.md. verifiers' classic API (< 0.4, ``load_environment``)
is gone upstream and is not exported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import rlmkit
from optimizers.backends.base import Backend, TrainJob, TrainResult, canonical, write_splits
from optimizers.backends.options import VerifiersOptions
from optimizers.backends.rlm_rollout import check_playable
from rlmkit.errors import DISTRIBUTION, NOT_ON_INDEX

VERIFIERS_RANGE = ">=0.4,<0.5"

PYPROJECT = """[project]
name = "{env_id}"
version = "0.1.0"
description = "rlmkit RLM environment for verifiers (written by rlmkit train --backend verifiers)"
requires-python = ">=3.11"
dependencies = ["{distribution}", "verifiers{verifiers_range}"]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools.packages.find]
include = ["{module}*"]

[tool.setuptools.package-data]
"{module}" = ["data/*.jsonl", "options.json"]
"""

MODULE = '''"""verifiers environment {env_id!r}: rlmkit's RLM loop, scored by the task's own scorer.

Written by ``rlmkit train --backend verifiers``; the logic is in
``optimizers.backends.verifiers_v1`` (verifiers {verifiers_range}, v1 Taskset API).
"""

import json
from pathlib import Path

from optimizers.backends import verifiers_v1

_HERE = Path(__file__).parent
__all__ = ["Taskset", "Env"]


class Taskset(verifiers_v1.RLMTaskset):
    DATA = _HERE / "data"


class Env(verifiers_v1.RLMEnv):
    OPTIONS = json.loads((_HERE / "options.json").read_text())
'''


def module_name(env_id: str) -> str:
    return env_id.replace("-", "_")


def checkout_root() -> Path | None:
    """The checkout rlmkit runs from (its pyproject names the distribution), or None for a wheel."""
    root = Path(rlmkit.__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and f'name = "{DISTRIBUTION}"' in pyproject.read_text():
        return root
    return None


def install_command(package: Path) -> str:
    """How to install the exported package into a fresh environment, today."""
    checkout = checkout_root()
    if checkout is None:  # a wheel: the environment that built the export already holds rlmkit
        return f"pip install {package}"
    return f"pip install -e {checkout} {package}"


class VerifiersBackend(Backend):
    name = "verifiers"
    row_kinds: ClassVar = {"rl": ("rl",)}
    options_type = VerifiersOptions

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        check_playable(job, [row for rows in splits.values() for row in rows])

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        options = self.options(job)
        env_id = options.env_id
        module = module_name(env_id)
        root = job.output_dir / "verifiers" / env_id
        package = root / module
        files = write_splits(
            package / "data", {s: [canonical(r) for r in rows] for s, rows in validated.splits.items()}
        )
        # what the environment's RLM runs need (verifiers_runtime.RLMSession reads it back)
        played = {key: value for key, value in options.explicit().items() if key != "env_id"}
        played["max_turns"] = job.max_turns
        written = {
            root / "pyproject.toml": PYPROJECT.format(
                env_id=env_id, module=module, verifiers_range=VERIFIERS_RANGE, distribution=DISTRIBUTION
            ),
            package / "__init__.py": MODULE.format(env_id=env_id, verifiers_range=VERIFIERS_RANGE),
            package / "options.json": json.dumps(played, indent=2),
        }
        for path, text in written.items():
            path.write_text(text)
        files += list(written)
        install = install_command(root.resolve())
        (root / "README.md").write_text(
            f"# {env_id}\n\nA verifiers environment written by `rlmkit train --backend verifiers`.\n\n"
            f"Install it (with rlmkit; {NOT_ON_INDEX}):\n\n    {install}\n\n"
            f"In an environment that already holds rlmkit: `pip install {root.resolve()}`.\n\n"
            f"Evaluate it: `vf-eval {env_id} --env.id {env_id}`.\n"
        )
        files.append(root / "README.md")
        command = f"{install} && vf-eval {env_id} --env.id {env_id}"
        return self.exported(
            validated,
            root,
            files,
            artifact_kind="env_package",
            command=command,
            message=f"verifiers environment {env_id!r} (v1 Taskset API, verifiers{VERIFIERS_RANGE})",
        )

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        return self.prepare(job)  # an export: verifiers / prime-rl run it
