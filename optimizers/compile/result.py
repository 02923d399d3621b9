"""What every compiler returns, and the steps all three share before they build rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from optimizers.compile.errors import EmptyDatasetError
from optimizers.compile.filters import Filters, Metric, Scored, select_runs
from optimizers.compile.report import CompileReport, token_counter
from optimizers.compile.sources import RunsLike, SourceFile, load_runs, signature_of


@dataclass
class CompileResult:
    kind: str  # "sft" | "rl" | "dpo"
    rows: list[BaseModel]
    report: CompileReport
    sources: list[SourceFile] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # filters and compile options, for the manifest
    extra_rows: list[BaseModel] = field(default_factory=list)  # RL: the offline GRPO group rows

    def write(self, out_dir: str | Path, *, seed: int = 0, val_fraction: float = 0.1) -> dict[str, Any]:
        """Write train / validation JSONL and manifest.json; returns the manifest."""
        from optimizers.compile.write import write_dataset

        return write_dataset(self, out_dir, seed=seed, val_fraction=val_fraction)


class Compilation:
    """Load, check one signature, score and filter runs; count tokens; finish with a result.

    ``mixed``: runs of several signatures make one dataset (a root model trained across tasks,
    each row with its own run's prompt); the report then counts runs per signature."""

    def __init__(
        self,
        kind: str,
        runs: RunsLike,
        filters: Filters,
        metric: Metric | None,
        tokenizer: Any,
        mixed: bool = False,
    ):
        self.runset = load_runs(runs)
        signature = signature_of(self.runset.runs, mixed)
        self.filters = filters
        self.report = CompileReport(
            kind=kind, signature=signature, runs_read=len(self.runset.runs), bad_lines=self.runset.bad_lines
        )
        if tokenizer is not None:
            self.report.token_estimate = type(tokenizer).__name__
        if self.runset.duplicate_runs:
            self.report.runs_dropped["duplicate_run"] += self.runset.duplicate_runs
        self.count = token_counter(tokenizer)
        self.selected: list[Scored] = select_runs(self.runset.runs, filters, self.report, metric)
        self.report.runs_kept = len(self.selected)

    def tally(self, row: BaseModel, prompt: list[dict], target: list[dict]) -> None:
        self.report.rows += 1
        self.report.per_task[row.task_id] += 1
        self.report.prompt_tokens += sum(self.count(m["content"]) for m in prompt)
        self.report.completion_tokens += sum(self.count(m["content"]) for m in target)

    def finish(
        self, rows: list[BaseModel], options: dict[str, Any], extra_rows: list[BaseModel] | None = None
    ):
        kind = self.report.kind
        if not rows and not extra_rows:
            raise EmptyDatasetError(
                f"no {kind} row survived the filters ({self.report.runs_read} run(s) read"
                + (f", {self.report.bad_lines} unreadable line(s) skipped" if self.report.bad_lines else "")
                + "):\n"
                + self.report.explain_drops(),
                report=self.report,
            )
        options = {"filters": self.filters.to_dict(), **options}
        return CompileResult(kind, rows, self.report, self.runset.files, options, extra_rows or [])
