"""What operators read: /health/live and /health/ready while the program loads, the key on every
route but health, and /metrics in Prometheus' text format, scraped under concurrent load."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rlmkit.serve import app, running
from tests.helpers.serve_programs import ROOT, SERVE, qa_rlm, served
from tests.helpers.waiting import wait_for

KEY = "operations-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT = "/v1/chat/completions"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(base: str) -> dict:
    response = httpx.get(f"{base}/metrics", headers=AUTH, timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def test_ready_is_503_while_the_program_loads_then_200_and_live_is_200_throughout():
    release = threading.Event()

    def slow_load():
        release.wait(60)
        return qa_rlm()

    with running(app(load=slow_load, api_key=KEY)) as base:
        try:
            assert httpx.get(f"{base}/health/live").status_code == 200
            loading = httpx.get(f"{base}/health/ready")
            assert loading.status_code == 503 and loading.json() == {"status": "loading"}
            call = httpx.post(
                f"{base}{CHAT}",
                json={"model": "rlmkit", "messages": [{"role": "user", "content": "q"}]},
                headers=AUTH,
            )
            assert call.status_code == 503 and call.json()["error"]["code"] == "loading"
            assert call.headers["retry-after"] == "5"
            assert value(scrape(base), "rlmkit_ready") == 0
        finally:
            release.set()
        wait_for(lambda: httpx.get(f"{base}/health/ready").status_code == 200, "the program loaded")
        assert httpx.get(f"{base}/health/live").status_code == 200
        reply = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="rlmkit", messages=[{"role": "user", "content": "loaded"}]
        )
        assert reply.choices[0].message.content == "LOADED (0 chars)"
        assert value(scrape(base), "rlmkit_ready") == 1


def test_a_program_that_fails_to_load_stops_rlmkit_serve_with_the_reason():
    result = subprocess.run(
        [*SERVE, "nowhere_such_module:program", "--port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "error: cannot import 'nowhere_such_module:program'" in result.stderr


def test_the_key_is_checked_on_every_route_but_health():
    with served(qa_rlm(), api_key=KEY) as url:
        base = url.removesuffix("/v1")
        for path in ("/health", "/health/live", "/health/ready"):
            assert httpx.get(f"{base}{path}").status_code == 200, path
        for path in ("/metrics", "/v1/models", "/v1/sessions/" + "0" * 32):
            refused = httpx.get(f"{base}{path}")
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key", path
        assert httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{base}/metrics", headers=AUTH).status_code == 200


def test_metrics_scraped_under_concurrent_load_add_up_and_hold_no_prompt_text():
    secret = "secret-question-text"
    plain, streamed, unknown_model = 8, 4, 3
    with served(qa_rlm(), api_key=KEY) as url:
        base = url.removesuffix("/v1")
        scrapes: list[dict] = []
        done = threading.Event()

        def scraping() -> None:  # Prometheus scraping while the calls run
            while not done.is_set():
                scrapes.append(scrape(base))

        async def load():
            async with openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0) as client:

                async def ask(i: int):
                    return await client.chat.completions.create(
                        model="rlmkit", messages=[{"role": "user", "content": f"{secret} {i}"}]
                    )

                async def stream(i: int):
                    chunks = await client.chat.completions.create(
                        model="rlmkit",
                        messages=[{"role": "user", "content": f"{secret} s{i}"}],
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                    return [c async for c in chunks][-1]

                async def wrong_model(i: int):
                    with pytest.raises(openai.NotFoundError):
                        await client.chat.completions.create(
                            model="other", messages=[{"role": "user", "content": secret}]
                        )

                return await asyncio.gather(
                    *(ask(i) for i in range(plain)),
                    *(stream(i) for i in range(streamed)),
                    *(wrong_model(i) for i in range(unknown_model)),
                )

        scraper = threading.Thread(target=scraping)
        scraper.start()
        try:
            replies = asyncio.run(load())[: plain + streamed]
        finally:
            done.set()
            scraper.join(30)
        total = plain + streamed + unknown_model
        # each request is counted when its last byte has gone: wait for the last of them
        wait_for(lambda: value(scrape(base), "rlmkit_request_duration_seconds_count", route=CHAT) == total)
        text = httpx.get(f"{base}/metrics", headers=AUTH).text
        final = samples(text)

    ok = value(final, "rlmkit_requests_total", route=CHAT, method="POST", status="200")
    missing = value(final, "rlmkit_requests_total", route=CHAT, method="POST", status="404")
    assert (ok, missing) == (plain + streamed, unknown_model)
    usage = [reply.usage for reply in replies]
    assert value(final, "rlmkit_tokens_total", kind="prompt") == sum(u.prompt_tokens for u in usage)
    assert value(final, "rlmkit_tokens_total", kind="completion") == sum(u.completion_tokens for u in usage)
    assert (
        value(final, "rlmkit_model_calls_total") == sum(u.rlm_calls for u in usage) == 2 * (plain + streamed)
    )
    assert value(final, "rlmkit_cost_dollars_total") == 0.0  # a scripted model has no price
    assert value(final, "rlmkit_calls_running") == value(final, "rlmkit_calls_waiting") == 0
    assert value(final, "rlmkit_sessions_live") == 0
    assert {"idle", "starting", "taken"} <= {
        dict(labels)["state"] for name, labels in final if name == "rlmkit_sandbox_workers"
    }
    # scrapes during the load parsed, and their counts never went down
    assert scrapes
    counts = [value(s, "rlmkit_request_duration_seconds_count", route=CHAT) for s in scrapes]
    assert counts == sorted(counts)
    assert secret not in text and secret.upper() not in text
