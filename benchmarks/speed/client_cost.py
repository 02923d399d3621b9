"""What an LM call costs the client, per client: one script, the measurements run.py reports and
the HTTP transport's own figures.

    python benchmarks/speed/client_cost.py http       # CPU per request, and 16 at once, per HTTP client
    python benchmarks/speed/client_cost.py per-call   # (7): ms per call of each LM client
    python benchmarks/speed/run.py                    # (7) and, with --local, (6), in results.json

``http`` (printed, not saved; the figures ``rlmkit/models/transports/http11.py`` and
``openai.py`` cite): the client's own CPU per request, and a burst of 16 requests to a server
answering in 200 ms. Clients: ``rlmkit.LM.acomplete`` (its openai transport: keep-alive lanes over
asyncio streams, one write per request), one ``httpx.AsyncClient`` pool, httpcore alone, aiohttp
(installed with litellm), and raw asyncio sockets (a floor: a prebuilt request, no parsing beyond
Content-Length). The scripted servers run in subprocesses, so the numbers are this process's work
only. Run it under ``nice -n 19`` on a shared machine.

``per-call`` (run.py's table (7), saved in ``benchmarks/results/results.json`` when run.py runs
it): each client (raw httpx, the openai client, dspy.LM, litellm, rlmkit.LM) sends tiny chat
requests to an instant scripted server in interleaved rounds (``peers/clients_driver.py``, a
process of its own). ``embedded_model``: run.py's table (6), ``local_throughput.py`` in a
subprocess with a time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from _bootstrap import BENCH, ROOT

if TYPE_CHECKING:
    from harness import RecordingServer

BODY = json.dumps({"model": "x", "messages": [{"role": "user", "content": "q"}]})
HEADERS = {"Content-Type": "application/json"}
SERVER = (
    "import sys, time\nfrom rlmkit.testing import ScriptedServer\n"
    "with ScriptedServer(lambda body: 'ok', latency=float(sys.argv[1])) as s:\n"
    "    print(s.url, flush=True)\n    time.sleep(3600)\n"
)


# ------------------------------------------------------------------ run.py's tables (7) and (6)
def client_cost(server: RecordingServer, calls: int, rounds: int) -> dict[str, Any]:
    server.configure(lambda kind, body: "hello")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "peers" / "clients_driver.py"), server.url, str(calls), str(rounds)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCH,
        check=False,
    )
    hits = server.take_hits()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT ")]
    if not lines:
        return {"error": f"clients driver failed: {proc.stderr[-1500:]}"}
    per_round = json.loads(lines[-1][len("@@RESULT ") :])
    server_ms = statistics.median((h.end - h.start) * 1000 for h in hits) if hits else None
    return {
        "calls": calls,
        "rounds": rounds,
        "server_ms_per_call": server_ms,
        "ms_per_call": {name: statistics.median(values) for name, values in per_round.items()},
        "per_round": per_round,
    }


def embedded_model(rounds: int, max_tokens: int, timeout_s: float) -> dict[str, Any]:
    """``local_throughput.py`` in a subprocess with a time limit: the machine's running model server
    (never a second one started), the same prompts raw and through rlmkit.LM, interleaved,
    ``rounds`` times each (one request's speed varies by about 10% on this VM's 2 cores)."""
    out = BENCH / "out" / "local_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(BENCH / "speed" / "local_throughput.py"),
        "--max-tokens",
        str(max_tokens),
        "--rounds",
        str(rounds),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=BENCH)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # only the script: the server is the machine's, shared, and stays up
        proc.communicate()
        return {"error": f"did not finish within {timeout_s:.0f} s on this machine; not measured"}
    if not out.exists():
        lines = (stdout + stderr).strip().splitlines() or ["no output"]
        return {"error": f"not measured: {lines[-1][:300]}"}
    found = json.loads(out.read_text())
    return {
        "prompts": len({row["prompt"] for row in found["rows"]}),
        "rounds": rounds,
        "max_tokens": found["max_tokens"],
        "load_average": found["load_average"],
        "rows": [  # rlmkit first, the raw runtime last: what verdicts.py compares
            {"path": "rlmkit.LM", "decode_tok_s": None, "wall_tok_s": found["tok_s"]["rlmkit"]},
            {"path": "raw httpx to llama.cpp", "decode_tok_s": None, "wall_tok_s": found["tok_s"]["raw"]},
        ],
    }


# ------------------------------------------------------------------ the HTTP clients' own cost
def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency)], stdout=subprocess.PIPE, text=True, env=env
    )
    return proc, proc.stdout.readline().strip()


def clients(url: str):
    import aiohttp
    import httpcore
    import httpx

    import rlmkit

    lm = rlmkit.LM("openai/x", api_base=url, api_key="k", cache=False, max_concurrency=16)
    pool = httpx.AsyncClient(base_url=url, verify=False, limits=httpx.Limits(max_connections=16))
    core = httpcore.AsyncConnectionPool(max_connections=16)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16))
    u = urlparse(url)
    raw = f"POST {u.path}/chat/completions HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
    raw = (raw + f"Content-Length: {len(BODY)}\r\n\r\n{BODY}").encode()
    sockets: asyncio.Queue = asyncio.Queue()
    opened = []

    async def rlmkit_call():
        await lm.acomplete([{"role": "user", "content": "q"}])

    async def httpx_call():
        (await pool.post("/chat/completions", content=BODY, headers=HEADERS)).json()

    async def httpcore_call():
        response = await core.request(
            "POST", url + "/chat/completions", headers=HEADERS, content=BODY.encode()
        )
        json.loads(response.content)

    async def aiohttp_call():
        async with session.post(url + "/chat/completions", data=BODY, headers=HEADERS) as response:
            json.loads(await response.read())

    async def socket_call():
        if sockets.empty() and len(opened) < 16:
            opened.append(await asyncio.open_connection(u.hostname, u.port))
            sockets.put_nowait(opened[-1])
        reader, writer = await sockets.get()
        writer.write(raw)
        await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length"):
                length = int(line.split(b":")[1])
        json.loads(await reader.readexactly(length))
        sockets.put_nowait((reader, writer))

    calls = {
        "rlmkit.LM.acomplete": rlmkit_call,
        "httpx.AsyncClient (one pool)": httpx_call,
        "httpcore pool": httpcore_call,
        "aiohttp": aiohttp_call,
        "raw asyncio sockets": socket_call,
    }

    async def close():
        await pool.aclose()
        await core.aclose()
        await session.close()
        for _, writer in opened:
            writer.close()

    return calls, close


async def cpu_per_request(url: str, n: int = 300) -> dict[str, float]:
    calls, close = clients(url)
    out = {}
    for name, call in calls.items():
        for _ in range(20):
            await call()
        start = time.process_time()
        for _ in range(n):
            await call()
        out[name] = (time.process_time() - start) / n * 1000
    await close()
    return out


async def burst(url: str, n: int = 16, rounds: int = 4) -> dict[str, list[float]]:
    calls, close = clients(url)
    out = {}
    for name, call in calls.items():
        await asyncio.gather(*(call() for _ in range(n)))  # connections opened, not timed
        walls = []
        for _ in range(rounds):
            start = time.perf_counter()
            await asyncio.gather(*(call() for _ in range(n)))
            walls.append((time.perf_counter() - start) * 1000)
        out[name] = walls
    await close()
    return out


# ------------------------------------------------------------------ the command line
def http_main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}")
    instant, instant_url = start_server(0.0)
    slow, slow_url = start_server(0.2)
    try:
        for name, ms in asyncio.run(cpu_per_request(instant_url)).items():
            print(f"CPU per request, sequential: {name:30s} {ms:.3f} ms")
        for name, walls in asyncio.run(burst(slow_url)).items():
            print(f"16 at once, 200 ms server:   {name:30s} {', '.join(f'{w:.0f}' for w in walls)} ms")
    finally:
        instant.kill()
        slow.kill()
    print(f"load average {os.getloadavg()[0]:.2f}")


def per_call_main(calls: int, rounds: int) -> None:
    from harness import RecordingServer  # needs psutil (the bench extra); the http mode does not

    with RecordingServer() as server:
        found = client_cost(server, calls, rounds)
    if "error" in found:
        raise SystemExit(found["error"])
    print(f"server ms/call (median): {found['server_ms_per_call']:.3f}")
    for name, ms in found["ms_per_call"].items():
        print(f"{name:24s} {ms:.3f} ms/call (median of {rounds} rounds of {calls})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=("http", "per-call"), default="http")
    parser.add_argument("--calls", type=int, default=100, help="per-call: calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="per-call: interleaved rounds")
    args = parser.parse_args(argv)
    if args.mode == "http":
        http_main()
    else:
        per_call_main(args.calls, args.rounds)


if __name__ == "__main__":
    main()
