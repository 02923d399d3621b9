"""The training-backend contract: a frozen ``TrainJob`` in, a ``TrainResult`` out.

rlmkit does not train models itself. A backend adapter takes a job (a dataset in rlmkit's
canonical format, see ``optimizers.compile.schema``) and hands it to an engine made for
training (TRL, prime-rl, verifiers, Tinker, OpenAI fine-tuning). Every adapter answers the
same four questions, in order, and the first three never need a GPU or the network:

    backend.missing_deps()      # which optional packages are absent (and which extra installs them)
    backend.validate(job)       # dataset kind fits, rows parse, base model is on disk ...
    backend.prepare(job)        # writes converted data / configs under job.output_dir
    backend.run(job, dry_run)   # trains, exports or submits; dry_run stops after prepare
"""

from __future__ import annotations

import importlib.util
import json
import tomllib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optimizers.backends.options import BackendOptions
from optimizers.compile.schema import ROW_MODELS
from rlmkit.errors import ConfigError, UserError, install_hint
from rlmkit.loading import load

JobKind = Literal["sft", "rl", "dpo"]
SPLITS = ("train", "validation", "test")  # a dataset folder holds one <split>.jsonl per split


# ---------------------------------------------------------------- errors (all raised before training)
class TrainJobError(UserError):
    """A job file or flag that does not describe a valid training job."""


class DatasetKindError(UserError):
    """The dataset's row kind does not fit the job kind or the backend."""


class DatasetError(UserError):
    """A dataset that is missing, empty, or has a row that fails the canonical schema."""


class MissingDependencyError(ConfigError):
    """An optional package a backend needs is not installed; ``extra`` says what installs it."""

    def __init__(self, backend: str, missing: list[Dependency]):
        names = ", ".join(dep.module for dep in missing)
        extras = sorted({dep.extra for dep in missing})
        how = install_hint(*extras)
        super().__init__(f"backend {backend!r} needs {names}, which is not installed: {how}")
        self.backend = backend
        self.missing = missing
        self.extras = extras


class BaseModelNotFoundError(UserError):
    """The base model is neither a local folder nor in the Hugging Face cache (offline check)."""


class SchemaMismatchError(UserError):
    """A written config does not fit the pinned schema of its target; ``key`` names the key."""

    def __init__(self, message: str, *, key: str):
        super().__init__(message)
        self.key = key


