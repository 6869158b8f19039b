"""The one shape of a refusal of bad input, and the check every text field starts with (pure).

Training steps, development instances, the platform file and the RBAC manifests all refuse bad input with
``field=value: why`` before anything is written, the value cut short so that a 1 MB argument is not echoed
back into a task log.
"""

from __future__ import annotations

from typing import Any

# Linux refuses to exec an argument or env string longer than MAX_ARG_STRLEN (32 pages = 128 KiB, with its NUL)
MAX_ARG_BYTES = 128 * 1024 - 1


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length, so a 1 MB value is not echoed."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, list | tuple | dict):
        return f"{text[:limit]}... ({len(value)} items)"
    return f"{text[:limit]}... ({len(value) if isinstance(value, str | bytes) else len(text)} characters)"


def bounded(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters with its full length (a message part that may carry user text)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def invalid(field: str, value: Any, why: str) -> ValueError:
    """The error for a bad input: ``cpu='2x': must be a positive number...`` (raise it)."""
    return ValueError(f"{field}={short_repr(value)}: {why}")


def text(field: str, value: Any, *, allow_empty: bool = False) -> str:
    """A string (or a number, as text) a process can receive: not empty unless allowed, no NUL byte, at most
    ``MAX_ARG_BYTES`` (what Linux passes as one argument or environment value)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise invalid(field, value, "must be a string")
    out = str(value)
    if not allow_empty and not out:
        raise invalid(field, value, "must not be empty")
    if "\x00" in out:
        raise invalid(field, value, "must not contain a NUL byte (it cannot be passed to a process)")
    size = len(out.encode("utf-8", "surrogatepass"))
    if size > MAX_ARG_BYTES:
        raise invalid(field, value, f"is {size} bytes; Linux refuses to exec a single argument or environment "
                                    f"value over {MAX_ARG_BYTES} bytes (MAX_ARG_STRLEN, 131072 with its NUL)")
    return out
