"""The embedded default model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by xllamacpp.

``local_lm()`` assembles and verifies the model file on first use (see ``model_file``),
finds or starts the machine's one OpenAI-compatible server on 127.0.0.1 (see ``machine``), and returns
an ordinary ``rlmkit.LM`` pointed at it, so it goes through the same LM layer as any provider.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmkit.local.adapter import DEFAULT as DEFAULT_ADAPTER
from rlmkit.local.adapter import resolve_adapter, served_alias
from rlmkit.local.machine import AdapterMismatch, MachineServer, machine_server
from rlmkit.local.model_file import EMBEDDED_MODEL, ModelSpec, Progress, ensure_model, models_dir
from rlmkit.local.preset import SHIPPED_PROGRAM, shipped_program
from rlmkit.local.server import MODEL_ALIAS, LocalServer, LocalServerConfig, shared_server

if TYPE_CHECKING:
    from rlmkit.models.lm import LM

log = logging.getLogger("rlmkit.local")

LOCAL_MODEL_NAME = f"openai/{MODEL_ALIAS}"
EMBEDDED_MAX_TOKENS = 1024
EMBEDDED_INPUT_CHARS = 16_000


def is_embedded(model: str) -> bool:
    """Whether ``model`` names the embedded model: the base alone, or with an adapter applied (its
    served name is the base's plus the adapter's, see ``served_alias``)."""
    return model == LOCAL_MODEL_NAME or model.startswith(LOCAL_MODEL_NAME + "+")


def local_lm(
    config: LocalServerConfig | None = None,
    *,
    progress: Progress | None = None,
    private: bool = False,
    adapter: str | Path | None = DEFAULT_ADAPTER,
    **lm_kwargs: Any,
) -> LM:
    """An LM backed by the embedded model (started on first call, stopped at exit).

    ``lm_kwargs`` go to ``rlmkit.LM`` (temperature, max_tokens, cache, ...). Concurrency
    defaults to the server's parallel slots, so requests never queue inside llama.cpp.
    ``private=True`` serves it from this process's own server with ``config`` (a measurement
    that needs, say, one llama.cpp thread on a crowded machine) instead of the machine's
    shared one, whose configuration is whichever process started it first.
    ``adapter``: a GGUF LoRA adapter applied to the model, ``None`` for the base model alone,
    ``"shipped"`` for the adapter this build ships; by default ``$RLMKIT_LOCAL_ADAPTER``, else the
    shipped adapter if its gate let it through (see ``adapter.py``).
    When the machine's server runs with another adapter, this process serves its own.
    """
    model = ensure_model(progress=progress)
    lora = resolve_adapter(adapter)
    server: LocalServer | MachineServer | None = None
    if not private:  # one per machine, shared
        try:
            server = machine_server(model, config, lora=lora)
        except AdapterMismatch as exc:
            log.info("%s; serving this process's own", exc)
    if server is None:
        server = shared_server(model, config, lora=lora, alias=served_alias(lora))
    return served_lm(server, f"openai/{served_alias(lora)}", **lm_kwargs)


def served_lm(server: LocalServer | MachineServer, model: str, **lm_kwargs: Any) -> LM:
    """An LM for a running llama.cpp server, with the embedded model's defaults (any GGUF model
    served here, e.g. a distilled student, is run under the same settings)."""
    from rlmkit.models.lm import LM  # the OpenAI-compatible transport: no litellm involved

    lm_kwargs.setdefault("max_concurrency", server.config.parallel)
    # A long prompt on a busy 2-core machine takes many minutes, more when the server's slots
    # share one thread, and a request cut off is sent again from its start: a short timeout
    # then never finishes anything. The server is our own child process (a dead one fails the
    # connection at once), so the cap only ends a server that hangs.
    lm_kwargs.setdefault("timeout", 3600.0)
    # A small model's turn is a little code: a cap keeps one run-away reply from holding the
    # CPU for minutes (RLM caps are ceilings; this tighter one wins, see rlmkit/run/model_call.py).
    lm_kwargs.setdefault("max_tokens", EMBEDDED_MAX_TOKENS)
    # A 4,000-token sub-call already takes ~40 s to read on 2 cores, and 4 slots share the KV.
    lm_kwargs.setdefault("input_chars", EMBEDDED_INPUT_CHARS)
    lm_kwargs.setdefault("preset", shipped_program())  # the program tuned for this model, if shipped
    return LM(model, api_base=server.url, api_key="local", **lm_kwargs)


__all__ = [
    "EMBEDDED_MODEL",
    "LOCAL_MODEL_NAME",
    "is_embedded",
    "LocalServer",
    "LocalServerConfig",
    "MachineServer",
    "SHIPPED_PROGRAM",
    "ModelSpec",
    "ensure_model",
    "resolve_adapter",
    "local_lm",
    "machine_server",
    "models_dir",
    "served_lm",
    "shared_server",
    "shipped_program",
]
