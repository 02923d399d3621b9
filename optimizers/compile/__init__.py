"""Trajectories -> training datasets: SFT (rejection sampling), RL (prompts + GRPO groups), DPO pairs.

    result = compile_sft("runs/", metric=my_metric, protocol="final")
    print(result.report.summary())
    result.write("data/sft", seed=0, val_fraction=0.1)   # train/validation JSONL + manifest.json
    validate_dataset("data/sft")

Row schemas: ``optimizers.compile.schema`` (SFTRow, RLRow, RLGroupRow, DPORow).
"""

from optimizers.compile.dpo import compile_dpo
from optimizers.compile.errors import DatasetValidationError, EmptyDatasetError, MixedSignaturesError
from optimizers.compile.filters import Filters
from optimizers.compile.repair import Unrepairable, repair_reply
from optimizers.compile.result import CompileResult
from optimizers.compile.rl import compile_rl, group_advantages
from optimizers.compile.sft import compile_sft
from optimizers.compile.sources import RunSet, by_signature, load_runs
from optimizers.compile.split import split_rows
from optimizers.compile.validate import validate_dataset, validate_file, validate_rows

__all__ = [
    "CompileResult",
    "DatasetValidationError",
    "EmptyDatasetError",
    "Filters",
    "MixedSignaturesError",
    "RunSet",
    "Unrepairable",
    "by_signature",
    "compile_dpo",
    "compile_rl",
    "compile_sft",
    "group_advantages",
    "load_runs",
    "repair_reply",
    "split_rows",
    "validate_dataset",
    "validate_file",
    "validate_rows",
]
