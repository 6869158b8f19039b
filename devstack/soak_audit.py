"""The soak's auditor: pure functions from what was observed after a soak (kubesim's objects, Airflow's task
instances, texts users can read) to the invariants Skiff promises, as a table. No I/O here: ``devstack.soak``
observes and calls :func:`audit`; ``tests/integration/devstack/test_soak_audit.py`` feeds it hand-built states."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

TERMINAL = {"success", "failed", "upstream_failed", "skipped", "removed"}
ANN = "skiff.io/"


@dataclass
class TaskObs:
    """One task instance as Airflow's REST API reports it, and the outcome its pod script asked for."""
    dag_id: str
    run_id: str
    task_id: str
    state: str | None
    try_number: int
    expected: str                  # "success" or "failed"
    map_index: int = -1


@dataclass
class SednaObs:
    """One FederatedLearningJob / JointInferenceService after the soak: child name -> spec hash wanted (from
    ``operators.sedna.desired``) and found (the child's ``skiff.io/spec-hash`` label)."""
    kind: str
    name: str
    want: dict[str, str]
    have: dict[str, str]


@dataclass
class Observed:
    tasks: list[TaskObs] = field(default_factory=list)
    jobs: list[dict] = field(default_factory=list)            # batch/v1 Jobs (JSON dicts) Skiff created
    sedna: list[SednaObs] | None = None                        # None: not driven in this soak
    converge_seconds: float | None = None
    tcp_services: dict[str, str] | None = None                 # tcp-services data: port -> "ns/svc:port"
    live_services: set[str] = field(default_factory=set)       # "ns/svc" of instances that still exist
    pvcs_before: set[str] = field(default_factory=set)         # "ns/name"
    pvcs_after: set[str] = field(default_factory=set)
    texts: dict[str, str] = field(default_factory=dict)        # where (log/xcom/event id) -> text
    passwords: list[str] = field(default_factory=list)


@dataclass
class Row:
    check: str
    value: str
    want: str
    ok: bool


def _job_key(job: dict) -> tuple:
    a = job.get("metadata", {}).get("annotations") or {}
    return tuple(a.get(ANN + k) for k in ("dag-id", "run-id", "task-id", "map-index", "try-number"))


def _job_finished(job: dict) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds)


def task_rows(obs: Observed) -> list[Row]:
    done = [t for t in obs.tasks if t.state in TERMINAL]
    right = sum(1 for t in done if t.state == t.expected)
    wrong = [f"{t.task_id}={t.state}" for t in done if t.state != t.expected]
    unfinished = [t.task_id for t in obs.tasks if t.state not in TERMINAL]
    return [Row("tasks finished right", str(right), f"{len(obs.tasks)}", right == len(obs.tasks)),
            Row("tasks finished wrong", _count(wrong), "0", not wrong),
            Row("tasks not finished", _count(unfinished), "0", not unfinished)]


def job_rows(obs: Observed) -> list[Row]:
    per_try = Counter(_job_key(j) for j in obs.jobs)
    dups = [k for k, n in per_try.items() if n > 1]
    state = {(t.dag_id, t.run_id, t.task_id, str(t.map_index)): t.state for t in obs.tasks}
    left = [j["metadata"]["name"] for j in obs.jobs
            if not _job_finished(j) and state.get(_job_key(j)[:4]) in TERMINAL]
    return [Row("duplicate Jobs for one try", _count(dups), "0", not dups),
            Row("Jobs left running by finished tasks", _count(left), "0", not left)]


def sedna_rows(obs: Observed) -> list[Row]:
    if obs.sedna is None:
        return [Row("Sedna children missing / old spec", "not driven", "0", True)]
    missing = [f"{s.name}/{c}" for s in obs.sedna for c in s.want if c not in s.have]
    stale = [f"{s.name}/{c}" for s in obs.sedna for c, h in s.want.items() if c in s.have and s.have[c] != h]
    took = "never" if obs.converge_seconds is None else f"{obs.converge_seconds:.0f} s"
    return [Row("Sedna children missing after convergence", _count(missing), "0", not missing),
            Row("Sedna children of an old spec after convergence", _count(stale), "0", not stale),
            Row("Sedna time to converge", took, "finite", obs.converge_seconds is not None)]


def port_rows(obs: Observed) -> list[Row]:
    if obs.tcp_services is None:
        return [Row("tcp-services ports duplicate / leaked", "not driven", "0", True)]
    targets = Counter(obs.tcp_services.values())        # one service port exposed on two node ports
    dups = [t for t, n in targets.items() if n > 1]
    leaked = [p for p, v in obs.tcp_services.items() if v.rsplit(":", 1)[0] not in obs.live_services]
    return [Row("tcp-services ports duplicated", _count(dups), "0", not dups),
            Row("tcp-services ports leaked", _count(leaked), "0", not leaked)]


def secret_rows(obs: Observed) -> list[Row]:
    seen = [where for where, text in obs.texts.items() for pw in obs.passwords if pw and pw in text]
    return [Row("PVCs deleted", _count(sorted(obs.pvcs_before - obs.pvcs_after)), "0",
                obs.pvcs_before <= obs.pvcs_after),
            Row(f"passwords seen in {len(obs.texts)} logs/XComs/Events", _count(seen), "0", not seen)]


def _count(items: list) -> str:
    return str(len(items)) if not items else f"{len(items)} ({', '.join(map(str, items[:3]))}{'...' * (len(items) > 3)})"


def audit(obs: Observed) -> list[Row]:
    return task_rows(obs) + job_rows(obs) + sedna_rows(obs) + port_rows(obs) + secret_rows(obs)


def table(rows: list[Row]) -> str:
    lines = ["| invariant | observed | expected | ok |", "|---|---|---|---|"]
    lines += [f"| {r.check} | {r.value} | {r.want} | {'yes' if r.ok else '**NO**'} |" for r in rows]
    return "\n".join(lines) + "\n"
