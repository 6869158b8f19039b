"""The one error type of the access layer, and the one message format: ``409 AlreadyExists: <message>``.

``KubeError`` subclasses the ``kubernetes`` client's ``ApiException``, so code written against the typed
client (``except ApiException as e: e.status``) keeps working while new code catches ``KubeError``.
``status`` is None for a transport failure (connection refused or dropped, timeout): no answer at all.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException


class KubeError(ApiException):
    def __init__(self, status: int | None, reason: str = "", message: str = "", *, body: str | None = None,
                 retry_after: float | None = None) -> None:
        Exception.__init__(self, status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.headers = None
        self.retry_after = retry_after  # seconds, from ``Retry-After`` or the Status' details.retryAfterSeconds

    def __str__(self) -> str:
        head = f"{self.status} {self.reason}" if self.status is not None else self.reason or "connection error"
        return f"{head}: {self.message}" if self.message else head

    @classmethod
    def from_response(cls, status: int, body: bytes | str | None, headers: Any = None) -> KubeError:
        """From an HTTP error answer: the Status body's reason/message, ``Retry-After`` if the server sent one."""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
        try:
            parsed = json.loads(text) if text else {}
        except ValueError:
            parsed = {}
        if not isinstance(parsed, dict):
            parsed = {}
        retry = (headers or {}).get("Retry-After") if headers is not None else None
        if retry is None:
            retry = (parsed.get("details") or {}).get("retryAfterSeconds")
        return cls(status, parsed.get("reason") or "", parsed.get("message") or text.strip(), body=text,
                   retry_after=_seconds(retry))

    @classmethod
    def from_status(cls, status: dict) -> KubeError:
        """From a ``Status`` object, e.g. the object of a watch ``ERROR`` event."""
        return cls(status.get("code"), status.get("reason") or "", status.get("message") or "",
                   body=json.dumps(status), retry_after=_seconds((status.get("details") or {}).get("retryAfterSeconds")))

    @classmethod
    def from_exception(cls, exc: BaseException) -> KubeError:
        """From either client's ``ApiException`` (or a ``KubeError``, returned as is)."""
        if isinstance(exc, KubeError):
            return exc
        status = getattr(exc, "status", None)
        if status is None or status == 0:  # the clients' "no answer" (SSL error, bad request preparation)
            return cls(None, "", getattr(exc, "reason", "") or str(exc))
        return cls.from_response(status, getattr(exc, "body", None), getattr(exc, "headers", None))

    @classmethod
    def transport(cls, exc: BaseException) -> KubeError:
        """No answer from the API server: refused, dropped, timed out."""
        return cls(None, type(exc).__name__, str(exc) or repr(exc))


def _seconds(value: Any) -> float | None:
    try:
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP-date Retry-After: API servers send seconds; fall back to our own back-off


def api_error_message(exc: Any) -> str:
    """``ApiException`` (sync or async client) or ``KubeError`` -> "409 AlreadyExists: jobs.batch "x" already exists"."""
    return str(KubeError.from_exception(exc))
