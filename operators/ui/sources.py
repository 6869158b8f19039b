"""Reads behind the page: the cluster (through ``operators.k8s``'s hook and connection) and Airflow's metadata DB.

Each read is one list call per kind across namespaces (label or field selectors), never one call per row, so a
page refresh costs the same with 5 instances or 500. Nothing here writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from operators.k8s import KubeError, api_client, conn_id
from operators.k8s.resource import DEPLOYMENTS, EVENTS, HPAS, JOBS, PODS, SERVICES, Resource
from operators.k8s.rest import Kube
from operators.k8s.retry import INTERACTIVE
from operators.platform.model import QUOTA_NAME
from operators.sedna.kube import DATASETS, FL_JOBS, JI_SERVICES, MODELS
from operators.training import failure
from operators.ui import views

TRAINING_SELECTOR = "app.kubernetes.io/managed-by=skiff,app.kubernetes.io/name=skiff-training"
RECENT_WINDOW = timedelta(hours=24)  # finished tasks (failed, succeeded) shown this long after they ended
MAX_TRAINING_ROWS = 500
QUOTAS = Resource("v1", "resourcequotas")

_kube_lock = threading.Lock()
_kubes: dict[str, Kube] = {}


def kube() -> Kube:
    """One API client per connection (``[skiff] kubernetes_conn_id``) per process: a hook per request would
    re-read the connection."""
    conn = conn_id()
    with _kube_lock:
        if conn not in _kubes:
            _kubes[conn] = Kube(api_client(conn), policy=INTERACTIVE)  # a person waits: seconds, not minutes
        return _kubes[conn]


def _list(k: Kube, res: Resource, *, labels: str | None = None, fields: str | None = None) -> list[dict]:
    """Every object of a kind in every namespace matching the selectors: one request."""
    return k.list(res, None, label_selector=labels, field_selector=fields)


def list_all(k: Kube, group_version: str, plural: str, *, labels: str | None = None) -> list[dict]:
    return _list(k, Resource(group_version, plural), labels=labels)


# ---------------------------------------------------------------- quota


def gpu_resource() -> str:
    """What the page counts as GPUs: the platform file's ``node_pools.gpu.resource`` (``nvidia.com/gpu`` unless
    the file names another)."""
    from operators.platform import load_platform

    return load_platform().node_pools.gpu_resource


def quotas(k: Kube, teams: Iterable[str] | None) -> list[dict]:
    """``skiff-quota`` of each team (``teams=None``: every team that has one), as bars."""
    found = {q["metadata"]["namespace"]: q for q in _list(k, QUOTAS, fields=f"metadata.name={QUOTA_NAME}")}
    names = sorted(found) if teams is None else list(teams)
    gpus = gpu_resource()
    return [views.team_quota(t, found.get(t), gpus) for t in names]


# ---------------------------------------------------------------- training


def training_task_instances(dag_ids: set[str] | None, now: datetime, job_keys: Iterable[tuple] = ()) -> list[dict]:
    """Unfinished and recently finished (failed, succeeded) training task instances in DAGs the user may read: those of
    ``TrainingJobOperator`` and those a training Job in the cluster names (subclasses have their own class name).
    """
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.utils.session import create_session
    from sqlalchemy import and_, or_, select

    keys = set(job_keys)
    recent = or_(TI.state.in_(views.ACTIVE_STATES),
                 and_(TI.state.in_(views.FINISHED_STATES), TI.end_date >= now - RECENT_WINDOW))
    training = TI.operator == views.TRAINING_OPERATOR
    if keys:
        training = or_(training, and_(TI.dag_id.in_({k[0] for k in keys}), TI.task_id.in_({k[1] for k in keys})))
    query = select(TI.id, TI.dag_id, TI.task_id, TI.run_id, TI.map_index, TI.try_number, TI.state, TI.start_date,
                   TI.end_date, TI.queued_dttm, TI.scheduled_dttm, TI.operator).where(training, recent)
    if dag_ids is not None:
        query = query.where(TI.dag_id.in_(dag_ids))
    query = query.order_by(TI.start_date.desc()).limit(MAX_TRAINING_ROWS)
    with create_session() as session:
        rows = [dict(r._mapping) for r in session.execute(query)]
    return [r for r in rows if r["operator"] == views.TRAINING_OPERATOR
            or (r["dag_id"], r["task_id"], r["run_id"], r["map_index"]) in keys]


@lru_cache(maxsize=2048)
def failure_reason(ti_id, try_number: int) -> str | None:
    """A finished try's reason from its log (a finished log never changes, hence the cache). The task instance
    is loaded as Airflow's log route loads it (trigger and DAG eagerly: the handler reads them)."""
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.trigger import Trigger
    from airflow.utils.log.log_reader import TaskLogReader
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from sqlalchemy.orm import joinedload

    query = (select(TI).where(TI.id == ti_id, TI.try_number == try_number).join(TI.dag_run)
             .options(joinedload(TI.trigger).joinedload(Trigger.triggerer_job), joinedload(TI.dag_model)))
    with create_session() as session:
        ti = session.scalar(query)
        if ti is None:
            return None
        try:
            messages, _ = TaskLogReader().read_log_chunks(ti, try_number, {})
            return views.failure_from_log(m if isinstance(m, dict) else m.model_dump() for m in messages)
        except Exception:  # noqa: BLE001 - an unreadable log (remote store down) costs the reason, not the page
            return None


