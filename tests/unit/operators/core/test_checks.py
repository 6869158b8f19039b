"""operators.core.checks: the one refusal shape (``field=value: why``, the value cut short) and the text check."""
from __future__ import annotations

import pytest

from operators.core.checks import MAX_ARG_BYTES, bounded, invalid, short_repr, text


def test_a_long_value_is_echoed_cut_with_its_size():
    assert short_repr("x") == "'x'"
    assert short_repr("y" * 10_000).endswith("... (10000 characters)") and len(short_repr("y" * 10_000)) < 120
    assert short_repr(list(range(1000))).endswith("... (1000 items)")
    assert bounded("z" * 500, 10) == "zzzzzzzzzz... (500 characters)" and bounded("ok") == "ok"


def test_the_refusal_names_field_value_and_why():
    assert str(invalid("cpu", "2x", "must be a number")) == "cpu='2x': must be a number"


@pytest.mark.parametrize(("value", "why"), [
    ("", "must not be empty"), ("a\x00b", "NUL byte"), ("x" * (MAX_ARG_BYTES + 1), "MAX_ARG_STRLEN"),
    (None, "must be a string"), (True, "must be a string"),
])
def test_text_refuses_what_a_process_cannot_receive(value, why):
    with pytest.raises(ValueError) as e:
        text("command", value)
    assert str(e.value).startswith("command=") and why in str(e.value)


def test_text_takes_strings_and_numbers():
    assert text("a", "x") == "x" and text("a", 3) == "3" and text("a", "", allow_empty=True) == ""
    assert text("a", "é" * (MAX_ARG_BYTES // 2)) == "é" * (MAX_ARG_BYTES // 2)   # bytes, not characters, count
