"""The OpenAPI v2 document as protobuf: gnostic's `openapi.v2.Document` (github.com/google/gnostic,
openapiv2/OpenAPIv2.proto), what kube-apiserver answers `/openapi/v2` with when asked for
`application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and what kubectl's discovery client asks for
(client-go discovery `OpenAPISchema` unmarshals nothing else).

Only what kubectl reads is encoded: the definitions' schemas (`$ref`, type, format, description, required,
properties, items, additionalProperties, enum) and their vendor extensions (`x-kubernetes-group-version-kind`
finds a kind's schema; extension values are YAML text, JSON being YAML). Field numbers are the .proto's.
"""
from __future__ import annotations

import json


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, embedded message)."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _string(num: int, text: str) -> bytes:
    return _field(num, text.encode()) if text else b""


def _any(value) -> bytes:
    """openapi.v2.Any {yaml = 2}."""
    return _string(2, json.dumps(value, separators=(",", ":")))


def _named_any(name: str, value) -> bytes:
    return _string(1, name) + _field(2, _any(value))


# Schema fields (OpenAPIv2.proto `message Schema`)
_REF, _FORMAT, _DESCRIPTION, _REQUIRED, _ENUM = 1, 2, 4, 19, 20
_ADDITIONAL, _TYPE, _ITEMS, _PROPERTIES, _VENDOR = 21, 22, 23, 25, 31


def schema(s: dict) -> bytes:
    out = bytearray()
    out += _string(_REF, s.get("$ref", ""))
    out += _string(_FORMAT, s.get("format", ""))
    out += _string(_DESCRIPTION, s.get("description", ""))
    for name in s.get("required") or []:
        out += _field(_REQUIRED, name.encode())
    for value in s.get("enum") or []:
        out += _field(_ENUM, _any(value))
    additional = s.get("additionalProperties")
    if isinstance(additional, dict):
        out += _field(_ADDITIONAL, _field(1, schema(additional)))
    elif isinstance(additional, bool):                              # AdditionalPropertiesItem.boolean = 2
        out += _field(_ADDITIONAL, _varint(2 << 3 | 0) + _varint(int(additional)))
    if s.get("type"):
        out += _field(_TYPE, _field(1, s["type"].encode()))        # TypeItem.value = 1
    items = s.get("items")
    if isinstance(items, dict):
        out += _field(_ITEMS, _field(1, schema(items)))             # ItemsItem.schema = 1
    props = s.get("properties")
    if props:
        named = b"".join(_field(1, _string(1, n) + _field(2, schema(p))) for n, p in props.items())
        out += _field(_PROPERTIES, named)                           # Properties.additional_properties = 1
    for key, value in s.items():
        if key.startswith("x-"):
            out += _field(_VENDOR, _named_any(key, value))
    return bytes(out)


def document(doc: dict) -> bytes:
    """openapi.v2.Document: swagger = 1, info = 2 (title = 1, version = 2), paths = 8, definitions = 9."""
    info = doc.get("info") or {}
    out = bytearray(_string(1, doc.get("swagger", "2.0")))
    out += _field(2, _string(1, info.get("title", "")) + _string(2, info.get("version", "")))
    out += _field(8, b"")
    named = b"".join(_field(1, _string(1, n) + _field(2, schema(s))) for n, s in doc.get("definitions", {}).items())
    out += _field(9, named)                                         # Definitions.additional_properties = 1
    return bytes(out)
