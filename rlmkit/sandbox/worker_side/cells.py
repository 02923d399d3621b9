"""Both sides: running one cell (bounded output capture, REPL echo, tracebacks that show only
the cell).

Runs inside the worker process, and in the host for the inline and Monty sandboxes, which import
it from here (standard library only: the worker imports it under ``python -I -S``).
"""

from __future__ import annotations

import _ast  # the node types; the ``ast`` module on top of them (0.4 MB with contextlib) is not loaded

CELL_FILE = "<repl-{}>"
_INTERNAL_FILES = ("cells.py", "worker.py", "wire.py", "inline.py")


class BoundedText:
    """A text stream keeping the first and last ``limit // 2`` characters; counts the rest.

    A 50 MB print costs the size of the string being printed, never a 50 MB buffer here.
    """

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head: list[str] = []
        self.head_len = 0
        self.tail = ""
        self.tail_seen = 0  # characters that went past the head

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        room = max(self.half - self.head_len, 0)
        if room:
            self.head.append(s[:room])
            self.head_len += min(room, n)
        if n > room:  # slice only the part that can survive in the tail: one copy of at most half
            self.tail_seen += n - room
            self.tail = (self.tail + s[max(room, n - self.half) :])[-self.half :]
        return n

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        dropped = self.tail_seen - len(self.tail)
        mid = f"\n... [{dropped} characters truncated] ...\n" if dropped else ""
        return "".join(self.head) + mid + self.tail


def execute(code: str, filename: str, namespace: dict) -> None:
    """exec ``code``; like the interactive prompt, print the repr of a final bare expression."""
    tree = compile(code, filename, "exec", _ast.PyCF_ONLY_AST)  # what ast.parse does
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - running model code is the point
    if last is not None:
        value = eval(compile(last, filename, "eval"), namespace)
        if value is not None:
            print(repr(value))


def format_error(exc: BaseException, filename: str, code: str) -> str:
    """The traceback of a cell's error, without the sandbox's own frames."""
    import linecache
    import traceback

    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not f.filename.endswith(_INTERNAL_FILES)]
    )
    return "".join(te.format()).rstrip()
