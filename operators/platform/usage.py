"""Usage report: per team, quota vs used; GPU-hours and CPU-hours per user and per DAG from finished Jobs (a ledger
beside the report keeps those Kubernetes has deleted since: ``merge_ledger``); where
Prometheus is configured, GPU-hours held and used and the efficiency per user, team and kind of pod (training
step, development instance, Sedna worker: the ``gpu`` section, ``gpu_used``).

``summarise`` is pure (objects in, report dict out). A Job's hours are its requests (cpu, GPUs) times the time
from ``status.startTime`` to its completion (``completionTime``, or the ``Failed`` condition's time); a Job
counts in the period in which it finished. The user is read back from the Job's ``/root`` volume, the user's
home PVC (``Platform.home_pvc``), the DAG from its ``skiff.io/dag-id`` annotation. ``run_usage_report`` (the
``usage_report`` DAG's task) writes the report as JSON under the Airflow home for the UI page.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from operators import settings
from operators.core.quantity import parse_quantity
from operators.platform.model import QUOTA_NAME, Platform, home_pvc

if TYPE_CHECKING:  # the access layer loads the client; importing this module must not
    from operators.k8s.rest import Kube

QUOTA_RESOURCES = {"cpu": "requests.cpu", "memory": "requests.memory", "storage": "requests.storage"}
ROOT_VOLUME = "root-dir"
JOB_SELECTOR = "app.kubernetes.io/managed-by=skiff,app.kubernetes.io/name=skiff-training"
DEFAULT_PERIOD = timedelta(days=30)


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def job_finished_at(job: dict) -> datetime | None:
    status = job.get("status") or {}
    if status.get("completionTime"):
        return _time(status["completionTime"])
    failed = next((c for c in status.get("conditions") or [] if c.get("type") == "Failed"
                   and c.get("status") == "True"), None)
    return _time(failed.get("lastTransitionTime")) if failed else None


def job_requests(job: dict, gpu_resource: str) -> tuple[Decimal, Decimal]:
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    cpu = gpu = Decimal(0)
    for container in spec.get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(requests.get("cpu", 0))
        gpu += parse_quantity(requests.get(gpu_resource, 0))
    return cpu, gpu


def job_user(job: dict, owners: dict[str, str]) -> str:
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    for volume in spec.get("volumes") or []:
        if volume.get("name") == ROOT_VOLUME:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName", "")
            return owners.get(claim, f"(pvc {claim})")
    return "(unknown)"


def _add(rows: dict, key: tuple, cpu_h: Decimal, gpu_h: Decimal) -> None:
    row = rows.setdefault(key, [Decimal(0), Decimal(0), 0])
    row[0] += cpu_h
    row[1] += gpu_h
    row[2] += 1


def job_record(job: dict, owners: dict[str, str], team_of_ns: dict[str, str], gpu_resource: str) -> dict | None:
    """A finished Job's line of the ledger: who, which DAG, when it finished and its CPU- and GPU-hours (its pods'
    requests times its run time; a gang of N workers holds N pods' worth); None while it has not finished."""
    finished, started = job_finished_at(job), _time((job.get("status") or {}).get("startTime"))
    if finished is None or started is None:
        return None
    hours = Decimal(max((finished - started).total_seconds(), 0)) / 3600
    cpu, gpu = job_requests(job, gpu_resource)
    pods = (job.get("spec") or {}).get("parallelism") or 1
    meta = job["metadata"]
    return {"uid": meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}",
            "user": job_user(job, owners), "team": team_of_ns.get(meta.get("namespace"), meta.get("namespace")),
            "dag_id": (meta.get("annotations") or {}).get("skiff.io/dag-id") or "(none)",
            "finished": finished.isoformat(), "cpu_hours": float(cpu * hours * pods),
            "gpu_hours": float(gpu * hours * pods)}


def merge_ledger(previous: list[dict], current: list[dict], since: datetime) -> list[dict]:
    """The Jobs that finished since ``since``: the previous runs' lines with the Jobs in the cluster now (a Job
    seen again replaces its line). Kubernetes deletes a finished Job after its ``ttlSecondsAfterFinished`` (a day
    by Skiff's default), so the cluster alone holds about a day of a 30-day period: the ledger keeps the rest,
    as long as the report runs within that TTL (hourly, by its DAG)."""
    lines = {line["uid"]: line for line in previous if _finished(line) is not None}
    lines.update((line["uid"], line) for line in current)
    return sorted((line for line in lines.values() if _finished(line) >= since),
                  key=lambda line: (line["finished"], line["uid"]))


LINE_TEXT = ("uid", "user", "team", "dag_id", "finished")


def _finished(line) -> datetime | None:
    """A ledger line's finish time; None for a line that is not one (a damaged file's is dropped, not trusted)."""
    if not isinstance(line, dict) or not all(isinstance(line.get(k), str) for k in LINE_TEXT) or not all(
            isinstance(line.get(k), int | float) and not isinstance(line.get(k), bool) and 0 <= line[k] < 1e9
            for k in ("cpu_hours", "gpu_hours")):
        return None
    try:
        finished = _time(line["finished"])
    except ValueError:
        return None
    return finished if finished is not None and finished.tzinfo is not None else None


