"""A peft LoRA adapter as a GGUF adapter file, so llama.cpp serves a trained student.

llama.cpp applies a LoRA adapter given as GGUF: ``general.type = adapter``,
``adapter.type = lora``, ``adapter.lora.alpha``, and for each adapted weight two tensors named
after the base tensor, ``<gguf name>.weight.lora_a`` (peft's A, shape rank x in) and
``.lora_b`` (peft's B, shape out x rank). The base stays the quantised GGUF the student was
trained from (transformers dequantised the same weights), so no merged model is written.
Tensor names are mapped with the ``gguf`` package's own table (the one llama.cpp's converters use).
``restore_adapter`` goes back the other way, so training can go on from an adapter whose peft
weights survive only as GGUF (a stage archive keeps the GGUF, not the float32 weights).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from rlmkit.errors import ConfigError

_PEFT_NAME = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<side>[AB])\.weight$")


def _arch(name: str):
    import gguf

    for arch, arch_name in gguf.MODEL_ARCH_NAMES.items():
        if arch_name == name:
            return arch
    raise ConfigError(f"the gguf package knows no architecture {name!r}")


def base_layout(base: Path) -> tuple[str, int]:
    """The architecture and block count a base GGUF declares (the adapter must match them)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(base)).fields
    architecture = str(fields["general.architecture"].contents())
    return architecture, int(fields[f"{architecture}.block_count"].contents())


def convert_adapter(adapter_dir: Path, out: Path, *, base: Path, half: bool = False) -> Path:
    """Write ``adapter_dir`` (peft: adapter_config.json + adapter_model.safetensors) as a GGUF
    adapter for the GGUF model ``base`` it was trained from. ``half``: store float16 (half the
    file; llama.cpp computes the LoRA product in float32 either way)."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    adapter_dir, out = Path(adapter_dir), Path(out)
    architecture, n_blocks = base_layout(base)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise ConfigError(f"{adapter_dir} is a {config.get('peft_type')} adapter; only LoRA converts")
    names = gguf.get_tensor_name_map(_arch(architecture), n_blocks)
    tmp = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(str(tmp), architecture)
    writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
    count = 0
    for key, value in sorted(load_file(str(adapter_dir / "adapter_model.safetensors")).items()):
        match = _PEFT_NAME.match(key)
        if match is None:
            raise ConfigError(f"{key} is not a LoRA A/B weight (modules_to_save cannot be served as LoRA)")
        base = names.get_name(match["module"] + ".weight", try_suffixes=(".weight",))
        if base is None:
            raise ConfigError(f"no GGUF tensor for {match['module']} in architecture {architecture}")
        dtype = np.float16 if half else np.float32
        writer.add_tensor(f"{base}.lora_{match['side'].lower()}", np.ascontiguousarray(value, dtype))
        count += 1
    if not count:
        raise ConfigError(f"{adapter_dir} holds no LoRA weights")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)  # whole or absent: a later run trusts an existing file
    return out


def restore_adapter(
    adapter_gguf: Path, out: Path, *, config: Path, modules: Iterable[str], base: Path
) -> Path:
    """The peft adapter folder ``out`` holding the weights of ``adapter_gguf`` (written by
    ``convert_adapter`` for ``base``): ``config``'s adapter_config.json beside them, and each GGUF
    tensor under the peft key of the model module (one of ``modules``, the model's module names)
    that converts to it. A float16 GGUF comes back as those float16 values in float32: the adapter
    llama.cpp served, not bit for bit the one trained."""
    import gguf
    import numpy as np
    from safetensors.numpy import save_file

    out = Path(out)
    settings = json.loads(Path(config).read_text())
    targets = set(settings["target_modules"])
    architecture, n_blocks = base_layout(base)
    names = gguf.get_tensor_name_map(_arch(architecture), n_blocks)
    peft_key = {}  # "blk.0.attn_q.weight" -> "base_model.model.model.layers.0.self_attn.q_proj"
    for module in modules:
        # peft's rule: a target names a module whole or ends its dotted name
        if any(module == t or module.endswith("." + t) for t in targets):
            gguf_name = names.get_name(module + ".weight", try_suffixes=(".weight",))
            if gguf_name is not None:
                peft_key[gguf_name] = f"base_model.model.{module}"
    reader = gguf.GGUFReader(str(adapter_gguf))
    alpha = float(reader.fields[gguf.Keys.Adapter.LORA_ALPHA].contents())
    if alpha != float(settings["lora_alpha"]):
        raise ConfigError(f"{adapter_gguf} has LoRA alpha {alpha}, {config} says {settings['lora_alpha']}")
    weights = {}
    for tensor in reader.tensors:
        stem, _, side = tensor.name.rpartition(".lora_")
        if stem not in peft_key or side not in ("a", "b"):
            raise ConfigError(f"{adapter_gguf}: no module of the model converts to {tensor.name}")
        # GGUF lists dimensions fastest first; the data is already in torch's row-major order
        shape = tuple(int(d) for d in reversed(tensor.shape))
        value = np.asarray(tensor.data, dtype=np.float32).reshape(shape)
        weights[f"{peft_key[stem]}.lora_{side.upper()}.weight"] = value
    if len(weights) != 2 * len(peft_key):
        raise ConfigError(
            f"{adapter_gguf} adapts {len(weights) // 2} of the {len(peft_key)} modules {config} targets"
        )
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(config, out / "adapter_config.json")
    save_file(weights, str(out / "adapter_model.safetensors"))
    return out
