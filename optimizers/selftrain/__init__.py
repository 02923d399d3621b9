"""Self-training: a model's own RLM runs, filtered and compiled, teach it to be a better RLM root.

The recipe (rejection fine-tuning, as the RLM paper trained RLM-Qwen3-8B) composes verbs that
exist on their own, each stage a subprocess whose output stays on disk:

    sample-SUITE      rlmkit eval SUITE --samples K --temperature T   (training seeds, < 1000)
    dataset           rlmkit compile sft (the paper's filters and repairs) and compile dpo
    train             rlmkit train --backend trl-sft (LoRA on the model dequantised from its GGUF)
    adapter           the peft adapter as a GGUF LoRA, which llama.cpp applies to the quantised base
    eval-ARM-SUITE    rlmkit eval SUITE --adapter none|ADAPTER --temperature 0 (held-out seeds)

A finished stage writes ``stages/NAME.json`` (its command, counts, seconds) and is never run
again; with an archive folder each finished stage is also packed there (``NAME.tar.gz``), so a
checkout that holds the archive resumes where the last run stopped. ``rlmkit self-train`` runs it.
"""

from optimizers.selftrain.paired import PairedResult, paired_compare
from optimizers.selftrain.recipe import Recipe, SuitePlan
from optimizers.selftrain.stages import StageStore

__all__ = ["PairedResult", "Recipe", "StageStore", "SuitePlan", "paired_compare"]
