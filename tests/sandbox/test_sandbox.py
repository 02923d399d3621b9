"""The REPL sandboxes: one contract (start/run/get/close, CellResult, Finish), three backends."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlmkit.errors import BudgetExceeded, ConfigError, ContextError, Finish, SandboxError
from rlmkit.sandbox import CellResult, SandboxLimits, make_sandbox
from rlmkit.sandbox.process import ProcessSandbox
from rlmkit.sandbox.worker_side.cells import BoundedText

BACKENDS = ["process", "inline"] + (["monty"] if importlib.util.find_spec("pydantic_monty") else [])


def submit(**outputs):
    raise Finish(outputs)


def upper(text: str) -> str:
    """Return text in upper case (a stand-in for llm_query)."""
    return text.upper()


@pytest.fixture(params=BACKENDS)
def sandbox(request):
    sb = make_sandbox(
        request.param, SandboxLimits(cell_timeout=1.0, max_output_chars=1000, interrupt_grace=0.5)
    )
    sb.start({"context": "alpha beta gamma", "items": [1, 2, 3]}, {"llm_query": upper, "SUBMIT": submit})
    yield sb
    sb.close()


def test_state_persists_across_cells(sandbox):
    assert sandbox.run("words = context.split()\ncount = len(words)").error is None
    result = sandbox.run("print(count, words[-1], sum(items))")
    assert result.stdout == "3 gamma 6\n"
    assert sandbox.run("count * 2").stdout == "6\n"  # a final expression is echoed like a REPL


def test_host_function_round_trip(sandbox):
    result = sandbox.run("reply = llm_query(context[:5])\nprint(reply)")
    assert result.error is None
    assert result.stdout == "ALPHA\n"
    assert sandbox.get("reply") == "ALPHA"


def test_finish_cannot_be_swallowed_by_except_exception(sandbox):
    code = "try:\n    SUBMIT(answer=len(context))\nexcept Exception:\n    print('swallowed')\nprint('after')"
    result = sandbox.run(code)
    assert result.finished is True
    assert result.finish_value == {"answer": len("alpha beta gamma")}
    assert "swallowed" not in result.stdout and "after" not in result.stdout
    assert result.error is None
    assert sandbox.run("1 + 1").finished is False  # the next cell starts fresh


def test_host_function_error_is_catchable_in_the_cell(sandbox):
    def bad(x):
        raise ValueError(f"bad input {x}")

    sandbox.start({"n": 1}, {"bad": bad})
    result = sandbox.run("try:\n    bad(7)\nexcept ValueError as e:\n    print('caught:', e)")
    assert result.stdout == "caught: bad input 7\n"


def test_errors_come_back_as_tracebacks_of_the_cell(sandbox):
    result = sandbox.run("x = 1\ny = x / 0")
    assert result.error is not None
    assert "ZeroDivisionError" in result.error
    assert "y = x / 0" in result.error
    assert "worker.py" not in result.error and "cells.py" not in result.error
    assert sandbox.run("x").stdout == "1\n"  # the lines before the error ran


def test_output_is_truncated_head_and_tail(sandbox):
    result = sandbox.run("print('H' * 2000 + 'M' * 50_000 + 'T' * 2000)")
    assert result.stdout.startswith("H" * 500)
    assert result.stdout.rstrip("\n").endswith("T" * 499)
    assert len(result.stdout) < 1200
    assert "truncated" in result.stdout


def test_timeout_interrupts_and_keeps_state(sandbox):
    sandbox.run("kept = 41")
    t0 = time.monotonic()
    result = sandbox.run("while True:\n    pass")
    assert result.timed_out is True
    assert time.monotonic() - t0 < 4.0
    assert "TimeoutError" in result.error
    if not result.restarted:  # process/inline interrupt the cell; monty replaces its session
        assert sandbox.run("kept + 1").stdout == "42\n"


def test_time_inside_host_functions_does_not_count(sandbox):
    def slow(x):
        time.sleep(0.6)
        return x

    sandbox.start({}, {"slow": slow})
    result = sandbox.run("a = slow(1)\nb = slow(2)\nprint(a + b)")  # 1.2 s of host time, limit 1.0 s
    assert result.timed_out is False, result.error
    assert result.stdout == "3\n"
    assert result.host_s >= 1.1


def test_get_reads_values_and_defaults(sandbox):
    sandbox.run("found = {'k': [1, 2.5, 'x'], 'n': None}")
    assert sandbox.get("found") == {"k": [1, 2.5, "x"], "n": None}
    assert sandbox.get("missing", "dflt") == "dflt"


@pytest.mark.parametrize("backend", BACKENDS)
def test_prelude_defines_helpers_over_host_functions(backend):
    with make_sandbox(backend) as sb:
        sb.start(
            {"context": "abc"}, {"llm_query": upper}, prelude="def shout(s):\n    return llm_query(s) + '!'"
        )
        assert sb.run("shout(context)").stdout == "'ABC!'\n"


def test_unknown_backend_and_bad_names_are_config_errors():
    with pytest.raises(ConfigError, match="unknown sandbox"):
        make_sandbox("docker")
    with pytest.raises(ConfigError, match="identifier"):
        make_sandbox("inline").start({"not valid": 1}, {})
    with pytest.raises(ConfigError, match="both"):
        make_sandbox("inline").start({"f": 1}, {"f": upper})


# ------------------------------------------------------------------ process backend only
@pytest.fixture
def process_sandbox():
    sb = ProcessSandbox(SandboxLimits(cell_timeout=1.0, interrupt_grace=0.5))
    yield sb
    sb.close()


def test_worker_death_restarts_with_inputs_and_prelude(process_sandbox):
    sb = process_sandbox
    sb.start({"context": "xyz"}, {"llm_query": upper}, prelude="helper = 'ready'")
    old_pid = sb.pid
    sb.run("context = 'changed'")
    result = sb.run("import os\nos._exit(3)")
    assert result.restarted is True and "exited with status 3" in result.error
    assert sb.pid != old_pid
    assert sb.run("print(context, helper, llm_query('ok'))").stdout == "xyz ready OK\n"


def test_wedged_worker_is_killed_and_restarted(process_sandbox):
    sb = process_sandbox
    sb.start({"context": "xyz"}, {})
    code = (
        "import time\nwhile True:\n    try:\n        time.sleep(10)\n"
        "    except KeyboardInterrupt:\n        pass"
    )
    t0 = time.monotonic()
    result = sb.run(code)
    assert result.timed_out and result.restarted
    assert time.monotonic() - t0 < 3.5
    assert sb.run("context").stdout == "'xyz'\n"


def test_ten_million_char_context_crosses_once(process_sandbox):
    context = ("The quick brown fox jumps over the lazy dög. " * 230_000)[:10_000_000]
    sb = process_sandbox
    t0 = time.monotonic()
    sb.start({"context": context}, {})
    start_s = time.monotonic() - t0
    assert start_s < 5.0
    assert (
        sb.run("print(len(context), context.count('dög'))").stdout
        == f"{len(context)} {context.count('dög')}\n"
    )
    t1 = time.monotonic()
    for _ in range(5):
        sb.run("n = len(context)")
    per_cell = (time.monotonic() - t1) / 5
    assert per_cell < 0.05, f"a cell took {per_cell:.3f}s: the context must not cross per cell"
    assert sb.get("context") == context


def test_get_never_runs_worker_code_on_the_host(process_sandbox, tmp_path):
    marker = tmp_path / "pwned"
    sb = process_sandbox
    sb.start({}, {"llm_query": upper})
    # __reduce__ makes the pickle call os.system when loaded: the host must refuse to load it.
    sb.run(
        "import os\nclass Evil:\n    def __reduce__(self):\n"
        f"        return (os.system, ('touch {marker}',))\n"
        "evil = Evil()"
    )
    with pytest.raises(TypeError, match="cannot leave the sandbox"):
        sb.get("evil")
    result = sb.run("llm_query(Evil())")
    assert "TypeError" in result.error and "plain data" in result.error
    assert not marker.exists()


def test_nested_get_from_inside_a_host_function(process_sandbox):
    sb = process_sandbox

    def final_var(name):
        raise Finish(sb.get(name))

    sb.start({}, {"FINAL_VAR": final_var})
    result = sb.run("answer = [1, 2, 3]\nFINAL_VAR('answer')")
    assert result.finished and result.finish_value == [1, 2, 3]


def test_run_errors_from_host_functions_end_the_run(process_sandbox):
    def spend(_):
        raise BudgetExceeded("calls spent", kind="calls", limit=1, used=1)

    sb = process_sandbox
    sb.start({}, {"llm_query": spend})
    with pytest.raises(BudgetExceeded):
        sb.run("try:\n    llm_query('x')\nexcept Exception:\n    pass")


def test_startup_and_empty_cell_are_fast(process_sandbox):
    sb = process_sandbox
    sb.start({"context": "x"}, {})
    assert sb.startup_s < 1.0  # measured ~0.1 s; generous for a loaded CI machine
    t0 = time.monotonic()
    for _ in range(50):
        sb.run("")
    assert (time.monotonic() - t0) / 50 < 0.01


def test_close_removes_worker_and_working_dir():
    sb = ProcessSandbox()
    sb.start({"context": "x"}, {})
    pid, workdir = sb.pid, sb.workdir
    sb.close()
    sb.close()  # idempotent
    assert not os.path.exists(workdir)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(SandboxError):
        sb.run("1")


def test_each_protection_is_reported_as_on_or_off_with_a_note():
    sb = ProcessSandbox()
    sb.start({}, {})
    try:
        assert sb.protections and all(isinstance(v, bool) for v in sb.protections.values())
        assert set(sb.protections) == set(sb.protection_notes)
    finally:
        sb.close()


def test_a_cell_that_prints_returns_its_output_and_timing_and_no_error():
    sb = ProcessSandbox()
    sb.start({"n": 3}, {})
    try:
        result = sb.run("print(n * 14)")
    finally:
        sb.close()
    assert type(result) is CellResult
    assert (result.stdout, result.error, result.timed_out, result.finished) == ("42\n", None, False, False)
    assert result.duration_s > 0


@pytest.mark.parametrize(
    "value",
    [
        "plain ascii",
        "latin-1 café",
        "two-byte \u0101\u0102",
        "four-byte \U0001f600 and \ud800 lone surrogate",
        "",
        ["doc one", "doc two"] * 1000,
        {"a": ("x", 1.5, None), "nested": [{"k": b"bytes"}]},
    ],
)
def test_inputs_of_every_kind_cross_intact(process_sandbox, value):
    class Sub(str):
        pass

    sb = process_sandbox
    sb.start({"value": value, "sub": Sub("a str subclass takes the UTF-8 path é")}, {})
    assert sb.get("value") == value
    assert sb.get("sub") == "a str subclass takes the UTF-8 path é"
    assert (
        sb.run("print(type(value).__name__, len(value))").stdout == f"{type(value).__name__} {len(value)}\n"
    )


class HostOnly:
    """Picklable on the host, but its module cannot be imported inside the sandbox."""


def test_unsendable_inputs_are_context_errors(process_sandbox):
    with pytest.raises(ContextError, match="lambda"):
        process_sandbox.start({"f": lambda: 1}, {})
    with pytest.raises(ContextError, match="standard library"):
        process_sandbox.start({"obj": HostOnly()}, {})


def test_run_from_inside_a_host_function_is_refused(process_sandbox):
    sb = process_sandbox

    def reenter():
        return sb.run("1")

    sb.start({}, {"reenter": reenter})
    with pytest.raises(SandboxError, match="inside a host function"):
        sb.run("reenter()")


def test_unconfined_worker_still_works():
    sb = ProcessSandbox(SandboxLimits(cell_timeout=1.0), confine=False)
    sb.start({"context": "abc"}, {"llm_query": upper})
    try:
        assert sb.protections == {}
        assert sb.run("llm_query(context)").stdout == "'ABC'\n"
    finally:
        sb.close()


@given(limit=st.integers(2, 60), writes=st.lists(st.text(max_size=50), max_size=8))
def test_bounded_text_keeps_exact_head_and_tail(limit, writes):
    out = BoundedText(limit)
    for w in writes:
        out.write(w)
    full, half = "".join(writes), max(limit // 2, 1)
    if len(full) <= 2 * half:
        assert out.getvalue() == full
    else:
        marker = f"\n... [{len(full) - 2 * half} characters truncated] ...\n"
        assert out.getvalue() == full[:half] + marker + full[-half:]


def test_one_object_under_two_names_crosses_once(process_sandbox):
    big = "x" * 1_000_000
    process_sandbox.start({"context": big, "document": big}, {})
    assert process_sandbox.run("print(context is document, len(document))").stdout == "True 1000000\n"


def test_a_prelude_that_kills_the_worker_fails_start(process_sandbox):
    with pytest.raises(SandboxError, match="prelude failed"):
        process_sandbox.start({}, {}, prelude="import os\nos._exit(9)")
    with pytest.raises(SandboxError, match="prelude failed"):
        process_sandbox.start({}, {}, prelude="1/0")
