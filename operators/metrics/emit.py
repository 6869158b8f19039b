"""Send event metrics through Airflow's own metrics facade (``airflow.sdk.observability.stats``).

Each feature keeps its own rules and one-line calls beside it (``operators.training.metrics``,
``operators.sedna.metrics``, ``operators.devinstances.metrics``, ``operators.platform.metrics``: all of them run in
a worker's task) and sends what they make through ``send``; the catalogue of names is ``catalogue``. The facade
sends to StatsD, Datadog or OpenTelemetry as ``[metrics]`` configures, or nowhere; the task runner sets it
up, and ``_stats`` does the same once in a process that did not (``airflow dags test``, a script).

A metric must never fail the work it counts: any error sending one is logged at debug level and dropped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from operators.metrics import catalogue as c

log = logging.getLogger("skiff.metrics")
_initialized_pid: int | None = None


def _stats():
    global _initialized_pid
    from airflow.sdk.observability import stats

    if _initialized_pid != os.getpid():
        from airflow.sdk.configuration import conf
        from airflow.sdk.observability.metrics import stats_utils

        # what the task runner does at start (airflow/sdk/execution_time/task_runner.py, main)
        stats.initialize(factory=stats_utils.get_stats_factory(),
                         export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=True))
        _initialized_pid = os.getpid()
    return stats


def send(samples: Iterable[tuple[c.Metric, dict, float]]) -> None:
    try:
        stats = _stats()
        for metric, tags, value in samples:
            if metric.type == c.TIMING:
                stats.timing(metric.stat, value, tags=tags)  # milliseconds, as StatsD timers are
            else:
                stats.incr(metric.stat, count=int(value), tags=tags)
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        log.debug("metrics not sent: %s", exc)
