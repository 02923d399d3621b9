"""verifiers export: an installable environment package that plays rlmkit's RLM loop.

    out/verifiers/<env_id>/pyproject.toml        name = env_id; depends on rlmkit
    out/verifiers/<env_id>/<module>/__init__.py   load_environment(**kwargs) (classic API) and,
                                                  under verifiers >= 0.4, Taskset + Env (v1 API)
    out/verifiers/<env_id>/<module>/data/*.jsonl  the canonical RL rows (train, validation)
    out/verifiers/<env_id>/<module>/options.json  the job's options (inputs_fn, sub_lm, ...)

The environment's logic lives in ``optimizers.backends.verifiers_runtime`` (one copy, tested);
the package is a thin, pinned entry point, so ``vf-eval <env_id>`` and prime-rl's classic
environment loader find it by name. Install it with ``pip install -e out/verifiers/<env_id>``.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from optimizers.backends.base import Backend, TrainJob, TrainResult, canonical, write_splits
from optimizers.backends.rlm_rollout import check_playable
from rlmkit.errors import DISTRIBUTION, ConfigError

CLASSIC_RANGE = ">=0.1.11,<0.4"

PYPROJECT = """[project]
name = "{env_id}"
version = "0.1.0"
description = "rlmkit RLM environment for verifiers (written by rlmkit train --backend verifiers)"
requires-python = ">=3.11"
dependencies = ["{distribution}", "verifiers{classic_range}"]

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
``optimizers.backends.verifiers_runtime`` (classic API, verifiers {classic_range}) and
``optimizers.backends.verifiers_v1`` (v1 Taskset API, verifiers >= 0.4).
"""

import json
from pathlib import Path

_HERE = Path(__file__).parent
OPTIONS = json.loads((_HERE / "options.json").read_text())
__all__ = ["load_environment"]


def load_environment(**kwargs):
    """Classic API: a verifiers MultiTurnEnv over this package's data; kwargs override options."""
    from optimizers.backends.verifiers_runtime import load_environment as build

    return build(str(_HERE / "data"), **{{**OPTIONS, **kwargs}})


from optimizers.backends.verifiers_runtime import has_v1_taskset_api

_v1 = None
if has_v1_taskset_api():  # v1 Taskset API: the taskset and its env, found by id through __all__
    from optimizers.backends import verifiers_v1 as _v1
if _v1 is not None:

    class Taskset(_v1.RLMTaskset):
        DATA = _HERE / "data"

    class Env(_v1.RLMEnv):
        OPTIONS = OPTIONS

    __all__ += ["Taskset", "Env"]
'''


def module_name(env_id: str) -> str:
    return env_id.replace("-", "_")


class VerifiersBackend(Backend):
    name = "verifiers"
    row_kinds: ClassVar = {"rl": ("rl",)}

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        env_id = job.options.get("env_id", "rlmkit-rlm")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", env_id):
            raise ConfigError(f"options.env_id {env_id!r} must be lowercase letters, digits and dashes")
        check_playable(job, [row for rows in splits.values() for row in rows])

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        env_id = job.options.get("env_id", "rlmkit-rlm")
        module = module_name(env_id)
        root = job.output_dir / "verifiers" / env_id
        package = root / module
        files = write_splits(
            package / "data", {s: [canonical(r) for r in rows] for s, rows in validated.splits.items()}
        )
        options = {key: value for key, value in job.options.items() if key not in ("env_id", "trainer")}
        options["max_turns"] = job.max_turns
        written = {
            root / "pyproject.toml": PYPROJECT.format(
                env_id=env_id, module=module, classic_range=CLASSIC_RANGE, distribution=DISTRIBUTION
            ),
            package / "__init__.py": MODULE.format(env_id=env_id, classic_range=CLASSIC_RANGE),
            package / "options.json": json.dumps(options, indent=2),
        }
        for path, text in written.items():
            path.write_text(text)
        files += list(written)
        command = f"pip install -e {root.resolve()} && vf-eval {env_id}"
        return self.exported(
            validated,
            root,
            files,
            artifact_kind="env_package",
            command=command,
            message=f"verifiers environment {env_id!r} (classic API, verifiers{CLASSIC_RANGE})",
        )

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        return self.prepare(job)  # an export: verifiers / prime-rl run it
