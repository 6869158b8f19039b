"""Field errors as kube-apiserver reports them: `Causes` (the field path, the reason and the real message of
each), and the 422 Invalid they make. Upstream: k8s.io/apimachinery/pkg/util/validation/field/errors.go
(`Required`, `Invalid`, `NotSupported`, `Forbidden`, `Duplicate` and their messages) and
k8s.io/apimachinery/pkg/api/errors/errors.go (`NewInvalid`: `<Kind.group> "<name>" is invalid: ...`).
"""
from __future__ import annotations

import json

from kubesim.apimachinery.errors import ApiError


class Causes(list):
    """Collected field errors: (field, reason type, message)."""

    def required(self, field: str, detail: str = "") -> None:
        self.append((field, "FieldValueRequired", "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, field: str, value, detail: str) -> None:
        self.append((field, "FieldValueInvalid", f"Invalid value: {_show(value)}: {detail}"))

    def unsupported(self, field: str, value, supported: list[str]) -> None:
        self.append((field, "FieldValueNotSupported", f"Unsupported value: {_show(value)}: supported values: "
                     + ", ".join(f'"{s}"' for s in supported)))

    def forbidden(self, field: str, detail: str) -> None:
        self.append((field, "FieldValueForbidden", detail))

    def duplicate(self, field: str, value) -> None:
        self.append((field, "FieldValueDuplicate", f"Duplicate value: {_show(value)}"))


def _show(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return json.dumps(value)


def qualified_kind(rt) -> str:
    """`Pod`, `Job.batch`, `Model.sedna.io`: how the real server names a kind in Invalid messages."""
    return rt.kind if not rt.group else f"{rt.kind}.{rt.group}"


def invalid_error(rt, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    parts = [f"{f}: {m}" for f, _t, m in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiError(422, f'{qualified_kind(rt)} "{name}" is invalid: {text}', "Invalid", name=name,
                    group=rt.group, kind=rt.kind,
                    causes=[{"reason": t, "message": m, "field": f} for f, t, m in causes])


def field_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
