"""Where per-turn and fan-out time goes on the HTTP path: the client's own CPU per request, and a
burst of 16 requests to a server answering in 200 ms, per HTTP client.

    nice -n 19 python benchmarks/http_clients.py

Clients: ``rlmkit.LM.acomplete`` (its openai transport: keep-alive lanes over asyncio streams,
one write per request, ``rlmkit/models/transports/http11.py``), one ``httpx.AsyncClient`` pool,
httpcore alone, aiohttp (installed with litellm), and raw asyncio sockets (a floor: a prebuilt
request, no parsing beyond Content-Length). The scripted servers run in subprocesses, so the
numbers are this process's work only.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BODY = json.dumps({"model": "x", "messages": [{"role": "user", "content": "q"}]})
HEADERS = {"Content-Type": "application/json"}
SERVER = (
    "import sys, time\nfrom rlmkit.testing import ScriptedServer\n"
    "with ScriptedServer(lambda body: 'ok', latency=float(sys.argv[1])) as s:\n"
    "    print(s.url, flush=True)\n    time.sleep(3600)\n"
)


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


def main() -> None:
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


if __name__ == "__main__":
    main()
