"""Build the Sedna reconcile DAGs (``dags/reconcile_federated_learning.py``, ``dags/reconcile_joint_inference.py``).

Each DAG is scheduled by (a) an ``Asset`` whose ``AssetWatcher`` runs ``SednaWatchTrigger`` in the triggerer,
so an edit or a deletion starts a run within seconds, OR (b) a cron resync every few minutes as a safety net.
``max_active_runs=1``; changes that arrive during a run are queued as asset events and handled by the next
run (the reconcile is level-triggered: one run fixes everything it sees). The single task reconciles every
CR of its kind and returns (and logs) the summary of what it changed; it fails (after reconciling everything
else) if the API server refused something, e.g. a child name taken by a foreign object.

Configuration (``operators/settings.py``; no I/O when the DAG file is parsed): ``[skiff] kubernetes_conn_id``,
``sedna_namespaces`` (the namespaces to watch and reconcile; default all), ``sedna_resync_cron``,
``sedna_lc_server`` (the Sedna LocalController URL given to workers) and ``sedna_concurrency``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, CronTriggerTimetable, task

from operators import settings
from operators.k8s.connection import conn_id
from operators.sedna.kinds import kind_spec
from operators.sedna.trigger import SednaWatchTrigger


def configured_namespaces() -> list[str] | None:
    return settings.get_list("sedna_namespaces") or None


def sedna_asset(kind: str) -> Asset:
    plural = kind_spec(kind).plural
    return Asset(
        name=f"sedna_{plural}",
        uri=f"x-sedna://sedna.io/{plural}",
        watchers=[AssetWatcher(name=f"sedna_{plural}_watch",
                               trigger=SednaWatchTrigger(kind=kind, namespaces=configured_namespaces(),
                                                         kubernetes_conn_id=conn_id()))],
    )


def run_reconcile(kind: str) -> dict:
    """The task body: one reconcile pass through the provider's KubernetesHook."""
    import logging

    from operators.k8s import Kube, api_client
    from operators.platform import PlatformError, load_platform
    from operators.sedna.reconcile import kueue_queue_labels, reconcile

    log = logging.getLogger("skiff.sedna")
    try:      # queueing: kueue: the children's pods name their team's LocalQueue
        queue_labels = kueue_queue_labels(load_platform())
    except PlatformError as e:
        log.error("the platform file cannot be read, so Sedna's pods get no Kueue queue label (under queueing: "
                  "kueue Kueue holds them until it can be read): %s", e)
        queue_labels = {}
    summary = reconcile(Kube(api_client(conn_id())), kind, configured_namespaces(), settings.get("sedna_lc_server"),
                        settings.get_int("sedna_concurrency"), queue_labels)
    for line in summary["actions"]:
        log.info("%s", line)
    for line in summary["errors"]:
        log.error("%s", line)
    log.info("summary: %s", {k: v for k, v in summary.items() if k not in ("actions", "errors")})
    if summary["errors"]:
        # everything else was reconciled; fail the run so the problem shows in the UI (the CRs' conditions
        # say the same), and the next event or resync retries
        listed = "\n".join(f"- {e}" for e in summary["errors"][:20])
        more = f"\n(and {len(summary['errors']) - 20} more)" if len(summary["errors"]) > 20 else ""
        raise RuntimeError(f"{len(summary['errors'])} reconcile error(s):\n{listed}{more}")
    return summary


def reconcile_dag(dag_id: str, kind: str, doc_md: str) -> DAG:
    with DAG(
        dag_id=dag_id,
        description=f"Keep Sedna {kind}s and their children in sync (event-driven + periodic resync)",
        schedule=AssetOrTimeSchedule(
            timetable=CronTriggerTimetable(settings.get("sedna_resync_cron"),
                                           timezone="UTC"),
            assets=sedna_asset(kind),
        ),
        start_date=datetime(2026, 11, 1),
        catchup=False,
        max_active_runs=1,
        # a platform DAG: it must heal from the first minute of a fresh deployment, where Airflow's
        # dags_are_paused_at_creation is true by default and nobody unpauses it by hand
        is_paused_upon_creation=False,
        tags=["skiff", "sedna", "reconcile"],
        doc_md=doc_md,
    ) as dag:
        @task(task_id="reconcile", multiple_outputs=False)  # one XCom: the summary dict
        def reconcile() -> dict:
            return run_reconcile(kind)

        reconcile()
    return dag
