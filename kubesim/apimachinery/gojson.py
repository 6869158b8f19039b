"""JSON bytes as kube-apiserver writes them: Go's `encoding/json` Encoder.

kube-apiserver's JSON serializer (k8s.io/apimachinery/pkg/runtime/serializer/json/json.go, `doEncode`) ends
with `json.NewEncoder(w).Encode(obj)`: compact output, fields in the Go struct's order (the caller builds
the dict in that order), UTF-8 left as is, `<`, `>`, `&`, U+2028 and U+2029 escaped as `\\u003c`... (the
Encoder's default `SetEscapeHTML(true)`), and a trailing newline. Clients that compare bodies byte for byte
(a public client's conformance suite does, for Status) see the same bytes from kubesim.
"""
from __future__ import annotations

import json

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TABLE = str.maketrans(_GO_ESCAPES)


def go_json(obj) -> bytes:
    """`obj` encoded as Go's json.Encoder.Encode writes it (trailing newline included)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (text.translate(_TABLE) + "\n").encode()
