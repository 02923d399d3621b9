"""Sub-calls: the functions the REPL code calls, dispatched on the host.

Each one is a coroutine on the run's event loop (``AsyncHostFunction``): the default sandbox
talks to its worker from that loop and awaits it in place; a sandbox that runs cells on a
thread calls it plainly, which hands the coroutine to the loop (``run_coroutine_threadsafe``)
and waits. Either way all model calls of a whole tree share one loop and one Budget; a batched call is an
``asyncio.gather`` there, at most ``max_concurrency`` items of the tree at once (each LM's
own limit caps its requests in flight, process-wide). An MCP server's tools (``mcp_tools.py``) and
the client's function tools (``client_tools.py``: the call waits for the caller's result) are
dispatched the same way, each call counted by the budget. Every call becomes a ``SubCall`` node in the
current code block of the trajectory (child RLMs nest their whole trajectory).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from rlmkit import events as ev
from rlmkit.errors import BudgetExceeded, LMError, RunError, ToolResultTimeout
from rlmkit.prompting import FUNCTION_DOCS, TYPED_CALL_REPAIR
from rlmkit.run.client_tools import ClientTool, PendingToolCall
from rlmkit.run.mcp_tools import McpTool, reply_text
from rlmkit.run.model_call import call_model
from rlmkit.run.state import RunState
from rlmkit.run.tool_schema import check_arguments
from rlmkit.run.typed_subcalls import TypedSubcall
from rlmkit.sandbox.base import AsyncHostFunction
from rlmkit.trajectory import Message, SubCall, Trajectory, bounded

# start_child(inputs) -> (outputs, trajectory): one rlm_query's child run, one level down in the tree
StartChild = Callable[[dict[str, Any]], Awaitable[tuple[dict[str, Any], Trajectory]]]


class SubcallHost:
    """Builds the host functions of one run and records each call in its trajectory."""

    def __init__(self, run: RunState, start_child: StartChild):
        self.run = run
        self.start_child = start_child
        self.settings = run.spec.settings
        self.typed = dict(run.spec.typed_subcalls)
        self.tools = dict(run.spec.tools)
        self.llm_calls = 0  # against settings.max_llm_calls; counted on the loop, one thread

    # -- plumbing ----------------------------------------------------------------
    def _sync(self, coro: Awaitable[Any]) -> Any:
        """Run ``coro`` on the tree's loop from the sandbox thread and wait for it. A RunError
        (e.g. BudgetExceeded) propagates: every sandbox stops the cell and raises it on the host."""
        return asyncio.run_coroutine_threadsafe(coro, self.run.tree.loop).result()

    def _on_loop(self, acall: Callable[..., Awaitable[Any]]) -> AsyncHostFunction:
        return AsyncHostFunction(lambda *args, **kwargs: self._sync(acall(*args, **kwargs)), acall)

    async def _call_lm(self, node: SubCall, messages: list[dict[str, str]], lm: Any) -> str:
        cap = self.settings.max_llm_calls
        if cap is not None:  # dspy.RLM's cap: an error the model's code can catch, not an abort
            if self.llm_calls + 1 > cap:
                raise RuntimeError(
                    f"LLM call limit exceeded: {self.llm_calls} + 1 > {cap}. "
                    "Use Python code for aggregation instead of making more LLM calls."
                )
            self.llm_calls += 1
        tree = self.run.tree
        node.model = lm.model

        def record(completion: Any) -> None:
            node.usage = completion.usage
            node.reply = bounded(completion.text, self.settings.display.trajectory_chars)
            ev.emit(ev.ModelReply(node, completion))

        with self._recorded(node):
            try:
                ev.emit(ev.ModelRequest(node, lm, messages))
                completion = await call_model(
                    tree.spending,
                    lm,
                    messages,
                    max_tokens=self.settings.sub_max_tokens,
                    record=record,
                    rollout_id=tree.rollout_id,
                )
                return completion.text
            except (LMError, BudgetExceeded) as exc:
                node.error = f"{type(exc).__name__}: {exc}"
                raise

    @contextlib.contextmanager
    def _recorded(self, node: SubCall) -> Iterator[None]:
        """A sub-call's span: timed, announced (started, finished) and kept in the current code
        block of the trajectory, however it ends."""
        node.started_s = self.run.tree.elapsed()
        start = time.monotonic()
        ev.emit(ev.SubcallStarted(node))
        try:
            yield
        finally:
            node.duration_s = time.monotonic() - start
            self.run.record_subcall(node)
            ev.emit(ev.SubcallFinished(node))

    async def _batch(
        self,
        make: Callable[[Any, int], Awaitable[Any]],
        items: list[Any],
        error: Callable[[Exception], Any],
        gate: bool = True,
    ):
        """Run ``make(item, i)`` for all items concurrently; a failed item becomes ``error(exc)``.

        ``gate``: at most ``max_concurrency`` items of the whole tree run at once. Off for
        child RLMs: a child holding a slot while its own batch waits for one could deadlock;
        their leaf calls are gated instead.
        """
        semaphore = self.run.tree.semaphore if gate else contextlib.nullcontext()

        async def one(i: int, item: Any) -> Any:
            try:
                async with semaphore:
                    return await make(item, i)
            except BudgetExceeded:
                raise
            except Exception as exc:  # one bad item must not sink the batch
                return error(exc)

        tasks = [asyncio.ensure_future(one(i, item)) for i, item in enumerate(items)]
        try:
            return list(await asyncio.gather(*tasks))
        except BudgetExceeded:  # the budget is spent: the rest of the batch must not keep calling
            for task in tasks:
                task.cancel()
            raise

    # -- llm_query -----------------------------------------------------------------
    async def _llm_query(self, prompt: Any, batch: int | None = None) -> str:
        text = prompt if isinstance(prompt, str) else str(prompt)
        node = SubCall(
            kind="llm_query",
            name="llm_query",
            depth=self.run.depth + 1,
            batch=batch,
            prompt=bounded(text, self.settings.display.trajectory_chars),
        )
        return await self._call_lm(node, [{"role": "user", "content": text}], self.run.spec.sub_lm)

    async def llm_query(self, prompt: str) -> str:
        return await self._llm_query(prompt)

    async def llm_query_batched(self, prompts: list[str]) -> list[str]:
        _check_list("llm_query_batched", prompts)
        return await self._batch(lambda p, i: self._llm_query(p, i), list(prompts), lambda e: f"Error: {e}")

    # -- rlm_query -----------------------------------------------------------------
    async def _rlm_query(self, prompt: Any, context: Any = None, batch: int | None = None) -> str:
        depth = self.run.depth + 1
        if depth >= self.settings.max_depth:  # no recursion left: a plain sub-model answers
            return await self._llm_query(prompt if context is None else f"{prompt}\n\n{context}", batch)
        node = SubCall(
            kind="rlm_query",
            name="rlm_query",
            depth=depth,
            batch=batch,
            prompt=bounded(str(prompt), self.settings.display.trajectory_chars),
        )
        with self._recorded(node):
            try:
                outputs, trajectory = await self.start_child(
                    {"context": prompt if context is None else context, "question": str(prompt)}
                )
                node.child = trajectory
                node.model = trajectory.meta.model
                node.usage = trajectory.usage
                answer = str(outputs["answer"])
                node.reply = bounded(answer, self.settings.display.trajectory_chars)
                return answer
            except RunError as exc:
                node.child = exc.trajectory
                node.error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, BudgetExceeded):
                    raise
                raise RuntimeError(f"rlm_query failed: {exc}") from None

    async def rlm_query(self, prompt: str, context: Any = None) -> str:
        return await self._rlm_query(prompt, context)

    async def rlm_query_batched(self, prompts: list[str], contexts: list[Any] | None = None) -> list[str]:
        _check_list("rlm_query_batched", prompts)
        if contexts is not None and len(contexts) != len(prompts):
            raise ValueError(f"rlm_query_batched: {len(prompts)} prompts but {len(contexts)} contexts")
        pairs = list(zip(prompts, contexts if contexts is not None else [None] * len(prompts)))
        return await self._batch(
            lambda pc, i: self._rlm_query(pc[0], pc[1], i), pairs, lambda e: f"Error: {e}", gate=False
        )

    # -- typed sub-calls and tools -------------------------------------------------------
    async def _typed(self, spec: TypedSubcall, kwargs: dict[str, Any], batch: int | None = None) -> Any:
        messages = spec.messages(kwargs)
        limit = self.settings.display.trajectory_chars
        node = SubCall(
            kind="typed",
            name=spec.name,
            depth=self.run.depth + 1,
            batch=batch,
            prompt=bounded(messages[-1]["content"], limit),
            messages=[Message(role=m["role"], content=bounded(m["content"], limit)) for m in messages],
        )
        text = await self._call_lm(node, messages, self.run.spec.sub_lm)
        try:
            return spec.parse(text)
        except ValueError as exc:  # one repair round: tell the sub-model what was wrong
            retry = messages + [
                {"role": "assistant", "content": text},
                {"role": "user", "content": TYPED_CALL_REPAIR.format(error=exc)},
            ]
            node2 = node.model_copy(
                update={
                    "id": node.id + "r",
                    "prompt": str(exc),
                    "reply": "",
                    "error": None,
                    "messages": [Message(**m) for m in retry],
                }
            )
            return spec.parse(await self._call_lm(node2, retry, self.run.spec.sub_lm))

    def _typed_function(self, spec: TypedSubcall) -> tuple[AsyncHostFunction, AsyncHostFunction]:
        async def call(**kwargs: Any) -> Any:
            return await self._typed(spec, kwargs)

        async def batched(items: list[dict[str, Any]]) -> list[Any]:
            _check_list(f"{spec.name}.batched", items)
            return await self._batch(lambda kw, i: self._typed(spec, dict(kw), i), list(items), _error_value)

        return self._on_loop(call), self._on_loop(batched)

    def _tool_function(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            node = SubCall(
                kind="tool",
                name=name,
                depth=self.run.depth + 1,
                prompt=bounded(repr((args, kwargs)), self.settings.display.trajectory_chars),
            )
            with self._recorded(node):
                try:
                    result = fn(*args, **kwargs)
                    node.reply = bounded(repr(result), self.settings.display.trajectory_chars)
                    return result
                except Exception as exc:
                    node.error = f"{type(exc).__name__}: {exc}"
                    raise

        return call

    # -- MCP tools ----------------------------------------------------------------------
    async def _mcp_call(self, tool: McpTool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call of an MCP server's tool: its arguments checked against the tool's schema (a
        ``ValueError`` in the REPL, nothing sent, nothing counted), then counted as a call of the
        budget and sent, bounded by the run's deadline."""
        limit = self.settings.display.trajectory_chars
        shown = {**({"args": list(args)} if args else {}), **kwargs}
        node = SubCall(
            kind="mcp_tool",
            name=tool.name,
            model=tool.server,
            depth=self.run.depth + 1,
            prompt=bounded(json.dumps(shown, default=str), limit),
        )
        with self._recorded(node):
            try:
                arguments = tool.arguments(args, kwargs)
                node.prompt = bounded(json.dumps(arguments, default=str), limit)
                spending = self.run.tree.spending
                spending.reserve()
                remaining = spending.remaining_seconds()
                try:
                    result = await tool.call(arguments, timeout=remaining)
                except TimeoutError:
                    if remaining is None:  # the tool's own timeout, not the run's deadline
                        raise
                    raise spending.past_deadline() from None
                node.reply = bounded(reply_text(result), limit)
                return result
            except Exception as exc:
                node.error = f"{type(exc).__name__}: {exc}"
                raise

    def _mcp_function(self, tool: McpTool) -> AsyncHostFunction:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._mcp_call(tool, args, kwargs)

        return self._on_loop(call)

    # -- the client's tools -------------------------------------------------------------
    async def _client_call(self, tool: ClientTool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call of a client tool: its arguments checked against the tool's schema (a
        ``ValueError`` in the REPL, nothing sent, nothing counted), then counted as a call of the
        budget and handed to the caller; the cell waits for the client's result, at most until the
        run's deadline or the control's ``result_timeout_s``."""
        control = self.run.tree.control
        assert control is not None  # only a tree with a control has client tools
        limit = self.settings.display.trajectory_chars
        shown = {**({"args": list(args)} if args else {}), **kwargs}
        node = SubCall(
            kind="client_tool",
            name=tool.name,
            model="client",
            depth=self.run.depth + 1,
            prompt=bounded(json.dumps(shown, default=str), limit),
        )
        with self._recorded(node):
            try:
                arguments = check_arguments(tool.name, tool.schema, args, kwargs)
                node.prompt = bounded(json.dumps(arguments, default=str), limit)
                spending = self.run.tree.spending
                spending.reserve()
                deadline, patience = spending.remaining_seconds(), control.result_timeout_s
                call = PendingToolCall(control.call_id(node.id), tool.name, arguments)
                try:
                    result = await control.call(
                        call, patience if deadline is None else min(deadline, patience)
                    )
                except TimeoutError:
                    if deadline is not None and deadline <= patience:
                        raise spending.past_deadline() from None
                    raise ToolResultTimeout(
                        f"client tool {tool.name} got no result in {control.result_timeout_s:g} s"
                    ) from None
                node.reply = bounded(reply_text(result), limit)
                return result
            except Exception as exc:
                node.error = f"{type(exc).__name__}: {exc}"
                raise

    def _client_function(self, tool: ClientTool) -> AsyncHostFunction:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._client_call(tool, args, kwargs)

        return self._on_loop(call)

    def _client_tools(self) -> dict[str, ClientTool]:
        control = self.run.tree.control
        return control.tools if control is not None else {}

    # -- what the REPL gets ------------------------------------------------------------
    def functions(self) -> tuple[dict[str, Callable[..., Any]], str]:
        """Host functions by name, and the prelude that dresses typed calls with ``.batched``."""
        functions: dict[str, Callable[..., Any]] = {
            name: self._on_loop(getattr(self, name))
            for name in ("llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched")
        }
        prelude = [_TYPED_PRELUDE] if self.typed else []
        for name, spec in self.typed.items():
            functions[name], functions[f"{name}__batched"] = self._typed_function(spec)
            prelude.append(
                f"{name} = _TypedCall({name}, {name}__batched, {spec.doc()!r}); del {name}__batched"
            )
        for name, fn in self.tools.items():
            functions[name] = self._tool_function(name, fn)
        for name, tool in self.run.tree.mcp_tools.items():
            functions[name] = self._mcp_function(tool)
        for name, client_tool in self._client_tools().items():
            functions[name] = self._client_function(client_tool)
        return functions, "\n".join(prelude)

    def docs(self, sub_chars: int) -> list[str]:
        lines = [FUNCTION_DOCS[name].format(sub_chars=f"{sub_chars:,}") for name in FUNCTION_DOCS]
        lines += [spec.doc() for spec in self.typed.values()]
        for name, fn in self.tools.items():
            doc = (fn.__doc__ or "").strip().splitlines()
            lines.append(f"{name}{_signature_of(fn)}: {doc[0] if doc else 'a tool.'}")
        lines += [tool.doc() for tool in self.run.tree.mcp_tools.values()]
        lines += [tool.doc() for tool in self._client_tools().values()]
        return lines


_TYPED_PRELUDE = """
class _TypedCall:
    def __init__(self, one, many, doc):
        self._one, self._many, self.__doc__ = one, many, doc
    def __call__(self, **kwargs):
        return self._one(**kwargs)
    def batched(self, items):
        return self._many(list(items))
    def __repr__(self):
        return self.__doc__
"""


def _error_value(exc: Exception) -> Exception:
    """A failed typed item: a builtin exception value (it must unpickle in any sandbox)."""
    return RuntimeError(f"{type(exc).__name__}: {exc}")


def _check_list(name: str, items: Any) -> None:
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{name} takes a list, got {type(items).__name__}")


def _signature_of(fn: Callable[..., Any]) -> str:
    import inspect

    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"
