"""Worker side: the REPL worker, one process per run, started as ``python -I -S worker.py CONFIG``.

Runs inside the worker process, never in the host (a forked worker runs it in a child of the
fork server, ``fork_server.py``). Standard library only: ``-I -S`` puts neither the script's
folder nor site-packages on ``sys.path``, so it adds its own folder just long enough to import
its siblings as top-level modules. It confines itself (``confine.py``), reports what is active,
receives the run's variables once, runs the prelude, then runs cells until the host closes the
pipe. Protocol (frames of an 8-byte length + pickle, see ``wire.py``). The host sends
``("functions", {name: doc})``; per input ``("var_str", name)`` + the text
(``Channel.send_text``), ``("var", name)`` + a pickle stream (``Channel.send_pickled``), or
``("alias", name, other)`` for an object already sent under another name; ``("loaded",)``;
then ``("run", code)`` (the prelude is the first run) and ``("get", name)``; a session also
sends ``("snapshot", ...)`` and ``("restore", ...)`` between cells (``snapshot.py``). The worker
answers ``("ready", protections)``, ``("loaded", errors)``, ``("done", stdout, stderr,
error, finished)`` and ``("value", found, payload)``, and asks ``("call", id, name,
pickled (args, kwargs))``; the host replies ``("ok", id, pickled value)``, ``("finish", id)``
or ``("error", id, exception type name, message)``.
"""

from __future__ import annotations

import builtins
import marshal
import os
import signal
import sys

if __package__:  # read as part of rlmkit (the type checker); the worker itself runs it as a script
    from . import cells, confine, fork_server, snapshot, wire
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cells
    import confine
    import fork_server
    import snapshot
    import wire

    del sys.path[0]  # model code must not import our modules by accident


class FinishSignal(BaseException):
    """A host function raised Finish: the cell ends here."""


class HostFunctionError(RuntimeError):
    """A host function failed with an exception type the worker does not know."""


class State:
    in_cell = False  # SIGINT only interrupts model code ...
    in_io = False  # ... and never splits a frame on the pipe
    pending_interrupt = False
    finished = False
    call_id = 0


def on_sigint(_sig, _frame):
    if not State.in_cell:
        return
    if State.in_io:
        State.pending_interrupt = True
        return
    raise KeyboardInterrupt("cell interrupted: it ran past the cell timeout")


class WorkerRepl:
    """The worker's REPL: its namespace, its cells, and its calls back to the host."""

    def __init__(self, chan: wire.Channel, config: dict):
        self.chan = chan
        self.config = config
        self.namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cell_count = 0
        self.load_errors: list[str] = []
        self.snapshots = snapshot.Snapshots()  # a session's checkpoints (see snapshot.py)

    # ------------------------------------------------------------ host functions
    def call_host(self, name: str, args: tuple, kwargs: dict):
        if State.finished:
            raise FinishSignal()
        State.call_id += 1
        my_id = State.call_id
        try:
            payload = wire.dumps(("call", my_id, name, wire.dumps((args, kwargs))))
        except Exception as exc:  # noqa: BLE001 - pickling can fail with any exception type
            raise TypeError(f"arguments to {name}() cannot be sent to the host: {exc}") from None
        State.in_io = True
        try:
            self.chan.send_bytes(payload)
            while True:
                msg = self.chan.recv()
                kind = msg[0]
                if kind == "get":
                    self.answer_get(msg[1])
                elif kind in ("ok", "finish", "error") and msg[1] == my_id:
                    break  # replies with another id belong to an interrupted call: skip them
        finally:
            State.in_io = False
        if State.pending_interrupt:
            State.pending_interrupt = False
            raise KeyboardInterrupt("cell interrupted: it ran past the cell timeout")
        if kind == "ok":
            return wire.loads_trusted(msg[2])
        if kind == "finish":
            State.finished = True
            raise FinishSignal()
        exc_type = getattr(builtins, msg[2], None)
        if isinstance(exc_type, type) and issubclass(exc_type, Exception):
            raise exc_type(msg[3])
        raise HostFunctionError(f"{msg[2]}: {msg[3]}")

    def install_functions(self, docs: dict[str, str]) -> None:
        for name, doc in docs.items():

            def stub(*args, _name=name, **kwargs):
                return self.call_host(_name, args, kwargs)

            stub.__name__ = stub.__qualname__ = name
            stub.__doc__ = doc
            self.namespace[name] = stub

    # ------------------------------------------------------------ cells
    def run_cell(self, code: str, after: str | None = None) -> tuple:
        self.cell_count += 1
        filename = cells.CELL_FILE.format(self.cell_count)
        limit = self.config["max_output_chars"]
        out, err = cells.BoundedText(limit), cells.BoundedText(limit)
        error = None
        State.finished = False
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        State.in_cell = True
        try:
            cells.execute(code, filename, self.namespace)
        except FinishSignal:
            pass
        except BaseException as exc:  # noqa: BLE001 - the cell's own error, reported as a traceback
            error = cells.format_error(exc, filename, code)
        finally:
            State.in_cell = False
            State.pending_interrupt = False
            if after is not None and not State.finished:
                self.run_after(after)
            sys.stdout, sys.stderr = old
        return ("done", out.getvalue(), err.getvalue(), error, State.finished)

    def run_after(self, code: str) -> None:
        """The host's follow-up to a cell (``Sandbox.run_then``), in the same round trip: what it
        prints joins the cell's output; an error in it is not the cell's."""
        try:
            exec(compile(code, "<rlmkit>", "exec"), self.namespace)
        except BaseException:  # noqa: BLE001, S110 - e.g. a late interrupt: the cell's result stands
            pass

    def answer_get(self, name: str) -> None:
        if name not in self.namespace:
            self.chan.send(("value", False, None))
            return
        try:
            payload = wire.dumps(self.namespace[name])
        except Exception as exc:  # noqa: BLE001 - pickling can fail with any exception type
            self.chan.send(("value", True, f"{type(exc).__name__}: {exc}"))
            return
        self.chan.send_bytes(wire.dumps(("value", True, payload)))

    # ------------------------------------------------------------ main loop
    def serve(self) -> None:
        while True:
            try:
                msg = self.chan.recv()
            except EOFError:
                return
            kind = msg[0]
            if kind == "var_str":
                self.namespace[msg[1]] = self.chan.recv_text()
            elif kind == "var":
                try:
                    self.namespace[msg[1]] = self.chan.recv_unpickled()
                except Exception as exc:  # noqa: BLE001 - e.g. a class the worker cannot import (it runs with -S)
                    self.load_errors.append(f"{msg[1]}: {type(exc).__name__}: {exc}")
            elif kind == "alias":
                if msg[2] in self.namespace:
                    self.namespace[msg[1]] = self.namespace[msg[2]]
            elif kind == "loaded":
                self.chan.send(("loaded", self.load_errors))
            elif kind == "functions":
                self.install_functions(msg[1])
            elif kind == "run":
                self.chan.send(self.run_cell(*msg[1:3]))
            elif kind == "get":
                self.answer_get(msg[1])
            elif kind == "snapshot":
                self.chan.send(self.snapshots.take(self.namespace, *msg[1:4]))
            elif kind == "restore":
                self.chan.send(self.snapshots.restore(self.namespace, *msg[1:3]))
            # stale replies to an interrupted call are dropped here


