"""Offline helpers for backend tests and demos: a tiny random Qwen3 model and dataset writing.

The model is built from a config with tiny dimensions and a byte-level BPE tokenizer trained
in a few milliseconds with the ``tokenizers`` library; the chat template is the one TRL ships
for Qwen3. Nothing here touches the network, so the TRL backends can run real optimizer
steps on a CPU in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

_CORPUS = [
    "You are a Recursive Language Model. Write Python code in a ```repl block to explore the REPL.",
    "print(len(context)) SUBMIT(answer=42) llm_query('classify this') answer = sum(values)",
    "The context holds numbers, words and lines. Count them, then submit the total.",
    "system user assistant question answer context 0123456789 + - * / = ( ) [ ] { } : , . ' \"",
]


def write_dataset(folder: Path, splits: dict[str, Iterable[BaseModel]]) -> Path:
    """Write canonical rows as ``<folder>/<split>.jsonl`` (what the compilers produce)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        lines = [row.model_dump_json(exclude_none=True) for row in rows]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def qwen3_chat_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()


def build_tiny_qwen(folder: Path, *, hidden_size: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Save a random Qwen3 causal LM (~100k parameters) with its tokenizer to ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        model_max_length=4096,
    )
    tokenizer.chat_template = qwen3_chat_template()

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_tiny_gguf(path: Path, architecture: str, blocks: int = 1) -> Path:
    """A GGUF file with only a header (architecture, block count) and one small tensor: enough for
    what reads a GGUF's layout (the architecture checks, the LoRA adapter converter)."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(blocks)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_lora_job(kind: str, dataset: Path, model: Path, output_dir: Path, **fields: Any) -> Any:
    """A two-step LoRA job on the tiny model: what a backend test trains (``fields`` override)."""
    from optimizers.backends.base import TrainJob

    defaults = {
        "lr": 1e-2,
        "steps": 2,
        "batch_size": 2,
        "max_seq_len": 256,
        "max_completion_tokens": 64,
        "lora": {"rank": 4, "alpha": 8},
    }
    return TrainJob(
        kind=kind, dataset=dataset, base_model=str(model), output_dir=output_dir, **{**defaults, **fields}
    )
