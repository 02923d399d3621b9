"""Host side: a DSPy ``CodeInterpreter`` as an rlmkit sandbox. Every sandbox of DSPy's ecosystem
(its ``LocalInterpreter``, its Deno ``PythonInterpreter``, a user's remote or container
interpreter written against DSPy's protocol) runs an rlmkit run's cells.

The interpreter comes from a zero-argument factory (``interpreter_factory=``, as in dspy.RLM),
is started on ``start`` and shut down on ``close``, on success and on error alike; one the
caller passes itself (``rlm(interpreter, ...)``) is the caller's, and is left running. Host
functions go into its mutable ``tools``. Only the model's code is executed, one execution per
cell, as dspy.RLM does (scripted interpreters count on it): the inputs cross with the first one,
and rlmkit's REPL prelude runs in front of the model's code until it has run once. An
interpreter keeps its namespace between executions, so the context crosses once. rlmkit's
input restore after each cell is left out: DSPy's protocol has no snippet of the host's own.

DSPy interpreters own ``SUBMIT``: it returns a ``FinalOutput``, which is handed to the run's
own ``SUBMIT`` to be checked against the signature like any other submission. An error in the
model's code (``CodeExecutionError``, ``SyntaxError``) is the cell's error, for the model to
see; a failure of the interpreter itself ends the run with ``InterpreterFailed``, which is both
rlmkit's ``SandboxError`` and DSPy's ``CodeInterpreterError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any  # Any: a DSPy CodeInterpreter, whose package ships no types

from dspy.primitives.code_interpreter import CodeExecutionError, CodeInterpreterError, FinalOutput

from rlmkit.errors import Finish, SandboxError
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits

INTERPRETER_OWNS = frozenset({"SUBMIT"})  # names a DSPy interpreter defines itself


class NotAnInterpreter(SandboxError, TypeError):
    """The factory returned something that is not a CodeInterpreter (a TypeError, as in dspy)."""


class InterpreterFailed(SandboxError, CodeInterpreterError):
    """The DSPy interpreter itself failed: rlmkit's run error and the one DSPy users catch."""


class InterpreterSandbox(Sandbox):
    """Cells run by ``interpreter``, a DSPy ``CodeInterpreter``; ``owned``: made for this run
    (started here, shut down on ``close``), else the caller's (left running)."""

    name = "interpreter"

    def __init__(
        self,
        interpreter: Any,
        limits: SandboxLimits | None = None,
        output_fields: list[dict[str, str]] | None = None,
        owned: bool = True,
    ):
        super().__init__(limits)
        self.interpreter = interpreter
        self.output_fields = output_fields  # dspy.RLM's [{"name", "type"}] for typed SUBMIT
        self.owned = owned
        self._submit: HostFunction | None = None
        self._pending: tuple[str, dict[str, object] | None] = ("", None)  # prelude and inputs, until run
        self._closed = False

    def start(
        self, variables: dict[str, object], functions: dict[str, HostFunction], prelude: str = ""
    ) -> None:
        interpreter = self.interpreter
        self._submit = functions.get("SUBMIT")
        interpreter.tools.update({k: v for k, v in functions.items() if k not in INTERPRETER_OWNS})
        if self.output_fields is not None and hasattr(interpreter, "output_fields"):
            interpreter.output_fields = self.output_fields
        if self.owned and callable(getattr(interpreter, "start", None)):
            interpreter.start()
        self._pending = (prelude, dict(variables))

    def run(self, code: str) -> CellResult:
        started = time.monotonic()
        result = CellResult()
        prelude, variables = self._pending
        try:
            value = self.interpreter.execute(f"{prelude}\n{code}" if prelude else code, variables)
            self._pending = ("", None)  # the prelude ran and the inputs crossed
            if isinstance(value, FinalOutput):
                self._hand_in(value.output)
            elif value is not None:
                result.stdout = value if isinstance(value, str) else repr(value)
        except Finish as done:
            self._pending = ("", None)
            result.finished, result.finish_value = True, done.value
        except (CodeExecutionError, SyntaxError) as exc:
            result.error = str(exc)
        except CodeInterpreterError as exc:
            raise InterpreterFailed(f"the interpreter failed: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - the model's SUBMIT was refused: its error, to fix
            result.error = f"{type(exc).__name__}: {exc}"
        result.duration_s = time.monotonic() - started
        return result

    def _hand_in(self, output: object) -> None:
        if self._submit is None:
            raise SandboxError("the interpreter returned a FinalOutput but this run has no SUBMIT")
        if isinstance(output, dict):
            self._submit(**output)
        else:
            self._submit(output)
        raise SandboxError("SUBMIT returned without finishing the run")  # SUBMIT raises Finish

    def run_then(self, code: str, after: str) -> CellResult:
        return self.run(code)  # one execution per cell: no snippet of the host's own (see the docstring)

    def get(self, name: str, default: object = None) -> object:
        return default  # DSPy's protocol has no read-back; FINAL_VAR-style protocols need another sandbox

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.interpreter is not None and self.owned:
            self.interpreter.shutdown()

    @property
    def protections(self) -> dict[str, bool]:
        return {"dspy_interpreter": True}  # whatever isolation the interpreter itself gives


def output_fields(signature: Any) -> list[dict[str, str]]:
    """dspy.RLM's description of the outputs, for an interpreter's typed ``SUBMIT``."""
    simple = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "dict"}
    fields = []
    for name, field in signature.output_fields.items():
        entry = {"name": name}
        if (kind := simple.get(getattr(field, "annotation", str))) is not None:
            entry["type"] = kind
        fields.append(entry)
    return fields


def make_interpreter(factory: Callable[[], Any]) -> Any:
    """``factory()``, checked to be an interpreter (dspy.RLM's TypeError otherwise). Called when a
    call starts, before any model is resolved: a broken factory is named before anything else."""
    made = factory()
    if not is_interpreter(made):
        kind = type(made).__name__
        raise NotAnInterpreter(f"interpreter_factory must return a CodeInterpreter, not {kind}")
    return made


def launcher(
    interpreter: Any, signature: Any, *, owned: bool
) -> Callable[[SandboxLimits], InterpreterSandbox]:
    """``RunSpec.make_sandbox`` for a run whose cells ``interpreter`` runs: ``owned`` when this run
    made it (from a factory: started and shut down here), else the caller's, left running."""
    fields = output_fields(signature)
    return lambda limits: InterpreterSandbox(interpreter, limits, fields, owned=owned)


def is_interpreter(value: object) -> bool:
    """An interpreter (not a class, not a factory): it executes code and shuts down."""
    return (
        not isinstance(value, type)
        and callable(getattr(value, "execute", None))
        and callable(getattr(value, "shutdown", None))
    )


def is_factory(value: object) -> bool:
    """A zero-argument interpreter factory (a class, a function), not the caller's interpreter."""
    return value is not None and not is_interpreter(value)