def training(k: Kube, dag_ids: set[str] | None, now: datetime | None = None) -> list[dict]:
    now = now or datetime.now(UTC)
    jobs: dict[tuple, tuple[int, dict]] = {}
    for job in _list(k, JOBS, labels=TRAINING_SELECTOR):
        key = views.job_key((job.get("metadata") or {}).get("annotations") or {})
        try_no = int(job["metadata"].get("labels", {}).get("skiff.io/try-number", "0"))
        if key and (key not in jobs or try_no >= jobs[key][0]):
            jobs[key] = (try_no, job)
    tis = training_task_instances(dag_ids, now, jobs)
    if not tis:
        return []
    pods: dict[str, list[dict]] = {}
    for p in _list(k, PODS, labels=TRAINING_SELECTOR):
        pods.setdefault(p["metadata"].get("labels", {}).get("skiff.io/job-name"), []).append(p)
    rows, gpus, shown = [], gpu_resource(), []
    waits = queue_reasons(k) if any((j.get("spec") or {}).get("suspend") for _, j in jobs.values()) else {}
    for ti in tis:
        job = jobs.get((ti["dag_id"], ti["task_id"], ti["run_id"], ti["map_index"]), (0, None))[1]
        job_pods = pods.get(job["metadata"]["name"], []) if job else []
        reason = row_reason(ti, job, job_pods)
        queued = waits.get((job["metadata"]["namespace"], job["metadata"]["name"])) if job else None
        rows.append(views.training_row(ti, job, job_pods[-1] if job_pods else None, now=now, reason=reason,
                                       gpu_resource=gpus, queue_reason=queued))
        if ti["state"] in views.ACTIVE_STATES:
            shown.append((rows[-1], job_pods[-1] if job_pods else None))
    with_live_usage(k, shown)  # a running step's use now (one metrics request for all rows)
    return rows


def row_reason(ti: dict, job: dict | None, pods: list[dict]) -> str | None:
    """The reason a row shows: its failed try's, for a failed task and for one up for retry (issue 36: the reason,
    "exit code 127 ...", was only in the task log and the e-mail while the row waited for its next try)."""
    return _failure(ti, job, pods) if ti["state"] in views.FAILED_TRY_STATES else None


def _failure(ti: dict, job: dict | None, pods: list[dict]) -> str | None:
    """Why a try failed: from its Job when that is still there (what the operator itself concluded, from the
    same objects), else from the task log (Jobs that could never run are deleted by the operator)."""
    if job is not None and failure.job_state(job) == "failed":
        return failure.failure_reason(job, pods, [])
    return failure_reason(ti["id"], ti["try_number"])


