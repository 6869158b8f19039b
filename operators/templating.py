"""Render the Jinja2 YAML manifest templates in ``k8s_templates`` into Kubernetes object dicts.

Contract for template authors (training and Sedna):

* ``render("training/job.yaml.j2", name=..., ...)`` loads the template from the installed
  ``k8s_templates`` package (``importlib.resources``), so it works from a wheel, a checkout or the triggerer.
* Undefined variables raise (``StrictUndefined``): a typo in a template is an error, never an empty field.
* Safe by default: EVERY ``{{ expression }}`` is emitted as a YAML *flow value* (``finalize``): strings
  become double-quoted scalars with every non-printable-ASCII character escaped, numbers/bools/None become
  YAML numbers/booleans/null, lists and dicts become flow sequences/mappings. So ``name: {{ name }}`` can
  never break out of its field whatever the user typed (quotes, newlines, ``: ``, ``#``, ``{``...).
  Build composite strings in the expression (``{{ job ~ "-aggregation" }}``), not by juxtaposing text and
  ``{{ }}`` inside one scalar.
* ``trim_blocks``/``lstrip_blocks`` are on, so ``{% if %}`` lines do not leave stray indentation.
* The result is the parsed YAML: a ``dict`` for a one-document template, a ``list[dict]`` for several
  (``---``-separated; empty documents are dropped).
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib.resources import files
from typing import Any

import jinja2
import yaml

TEMPLATE_PACKAGE = "k8s_templates"
# libyaml's safe loader when built in (the same YAML 1.1 safe types, ~10x faster: the Sedna reconcile renders
# thousands of children per pass); the pure-Python one otherwise
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_value(value: Any) -> str:
    """Return ``value`` as a YAML flow value that parses back to exactly ``value``."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined: raises UndefinedError naming the missing variable
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _yaml_float(value)
    if isinstance(value, str):
        return _yaml_string(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_yaml_string(str(k))}: {yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    raise TypeError(f"cannot render a {type(value).__name__} into a manifest: {value!r}")


def _yaml_float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    # PyYAML (YAML 1.1) only reads a float with a dot in the mantissa: "1e-05" would come back a string.
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (f"e{exponent if exponent[0] in '+-' else '+' + exponent}" if exponent else "")


def _yaml_string(value: str) -> str:
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'  # the common case, nothing to escape (printable ASCII is 0x20-0x7E)
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _load_template_source(name: str) -> str:
    resource = files(TEMPLATE_PACKAGE)
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise jinja2.TemplateNotFound(name)
        resource = resource.joinpath(part)
    if not resource.is_file():
        raise jinja2.TemplateNotFound(name)
    return resource.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template_source),
        undefined=jinja2.StrictUndefined,
        finalize=yaml_value,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["yaml_value"] = yaml_value
    return env


def render_text(template_name: str, **values: Any) -> str:
    """The rendered YAML text (for debugging and tests); see :func:`render`."""
    return environment().get_template(template_name).render(**values)


def render(template_name: str, **values: Any) -> dict | list[dict]:
    """Render ``k8s_templates/<template_name>`` with ``values`` and return the parsed manifest(s)."""
    text = render_text(template_name, **values)
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        raise ValueError(f"template {template_name!r} rendered invalid YAML: {exc}") from exc
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"template {template_name!r} rendered a {type(doc).__name__}, not an object")
    if len(docs) == 1:
        return docs[0]
    return docs
