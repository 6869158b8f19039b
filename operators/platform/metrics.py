"""platform_sync's event metrics (the pure rule, and the one-line call ``operators.platform.dags`` makes)."""

from __future__ import annotations

from collections.abc import Mapping

from operators.metrics import catalogue as c
from operators.metrics.emit import send


def sync_samples(report: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """platform_sync's report: objects written, objects refused, and the run's result."""
    applied, errors = len(report.get("applied") or []), len(report.get("errors") or [])
    out = [(c.SYNC_RUNS, {"result": "failed" if errors else "ok"}, 1)]
    out += [(c.SYNC_WRITES, {}, applied)] if applied else []
    return out + ([(c.SYNC_REFUSALS, {}, errors)] if errors else [])


def platform_sync(report: Mapping) -> None:
    send(sync_samples(report))
