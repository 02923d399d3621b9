"""Serve a transformers checkpoint (optionally with a LoRA adapter) as an OpenAI-compatible
chat server on 127.0.0.1, so a trained model is evaluated through the same LM layer and RLM
loop as any provider. For small models on one machine; use vLLM / SGLang beyond that.
"""

from __future__ import annotations

import threading
from typing import Any

from rlmkit.models.chat_server import ChatServer, chat_response
from rlmkit.models.transports.function import approx_tokens


class HFChatModel:
    """Greedy chat generation with a local model folder (+ peft adapter)."""

    def __init__(
        self,
        base_model: str,
        adapter: str | None = None,
        *,
        max_new_tokens: int = 256,
        gguf_file: str | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        # gguf_file: a GGUF in the base_model folder, dequantised to float32 by transformers
        source = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(base_model, **source)
        model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32, **source)
        if adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter)
        self.model = model.eval()
        self.max_new_tokens = max_new_tokens
        self._lock = threading.Lock()  # one generation at a time: the model is not thread-safe

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [
            {"role": m["role"], "content": str(m.get("content", ""))} for m in body.get("messages", [])
        ]
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        limit = min(int(body.get("max_tokens") or self.max_new_tokens), self.max_new_tokens)
        with self._lock, self.torch.no_grad():
            out = self.model.generate(
                **ids, max_new_tokens=limit, do_sample=False, pad_token_id=self.tokenizer.pad_token_id
            )
        text = self.tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        response = chat_response(text, body.get("model", "local"), int(ids["input_ids"].shape[1]))
        response["usage"]["completion_tokens"] = int(
            out.shape[1] - ids["input_ids"].shape[1]
        ) or approx_tokens(text)
        return response


def serve_hf(base_model: str, adapter: str | None = None, **kwargs: Any) -> ChatServer:
    """A started server; use ``rlmkit.LM("openai/local", api_base=server.url, api_key="local")``."""
    return ChatServer(HFChatModel(base_model, adapter, **kwargs), name="local").start()
