"""The idle signal of a development instance, and the culler's decision (pure parts + one read).

Signal: Jupyter Server's Prometheus gauge ``jupyter_server_last_activity_timestamp_seconds`` on
``/metrics`` of port 8888 (the start-up script turns off authentication for ``/metrics`` only). It is the
same value as ``last_activity`` of Jupyter's ``/api/status``: the latest of any kernel's activity (code
running or output), any terminal's activity and any authenticated API request from a browser tab.
Skiff reads it through the API server's service proxy
(``GET /api/v1/namespaces/<ns>/services/<svc>:8888/proxy/metrics``), so the culler needs no network route
to the pods, only the ``services/proxy`` permission.

An instance is idle when that time is older than the idle limit (default 8 h). When the signal cannot be
read (Jupyter not answering, no endpoints), the instance is NOT culled: the culler never stops what it
cannot see, and says so. SSH sessions and code-server activity are not part of the signal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from operators.devinstances.spec import BUILTIN_PORTS

if TYPE_CHECKING:
    from operators.k8s.rest import Kube

METRIC = "jupyter_server_last_activity_timestamp_seconds"
_LINE = re.compile(rf"^{METRIC}(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)(?:\s+\d+)?\s*$", re.MULTILINE)
PROXY_PATH = "metrics"
JUPYTER_PORT = BUILTIN_PORTS["jupyter"]


def last_activity(metrics_text: str) -> datetime | None:
    """The last-activity time in Prometheus text exposition format, or None if absent."""
    match = _LINE.search(metrics_text or "")
    if not match:
        return None
    try:
        return datetime.fromtimestamp(float(match.group(1)), tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


@dataclass(frozen=True)
class Verdict:
    idle: bool
    why: str


def decide(last: datetime | None, now: datetime, idle_seconds: float, error: str | None = None) -> Verdict:
    """Idle only when the signal was read and is older than ``idle_seconds``."""
    if last is None:
        return Verdict(False, f"no idle signal ({error or 'no ' + METRIC + ' in /metrics'}): left running")
    quiet = (now - last).total_seconds()
    if quiet > idle_seconds:
        return Verdict(True, f"idle for {quiet / 3600:.1f} h (limit {idle_seconds / 3600:g} h)")
    return Verdict(False, f"active {quiet / 60:.0f} min ago")


def read_last_activity(kube: Kube, namespace: str, service: str) -> tuple[datetime | None, str | None]:
    """(last activity, None) or (None, why it could not be read), through the API server's service proxy.
    What answers is the owner's program: one request, read within the access layer's bound for user content
    (``operators.k8s.rest.USER_CONTENT``: 256 KiB, 10 s from sending it), so an instance that floods, drips or
    does not answer is reported, not waited for; the reason is cut short (it may quote what the pod said)."""
    from operators.core.checks import bounded
    from operators.k8s import KubeError
    from operators.k8s.resource import SERVICES

    try:
        text = kube.get_text(SERVICES, namespace, f"{service}:{JUPYTER_PORT}", f"proxy/{PROXY_PATH}")
    except KubeError as exc:
        return None, bounded(str(exc), 200)
    last = last_activity(text)
    return (last, None) if last else (None, f"no {METRIC} in /metrics")
