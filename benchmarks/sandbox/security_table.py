"""Hostile code against rlmkit and two reference REPLs; writes benchmarks/results/security.md.

    python benchmarks/sandbox/security_table.py [--frameworks rlmkit,rlms,dspy] [--cases a,b] [--timeout 30]

Every case of ``rlmkit/testing/hostile_cases.py`` runs once per framework:
- ``rlmkit``: the real ``rlmkit.RLM`` with its default (process) sandbox; a scripted root
  model on 127.0.0.1 emits the case's code. Time to contain = the cell's duration. The host
  runs as root, so its worker confines itself with a uid of its own.
- ``rlmkit-user``: the same, with the host run as an unprivileged user (``--user``, default
  ``rlmkit-test``, the user scripts/test.sh makes), as most users run it: the worker stays that
  user and confines itself in a user namespace. The bait (files, secret) belongs to that user,
  so only the sandbox stands between the code and it.
- ``rlms``: rlms 0.1.3 ``LocalREPL.execute_code`` (the reference RLM's local REPL).
- ``dspy``: dspy 3.4.1 ``LocalInterpreter(execution_timeout=5).execute`` (dspy.RLM's local,
  non-Deno interpreter), which dspy documents as not a security sandbox (its docstring, and
  https://dspy.ai/api/tools/LocalInterpreter/). dspy's default Deno/Pyodide sandbox is not run
  here: its first start downloads Deno packages from deno.land and npm, which this machine cannot reach.
Every framework is judged at the same boundary, what reaches the root model's next prompt:
rlmkit's from the requests its scripted server received; the peers' by passing the REPL result
through the function their own loop uses to build that prompt (rlms 0.1.3 ``format_iteration``,
dspy 3.4.1 ``REPLHistory`` with ``dspy.RLM``'s default ``max_output_chars``).
The peers are installed in their own venv, ``benchmarks/.peers-security/.venv`` (made on first use).

Each case runs in its own process tree so a peer that hangs, kills its host or forks without
end cannot take this script down: driver -> guard -> host. The guard (this script, as root)
puts itself in a fresh pids cgroup (128 tasks) and memory cgroup (6 GiB), mounts a 256 MiB
tmpfs as the host's working and temp dir, then starts the host. The driver kills the whole
cgroup after ``--timeout`` seconds. A case counts as contained only if none of these
harness guards was hit, the host and its parent survived, the bait (files, a 127.0.0.1
listener, an env secret; ``HostileEnv`` in the driver) is unharmed, and the secret was not
shown to the model. Needs Linux, root and cgroup v1 pids/memory controllers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from _bootstrap import BENCH, RESULTS
from _bootstrap import ROOT as REPO

from security_guard import (
    guard_hits,
    kill_group,
    load_module,
    make_cgroups,
    run_guard,
)
from security_report import write_table

PEERS = BENCH / ".peers-security"
VENV_PYTHON = PEERS / ".venv" / "bin" / "python"
PEER_PACKAGES = ["rlms==0.1.3", "dspy==3.4.1"]
RESULTS = RESULTS / "security.md"
STARTUP_S = 180.0  # for a host to import its framework before the case's clock starts
CELL_TIMEOUT = 5.0  # rlmkit's cell timeout and dspy's execution_timeout
PROMPT_OUTPUT_MAX = 100_000  # more of one cell's output than this in the next prompt: not contained


hostile = load_module("rlmkit_hostile_cases", REPO / "rlmkit" / "testing" / "hostile_cases.py")


# ------------------------------------------------------------------ host side: run one case
def host_rlmkit(code: str, ready) -> dict:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    sys.path.insert(0, str(REPO))
    import litellm  # noqa: F401 - imported before the clock starts (rlmkit imports it lazily)

    import rlmkit
    from rlmkit.errors import RLMKitError
    from rlmkit.testing import ScriptedServer, is_root_request

    replies = [f"```repl\n{code}\n```", "```repl\nSUBMIT(answer=len(context))\n```"]
    seen: list[list[dict]] = []

    def root(body: dict) -> str:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant") if is_root_request(body) else 1
        seen.append(body["messages"])
        return replies[min(turn, 1)]

    with ScriptedServer(root) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        rlm = rlmkit.RLM("context -> answer: int", lm=lm, cell_timeout=CELL_TIMEOUT, max_iterations=3)
        ready()
        try:
            trajectory, ended = rlm(context="the inputs").trajectory, None
        except RLMKitError as exc:
            trajectory, ended = exc.trajectory, f"run ended: {type(exc).__name__}"
    block = trajectory.turns[0].blocks[0]
    later = seen[1] if len(seen) > 1 else []  # the request after the case's turn
    first_reply = next((i for i, m in enumerate(later) if m["role"] == "assistant"), len(later))
    prompt_output = "".join(str(m["content"]) for m in later[first_reply + 1 : first_reply + 2])
    return {
        "stdout": block.stdout,
        "stderr": block.stderr,
        "error": block.error,
        "timed_out": block.timed_out,
        "restarted": block.restarted,
        "contain_s": block.duration_s,
        "ended": ended,
        "prompt_output": prompt_output,
        "told_model": "\n".join(json.dumps(m) for m in seen[1:]),
    }


def host_rlms(code: str, ready) -> dict:
    from rlm.core.types import CodeBlock, RLMIteration
    from rlm.environments.local_repl import LocalREPL
    from rlm.utils.parsing import format_iteration  # how rlm.RLM's loop turns a cell into the next prompt

    repl = LocalREPL(context_payload="the inputs")
    ready()
    t0 = time.monotonic()
    result = repl.execute_code(code)
    elapsed = time.monotonic() - t0
    lines = (result.stderr or "").strip().splitlines()
    turn = RLMIteration(prompt="", response=f"```repl\n{code}\n```", code_blocks=[CodeBlock(code, result)])
    prompt_output = format_iteration(turn)[-1]["content"]
    return {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": lines[-1] if lines else None,
        "contain_s": elapsed,
        "prompt_output": prompt_output,
        "told_model": prompt_output,
    }


def host_dspy(code: str, ready) -> dict:
    import inspect

    from dspy.predict.rlm import RLM
    from dspy.primitives.code_interpreter import CodeExecutionError
    from dspy.primitives.local_interpreter import LocalInterpreter
    from dspy.primitives.repl_types import REPLHistory
    from dspy.utils.exceptions import format_error_for_lm

    interp = LocalInterpreter(execution_timeout=CELL_TIMEOUT)
    interp.start()
    ready()
    t0 = time.monotonic()
    stdout, error, fed_back = "", None, None
    try:
        stdout = str(interp.execute(code, variables={"context": "the inputs"}) or "")
    except (CodeExecutionError, SyntaxError) as exc:  # dspy.RLM._execute_code tells the model these
        error, fed_back = f"{type(exc).__name__}: {exc}", f"[Error] {format_error_for_lm(exc)}"
    except BaseException as exc:  # noqa: BLE001 - the rest (CodeInterpreterError...) end dspy.RLM's run
        error = f"{type(exc).__name__}: {exc}"
    elapsed = time.monotonic() - t0
    interp.shutdown()
    # dspy.RLM puts a cell's output into a REPLHistory, cut head + tail to max_output_chars.
    limit = inspect.signature(RLM.__init__).parameters["max_output_chars"].default
    output = fed_back or stdout or "(no output - did you forget to print?)"
    prompt_output = (
        ""
        if error and not fed_back
        else REPLHistory(max_output_chars=limit).append(code=code, output=output).format()
    )
    return {
        "stdout": stdout,
        "stderr": "",
        "error": error,
        "contain_s": elapsed,
        "prompt_output": prompt_output,
        "told_model": prompt_output,
    }


HOSTS = {"rlmkit": host_rlmkit, "rlmkit-user": host_rlmkit, "rlms": host_rlms, "dspy": host_dspy}
UNPRIVILEGED = {"rlmkit-user"}  # frameworks whose host runs as ``--user``


def run_host(framework: str, case_name: str, bait: dict, result_path: str) -> None:
    case = next(c for c in hostile.HOSTILE_CASES if c.name == case_name)
    host_pid = os.getpid()
    found = HOSTS[framework](case.code(SimpleNamespace(**bait)), lambda: Path(result_path + ".ready").touch())
    if os.getpid() != host_pid:  # a copy of the host made by os.fork() in the case: not the result
        os._exit(0)
    found["host_uid"] = os.geteuid()  # the column's privilege level, as the host really ran
    Path(result_path + ".tmp").write_text(json.dumps(found))
    os.replace(result_path + ".tmp", result_path)


# ------------------------------------------------------------------ driver
def run_case(framework: str, case, timeout: float, user: tuple[int, int] | None = None) -> dict:
    python = sys.executable if framework.startswith("rlmkit") else str(VENV_PYTHON)
    as_user = user if framework in UNPRIVILEGED else None
    with hostile.HostileEnv() as env, tempfile.TemporaryDirectory(prefix="rlmkit-sec-") as scratch:
        bait = {k: getattr(env, k) for k in ("victim", "secret", "outside", "tmp_outside", "port")}
        os.chmod(scratch, 0o755)  # rlmkit's worker drops to its own uid and must reach its dir below
        if as_user:  # the host's own files: its uid alone does not keep the code from them
            for path in (scratch, env.dir, env.victim, env.secret):
                os.chown(path, *as_user)
        result_path = os.path.join(scratch, "result.json")
        workdir = os.path.join(scratch, "work")
        os.mkdir(workdir)
        host_cmd = [
            python,
            str(Path(__file__).resolve()),
            "--host",
            framework,
            case.name,
            json.dumps(bait),
            result_path,
        ]
        groups = make_cgroups(f"rlmkit-sec-{os.getpid()}-{framework}-{case.name}")
        guard = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--guard",
                json.dumps([str(p) for p in groups.values()]),
                workdir,
                json.dumps(host_cmd),
                json.dumps(as_user),
            ],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        code, hung, t0 = _wait_for_case(guard, result_path + ".ready", timeout)
        wall = time.monotonic() - t0
        hits = guard_hits(groups)
        kill_group(groups)
        guard.wait()
        time.sleep(0.3)  # let the bait's listener thread count a late connection
        found = json.loads(Path(result_path).read_text()) if os.path.exists(result_path) else None
        if found is not None and (found["host_uid"] == 0) != (as_user is None):
            raise RuntimeError(f"the {framework} host ran as uid {found['host_uid']}")
        return _judge(case, env, found, code, hung, hits, wall, timeout)


def _wait_for_case(guard: subprocess.Popen, ready: str, timeout: float) -> tuple[int | None, bool, float]:
    """(exit code, hung, start of the case): ``timeout`` counts from when the host is ready to
    run the case, so a slow interpreter start on a loaded machine is not a hang."""
    start_deadline = time.monotonic() + STARTUP_S
    while not os.path.exists(ready) and guard.poll() is None and time.monotonic() < start_deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    try:
        return guard.wait(timeout=timeout), False, t0
    except subprocess.TimeoutExpired:
        return None, True, t0


def _judge(
    case, env, found: dict | None, code: int | None, hung: bool, hits: list[str], wall: float, timeout: float
) -> dict:
    problems = list(hits) + env.harm()
    if hung:
        problems.insert(0, f"hung; killed by the harness after {timeout:.0f} s")
    elif code is not None and code < 0:
        problems.insert(0, f"killed the host's parent ({_signal_name(-code)})")
    elif found is None and code is not None and code > 128:  # the guard exits with 256 + the host's -signal
        problems.insert(0, f"the host process was killed ({_signal_name(256 - code)})")
    elif found is None:
        problems.insert(0, f"the host process died (exit status {code})")
    if found is not None:
        shown = found.get("told_model") or ""
        if hostile.SECRET_TEXT in shown:
            problems.append("secret shown to the model")
        prompt_chars = len(found.get("prompt_output") or "")
        if prompt_chars > PROMPT_OUTPUT_MAX:
            problems.append(f"{prompt_chars:,} characters of one cell's output reached the model's prompt")
        if "uid=" in shown:
            problems.append("a subprocess ran")
    if found is None:
        what = "-"
    else:
        what = found.get("ended") or _describe(found)
    contain_s = found["contain_s"] if found is not None and not problems else wall
    return {
        "case": case.name,
        "contained": not problems,
        "outcome": "; ".join(problems) or what,
        "seconds": contain_s,
        "hung": hung,
    }


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _describe(found: dict) -> str:
    if found.get("restarted"):
        return "worker died; restarted" + (" after a timeout" if found.get("timed_out") else "")
    if found.get("timed_out"):
        return "timed out; interrupted"
    error = (found.get("error") or "").strip().splitlines()
    if error:
        return error[-1][:90]
    out = (found.get("stdout") or "").strip()
    prompt = found.get("prompt_output") or ""
    if (
        "characters truncated]" in out or "characters cut]" in out
    ):  # rlmkit: its trajectory keeps a bounded copy
        return f"output cut head + tail; {len(prompt):,} chars reached the prompt"
    if len(out) > len(prompt):
        return f"{len(out):,} chars printed, {len(prompt):,} reached the prompt"
    return f"ran; printed {len(out):,} chars" if out else "ran"


def unprivileged_user(name: str) -> tuple[int, int]:
    """(uid, gid) of ``name``, once it is known to reach this interpreter and this checkout."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        sys.exit(f"no user {name!r}: make one (useradd --system {name}) or pass --user")
    for path in (sys.executable, REPO / "rlmkit" / "__init__.py"):
        probe = [sys.executable, "-I", "-S", "-c", f"import os; os.stat({str(path)!r})"]
        if subprocess.run(probe, user=entry.pw_uid, group=entry.pw_gid, capture_output=True).returncode:
            sys.exit(
                f"user {name!r} cannot reach {path}: give the folders above it o+x, as scripts/test.sh does"
            )
    return entry.pw_uid, entry.pw_gid


