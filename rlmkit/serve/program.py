"""What is served: one program, found from what the command line or the caller names.

A program is an ``rlmkit.RLM``, or any DSPy module that holds one (its first RLM gives the
fields the API maps messages onto). ``load_program`` reads the three spellings of the
``rlmkit serve PROGRAM`` argument: a signature string, a saved program (the ``program.json``
that ``rlmkit optimize`` writes, or the directory holding it) and ``module:attr``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from rlmkit import events as ev
from rlmkit.errors import ConfigError
from rlmkit.loading import load

DEFAULT_SIGNATURE = "context, question -> answer"
MODULE_ATTR = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass
class Program:
    """The served module, the RLM whose signature names the API's fields, and the model name."""

    module: Any
    rlm: Any
    name: str = "rlmkit"
    created: int = 0
    inputs: dict[str, Any] = field(init=False)
    outputs: dict[str, Any] = field(init=False)
    sampling: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        self.inputs = dict(self.rlm.signature.input_fields)
        self.outputs = dict(self.rlm.signature.output_fields)
        self.sampling = sampling_of(self.rlm)

    @property
    def is_rlm(self) -> bool:
        return self.module is self.rlm

    def stream(self, inputs: dict[str, Any], session: Any = None) -> AsyncIterator[Any]:
        """The call's ``rlmkit.events`` as they happen, then its ``dspy.Prediction`` (a failed
        call raises after its events). A session's call, the RLM's, or the outer module's."""
        if session is not None:
            return session.stream(**inputs)
        if self.is_rlm:
            return self.rlm.stream(**inputs)
        return _stream_module(self.module, inputs)

    async def acall(self, inputs: dict[str, Any], session: Any = None) -> Any:
        """The Prediction of an RLM's (or a session's) call; None for a module around an RLM,
        whose calls ``stream`` follows instead."""
        if session is not None:
            return await session.acall(**inputs)
        if self.is_rlm:
            return await self.rlm.acall(**inputs)
        return None


DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def sampling_of(rlm: Any) -> dict[str, float]:
    """The sampling settings the RLM's root model is called with (a response says them), read
    once as the program is served; the API's defaults for what the model does not set."""
    try:
        params = getattr(rlm.lm, "params", None) or {}
    except Exception:  # noqa: BLE001 - no default model configured yet: the defaults hold
        params = {}
    return {
        name: float(params[name]) if isinstance(params.get(name), int | float) else default
        for name, default in DEFAULT_SAMPLING.items()
    }


def find_rlm(module: Any) -> Any:
    """``module`` itself when it is an RLM, else the first RLM among its sub-modules."""
    from rlmkit.rlm import RLM

    if isinstance(module, RLM):
        return module
    if isinstance(module, dspy.Module):
        for _, sub in module.named_sub_modules():
            if isinstance(sub, RLM):
                return sub
    raise ConfigError(f"{type(module).__name__} is neither an rlmkit.RLM nor a DSPy module holding one")


def as_program(module: Any, name: str = "rlmkit") -> Program:
    import time

    return Program(module=module, rlm=find_rlm(module), name=name, created=int(time.time()))


def load_program(
    spec: str | Any,
    *,
    lm: Callable[[], Any] | None = None,
    signature: str | None = None,
    name: str = "rlmkit",
) -> Program:
    """The program ``spec`` names. ``lm`` makes the model for a signature or a saved program
    (called only then, so a ``module:attr`` program keeps the models it was built with);
    ``signature``: a saved program's signature (its file keeps prompts and knobs, not fields)."""
    if not isinstance(spec, str):
        return as_program(spec, name)
    from rlmkit.rlm import RLM

    path = Path(spec)
    if path.is_dir() and (path / "program.json").is_file():
        path = path / "program.json"
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise ConfigError(f"no saved program at {path}")
        rlm = RLM(signature or DEFAULT_SIGNATURE, lm=lm() if lm else None)
        rlm.load(str(path))
        return as_program(rlm, name)
    if MODULE_ATTR.match(spec):
        return as_program(_import(spec), name)
    if "->" in spec:
        return as_program(RLM(spec, lm=lm() if lm else None), name)
    raise ConfigError(
        f"{spec!r} is not a signature ('context, question -> answer'), a saved program (program.json) "
        "or module:attr"
    )


def _import(spec: str) -> Any:
    found = load(spec)  # a ConfigError names the part that is wrong
    if callable(found) and not isinstance(found, dspy.Module):  # a factory: called once, at start
        found = found()
    return found


async def _stream_module(module: Any, inputs: dict[str, Any]) -> AsyncIterator[Any]:
    """A DSPy module around an RLM: its RLM's events (the listener is copied into the call's
    context, a worker thread's too), then the module's Prediction."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    def put(event: ev.Event) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    with ev.listen(put):  # a module without aforward runs its sync forward in a thread
        call = module.acall(**inputs) if hasattr(module, "aforward") else asyncio.to_thread(module, **inputs)
        task = asyncio.ensure_future(call)
    task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, done))
    try:
        while (item := await queue.get()) is not done:
            yield item
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
