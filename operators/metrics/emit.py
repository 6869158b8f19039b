"""Send event metrics through Airflow's own metrics facade (``airflow.sdk.observability.stats``).

Each feature calls one of these in one line where the event happens (all of them run in a worker's task:
the training operator, the Sedna reconcile, the instance operators and culler, platform_sync). The facade
sends to StatsD, Datadog or OpenTelemetry as ``[metrics]`` configures, or nowhere; the task runner sets it
up, and ``_stats`` does the same once in a process that did not (``airflow dags test``, a script).

A metric must never fail the work it counts: any error sending one is logged at debug level and dropped.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping

from operators.metrics import catalogue as c
from operators.metrics import events

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


# ---- one-line calls for the features ---------------------------------------------------------------------
def training_started(namespace: str) -> None:
    send([(c.TRAINING_STARTED, {"team": namespace}, 1)])


def training_reattached(namespace: str) -> None:
    send([(c.TRAINING_REATTACHED, {"team": namespace}, 1)])


def training_finished(result: Mapping) -> None:
    send(events.training_outcome(result, time.time()))


def sedna_action(cr_kind: str, namespace: str, reason: str) -> None:
    send(events.sedna_action(cr_kind, namespace, reason))


def sedna_pass(cr_kind: str, summary: Mapping) -> None:
    send(events.sedna_pass(cr_kind, summary))


def instance_action(action: str, namespace: str, changed: bool) -> None:
    send(events.instance_action(action, namespace, changed))


def instances_culled(summary: Mapping) -> None:
    send(events.instances_culled(summary))


def platform_sync(report: Mapping) -> None:
    send(events.platform_sync(report))
