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


# render() parses each template's skeleton once and fills it with the values (see operators.templating): the
# result must be what parsing the fully rendered text gives, whatever the values
_POD_VALUES = st.fixed_dictionaries({
    "name": st.text(), "namespace": st.text(),
    "labels": st.dictionaries(st.text(max_size=8), st.text(), max_size=4),
    "annotations": st.dictionaries(st.text(max_size=8), values, max_size=3),
    "owner": values, "pod_spec": values,
})


@settings(max_examples=200, deadline=None)
@given(_POD_VALUES)
def test_render_is_the_parsed_rendered_text(kw):
    fast = templating.render("sedna/fl-pod.yaml.j2", **kw)
    assert _same(fast, templating._parse("sedna/fl-pod.yaml.j2", templating.render_text("sedna/fl-pod.yaml.j2", **kw)))


@settings(max_examples=100, deadline=None)
@given(st.integers(), st.none() | st.integers(min_value=1), st.none() | st.lists(values, max_size=2), values)
def test_render_with_control_flow_is_the_parsed_rendered_text(top, low, metrics, behavior):
    kw = {"name": "h", "namespace": "ns", "labels": {"a": "b"}, "owner": {"uid": "u"}, "deployment": "d",
          "max_replicas": top, "min_replicas": low, "metrics": metrics, "behavior": behavior}
    fast = templating.render("sedna/ji-hpa.yaml.j2", **kw)
    assert _same(fast, templating._parse("sedna/ji-hpa.yaml.j2", templating.render_text("sedna/ji-hpa.yaml.j2", **kw)))


def test_render_returns_fresh_objects():
    spec = {"containers": [{"name": "c", "image": "i"}]}
    kw = {"name": "p", "namespace": "ns", "labels": {}, "annotations": {}, "owner": {}, "pod_spec": spec}
    first = templating.render("sedna/fl-pod.yaml.j2", **kw)
    first["spec"]["containers"][0]["image"] = "changed"
    first["metadata"]["name"] = "changed"
    assert spec["containers"][0]["image"] == "i"
    assert templating.render("sedna/fl-pod.yaml.j2", **kw)["spec"] == {"containers": [{"name": "c", "image": "i"}]}


def test_a_key_yaml_refuses_is_refused_as_before():
    kw = {"name": "p", "namespace": "ns", "labels": {"k" * 1100: "v"}, "annotations": {}, "owner": {},
          "pod_spec": {}}
    with pytest.raises(ValueError, match="rendered invalid YAML"):
        templating.render("sedna/fl-pod.yaml.j2", **kw)
    assert templating.render("sedna/fl-pod.yaml.j2", **{**kw, "labels": {"k" * 990: "v"}})["metadata"]["labels"]


@pytest.mark.parametrize("skeleton", [
    'a: x"{m}0"\n',               # juxtaposed with text
    'a: |\n  "{m}0"\n',           # inside a block scalar
    'a: 1  # "{m}0"\n',           # in a comment
    'a: !!str "{m}0"\n',          # tagged
    'a: &x "{m}0"\nb: *x\n',      # aliased (used twice)
    '"{m}0": 1\n',                # a key
])
def test_a_placeholder_that_is_not_a_whole_value_takes_the_text_path(skeleton):
    assert templating._parse_skeleton("t", skeleton.format(m=templating._MARK), 1) is None


def test_a_whole_value_placeholder_is_a_slot():
    m = templating._MARK
    parsed = templating._parse_skeleton("t", f'a: "{m}0"\nb: ["{m}1", {{c: "{m}2"}}]\n', 3)
    assert templating._fill(parsed[0], ["x", {"y": 1}, None]) == {"a": "x", "b": [{"y": 1}, {"c": None}]}


def test_sedna_children_parse_one_skeleton(monkeypatch):
    parsed, real = [], templating._parse
    monkeypatch.setattr(templating, "_parse", lambda name, text: parsed.append(name) or real(name, text))
    templating._parse_skeleton.cache_clear()
    for i in range(3):
        templating.render("sedna/fl-pod.yaml.j2", name=f"p{i}", namespace="ns", labels={"i": str(i)}, annotations={},
                          owner={}, pod_spec={"containers": [{"name": "c", "image": f"i{i}"}]})
    assert parsed == ["sedna/fl-pod.yaml.j2"]  # the skeleton, once; no text parsed per render
