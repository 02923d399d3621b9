"""``rlmkit.loading.load``: the one way code named in data ("package.module:attribute") is found."""

from __future__ import annotations

import pytest

from rlmkit.errors import ConfigError, UserError
from rlmkit.loading import load


def test_load_finds_a_module_attribute_and_a_dotted_one():
    assert load("rlmkit.errors:UserError") is UserError
    assert load("rlmkit.errors:UserError.__init__") is UserError.__init__


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rlmkit.errors", "must look like 'package.module:function'"),
        (":UserError", "must look like"),
        ("rlmkit.nowhere:x", "cannot import 'rlmkit.nowhere:x'"),
        ("rlmkit.errors:Nothing", "cannot import 'rlmkit.errors:Nothing'"),
    ],
)
def test_load_says_which_part_of_a_spec_is_wrong(spec, message):
    with pytest.raises(ConfigError, match=message):
        load(spec)
