"""Dollar cost of a call, from the price map litellm ships, read as data (litellm never imported).

litellm keeps its model prices in ``model_prices_and_context_window_backup.json`` inside
its package. Reading that file (found with ``importlib.util.find_spec``, which locates a
package without running it) gives every transport the same prices litellm itself would
use with its cost map forced local, without the seconds litellm takes to import.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import re
import threading
from pathlib import Path

log = logging.getLogger("rlmkit")
PRICE_FILE = "model_prices_and_context_window_backup.json"
_TIER = re.compile(r"^input_cost_per_token_above_(\d+)k_tokens$")
_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    """A child forked while the background load held the lock would otherwise wait on it forever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def price_file() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / PRICE_FILE).is_file():
            return Path(folder) / PRICE_FILE
    return None


@functools.lru_cache(maxsize=1)
def _raw() -> bytes:
    path = price_file()
    if path is None:
        log.warning("rlmkit: litellm's price map was not found; every call is priced at 0")
        return b"{}"
    return path.read_bytes()


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, object]:
    parsed = json.loads(_raw())
    return parsed if isinstance(parsed, dict) else {}


def price_map() -> dict[str, object]:
    """``{model: {input_cost_per_token: ..., ...}}``, the whole file, parsed once (thread-safe)."""
    with _lock:
        return _load()


@functools.lru_cache(maxsize=4096)
def listed(key: str) -> bool:
    """Whether ``key`` could be a model in the file (a quoted name followed by an object), found in
    the raw text: parsing the whole 3.5 MB takes ~40 ms of CPU, which a local or self-hosted model
    (no price) should not pay before its first call. A yes is confirmed by the parsed map."""
    if not key.isascii():
        return True  # the file may spell it escaped or not: ask the parsed map
    quoted, raw = json.dumps(key).encode(), _raw()
    if quoted not in raw:  # the common answer for a self-hosted model, and the fastest search
        return False
    return re.search(re.escape(quoted) + rb"\s*:\s*\{", raw) is not None


def warm(model: str) -> None:
    """Parse the map in a background thread while a run starts, if ``model`` may be priced in it."""
    provider, _, name = model.partition("/")
    if _load.cache_info().currsize == 0 and any(listed(k) for k in (name, model) if k):
        threading.Thread(target=price_map, name="rlmkit-prices", daemon=True).start()


def model_prices(model: str, served_as: str | None = None) -> dict[str, object] | None:
    """The price entry for ``provider/name`` (litellm's lookup order: bare name, then the full string)."""
    provider, _, name = model.partition("/")
    candidates = [name, model] if name else [model]
    if served_as and served_as not in candidates:  # e.g. a dated snapshot name the server answered with
        candidates += [served_as, f"{provider}/{served_as}"] if name else [served_as]
    listed_keys = [key for key in candidates if listed(key)]
    prices = price_map() if listed_keys else {}
    for key in listed_keys:
        entry = prices.get(key)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return entry
    return None


def call_cost(model: str, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0,
              served_as: str | None = None) -> float:  # fmt: skip
    """Dollars for one call; 0.0 for a model with no price (a local or self-hosted model)."""
    entry = model_prices(model, served_as)
    if entry is None:
        return 0.0
    suffix = _tier_suffix(entry, prompt_tokens)  # long prompts are billed at the tier's rate throughout
    input_rate = _rate(entry, "input_cost_per_token" + suffix, "input_cost_per_token") or 0.0
    output_rate = _rate(entry, "output_cost_per_token" + suffix, "output_cost_per_token") or 0.0
    cached_rate = _rate(entry, "cache_read_input_token_cost" + suffix, "cache_read_input_token_cost")
    cached = min(cached_prompt_tokens, prompt_tokens) if cached_rate is not None else 0
    return (
        (prompt_tokens - cached) * input_rate
        + cached * (cached_rate or 0.0)
        + completion_tokens * output_rate
    )


def _rate(entry: dict[str, object], *keys: str) -> float | None:
    """The first of ``keys`` the entry prices in dollars per token (the file is JSON: a field may be
    null or missing)."""
    for key in keys:
        value = entry.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def _tier_suffix(entry: dict[str, object], prompt_tokens: int) -> str:
    tiers = sorted(int(m.group(1)) for key in entry if (m := _TIER.match(key)))
    above = [k for k in tiers if prompt_tokens > k * 1000]
    return f"_above_{above[-1]}k_tokens" if above else ""
