"""The platform DAGs' bodies and builders (``dags/platform_sync.py``, ``dags/usage_report.py`` call these).

``platform_sync``: scheduled by an ``Asset`` whose ``AssetWatcher`` runs ``PlatformFileTrigger`` (a change of
the file starts a run within seconds) OR hourly. The one task validates the file (a bad file fails the run
naming file, line and field, before anything is written), applies it to the cluster (``sync``) and sizes the
teams' Airflow pools (``pools``); it returns the report and fails after doing everything else if something
was refused. ``usage_report``: hourly, writes the usage JSON the UI page reads (``usage``).

Configuration (read from Airflow config / environment, never I/O at parse time): ``[skiff] platform_file``,
``[skiff] kubernetes_conn_id`` (default ``kubernetes_default``), ``[skiff] airflow_api_conn_id`` (default
``skiff_airflow_api``), ``[skiff] platform_poll_seconds`` (default 5).
"""

from __future__ import annotations

import logging
from datetime import datetime

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, CronTriggerTimetable, task

from operators import settings
from operators.platform import PlatformError, metrics, platform_file
from operators.platform.trigger import PlatformFileTrigger
from operators.platform.usage import run_usage_report  # light: stdlib and the model; the cluster at run time

log = logging.getLogger("skiff.platform")
START = datetime(2026, 11, 1)


def platform_asset() -> Asset:
    try:
        path = str(platform_file())
    except PlatformError:  # nothing to watch: the hourly run fails saying how to set it (run_platform_sync)
        return Asset(name="skiff_platform_file", uri="file:///skiff-platform-file-not-set")
    return Asset(name="skiff_platform_file", uri=f"file://{path}", watchers=[AssetWatcher(
        name="skiff_platform_file_watch",
        trigger=PlatformFileTrigger(path=path, poll_seconds=settings.get_float("platform_poll_seconds")))])


def run_platform_sync() -> dict:
    from airflow.sdk.exceptions import AirflowNotFoundException

    from operators.k8s import Kube, api_client
    from operators.platform import load_platform
    from operators.platform.desired import desired_pools
    from operators.platform.pools import AirflowPools
    from operators.platform.sync import sync_cluster

    platform = load_platform()                       # PlatformError: nothing is written
    report = sync_cluster(Kube(api_client()), platform).as_dict()
    conn_id = settings.get("airflow_api_conn_id")
    try:
        report["pools"] = AirflowPools.from_connection(conn_id).sync(desired_pools(platform))
    except AirflowNotFoundException:
        report["pools"] = {"skipped": f"no Airflow connection {conn_id!r} to reach the Airflow API"}
        log.warning("pools not synced: define the connection %r (http://user:password@host:port)", conn_id)
    for line in report["applied"]:
        log.info("applied %s", line)
    for line in report["orphaned"]:
        log.warning("orphaned (in the cluster, no longer in %s): %s", platform.source, line)
    for line in report["errors"]:
        log.error("%s", line)
    log.info("platform %s: %d applied, %d unchanged, %d orphaned, pools %s", platform.source,
             len(report["applied"]), report["unchanged"], len(report["orphaned"]), report["pools"])
    metrics.platform_sync(report)
    if report["errors"]:
        raise RuntimeError(f"{len(report['errors'])} object(s) refused; first: {report['errors'][0]}")
    return report


def _one_task_dag(dag_id: str, doc_md: str, *, description: str, schedule, task_id: str, run) -> DAG:
    """Both platform DAGs: the one task ``run``, one run at a time, no catch-up, unpaused on creation."""
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["skiff", "platform"],
        doc_md=doc_md,
    ) as dag:
        task(task_id=task_id, multiple_outputs=False)(run)()
    return dag


def platform_sync_dag(dag_id: str, doc_md: str) -> DAG:
    return _one_task_dag(
        dag_id, doc_md,
        description="Apply the platform file: namespaces, quotas, PVCs, pull secrets, RBAC, Airflow pools",
        schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("@hourly", timezone="UTC"),
                                     assets=platform_asset()),
        task_id="sync", run=run_platform_sync)


def usage_report_dag(dag_id: str, doc_md: str) -> DAG:
    return _one_task_dag(
        dag_id, doc_md,
        description="Quota use per team and GPU/CPU-hours per user and DAG (for the Skiff UI page)",
        schedule=CronTriggerTimetable("@hourly", timezone="UTC"),
        task_id="report", run=run_usage_report)
