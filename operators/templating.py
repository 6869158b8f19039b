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

How ``render`` gets there without parsing YAML per call: it renders the template with each ``{{ }}`` value
replaced by a numbered placeholder string (the *skeleton*: the template's own text and control flow, none of
the values), parses each distinct skeleton once, and fills copies of the parsed skeleton with the values. A
value's flow YAML parses back to exactly the value (``yaml_value``'s contract, tested), so the result is what
parsing the fully rendered text gives. A skeleton in which a placeholder is not a whole scalar (a value
juxtaposed with text, inside a block scalar or a comment, an anchor/alias) takes the plain YAML path.

Layer: the shared core's (with ``operators.core``): pure text-to-objects, importing nothing else of
``operators``, so that every layer which writes a manifest (the platform, RBAC, the features) renders it here
and every manifest shape stays written once in ``k8s_templates/``. It stays at this path because the
templates' contract and the security docs name it.
"""

from __future__ import annotations

import math
import re
import secrets
import threading
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


def _plain(value: Any) -> Any:
    """``value`` as parsing ``yaml_value(value)`` gives it back: fresh dicts (``str`` keys) and lists, plain
    ``int``/``float``/``str``; the same errors for what cannot be rendered."""
    t = type(value)  # exact JSON types first (what manifests are made of), subclasses and the rest below
    if t is str:
        if _MARK in value:  # rendered template text (a macro's caller()): only the text path renders it right
            raise _TextOnly
        return value
    if t is dict:
        return {k if type(k) is str and len(k) <= 90 and _MARK not in k else _plain_key(k): _plain(v)
                for k, v in value.items()}
    if t is list:
        return [_plain(v) for v in value]
    if value is None or t is bool or t is int or t is float:
        return value
    if isinstance(value, str):
        return _plain(str.__str__(value))
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {_plain_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined: raises UndefinedError naming the missing variable
    raise TypeError(f"cannot render a {type(value).__name__} into a manifest: {value!r}")


def _plain_key(key: Any) -> str:
    text = str.__str__(str(key))
    # YAML refuses a flow-mapping key longer than 1024 characters as written: the text path gives that error
    if _MARK in text or (len(text) > 90 and len(_yaml_string(text)) > 1000):
        raise _TextOnly
    return text


class _TextOnly(Exception):
    """This render must parse the rendered text (see the module's docstring)."""


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


# skeleton renders: the values of this thread's render, in output order (None: a plain render)
_slots = threading.local()
_MARK = f"skiff-slot-{secrets.token_hex(6)}-"  # no template text contains it (random per process)


@jinja2.pass_context  # evaluated at render time: Jinja never folds a constant {{ }} into the compiled template
def _finalize(_context: Any, value: Any) -> str:
    slots = getattr(_slots, "values", None)
    if slots is None:
        return yaml_value(value)
    slots.append(_plain(value))
    return f'"{_MARK}{len(slots) - 1}"'


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template_source),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
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
    template = environment().get_template(template_name)
    _slots.values = slots = []
    try:
        skeleton = template.render(**values)
        parsed = _parse_skeleton(template_name, skeleton, len(slots))
    except _TextOnly:
        parsed = None
    finally:
        _slots.values = None
    if parsed is None:
        return _parse(template_name, template.render(**values))
    docs = [_fill(doc, slots) for doc in parsed]
    return docs[0] if len(docs) == 1 else docs


def _parse(template_name: str, text: str) -> dict | list[dict]:
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


class _Slot(int):
    """Where value number ``int(self)`` goes in a parsed skeleton."""


@lru_cache(maxsize=512)
def _parse_skeleton(template_name: str, skeleton: str, n_slots: int) -> tuple | None:
    """The documents of a skeleton with each placeholder a ``_Slot``; None if a placeholder is anything but an
    untagged whole mapping value or sequence item, used twice, or missing, or if the skeleton does not parse
    (such a skeleton takes the text path, which gives the result or the error)."""
    if _TAGGED.search(skeleton):
        return None
    try:
        docs = _parse(template_name, skeleton)
    except ValueError:
        return None
    seen: list[int] = []

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if isinstance(k, str) and _MARK in k:
                    raise _NotWhole
                out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str) and _MARK in node:
            index = node[len(_MARK):] if node.startswith(_MARK) else ""
            if not index.isdigit():
                raise _NotWhole
            seen.append(int(index))
            return _Slot(int(index))
        return node

    try:
        out = tuple(walk(doc) for doc in (docs if isinstance(docs, list) else [docs]))
    except _NotWhole:
        return None
    return out if sorted(seen) == list(range(n_slots)) else None


class _NotWhole(Exception):
    pass


_TAGGED = re.compile(r"[!&][^\s]*\s+\"" + re.escape(_MARK))  # `!!str "<slot>"`, `&anchor "<slot>"`


def _fill(node: Any, slots: list) -> Any:
    """A fresh copy of a parsed skeleton with its slots filled (each value is used once: no sharing)."""
    if type(node) is dict:
        return {k: _fill(v, slots) for k, v in node.items()}
    if type(node) is list:
        return [_fill(v, slots) for v in node]
    if type(node) is _Slot:
        return slots[node]
    return node
