"""Events: what a run does, as it happens, for callbacks, tracers, usage trackers and streams.

The run loop, sub-calls and sandbox each say what happens with a one-line ``emit(Event)``.
Events come in start/end pairs that form spans: run -> turn -> model call / cell ->
sub-call -> model call / child run. The first ``RunStarted`` of a call tree builds a
``Dispatcher`` holding every listener that applies (rlmkit listeners, DSPy callbacks, the
usage tracker and history, OpenTelemetry); with none, nothing is built and each ``emit`` is
one context-variable read.

The current span lives in a context variable, so concurrent async runs never see each
other's events; a cell's sub-calls run in a copy of the context the cell started in (as
tasks on the run's loop, or from a cell thread: ``concurrency.threads.in_thread``), so they nest under it.

Events reference live trajectory nodes (``Turn``, ``CodeBlock``, ``SubCall``): an end
event carries the finished node.

    with rlmkit.events.listen(print):          # every event of every run started inside
        rlm(context=..., question=...)
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rlmkit.trajectory import ChatMessage, CodeBlock, Message, RunMeta, SubCall, Trajectory, Turn

if TYPE_CHECKING:  # the run's types, named for readers and tools; the run imports this module
    import dspy

    from rlmkit.models.contract import Completion, Model
    from rlmkit.run.spec import RunSpec
    from rlmkit.sandbox.base import Sandbox

log = logging.getLogger("rlmkit")

Listener = Callable[["Event"], None]
# made once per call tree from its first event: its listeners, if it has any
Instrumentation = Callable[["RunStarted"], "Listener | list[Listener] | None"]


# -- the events ----------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Event:
    """Filled in by the dispatcher: which span this is, its parent, its run and when."""

    span_id: str = field(default="", init=False)
    parent_id: str | None = field(default=None, init=False)
    run_id: str = field(default="", init=False)
    session_id: str = field(default="", init=False)  # the session the run is a call of ("" when none)
    session_call: int | None = field(default=None, init=False)  # that call's number (1, 2, ...)
    depth: int = field(default=0, init=False)
    time: float = field(default=0.0, init=False)  # time.time() when it was emitted
    start: Event | None = field(default=None, init=False, repr=False)  # an end event's start event

    starts = False  # a start event opens a span; its end event closes the span with the same key
    leaf = False  # a span that never has children is not made the current span (one less context write)

    def key(self) -> tuple[str, object]:
        raise NotImplementedError

    def end(self, error: BaseException | None) -> Event:
        """A start event's end event (the dispatcher closes what an error left open with it)."""
        raise NotImplementedError

    def __repr__(self) -> str:  # short: a RunStarted holds the inputs, a ModelRequest the whole prompt
        return (
            f"{type(self).__name__}(span_id={self.span_id!r}, parent_id={self.parent_id!r}, "
            f"run_id={self.run_id[:12]!r}, depth={self.depth})"
        )


@dataclass(eq=False, repr=False)
class RunStarted(Event):
    """A run begins (``depth`` > 0: a child run made by ``rlm_query``)."""

    meta: RunMeta
    spec: RunSpec[Model]  # models, settings, signature
    inputs: dict[str, object]
    starts = True

    @property
    def rlm(self) -> dspy.Module | None:
        """The RLM (a dspy.Module) this run belongs to."""
        return getattr(self.spec, "module", None)

    def key(self) -> tuple[str, object]:
        return ("run", self.meta.run_id)

    def end(self, error: BaseException | None) -> Event:
        raise AssertionError("a run is ended by run_loop itself")


@dataclass(eq=False, repr=False)
class RunFinished(Event):
    """A run is over: ``error`` is None on success; ``trajectory`` holds all it did either way."""

    trajectory: Trajectory
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("run", self.trajectory.meta.run_id)


@dataclass(eq=False, repr=False)
class SandboxStarting(Event):
    sandbox: Sandbox
    starts = True
    leaf = True

    def key(self) -> tuple[str, object]:
        return ("sandbox-start", id(self.sandbox))

    def end(self, error: BaseException | None) -> Event:
        return SandboxStarted(self.sandbox, error)


@dataclass(eq=False, repr=False)
class SandboxStarted(Event):
    sandbox: Sandbox
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("sandbox-start", id(self.sandbox))


