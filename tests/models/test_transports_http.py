"""The OpenAI-compatible HTTP/1.1 transport on the wire: one-connection lanes lent one request
at a time, the request written in one go, responses read whole (lengths, chunks, closes), stale
keep-alive connections replaced without a failed request."""

from __future__ import annotations

import threading

import rlmkit


def test_lanes_are_made_on_demand_reused_and_capped():
    import asyncio

    from rlmkit.models.transports.openai import shared_client

    async def scenario():
        lanes = shared_client("http://127.0.0.1:9/v1", 2)
        first, second = await lanes.take(), await lanes.take()
        assert first is not second and lanes.made == 2 and first.conn is None  # connected on first use
        third = asyncio.ensure_future(lanes.take())
        await asyncio.sleep(0)
        assert not third.done()  # capped at the pool size: it waits for a lane
        lanes.give(first)
        assert await third is first and lanes.made == 2  # reused, not a new lane

    asyncio.run(scenario())


class _Writer:
    """A stand-in for a connection's StreamWriter that records each write."""

    def __init__(self):
        self.writes, self.closed = [], False

    def write(self, data):
        self.writes.append(data)

    def is_closing(self):
        return self.closed

    def close(self):
        self.closed = True


def _exchange(reply: bytes, used: int = 0):
    """One POST through ``http11.post`` against ``reply`` as the server's bytes."""
    import asyncio

    from rlmkit.models.transports import http11

    async def scenario():
        reader = asyncio.StreamReader()
        reader.feed_data(reply)
        reader.feed_eof()
        conn = http11.Connection(reader, _Writer(), used=used)
        origin = http11.Origin.of("http://127.0.0.1:8080/v1")
        response = await http11.post(conn, origin, "/v1/chat/completions", {"X-A": "1"}, b'{"a": 1}')
        return response, conn

    return asyncio.run(scenario())


def test_a_request_goes_out_in_one_write_and_its_response_is_read_whole():
    response, conn = _exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nRetry-After: 3\r\n\r\nhi")
    assert conn.writer.writes == [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 8\r\n"
        b'X-A: 1\r\n\r\n{"a": 1}'
    ]
    assert (response.status, response.reason, response.body) == (200, "OK", b"hi")
    assert response.headers["retry-after"] == "3" and not conn.writer.closed and conn.used == 1


def test_a_chunked_response_is_joined_and_connection_close_is_honoured():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    chunked += b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
    response, conn = _exchange(chunked)
    assert response.body == b"abcde" and conn.writer.closed
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
    response, conn = _exchange(interim)
    assert (response.status, response.body) == (204, b"")
    response, conn = _exchange(b"HTTP/1.1 200 OK\r\n\r\nto the end")  # no length: read to the close
    assert response.body == b"to the end" and conn.writer.closed
    response, conn = _exchange(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")  # 1.0: closes
    assert response.body == b"ok" and conn.writer.closed
    response, conn = _exchange(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
    assert response.body == b"" and not conn.writer.closed


def test_a_reused_connection_closed_before_any_reply_is_stale_and_garbage_is_a_protocol_error():
    import asyncio

    import pytest

    from rlmkit.models.transports import http11

    with pytest.raises(http11.StaleConnection):
        _exchange(b"", used=3)  # the server had closed it while idle
    with pytest.raises(asyncio.IncompleteReadError):
        _exchange(b"", used=0)  # a new connection that closes at once is the server's fault
    with pytest.raises(asyncio.IncompleteReadError):
        _exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", used=3)  # cut mid-body
    with pytest.raises(http11.ProtocolError):
        _exchange(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_a_lane_whose_connection_was_closed_is_replaced_when_next_taken():
    import asyncio

    from rlmkit.models.transports.openai import shared_client
    from rlmkit.testing import ScriptedServer

    with ScriptedServer(lambda body: "ok") as server:

        async def scenario():
            lm = rlmkit.LM(
                "openai/scripted", api_base=server.url, api_key="test-key", cache=False, max_concurrency=1
            )
            assert (await lm.acomplete([{"role": "user", "content": "a"}])).text == "ok"
            lanes = shared_client(server.url, 1)
            lane = await lanes.take()
            first = lane.conn
            first.close()  # as when the server drops an idle keep-alive connection
            lanes.give(lane)
            assert (await lm.acomplete([{"role": "user", "content": "b"}])).text == "ok"
            again = await lanes.take()
            assert again is lane and lane.conn is not first and lane.conn.used == 1 and lanes.made == 1
            lane.drop()

        asyncio.run(scenario())


def test_sixteen_requests_at_once_reuse_sixteen_connections():
    import asyncio

    from rlmkit.models.transports.openai import shared_client
    from rlmkit.testing import ScriptedServer

    all_in = threading.Barrier(16)  # a reply only once 16 requests are in flight together

    def hold(body):
        all_in.wait(timeout=60)
        return "ok"

    with ScriptedServer(hold) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="t", cache=False, max_concurrency=16)

        async def burst():
            for _ in range(2):
                replies = await asyncio.gather(
                    *(lm.acomplete([{"role": "user", "content": str(i)}]) for i in range(16))
                )
                assert [r.text for r in replies] == ["ok"] * 16
            return shared_client(server.url, 16).made

        assert asyncio.run(burst()) == 16  # 16 connections, kept for the second burst


def test_a_server_that_closes_each_connection_after_its_reply_costs_no_failed_request():
    """Servers close idle keep-alive connections (uvicorn after 5 s), often without saying so: the
    next request on that lane must go out on a new connection, not fail (no retries allowed here)."""
    import asyncio
    import json

    from rlmkit.models.transports.openai import shared_client

    async def scenario():
        served = []

        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            body = json.loads(await reader.readexactly(length))
            served.append(body["messages"][0]["content"])
            reply = json.dumps(
                {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
            ).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
            await writer.drain()
            writer.close()  # no "Connection: close": the client learns it only from the socket

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        lm = rlmkit.LM(
            "openai/x", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", cache=False, num_retries=0
        )
        for i in range(3):
            assert (await lm.acomplete([{"role": "user", "content": str(i)}])).text == "ok"
            if i == 1:  # wait until the client has seen the close: the next take drops that connection
                lanes = shared_client(f"http://127.0.0.1:{port}/v1", 16)
                lane = await lanes.take()
                assert await asyncio.wait_for(lane.conn.reader.read(1), timeout=30) == b""  # its FIN
                lanes.give(lane)
        server.close()
        await server.wait_closed()
        return served

    assert asyncio.run(scenario()) == ["0", "1", "2"]
