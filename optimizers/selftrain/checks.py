"""What can be wrong before hours of sampling and training start, checked in seconds.

Each check raises a ``UserError`` / ``ConfigError`` that says what to do; none calls a model."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rlmkit.errors import ConfigError, UserError


def check_architecture(gguf: Path) -> str:
    """The GGUF's architecture, if both sides of the recipe know it: transformers must dequantise
    it for training, and the adapter converter must map its tensor names for llama.cpp."""
    from gguf import GGUFReader
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    from optimizers.gguf_lora import _arch

    field = GGUFReader(str(gguf)).fields.get("general.architecture")
    if field is None:
        raise ConfigError(f"{gguf} declares no general.architecture in its GGUF header")
    architecture = str(field.contents())
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        readable = [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]
        raise ConfigError(
            f"{gguf.name} is a {architecture!r} model, which transformers cannot dequantise from GGUF "
            f"(it reads {', '.join(readable)})"
        )
    _arch(architecture)  # the converter's name map (raises ConfigError when gguf knows no such model)
    return architecture


def parameter_count(gguf: Path) -> int:
    from gguf import GGUFReader

    return sum(int(tensor.n_elements) for tensor in GGUFReader(str(gguf)).tensors)


def check_room(gguf: Path, work: Path) -> dict[str, int]:
    """Memory for the float32 weights transformers dequantises (plus activations), disk for the
    stages' outputs (run folders, datasets, a float32 adapter and its GGUF form)."""
    weights = parameter_count(gguf) * 4
    need_memory = int(weights * 1.5)
    available = available_memory()
    if available < need_memory:
        raise UserError(
            f"training {gguf.name} needs about {need_memory / 2**30:.1f} GiB of available memory for "
            f"its dequantised float32 weights; {available / 2**30:.1f} GiB is available"
        )
    work.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(work).free
    need_disk = 2 * 2**30
    if free < need_disk:
        raise UserError(f"{work} has {free / 2**30:.1f} GiB free; the stages need about 2 GiB")
    return {"weights_bytes": weights, "memory_free_bytes": available, "disk_free_bytes": free}


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes a new process may take: Linux's MemAvailable, the free pages and the page cache the
    kernel gives back on demand (after hours of sampling, the cache holds most of the free
    memory); elsewhere, the free pages alone."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_backend(name: str) -> None:
    """The training backend exists and its packages are installed (names the extra if not)."""
    from optimizers.backends.base import MissingDependencyError, get_backend

    backend = get_backend(name)
    missing = backend.missing_deps()
    if missing:
        raise MissingDependencyError(name, missing)