def summarise(platform: Platform, quotas: list[dict], jobs: list[dict], since: datetime, until: datetime,
              ledger: list[dict] = ()) -> dict:
    """The report for ``[since, until)`` from the quotas and the Jobs (with the previous runs' ``ledger``); the
    merged ledger is in ``report["ledger"]`` for the next run (written beside the report, not shown)."""
    owners = {home_pvc(u): u for u in platform.users()}
    gpu_resource = platform.node_pools.gpu_resource
    resources = {**QUOTA_RESOURCES, "gpu": f"requests.{gpu_resource}"}
    by_ns = {q["metadata"]["namespace"]: q for q in quotas if q["metadata"]["name"] == QUOTA_NAME}
    teams = []
    for team in platform.teams:
        status = (by_ns.get(team.namespace) or {}).get("status") or {}
        teams.append({"team": team.name, "namespace": team.namespace, "quota": {
            name: {"hard": (status.get("hard") or {}).get(key), "used": (status.get("used") or {}).get(key)}
            for name, key in resources.items()}})
    team_of_ns = {t.namespace: t.name for t in platform.teams}
    current = [r for r in (job_record(j, owners, team_of_ns, gpu_resource) for j in jobs) if r is not None]
    lines = merge_ledger(list(ledger), current, since)
    users: dict[tuple, list] = {}
    dags: dict[tuple, list] = {}
    for line in lines:
        if _time(line["finished"]) >= until:
            continue
        cpu_h, gpu_h = Decimal(str(line["cpu_hours"])), Decimal(str(line["gpu_hours"]))
        _add(users, (line["user"], line["team"]), cpu_h, gpu_h)
        _add(dags, (line["dag_id"], line["team"]), cpu_h, gpu_h)

    def rows(table: dict, key_name: str) -> list[dict]:
        return [{key_name: k[0], "team": k[1], "cpu_hours": round(float(v[0]), 4), "gpu_hours": round(float(v[1]), 4),
                 "jobs": v[2]} for k, v in sorted(table.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))]

    return {"period": {"since": since.isoformat(), "until": until.isoformat()}, "platform_file": platform.source,
            "teams": teams, "by_user": rows(users, "user"), "by_dag": rows(dags, "dag_id"), "ledger": lines}


def usage(kube: Kube, platform: Platform, *, since: datetime | None = None, until: datetime | None = None,
          ledger: list[dict] = ()) -> dict:
    """The report for ``[since, until)`` (default: the last 30 days), read from the cluster and the ledger."""
    from operators.k8s.resource import JOBS, Resource

    until = until or datetime.now(UTC)
    since = since or until - DEFAULT_PERIOD
    quotas = kube.list(Resource("v1", "resourcequotas"))
    jobs = kube.list(JOBS, label_selector=JOB_SELECTOR)
    report = summarise(platform, quotas, jobs, since, until, ledger)
    report["generated_at"] = until.isoformat()
    return with_gpu_used(report, platform, since, until)


def with_gpu_used(report: dict, platform: Platform, since: datetime, until: datetime,
                  url: str | None = None) -> dict:
    """The report's ``gpu`` section: GPU-hours held, used and the efficiency per user, team and kind of pod,
    from Prometheus at ``[skiff] prometheus_url`` (``gpu_used``); no address or no answer: not known, and why."""
    from operators.platform import gpu_used

    url = settings.get("prometheus_url") if url is None else url
    team_of_ns = {t.namespace: t.name for t in platform.teams}
    if not url:
        report["gpu"] = gpu_used.section(None, "no Prometheus configured ([skiff] prometheus_url)", team_of_ns)
        return report
    try:
        hours = gpu_used.read(url, since, until)
    except Exception as exc:  # noqa: BLE001 - the report is still written, saying why held and used are not known
        report["gpu"] = gpu_used.section(None, f"Prometheus at {url}: {type(exc).__name__}: {exc}"[:300], team_of_ns)
        return report
    report["gpu"] = gpu_used.section(hours, None, team_of_ns)
    return report


def usage_file() -> Path:
    return Path(settings.get("usage_file"))


def ledger_file(report: Path) -> Path:
    """Beside the report, not in it: the page serves the report, and the ledger names every Job's user."""
    return report.with_name(report.stem + "-ledger.json")


def read_ledger(path: Path) -> list[dict]:
    """The previous runs' Jobs; none before the first run, or if the file is not a ledger (it is rebuilt)."""
    try:
        lines = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return [line for line in lines if isinstance(line, dict)] if isinstance(lines, list) else []


def write_report(report: dict[str, Any] | list, path: Path) -> None:
    """Atomically (write + rename): the UI never reads a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def read_report(path: Path | None = None) -> dict | None:
    """For the UI page: the last report, or None before the first run."""
    try:
        return json.loads((path or usage_file()).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def run_usage_report() -> dict:
    from operators.k8s import Kube, api_client
    from operators.platform import load_platform

    path = usage_file()
    report = usage(Kube(api_client()), load_platform(), ledger=read_ledger(ledger_file(path)))
    write_report(report.pop("ledger"), ledger_file(path))  # first: a report never counts Jobs its ledger lost
    write_report(report, path)
    gpu = report["gpu"]  # the task's log says whether the GPU efficiency is known, and if not, why
    return {"file": str(path), "teams": len(report["teams"]), "users": len(report["by_user"]),
            "dags": len(report["by_dag"]), "gpu_efficiency": (f"{len(gpu['by_user'])} rows from {gpu['source']}"
                                                              if gpu["source"] else f"not known: {gpu['problem']}")}
