"""``POST /v1/responses/compact`` keeps the REPL and continues it; image parts reach a text-only
program as a note in the metadata, not a failure."""

from __future__ import annotations

import httpx

from tests.helpers.serve_programs import counting_rlm, served

IMAGE = "data:image/png;base64,iVBORw0KGgo="


def test_a_compacted_response_continues_the_same_repl():
    with served(counting_rlm()) as url:
        first = httpx.post(f"{url}/responses", json={"model": "rlmkit", "input": "one"}).json()
        compacted = httpx.post(
            f"{url}/responses/compact", json={"model": "rlmkit", "previous_response_id": first["id"]}
        )
        assert compacted.status_code == 200, compacted.text
        body = compacted.json()
        assert body["object"] == "response.compaction" and body["output"][0]["type"] == "compaction"
        item = body["output"][0]
        follow = httpx.post(
            f"{url}/responses",
            json={"model": "rlmkit", "input": [item, {"role": "user", "content": "two"}]},
        ).json()
        assert follow["output"][-1]["content"][0]["text"].startswith("two: call 2")  # the REPL's count
        missing = httpx.post(f"{url}/responses/compact", json={"input": "x"})
        assert missing.status_code == 400


def test_a_text_only_program_answers_an_image_request_and_says_it_did_not_read_the_image():
    with served(counting_rlm()) as url:
        content = [{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": IMAGE}]
        response = httpx.post(
            f"{url}/responses", json={"model": "rlmkit", "input": [{"role": "user", "content": content}]}
        ).json()
        assert response["status"] == "completed" and "rlmkit_images" in response["metadata"]
        chat = httpx.post(
            f"{url}/chat/completions",
            json={"model": "rlmkit", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": IMAGE}}]}]},
        ).json()  # fmt: skip
        assert (
            chat["choices"][0]["message"]["content"].startswith("look")
            and "rlmkit_images" in chat["metadata"]
        )