@dataclass(eq=False, repr=False)
class SandboxClosing(Event):
    sandbox: Sandbox
    starts = True
    leaf = True

    def key(self) -> tuple[str, object]:
        return ("sandbox-close", id(self.sandbox))

    def end(self, error: BaseException | None) -> Event:
        return SandboxClosed(self.sandbox, error)


@dataclass(eq=False, repr=False)
class SandboxClosed(Event):
    sandbox: Sandbox
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("sandbox-close", id(self.sandbox))


@dataclass(eq=False, repr=False)
class TurnStarted(Event):
    """A root turn begins: ``messages`` is what the root model is about to read."""

    turn: Turn  # its index, then its reply, blocks and usage as it goes
    messages: list[Message]
    starts = True

    def key(self) -> tuple[str, object]:
        return ("turn", id(self.turn))

    def end(self, error: BaseException | None) -> Event:
        return TurnFinished(self.turn, error)


@dataclass(eq=False, repr=False)
class TurnFinished(Event):
    turn: Turn
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("turn", id(self.turn))


@dataclass(eq=False, repr=False)
class ModelRequest(Event):
    """A model call: a root turn's (``owner`` is the Turn) or a sub-call's (the SubCall)."""

    owner: Turn | SubCall
    lm: Model
    messages: list[ChatMessage]
    starts = True
    leaf = True

    def key(self) -> tuple[str, object]:
        return ("lm", id(self.owner))

    def end(self, error: BaseException | None) -> Event:
        return ModelReply(self.owner, None, error)

    @property
    def root(self) -> bool:
        """A root turn's call (not a sub-call's)."""
        return type(self.owner) is Turn


@dataclass(eq=False, repr=False)
class ModelReply(Event):
    owner: Turn | SubCall
    completion: Completion | None  # text, model, usage, cached; None on error
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("lm", id(self.owner))


@dataclass(eq=False, repr=False)
class CellStarted(Event):
    block: CodeBlock  # its code now, its output when finished
    sandbox: Sandbox
    starts = True

    def key(self) -> tuple[str, object]:
        return ("cell", id(self.block))

    def end(self, error: BaseException | None) -> Event:
        return CellFinished(self.block, self.sandbox, error)


@dataclass(eq=False, repr=False)
class CellFinished(Event):
    block: CodeBlock
    sandbox: Sandbox
    error: BaseException | None = None  # a host-side failure; the code's own errors are in block.error

    def key(self) -> tuple[str, object]:
        return ("cell", id(self.block))


@dataclass(eq=False, repr=False)
class SubcallStarted(Event):
    """``llm_query``, ``rlm_query``, a typed sub-call or a tool, called from a cell (one per batch item)."""

    node: SubCall
    starts = True

    def key(self) -> tuple[str, object]:
        return ("subcall", id(self.node))

    def end(self, error: BaseException | None) -> Event:
        return SubcallFinished(self.node, error)


@dataclass(eq=False, repr=False)
class SubcallFinished(Event):
    node: SubCall
    error: BaseException | None = None

    def key(self) -> tuple[str, object]:
        return ("subcall", id(self.node))


# -- dispatch --------------------------------------------------------------------------------
class Span:
    """One open start event: its id, its parent span, and the run it belongs to."""

    __slots__ = ("children", "depth", "dispatcher", "id", "parent", "run_id", "session_call", "session_id",
                 "start", "token")  # fmt: skip

    def __init__(self, span_id: str, parent: Span | None, start: Event, dispatcher: Dispatcher):
        self.id, self.parent, self.start, self.dispatcher = span_id, parent, start, dispatcher
        self.token: Token[Span | None] | None = (
            None  # a tree's first span resets the context variable with it
        )
        self.children: list[Span] | None = None
        self.session_id: str
        self.session_call: int | None
        outer = (parent.session_id, parent.session_call) if parent is not None else ("", None)
        if type(start) is RunStarted:
            self.run_id, self.depth = start.meta.run_id, start.meta.depth
            session = start.meta.session
            # a child run: its root's session and call
            self.session_id, self.session_call = (
                (session["id"], session.get("call")) if session.get("id") else outer
            )
        else:
            self.run_id, self.depth = (parent.run_id, parent.depth) if parent is not None else ("", 0)
            self.session_id, self.session_call = outer