# ---------------------------------------------------------------- job and result
class LoRA(BaseModel):
    """LoRA adapter shape. ``targets=["all-linear"]`` means every linear layer (peft's shortcut)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(16, ge=1, description="adapter rank r")
    alpha: int = Field(32, ge=1, description="scaling numerator (scale = alpha / rank)")
    targets: tuple[str, ...] = Field(("all-linear",), min_length=1, description="module names to adapt")
    dropout: float = Field(0.0, ge=0.0, lt=1.0)


class TrainJob(BaseModel):
    """One training job, backend-independent. Frozen: change it with ``job.model_copy(update=...)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JobKind = Field(description="what is trained: sft | rl | dpo")
    dataset: Path = Field(
        description="a canonical JSONL file, or a folder with train.jsonl [+ validation.jsonl]"
    )
    base_model: str = Field(
        description="local model folder or Hugging Face id (must be on disk for local runs)"
    )
    output_dir: Path = Field(description="where converted data, configs and adapters are written")
    lr: float = Field(1e-5, gt=0, description="learning rate")
    steps: int = Field(100, ge=1, description="optimizer steps")
    batch_size: int = Field(8, ge=1, description="samples (sft/dpo) or prompts x group (rl) per step")
    group_size: int = Field(8, ge=2, description="rollouts per prompt (rl)")
    max_seq_len: int = Field(4096, ge=16, description="longest tokenized sample")
    max_completion_tokens: int = Field(1024, ge=1, description="tokens the policy may write per turn")
    max_turns: int = Field(10, ge=1, description="root turns per rollout (rl)")
    lora: LoRA | None = Field(default_factory=LoRA, description="None trains all weights")
    seed: int = 0
    options: dict[str, Any] = Field(
        default_factory=dict, description="backend-specific options, read by the backend's options_type"
    )

    @model_validator(mode="after")
    def _fits(self) -> TrainJob:
        if self.max_completion_tokens >= self.max_seq_len:
            raise ValueError("max_completion_tokens must be smaller than max_seq_len")
        return self

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> TrainJob:
        """Read a job from TOML (top-level keys = fields, ``[lora]``, ``[options]``); flags override.

        Relative ``dataset`` / ``output_dir`` paths are taken relative to the TOML file.
        """
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError as exc:
            raise TrainJobError(f"job file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise TrainJobError(f"job file {path} is not valid TOML: {exc}") from exc
        for key in ("dataset", "output_dir"):
            if key in data and not Path(data[key]).is_absolute():
                data[key] = str(path.parent / data[key])
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.build(**data)

    @classmethod
    def build(cls, **fields: Any) -> TrainJob:
        """Construct a job, turning pydantic's error into a TrainJobError that names each field."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'job'}: {e['msg']}" for e in exc.errors())
            raise TrainJobError(f"invalid training job: {problems}") from exc

    def dump_toml(self) -> str:
        import tomli_w  # imported here: only writers of job files need it

        data = self.model_dump(mode="json", exclude_none=True)
        return tomli_w.dumps(data)


ResultStatus = Literal["trained", "exported", "submitted", "failed"]
ArtifactKind = Literal["lora_adapter", "model", "dataset", "config", "env_package", "remote_checkpoint"]


class TrainResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    backend: str
    status: ResultStatus
    artifact: Path | None = None
    artifact_kind: ArtifactKind | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    command: str | None = None  # how to launch it where the GPUs are, when the backend runs elsewhere
    files: list[Path] = Field(default_factory=list)  # everything prepare() wrote
    message: str = ""


# ---------------------------------------------------------------- datasets
def dataset_files(dataset: Path) -> dict[str, Path]:
    """``{split: path}`` for a dataset file (its split is ``train``) or folder."""
    if dataset.is_file():
        return {"train": dataset}
    if dataset.is_dir():
        found = {
            split: dataset / f"{split}.jsonl" for split in SPLITS if (dataset / f"{split}.jsonl").is_file()
        }
        if "train" in found:
            return found
        raise DatasetError(f"dataset folder {dataset} has no train.jsonl")
    raise DatasetError(f"dataset not found: {dataset}")


def read_rows(path: Path) -> list[Any]:
    """Parse and validate every row of one canonical JSONL file (all rows must share a kind)."""
    rows: list[Any] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            model = ROW_MODELS[data.get("kind", "")]
        except (ValueError, KeyError):
            raise DatasetError(
                f"{path}:{number}: not a canonical row (kind must be one of {sorted(ROW_MODELS)})"
            ) from None
        try:
            rows.append(model.model_validate(data))
        except ValidationError as exc:
            raise DatasetError(
                f"{path}:{number}: invalid {data['kind']} row: {exc.errors()[0]['msg']}"
            ) from exc
        if rows[0].kind != rows[-1].kind:
            raise DatasetError(f"{path}:{number}: mixes {rows[0].kind} and {rows[-1].kind} rows")
    if not rows:
        raise DatasetError(f"{path} holds no rows")
    return rows


def write_splits(folder: Path, records: dict[str, list[dict[str, Any]]]) -> list[Path]:
    """Write ``<folder>/<split>.jsonl`` for each split's records; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, lines in records.items():
        path = folder / f"{split}.jsonl"
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
        paths.append(path)
    return paths


def canonical(row: Any) -> dict[str, Any]:
    """A row as the compilers wrote it (for backends that read canonical rows back at run time)."""
    return row.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------- adapters
@dataclass(frozen=True)
class Dependency:
    module: str  # importable name
    extra: str  # the rlmkit extra that installs it


@dataclass
class Validated:
    """What ``validate`` learned, so ``prepare`` does not read the data twice."""

    row_kind: str
    splits: dict[str, list[Any]]


class Backend(ABC):
    """One adapter per training engine. Subclasses fill the class attributes and two methods."""

    name: str = "base"
    requires: tuple[Dependency, ...] = ()
    row_kinds: ClassVar[dict[str, tuple[str, ...]]] = {}  # job kind -> canonical row kinds it accepts
    needs_local_model: bool = False  # True when the base model is loaded on this machine
    options_type: ClassVar[type[BackendOptions]] = BackendOptions  # what the job's [options] may hold

    def options(self, job: TrainJob) -> Any:
        """The job's options as this backend's ``options_type`` (an unknown key is a ConfigError)."""
        return self.options_type.parse(self.name, job.options)

    def missing_deps(self) -> list[Dependency]:
        return [dep for dep in self.requires if importlib.util.find_spec(dep.module) is None]

    def validate(self, job: TrainJob) -> Validated:
        """Check everything that can be checked offline; raise a typed UserError otherwise."""
        missing = self.missing_deps()
        if missing:
            raise MissingDependencyError(self.name, missing)
        self.options(job)
        accepted = self.row_kinds.get(job.kind)
        if not accepted:
            raise DatasetKindError(
                f"backend {self.name!r} cannot train kind {job.kind!r} (it trains: {sorted(self.row_kinds)})"
            )
        splits = {split: read_rows(path) for split, path in dataset_files(job.dataset).items()}
        row_kind = splits["train"][0].kind
        for split, rows in splits.items():
            if rows[0].kind not in accepted:
                raise DatasetKindError(
                    f"{split} rows are {rows[0].kind!r}, but {self.name!r} needs {' or '.join(accepted)} "
                    f"rows for a {job.kind} job"
                )
        if self.needs_local_model:
            resolve_local_model(job.base_model)
        self.check(job, splits)
        return Validated(row_kind=row_kind, splits=splits)

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        """Backend-specific checks (sizes, rows); the default accepts everything."""

    def exported(self, validated: Validated, artifact: Path, files: list[Path], **fields: Any) -> TrainResult:
        """The result of ``prepare``: what was written, and how many training rows it holds."""
        fields.setdefault("artifact_kind", "dataset")
        metrics = {"train_rows": float(len(validated.splits["train"]))}
        return TrainResult(
            backend=self.name, status="exported", artifact=artifact, files=files, metrics=metrics, **fields
        )

    @abstractmethod
    def prepare(self, job: TrainJob) -> TrainResult:
        """Validate, then write the converted data and configs; returns an ``exported`` result."""

    @abstractmethod
    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        """Prepare, then train / submit (unless ``dry_run``)."""


def resolve_local_model(base_model: str) -> Path:
    """A folder holding the model's config, found without the network, or BaseModelNotFoundError."""
    local = Path(base_model).expanduser()
    if local.is_dir():
        if (local / "config.json").is_file() or any(local.glob("*.gguf")):
            return local
        raise BaseModelNotFoundError(f"{local} is a folder but holds no config.json or .gguf file")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        try_to_load_from_cache = None
    if try_to_load_from_cache is not None and "/" in base_model:
        cached = try_to_load_from_cache(base_model, "config.json")
        if isinstance(cached, str):
            return Path(cached).parent
    raise BaseModelNotFoundError(
        f"base model {base_model!r} is not a local folder and not in the Hugging Face cache; "
        "download it first (huggingface-cli download ...) or pass a local path"
    )


BACKENDS: dict[str, str] = {
    "trl-sft": "optimizers.backends.trl_sft:TRLSFTBackend",
    "trl-dpo": "optimizers.backends.trl_dpo:TRLDPOBackend",
    "trl-grpo": "optimizers.backends.trl_grpo:TRLGRPOBackend",
    "prime-rl": "optimizers.backends.prime_rl:PrimeRLBackend",
    "verifiers": "optimizers.backends.verifiers_env:VerifiersBackend",
    "tinker": "optimizers.backends.tinker_backend:TinkerBackend",
    "openai-jsonl": "optimizers.backends.openai_jsonl:OpenAIJSONLBackend",
}


def get_backend(name: str, **kwargs: Any) -> Backend:
    """The adapter called ``name`` (imported on demand, so unused engines are never imported)."""
    if name not in BACKENDS:
        raise ConfigError(f"unknown training backend {name!r}; known: {', '.join(BACKENDS)}")
    return load(BACKENDS[name])(**kwargs)
