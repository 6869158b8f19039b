"""What the page shows, computed from plain data (cluster objects as dicts, task-instance rows): no I/O.

Quota bars, the form's bounds, training rows and Sedna rows are shaped here so they are tested without a
cluster or an Airflow; ``sources`` fetches the inputs and ``app`` serves the results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from urllib.parse import quote

from operators.core.nodepools import GPU_RESOURCE
from operators.core.quantity import parse_quantity
from operators.training.checkpoint import written_preemptions
from operators.training.metrics import failure_class
from operators.ui.live_usage import step_peak

GI = Decimal(2**30)
UNITS = {"cpu": "cores", "memory": "GiB", "gpu": "GPUs", "storage": "GiB"}
BYTES = {"memory", "storage"}


def _amount(resource: str, value: object) -> float:
    amount = parse_quantity(str(value))
    return float(amount / GI if resource in BYTES else amount)


def quota_keys(gpu_resource: str = GPU_RESOURCE) -> dict[str, tuple[str, ...]]:
    """bar -> quota keys, first present wins (requests are what the scheduler admits on; cpu/memory are aliases);
    GPUs are the platform file's ``node_pools.gpu.resource``."""
    return {"cpu": ("requests.cpu", "cpu", "limits.cpu"), "memory": ("requests.memory", "memory", "limits.memory"),
            "gpu": (f"requests.{gpu_resource}", gpu_resource, f"limits.{gpu_resource}"),
            "storage": ("requests.storage",)}


def quota_bars(quota: Mapping, gpu_resource: str = GPU_RESOURCE) -> list[dict]:
    """One ResourceQuota -> a bar per resource it limits: ``{resource, used, hard, unit, percent}``."""
    status = quota.get("status") or {}
    hard, used = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}, status.get("used") or {}
    bars = []
    for resource, keys in quota_keys(gpu_resource).items():
        key = next((k for k in keys if k in hard), None)
        if key is None:
            continue
        h, u = _amount(resource, hard[key]), _amount(resource, used.get(key, "0"))
        bars.append({"resource": resource, "key": key, "used": round(u, 3), "hard": round(h, 3),
                     "unit": UNITS[resource], "percent": round(100 * u / h, 1) if h else 0.0})
    return bars


def team_quota(team: str, quota: Mapping | None, gpu_resource: str = GPU_RESOURCE) -> dict:
    return {"team": team, "bars": quota_bars(quota, gpu_resource) if quota else [], "missing": quota is None}


def free_quota(bars: Iterable[dict]) -> dict[str, float]:
    """What is left per resource (never negative): the New-instance form's upper bounds."""
    return {b["resource"]: max(0.0, round(b["hard"] - b["used"], 3)) for b in bars}


def gpu_hours_by_user(report: Mapping | None, teams: set[str] | None) -> dict:
    """The usage report's ``by_user`` rows of ``teams`` (None: all) summed per user, most GPU-hours first (held by
    training Jobs), and its GPU efficiency rows of those teams (``gpu_efficiency``)."""
    if not report:
        return {"users": [], "generated": None, "since": None, "until": None}
    totals: dict[str, float] = {}
    for row in report.get("by_user") or []:
        if teams is None or row.get("team") in teams:
            totals[row["user"]] = totals.get(row["user"], 0.0) + float(row.get("gpu_hours") or 0)
    period = report.get("period") or {}
    # hundredths of an hour, as the chart labels them: a user under 0.005 h would be a bar labelled "0 h" (issue 36)
    users = [{"user": u, "gpu_hours": round(h, 2)} for u, h in totals.items() if round(h, 2) > 0]
    return {"users": sorted(users, key=lambda r: (-r["gpu_hours"], r["user"])),
            "generated": report.get("generated_at"), "since": period.get("since"), "until": period.get("until"),
            "efficiency": gpu_efficiency(report.get("gpu"), teams)}


def gpu_efficiency(section: Mapping | None, teams: set[str] | None) -> dict | None:
    """The report's ``gpu`` section (``operators.platform.gpu_used.section``: GPU-hours held, used and the
    efficiency per user, team and kind) for ``teams`` (None: all); None for a report written before it had one.
    Not known (no Prometheus, or no answer): no rows and the ``problem``, never a number."""
    if section is None:
        return None
    mine = (lambda row: True) if teams is None else (lambda row: row.get("team") in teams)
    return {"source": section.get("source"), "problem": section.get("problem"),
            "teams": [dict(r) for r in section.get("by_team") or [] if mine(r)],
            "users": [dict(r) for r in section.get("by_user") or [] if mine(r)]}


# ---------------------------------------------------------------- training

TRAINING_OPERATOR = "TrainingJobOperator"
ACTIVE_STATES = ("running", "deferred", "queued", "scheduled", "up_for_retry", "restarting")
FINISHED_STATES = ("failed", "success")
FAILED_TRY_STATES = ("failed", "up_for_retry")   # states whose row shows the reason of the try that failed