_active: ContextVar[Span | None] = ContextVar("rlmkit_active_span", default=None)
_listeners: ContextVar[tuple[Listener, ...]] = ContextVar("rlmkit_listeners", default=())
_instrumentations: list[Instrumentation] = []  # process-wide: DSPy's, OpenTelemetry
_ids = itertools.count(1)


def emit(event: Event) -> None:
    """Hand ``event`` to the listeners of the current call tree (nothing to do without any)."""
    span = _active.get()
    if span is not None:
        span.dispatcher.dispatch(event, span)
    elif type(event) is RunStarted:
        listeners = _collect(event)
        if listeners:
            Dispatcher(listeners).dispatch(event, None)


class Dispatcher:
    """The listeners of one call tree, and its open spans (to match ends and close leftovers)."""

    def __init__(self, listeners: list[Listener]):
        self.listeners = listeners
        self.open: dict[tuple[str, object], Span] = {}

    def dispatch(self, event: Event, current: Span | None) -> None:
        event.time = time.time()
        span: Span | None
        if event.starts:
            span = Span(str(next(_ids)), current, event, self)
            if current is not None:
                if current.children is None:
                    current.children = [span]
                else:
                    current.children.append(span)
            self.open[event.key()] = span
            if current is None:
                span.token = _active.set(span)
            elif not event.leaf:
                _active.set(span)
        else:
            span = self.open.pop(event.key(), None)
            if span is None:
                return  # an end without its start (already closed): nothing to report
            if span.children:  # an end event's error (None on success) ends what it left open
                error: BaseException | None = getattr(event, "error", None)
                self._close_children(span, error)
            if span.token is not None:
                _active.reset(span.token)
            elif not span.start.leaf:
                _active.set(span.parent)
        self._fill(event, span)
        self.deliver(event)

    @staticmethod
    def _fill(event: Event, span: Span) -> None:
        event.span_id, event.run_id, event.depth = span.id, span.run_id, span.depth
        event.session_id, event.session_call = span.session_id, span.session_call
        if event is not span.start:
            event.start = span.start
        if span.parent is not None:
            event.parent_id = span.parent.id

    def _close_children(self, span: Span, error: BaseException | None) -> None:
        """End what an error left open inside ``span`` (a turn cut short, a model call that
        raised ...), innermost first, so every start a listener saw gets its end."""
        for child in reversed(span.children or ()):
            if self.open.get(child.start.key()) is child:
                self._close_children(child, error)
                del self.open[child.start.key()]
                end = child.start.end(
                    error or _Interrupted(f"ended with its {type(span.start).__name__[:-7].lower()}")
                )
                end.time = time.time()
                self._fill(end, child)
                self.deliver(end)
        span.children = None

    def deliver(self, event: Event) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                log.warning(
                    "rlmkit: event listener %r failed on %s", listener, type(event).__name__, exc_info=True
                )


class _Interrupted(RuntimeError):
    """The error given to a span that its parent's end closed."""


def _collect(event: RunStarted) -> list[Listener]:
    """Every listener that applies to a new call tree: rlmkit's own, then each instrumentation's
    (DSPy's callbacks, usage and history register one in ``observe.dspy_bridge``)."""
    found = list(_listeners.get())
    for make in _instrumentations:
        made = make(event)
        if made:
            found.extend(made if isinstance(made, list) else [made])
    return found


@contextlib.contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Call ``listener(event)`` for every event of the runs started inside this block (this context only)."""
    token = _listeners.set((*_listeners.get(), listener))
    try:
        yield
    finally:
        _listeners.reset(token)


def instrument(make: Instrumentation) -> Callable[[], None]:
    """Add a process-wide listener factory (called once per call tree, with its first event);
    returns its remover."""
    _instrumentations.append(make)
    return lambda: _instrumentations.remove(make) if make in _instrumentations else None


__all__ = [
    "CellFinished",
    "CellStarted",
    "Event",
    "ModelReply",
    "ModelRequest",
    "RunFinished",
    "RunStarted",
    "SandboxClosed",
    "SandboxClosing",
    "SandboxStarted",
    "SandboxStarting",
    "SubcallFinished",
    "SubcallStarted",
    "TurnFinished",
    "TurnStarted",
    "emit",
    "instrument",
    "listen",
]
