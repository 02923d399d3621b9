"""``tools=[...]`` as dspy.RLM takes it: plain callables or ``dspy.Tool``s, sync or async,
each becoming one host function of the REPL under its tool name.

A ``dspy.Tool`` is called as itself (``Tool.__call__`` / ``acall``: its argument parsing,
its callbacks), with the model's positional arguments bound to the tool's parameters in
order, since REPL code calls ``lookup("apple")`` as often as ``lookup(key="apple")``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any

import dspy

from rlmkit.dspy_compat.names import check_tool_names


def normalize_tools(tools: Any) -> dict[str, dspy.Tool]:
    """``tools`` (a list) as ``{name: dspy.Tool}``, with dspy.RLM's errors for what it refuses."""
    if not tools:
        return {}
    if isinstance(tools, dict):
        raise TypeError(
            "tools must be a list, not a dict. Change tools={'name': func} to tools=[func] "
            "(tool names are inferred from function names, or use dspy.Tool(func, name='custom_name')); "
            "rlmkit's own spelling for a name-to-function mapping is subcalls={'name': func}"
        )
    found: dict[str, dspy.Tool] = {}
    for value in tools:
        if not isinstance(value, dspy.Tool):
            if not callable(value):
                raise TypeError(f"Tool {value!r} must be callable, got {type(value).__name__}")
            value = dspy.Tool(value)
        if value.name in found:
            raise ValueError(f"Duplicate tool name '{value.name}' (give one of them another name)")
        found[value.name] = value
    check_tool_names(found)
    return found


def host_function(tool: dspy.Tool) -> Callable[..., Any]:
    """The REPL's function for ``tool``. The sandbox calls host functions on a thread with no
    event loop of its own, so an async tool's coroutine runs there to completion."""
    params = list(inspect.signature(tool.func).parameters) if callable(tool.func) else list(tool.args)

    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(params):
            raise TypeError(f"{tool.name}() takes {len(params)} arguments, got {len(args)}")
        kwargs.update(zip(params, args))
        if inspect.iscoroutinefunction(tool.func):
            return _run_to_completion(tool.acall(**kwargs))
        return tool(**kwargs)

    call.__name__ = tool.name
    call.__doc__ = tool.desc
    try:
        call.__signature__ = inspect.signature(tool.func)
    except (TypeError, ValueError):
        pass
    return call


def _run_to_completion(coro: Any) -> Any:
    """Run ``coro`` from sync code: here if this thread has no loop running, else on a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
