"""rlmkit: Recursive Language Models as typed, composable DSPy-style modules.

Names are loaded on first use, so ``import rlmkit`` (and the CLI) stay fast and never
touch the network; dspy is imported when an RLM is built, litellm only for a provider that needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RLM": "rlmkit.rlm",
    "LM": "rlmkit.models.lm",
    "Completion": "rlmkit.models.lm",
    "FunctionLM": "rlmkit.models.lm",
    "Model": "rlmkit.models.contract",  # what any model provides; ModelTraits: what a run assumes
    "ModelTraits": "rlmkit.models.contract",
    "configure": "rlmkit.model_choice",
    "local_lm": "rlmkit.local",
    "Budget": "rlmkit.budget",
    "Session": "rlmkit.session",
    "Trajectory": "rlmkit.trajectory",
    "TrajectoryLog": "rlmkit.trajectory",
    "errors": "rlmkit.errors",
    "events": "rlmkit.events",  # what a run does as it happens: listen(), the event types
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def _installed_version() -> str:
    # The version lives in one place, pyproject.toml; an install carries it in its metadata. A checkout
    # on sys.path without an install has no metadata: its version is unknown, said so in PEP 440 form.
    from importlib.metadata import PackageNotFoundError, version

    from rlmkit.errors import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on first use: importlib.metadata costs an import rlmkit need not pay
        installed = globals()[name] = _installed_version()
        return installed
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rlmkit' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name == f"rlmkit.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
