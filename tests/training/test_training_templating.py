"""operators.templating: every rendered value parses back to exactly what was passed in."""

import math

import jinja2
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import templating
from operators.templating import yaml_value

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(values)
def test_yaml_value_round_trips(value):
    assert _same(yaml.safe_load(yaml_value(value)), value)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_a_string_cannot_break_out_of_its_field(text):
    doc = yaml.safe_load(f"a: {yaml_value(text)}\nb: fixed\n")
    assert doc == {"a": text, "b": "fixed"}


def test_unknown_template_and_undefined_variable_are_errors():
    with pytest.raises(jinja2.TemplateNotFound):
        templating.render("no/such.yaml.j2")
    with pytest.raises(jinja2.TemplateNotFound):
        templating.render("../operators/templating.py")
    with pytest.raises(jinja2.UndefinedError):
        templating.render("training/job.yaml.j2")


def test_unsupported_type_is_rejected():
    with pytest.raises(TypeError, match="set"):
        yaml_value({1, 2})