def task_log_path(dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """The Airflow UI's page for this try's log, relative to the UI root."""
    path = f"dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"
    if map_index not in (None, -1):
        path += f"/mapped/{map_index}"
    return f"{path}?try_number={try_number}"


def job_key(annotations: Mapping[str, str]) -> tuple | None:
    """(dag, task, run, map index) from a training Job's annotations (``operators.training.naming``)."""
    try:
        return (annotations["skiff.io/dag-id"], annotations["skiff.io/task-id"], annotations["skiff.io/run-id"],
                int(annotations.get("skiff.io/map-index", "-1")))
    except (KeyError, ValueError):
        return None


def _pod_facts(pod: Mapping | None, gpu_resource: str) -> dict:
    if not pod:
        return {"node": None, "gpu": 0, "cpu": None, "memory": None, "pod_phase": None}
    spec = pod.get("spec") or {}
    gpu, cpu, memory = 0.0, None, None
    for c in spec.get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        gpu += float(parse_quantity(str(limits.get(gpu_resource, "0"))))
        cpu = limits.get("cpu", cpu)
        memory = limits.get("memory", memory)
    return {"node": spec.get("nodeName"), "gpu": int(gpu), "cpu": cpu, "memory": memory,
            "pod_phase": (pod.get("status") or {}).get("phase")}


def waiting_for(ti_state: str, job: Mapping | None, pod: Mapping | None, problem: str | None) -> str | None:
    """Why an unfinished task is not running yet: the pool (Airflow), Kueue's queue (a suspended Job), quota or
    scheduling (Kubernetes)."""
    if ti_state in ("scheduled", "queued") and job is None:
        return "pool"
    if problem:
        return problem
    if job is not None and (job.get("spec") or {}).get("suspend"):
        if written_preemptions(job):   # Kueue preempted it and it waits to be admitted again (checkpoint.py)
            return "preempted_gpus" if _template_gpus(job) else "preempted"
        return "kueue"
    if job is not None and pod is None:
        return "quota"
    if pod is not None and (pod.get("status") or {}).get("phase") == "Pending" and not (pod.get("spec") or {}).get(
            "nodeName"):
        return "scheduling"
    return None


def _template_gpus(job: Mapping, gpu_resource: str = GPU_RESOURCE) -> float:
    """The GPUs a Job's pod template asks for (a suspended Job has no pod to read them from)."""
    spec = (((job.get("spec") or {}).get("template") or {}).get("spec") or {})
    return sum(float(parse_quantity(str(((c.get("resources") or {}).get("limits") or {}).get(gpu_resource, "0"))))
               for c in spec.get("containers") or [])


def training_row(ti: Mapping, job: Mapping | None, pod: Mapping | None, *, now: datetime,
                 reason: str | None = None, problem: str | None = None, gpu_resource: str = GPU_RESOURCE,
                 queue_reason: str | None = None) -> dict:
    """One task instance of ``TrainingJobOperator`` with what its Job and pod say; ``queue_reason``: Kueue's
    words for a Job it keeps suspended (shown while the row waits for ``kueue``)."""
    start = ti.get("start_date") or ti.get("queued_dttm") or ti.get("scheduled_dttm")
    end = ti.get("end_date") if ti["state"] not in ACTIVE_STATES else None
    meta = (job or {}).get("metadata") or {}
    row = {
        "dag_id": ti["dag_id"], "task_id": ti["task_id"], "run_id": ti["run_id"],
        "map_index": ti.get("map_index", -1), "try_number": ti.get("try_number", 0), "state": ti["state"],
        "team": meta.get("namespace") or ti.get("team"), "job": meta.get("name"),
        "started": start.isoformat() if start else None,
        "age_seconds": int((now - start).total_seconds()) if start else None,
        "ended": end.isoformat() if end else None,
        "reason": reason,
        # the reason's class, a closed set the page translates (the reason itself is the cluster's English)
        "reason_class": failure_class(reason, None) if reason else None,
        "waiting_for": waiting_for(ti["state"], job, pod, problem) if ti["state"] in ACTIVE_STATES else None,
        "queue_reason": None,
        "log_path": task_log_path(ti["dag_id"], ti["run_id"], ti["task_id"], ti.get("map_index", -1),
                                  max(1, ti.get("try_number") or 1)),
    }
    row.update(_pod_facts(pod, gpu_resource))
    # a distributed step (workers=N) is one row with N pods: its GPUs are all N pods' (each as the one shown)
    spec = (job or {}).get("spec") or {}
    row["workers"] = int(spec.get("completions") or 1) if spec.get("completionMode") == "Indexed" else 1
    row["gpu"] *= row["workers"]
    # the step's peak so far (running) or its last (finished), from its Job (operators/training/usage.py)
    row["peak"] = step_peak(job, finished=ti["state"] in FINISHED_STATES, running=row["pod_phase"] == "Running")
    if row["waiting_for"] in ("kueue", "preempted", "preempted_gpus"):
        row["queue_reason"] = queue_reason
    return row


# ---------------------------------------------------------------- Kueue queues

QUEUE_RESOURCES = (("cpu", "cpu"), ("memory", "memory"), ("gpu", GPU_RESOURCE))


FLAVORS = ("online", "gpu", "default")    # operators.platform.kueue.FLAVOR_ORDER: the order the page lists them


def queue_figures(cells: Mapping[tuple[str, str], Mapping[str, float]], gpu_resource: str = GPU_RESOURCE) -> list[dict]:
    """One ClusterQueue's ``operators.platform.kueue.queue_cells`` ((flavor, resource) -> figures) -> per flavor and
    resource its nominal, used, borrowed and lent amounts in the page's units (memory in GiB), as the platform
    file gives them (``teams[].kueue.flavors.<flavor>``: per flavor, never summed over flavors: issue 36);
    resources without any quota or use are left out."""
    out = []
    flavors = sorted({f for f, _ in cells}, key=lambda f: (FLAVORS.index(f) if f in FLAVORS else len(FLAVORS), f))
    for flavor in flavors:
        for name, key in QUEUE_RESOURCES:
            f = cells.get((flavor, gpu_resource if name == "gpu" else key))
            if not f or not any(f.values()):
                continue
            scale = float(GI) if name in BYTES else 1.0
            out.append({"flavor": flavor, "resource": name, "unit": UNITS[name],
                        **{k: round(float(f.get(k, 0.0)) / scale, 2) for k in ("nominal", "used", "borrowed", "lent")}})
    return out


def failure_from_log(messages: Iterable[Mapping]) -> str | None:
    """The one-line reason of a failed try, from its structured log: Skiff's ``TrainingJobFailed`` (its
    ``Training Job ns/name failed: <reason>`` line), else the last exception's first line."""
    skiff, other = None, None
    for msg in messages:
        for err in msg.get("error_detail") or []:
            value = str(err.get("exc_value") or "").strip()
            first = value.splitlines()[0] if value else str(err.get("exc_type") or "")
            if err.get("exc_type") == "TrainingJobFailed" and " failed: " in first:
                skiff = first.split(" failed: ", 1)[1]
            elif first:
                other = f"{err.get('exc_type')}: {first}" if err.get("exc_type") else first
    last = skiff or other
    return last[:300] if last else None


# ---------------------------------------------------------------- Sedna


def sedna_row(cr: Mapping, desired_children: Iterable[tuple[str, str]] | None, actual: Iterable[Mapping],
              events: Iterable[Mapping], *, error: str | None = None, max_events: int = 3) -> dict:
    """A FederatedLearningJob / JointInferenceService: desired vs actual children, phase, last events."""
    meta, status = cr.get("metadata") or {}, cr.get("status") or {}
    actual_keys = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in actual}
    desired = set(desired_children or ())
    conditions = status.get("conditions") or []
    phase = status.get("phase") or next(
        (c.get("type") for c in reversed(conditions) if str(c.get("status")) == "True"), None)
    by_kind: dict[str, dict[str, int]] = {}
    for kind, _ in desired:
        by_kind.setdefault(kind, {"desired": 0, "actual": 0})["desired"] += 1
    for kind, name in actual_keys:
        entry = by_kind.setdefault(kind, {"desired": 0, "actual": 0})
        entry["actual"] += 1 if (kind, name) in desired or not desired else 0
    recent = sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or
                                              (e.get("metadata") or {}).get("creationTimestamp") or ""))
    return {
        "kind": cr.get("kind"), "namespace": meta.get("namespace"), "name": meta.get("name"),
        "phase": phase or "Unknown", "error": error,
        "desired": len(desired), "actual": len(actual_keys & desired) if desired else len(actual_keys),
        "children": [{"kind": k, **v} for k, v in sorted(by_kind.items())],
        "in_sync": not error and desired <= actual_keys,
        "events": [{"type": e.get("type"), "reason": e.get("reason"), "message": e.get("message") or e.get("note"),
                    "time": e.get("lastTimestamp") or e.get("eventTime")} for e in recent[-max_events:]][::-1],
    }


def split_by_team(rows: list[dict], teams: list[str] | None) -> tuple[list[dict], list[dict]]:
    """Training rows of the caller's teams (``teams``: namespaces; ``None``: an Airflow admin, every team) and the
    others Airflow lets them read. A row with no team known yet (no Job: waiting for an Airflow pool slot) is
    the caller's to see: it names no other team's work."""
    if teams is None:
        return list(rows), []
    mine = [r for r in rows if r.get("team") is None or r.get("team") in teams]
    return mine, [r for r in rows if not (r.get("team") is None or r.get("team") in teams)]
