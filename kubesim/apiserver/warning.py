"""Warnings for the client, as k8s.io/apiserver/pkg/warning records them: an admission plugin calls
`add(text)` while it handles a request; the endpoint sends each distinct text once as a `Warning` header
(`299 - "<text>"`, k8s.io/apimachinery/pkg/util/net/http.go NewWarningHeader), which kubectl prints as
`Warning: <text>` and client libraries expose. A write that does not come from an HTTP request (a
controller's own) has no recorder: its warnings go nowhere, as in the real controller-manager's client.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

_recorder: ContextVar[list[str] | None] = ContextVar("kubesim_warnings", default=None)


def add(text: str) -> None:
    """Record a warning for the current request (deduplicated, in order)."""
    warnings = _recorder.get()
    if warnings is not None and text not in warnings:
        warnings.append(text)


@contextlib.contextmanager
def recording():
    """Collect the warnings of the writes made inside the block; yields the list."""
    warnings: list[str] = []
    token = _recorder.set(warnings)
    try:
        yield warnings
    finally:
        _recorder.reset(token)


def header_value(text: str) -> str:
    """`299 - "<text>"` with `"` and `\\` escaped, as NewWarningHeader quotes it."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
