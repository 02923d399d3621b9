"""The two callables ``TrainTuner`` needs, built from saved runs and a served model.

``build_dataset_from_runs`` compiles the runs of a job's families; ``evaluate_served``
serves a trained model on 127.0.0.1 and scores it per family. The program and the
evaluator come in as arguments (the CLI passes ``programs``' ones): optimizers never
import a specific program.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from optimizers.trainloop.train_tuner import BuiltDataset


def build_dataset_from_runs(runs_dir: Path) -> Callable[[Any, Path], BuiltDataset]:
    """A ``build_dataset`` for TrainTuner: compile the runs of the job's families."""
    from optimizers.compile import Filters, compile_sft, load_runs

    runs = load_runs(runs_dir).runs

    def build(proposal: Any, out: Path) -> BuiltDataset:
        chosen = [
            r
            for r in runs
            if r.meta.depth == 0
            and r.meta.task.get("suite") in proposal.families
            and r.meta.task.get("length", 0) <= proposal.length
        ]
        result = compile_sft(chosen, filters=Filters(min_score=proposal.min_score))
        result.write(out, seed=0, val_fraction=0.1)
        return BuiltDataset(out, {str(r.meta.task.get("example_id")) for r in chosen})

    return build


def serve_transformers(max_tokens: int) -> Callable[[Any], tuple[Any, Any]]:
    """Serve a model folder (+ peft adapter) with in-process transformers generation."""

    def serve(model: Any) -> tuple[Any, Any]:
        import rlmkit
        from optimizers.trainloop.hf_serve import serve_hf

        server = serve_hf(model.base_model, model.adapter, max_new_tokens=max_tokens)
        return server, rlmkit.LM("openai/local", api_base=server.url, api_key="local", cache=False)

    return serve


def serve_llama_cpp(gguf: Path, max_tokens: int) -> Callable[[Any], tuple[Any, Any]]:
    """Serve a GGUF base with llama.cpp, a trained adapter converted to a GGUF LoRA on top. A full
    fine-tune (LoRA rank 0) is no adapter: keep rank 0 out of the job space (``--lora-ranks``)."""

    def serve(model: Any) -> tuple[Any, Any]:
        from optimizers.students import serve_gguf

        return serve_gguf(gguf, model.adapter, max_tokens=max_tokens, temperature=0.0, cache=False)

    return serve


def evaluate_served(
    max_iterations: int,
    workers: int,
    max_tokens: int,
    *,
    program_for: Callable[..., Any],
    evaluate: Callable[..., Any],
    serve: Callable[[Any], tuple[Any, Any]] | None = None,
) -> Callable[[Any, list[Any]], dict[str, float]]:
    """An ``evaluate`` for TrainTuner: serve the model, run each family's program, mean score per family.

    ``program_for(family, lm=, max_iterations=)`` builds a family's program; ``evaluate(factory,
    examples, workers=)`` scores it (``programs.evaluate.evaluate`` has that shape). ``serve(model)``
    returns (a server with ``stop()``, its LM); default: transformers in-process.
    """
    serve = serve or serve_transformers(max_tokens)

    def run(model: Any, examples: list[Any]) -> dict[str, float]:
        server, lm = serve(model)
        try:
            scores: dict[str, float] = {}
            for family in sorted({ex.suite for ex in examples}):
                subset = [ex for ex in examples if ex.suite == family]
                result = evaluate(
                    lambda f=family: program_for(f, lm=lm, max_iterations=max_iterations),
                    subset,
                    workers=workers,
                )
                scores[family] = result.mean
            return scores
        finally:
            server.stop()

    return run