# ---------------------------------------------------------------- live usage (the metrics API)

POD_METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"
# The metrics API changes once per metric resolution (metrics-server's 15 s): one read serves every page poll of
# this process for this long (each request still shows only its caller's rows), so N open pages cost one read
# per few seconds, not N per poll (BENCHMARKS.md ui: the list was the instances and training endpoints' tail).
POD_METRICS_TTL_S = 5.0
_metrics_lock = threading.Lock()
_metrics_cache: dict[str, tuple[float, tuple]] = {}


def pod_metrics_cached(k: Kube, now: float | None = None) -> tuple[dict[tuple[str, str], dict], str | None]:
    """``pod_metrics``, read at most once per ``POD_METRICS_TTL_S`` per connection (one reader at a time)."""
    import time

    with _metrics_lock:
        now = time.monotonic() if now is None else now
        hit = _metrics_cache.get(conn_id())
        if hit is None or now - hit[0] >= POD_METRICS_TTL_S:
            hit = _metrics_cache[conn_id()] = (now, pod_metrics(k))
        return hit[1]


def pod_metrics(k: Kube) -> tuple[dict[tuple[str, str], dict], str | None]:
    """Skiff's pods' PodMetrics across namespaces, one request: ``({(namespace, pod): item}, problem)``; problem
    ``live_usage.NO_API`` when the cluster serves no metrics API (404, or 503: metrics-server registered and
    down), so the page says so instead of a number."""
    from operators.ui.live_usage import NO_API

    try:  # Skiff's pods only (metrics-server's PodMetrics carry their pod's labels): not every pod of the cluster
        doc = k.request("GET", POD_METRICS_PATH, query=[("labelSelector", "app.kubernetes.io/managed-by=skiff")]) or {}
    except KubeError as exc:
        if exc.status in (404, 503):
            return {}, NO_API
        raise
    return {((i.get("metadata") or {}).get("namespace"), (i.get("metadata") or {}).get("name")): i
            for i in doc.get("items") or []}, None


def with_live_usage(k: Kube, rows: list[tuple[dict, dict | None]]) -> None:
    """Adds ``usage`` to each row whose pod runs (``live_usage.pod_usage``); reads the metrics API once, and
    not at all when no pod runs."""
    from operators.ui.live_usage import pod_usage

    running = [(row, pod) for row, pod in rows if pod is not None and (pod.get("status") or {}).get("phase") == "Running"]
    if not running:
        return
    found, problem = pod_metrics_cached(k)
    gpus = gpu_resource()
    for row, pod in running:
        meta = pod.get("metadata") or {}
        row["usage"] = pod_usage(pod, found.get((meta.get("namespace"), meta.get("name"))), problem, gpus)


# ---------------------------------------------------------------- Sedna


def sedna(k: Kube, namespaces: set[str] | None = None) -> dict:
    """Every FederatedLearningJob and JointInferenceService (in ``namespaces`` if given) with its children;
    ``installed`` is False when the cluster has no Sedna CRDs."""
    try:
        return {"installed": True, "workloads": _sedna_rows(k, namespaces)}
    except KubeError as exc:
        if exc.status == 404:
            return {"installed": False, "workloads": []}
        raise