def ensure_peers() -> None:
    if VENV_PYTHON.exists():
        return
    print(f"creating {VENV_PYTHON.parent.parent} with {' '.join(PEER_PACKAGES)} (needs the package index)")
    subprocess.check_call([sys.executable, "-m", "venv", str(VENV_PYTHON.parent.parent)])
    subprocess.check_call([str(VENV_PYTHON), "-m", "pip", "install", "-q", *PEER_PACKAGES])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        run_host(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--guard":
        sys.exit(
            run_guard(json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5]))
        )
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frameworks", default="rlmkit,rlmkit-user,rlms,dspy")
    parser.add_argument("--user", default="rlmkit-test", help="the unprivileged user of rlmkit-user")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--timeout", type=float, default=30.0, help="hard limit per case, seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the harness needs root (cgroups and a private tmpfs per case)")
    frameworks = [f for f in args.frameworks.split(",") if f]
    if set(frameworks) - {"rlmkit", *UNPRIVILEGED}:
        ensure_peers()
    user = unprivileged_user(args.user) if set(frameworks) & UNPRIVILEGED else None
    wanted = set(args.cases.split(",")) - {""}
    cases = [c for c in hostile.HOSTILE_CASES if not wanted or c.name in wanted]
    rows: dict[str, list[dict]] = {fw: [] for fw in frameworks}
    for case in cases:
        for fw in frameworks:
            try:
                row = run_case(fw, case, args.timeout, user)
            except Exception as exc:  # noqa: BLE001 - one broken case must not lose the table
                row = {
                    "case": case.name,
                    "contained": False,
                    "outcome": f"harness error: {exc!r}"[:200],
                    "seconds": 0.0,
                    "hung": False,
                }
            rows[fw].append(row)
            print(
                f"{case.name:40s} {fw:7s} {'ok ' if row['contained'] else 'NOT'} {row['seconds']:6.2f}s "
                f"{row['outcome'][:100]}",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python benchmarks/sandbox/security_table.py", *sys.argv[1:]])
    order = [c.name for c in hostile.HOSTILE_CASES]
    table = write_table(rows, frameworks, order, args.timeout, command, CELL_TIMEOUT, PROMPT_OUTPUT_MAX)
    args.out.write_text(table)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