def confine_self(config: dict) -> dict[str, bool | str]:
    """Apply every confinement step that works here; return name -> True | reason it is off."""
    done: dict[str, bool | str] = {}
    root = os.geteuid() == 0
    workdir, ro = config["workdir"], config["read_only"]
    uid = 1_000_000 + os.getpid() if root else None

    def step(name: str, fn, *args) -> bool:
        try:
            fn(*args)
            done[name] = True
        except (confine.StepFailed, OSError) as exc:
            done[name] = f"off: {exc}"
        return done[name] is True

    step("network_namespace", confine.enter_namespaces, not config["network"], False)
    if step("mount_namespace", confine.enter_namespaces, False, True):
        step("workdir_tmpfs", confine.private_workdir, workdir, config["max_disk_bytes"], uid)
        if root:
            step("python_reexposed", confine.expose_to_other_users, ro[:1])
    if root and done.get("workdir_tmpfs") is not True:
        os.chown(workdir, uid, uid)
    done["own_uid"] = step("own_uid", confine.drop_to_uid, uid) if root else "off: host is not root"
    step("die_with_host", confine.die_with_parent, config["host_pid"])
    nproc = None if config["max_processes"] is None else 1 + config["max_processes"]
    step("rlimits", confine.set_rlimits, config["memory_bytes"], config["max_file_bytes"], nproc)
    try:
        abi = confine.landlock([workdir], ro, block_tcp=not config["network"])
        done["landlock_fs"] = True
        done["landlock_tcp"] = (abi >= 4) or "off: landlock ABI < 4"
        done["landlock_signal_scope"] = (abi >= 6) or "off: landlock ABI < 6"
    except (confine.StepFailed, OSError) as exc:
        done["landlock_fs"] = f"off: {exc}"
    step("seccomp", confine.seccomp, config["max_processes"] == 0, not config["network"])
    return done


def run_worker(config: dict) -> None:
    chan = wire.Channel(config["rfd"], config["wfd"])
    signal.signal(signal.SIGINT, on_sigint)
    os.chdir(config["workdir"])
    try:
        protections = confine_self(config) if config["confine"] else {}
    except BaseException as exc:  # report instead of dying silently
        chan.send(("fatal", f"{type(exc).__name__}: {exc}"))
        raise
    chan.send(("ready", protections))
    WorkerRepl(chan, config).serve()


def main() -> None:
    config = marshal.loads(bytes.fromhex(sys.argv[1]))  # built in: no json module (0.3 MB) in the worker
    if config.get("fork_server"):
        fork_server.serve(config, run_worker)
    else:
        run_worker(config)


if __name__ == "__main__":
    main()
