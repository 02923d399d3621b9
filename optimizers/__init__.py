from optimizers.compile import compile_dpo, compile_rl, compile_sft  # noqa: F401
