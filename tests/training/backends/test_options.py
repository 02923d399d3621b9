"""Each training backend reads a job's ``[options]`` through its own typed options class: a key
it does not know fails before any data is read, naming the keys it does; values are type-checked;
shared helpers read their part of the table."""

from __future__ import annotations

import dataclasses

import pytest

from optimizers.backends.base import BACKENDS, TrainJob, get_backend
from optimizers.backends.options import RolloutOptions, TRLOptions
from optimizers.backends.prime_rl import PrimeRLOptions
from optimizers.backends.testing import write_dataset
from optimizers.backends.trl_sft import TRLSFTOptions
from optimizers.compile.schema import ChatMessage, SFTRow
from rlmkit.errors import ConfigError

USER = ChatMessage(role="user", content="q")
REPLY = ChatMessage(role="assistant", content="a")


def sft_job(tmp_path, **options) -> TrainJob:
    row = SFTRow(id="s", task_id="t", prompt=[USER], completion=[REPLY], messages=[USER, REPLY])
    data = write_dataset(tmp_path / "d", {"train": [row]})
    return TrainJob(kind="sft", dataset=data, base_model="m", output_dir=tmp_path / "o", options=options)


def test_an_unknown_option_fails_before_the_data_is_read_and_names_the_valid_ones(tmp_path):
    job = sft_job(tmp_path, fromat="messages")
    with pytest.raises(ConfigError, match="no option fromat") as info:
        get_backend("openai-jsonl").validate(job)
    assert "its options: none" in str(info.value)
    with pytest.raises(ConfigError, match=r"'prime-rl' has no option fromat .*env_id.*num_train_gpus"):
        get_backend("prime-rl").options(job)


@pytest.mark.parametrize(
    ("cls", "raw", "message"),
    [
        (TRLSFTOptions, {"format": "chat"}, "options.format must be 'prompt_completion' or 'messages'"),
        (PrimeRLOptions, {"num_train_gpus": "2"}, "options.num_train_gpus must be int"),
        (PrimeRLOptions, {"num_infer_gpus": 0}, "num_infer_gpus must be >= 1"),
        (PrimeRLOptions, {"env_id": "My Env"}, "lowercase letters"),
        (RolloutOptions, {"max_depth": True}, "options.max_depth must be int"),
    ],
)
def test_option_values_are_checked(cls, raw, message):
    with pytest.raises(ConfigError, match=message):
        cls.parse("b", raw)


def test_a_shared_helper_reads_its_part_and_an_export_writes_what_differs_from_the_defaults():
    raw = {"gguf_file": "s.gguf", "trainer": {"temperature": 1.0}, "inputs_fn": "m:f", "cell_timeout": 5}
    assert TRLOptions.part(raw) == TRLOptions(gguf_file="s.gguf", trainer={"temperature": 1.0})
    assert RolloutOptions.part(raw).explicit() == {"inputs_fn": "m:f", "cell_timeout": 5}


def test_every_option_of_every_backend_has_a_default_and_help():
    for name in BACKENDS:
        fields = dataclasses.fields(get_backend(name).options_type)
        assert all(f.metadata.get("help") for f in fields), name
        get_backend(name).options_type()  # every field has a default