def _sedna_rows(k: Kube, namespaces: set[str] | None) -> list[dict]:
    from operators.sedna import desired as d

    fl, ji = _list(k, FL_JOBS), _list(k, JI_SERVICES)
    if namespaces is not None:
        fl = [c for c in fl if c["metadata"]["namespace"] in namespaces]
        ji = [c for c in ji if c["metadata"]["namespace"] in namespaces]
    if not fl and not ji:
        return []
    models = _by_ns_name(_list(k, MODELS))
    datasets = _by_ns_name(_list(k, DATASETS)) if fl else {}
    children: dict[str, list[dict]] = {}
    for res, kind in ((PODS, "Pod"), (SERVICES, "Service"), (DEPLOYMENTS, "Deployment"),
                      (HPAS, "HorizontalPodAutoscaler")):
        for obj in _list(k, res, labels="app.kubernetes.io/managed-by=skiff"):
            obj.setdefault("kind", kind)
            for ref in obj["metadata"].get("ownerReferences") or []:
                children.setdefault(ref.get("uid"), []).append(obj)
    events: dict[str, list[dict]] = {}
    for kind in (d.FL_KIND, d.JI_KIND):
        for ev in _list(k, EVENTS, fields=f"involvedObject.kind={kind}"):
            events.setdefault((ev.get("involvedObject") or {}).get("uid"), []).append(ev)
    rows = []
    for cr, kind in [(c, d.FL_KIND) for c in fl] + [(c, d.JI_KIND) for c in ji]:
        ns, uid = cr["metadata"]["namespace"], cr["metadata"]["uid"]
        cr.setdefault("kind", kind)
        if kind == d.FL_KIND:
            want = d.desired_federated_learning(cr, models.get(ns, {}), datasets.get(ns, {}))
        else:
            want = d.desired_joint_inference(cr, models.get(ns, {}))
        rows.append(views.sedna_row(cr, [(c.kind, c.name) for c in want.children], children.get(uid, []),
                                    events.get(uid, []), error=str(want.error) if want.error else None))
    return rows


def _by_ns_name(objs: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for o in objs:
        out.setdefault(o["metadata"]["namespace"], {})[o["metadata"]["name"]] = o
    return out


# ---------------------------------------------------------------- Kueue queues (queueing: kueue)

CLUSTER_QUEUES = Resource("kueue.x-k8s.io/v1beta2", "clusterqueues")


def queue_reasons(k: Kube) -> dict[tuple[str, str], str]:
    """(namespace, Job name) -> why Kueue keeps it waiting, in Kueue's words (the Workload's QuotaReserved
    message, as the task log says it: ``operators.training.queued``): one list of Workloads across namespaces;
    {} without Kueue (404)."""
    from operators.k8s.resource import WORKLOADS
    from operators.training.queued import waiting_message

    try:
        workloads = _list(k, WORKLOADS)
    except KubeError as exc:
        if exc.status == 404:
            return {}
        raise
    out = {}
    for wl in workloads:
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                out[(wl["metadata"]["namespace"], ref["name"])] = waiting_message(wl, None, None)
    return out


def queues(k: Kube, namespaces: Iterable[str] | None) -> dict[str, dict[str, list[dict]]]:
    """Per team namespace (``namespaces=None``: every team) its Kueue queues' figures per flavor for the page:
    ``{"training": [...], "dev": [...]}`` (``views.queue_figures``); {} without Kueue."""
    from operators.platform.kueue import queue_cells
    try:
        cqs = _list(k, CLUSTER_QUEUES, labels="app.kubernetes.io/managed-by=skiff")
    except KubeError as exc:
        if exc.status == 404:
            return {}
        raise
    cells, gpus, wanted = queue_cells(cqs), gpu_resource(), None if namespaces is None else set(namespaces)
    by_queue: dict[str, dict[tuple[str, str], dict[str, float]]] = {}
    for (queue, flavor, resource), figures in cells.items():
        by_queue.setdefault(queue, {})[(flavor, resource)] = figures
    out: dict[str, dict[str, list[dict]]] = {}
    for cq in cqs:
        name = cq["metadata"]["name"]
        ns = (((cq.get("spec") or {}).get("namespaceSelector") or {}).get("matchLabels") or {}).get(
            "kubernetes.io/metadata.name")
        if ns is None or (wanted is not None and ns not in wanted):
            continue
        kind = "dev" if name.endswith("-dev") else "training"
        out.setdefault(ns, {})[kind] = views.queue_figures(by_queue.get(name, {}), gpus)
    return out

