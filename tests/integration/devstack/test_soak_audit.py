"""The soak's auditor (devstack/soak_audit.py) on hand-built states: a clean state passes every row, and each
kind of violation is caught by its own row (and only by it)."""
from __future__ import annotations

import copy

import pytest

from devstack.soak_audit import Observed, SednaObs, TaskObs, audit, table


def job(task: str, try_number: int, finished: bool = True, run: str = "r1") -> dict:
    ann = {"skiff.io/dag-id": "soak", "skiff.io/run-id": run, "skiff.io/task-id": task,
           "skiff.io/map-index": "-1", "skiff.io/try-number": str(try_number)}
    conds = [{"type": "Complete", "status": "True"}] if finished else []
    return {"metadata": {"name": f"{task}-t{try_number}", "annotations": ann}, "status": {"conditions": conds}}


def clean() -> Observed:
    return Observed(
        tasks=[TaskObs("soak", "r1", "ok_0", "success", 2, "success"),
               TaskObs("soak", "r1", "oom_1", "failed", 1, "failed")],
        jobs=[job("ok_0", 1, finished=False), job("ok_0", 2), job("oom_1", 1)],
        sedna=[SednaObs("FederatedLearningJob", "fl-0", {"fl-0-agg": "h2", "fl-0-svc": "h1"},
                        {"fl-0-agg": "h2", "fl-0-svc": "h1"})],
        converge_seconds=12.0,
        tcp_services={"30001": "alice/nb:22", "30002": "alice/nb:8080"}, live_services={"alice/nb"},
        pvcs_before={"recsys/alice-home"}, pvcs_after={"recsys/alice-home"},
        texts={"log ok_0": "training done", "event 1": "Created pod"}, passwords=["s3cr3t-Pw"])


def failing(obs: Observed) -> list[str]:
    return [r.check for r in audit(obs) if not r.ok]


def test_clean_state_passes_every_row():
    """Every task as expected, every Job of a finished task finished, children converged, ports and PVCs
    intact, no password in any text: no row fails."""
    obs = clean()
    obs.jobs[0] = job("ok_0", 1)
    rows = audit(obs)
    assert [r.check for r in rows if not r.ok] == []
    assert "| tasks finished right | 2 | 2 | yes |" in table(rows)


def _break(kind: str) -> Observed:
    obs = clean()
    obs.jobs[0] = job("ok_0", 1)
    if kind == "wrong":
        obs.tasks[1].state = "success"                     # an OOMKilled Job reported as success
    elif kind == "unfinished":
        obs.tasks[0].state = "deferred"
    elif kind == "duplicate":
        obs.jobs.append(copy.deepcopy(obs.jobs[1]))         # two Jobs for try 2
    elif kind == "left":
        obs.jobs.append(job("oom_1", 2, finished=False))    # a Job still running for a failed task
    elif kind == "missing":
        del obs.sedna[0].have["fl-0-svc"]
    elif kind == "stale":
        obs.sedna[0].have["fl-0-agg"] = "h1"
    elif kind == "never":
        obs.converge_seconds = None
    elif kind == "dup_port":
        obs.tcp_services["30003"] = "alice/nb:22"
    elif kind == "leak":
        obs.tcp_services["30004"] = "bob/gone:22"
    elif kind == "pvc":
        obs.pvcs_after = set()
    elif kind == "password":
        obs.texts["xcom ok_0"] = '{"password": "s3cr3t-Pw"}'
    return obs


@pytest.mark.parametrize("kind, row", [
    ("wrong", ["tasks finished right", "tasks finished wrong"]),
    ("unfinished", ["tasks finished right", "tasks not finished"]),
    ("duplicate", ["duplicate Jobs for one try"]),
    ("left", ["Jobs left running by finished tasks"]),
    ("missing", ["Sedna children missing after convergence"]),
    ("stale", ["Sedna children of an old spec after convergence"]),
    ("never", ["Sedna time to converge"]),
    ("dup_port", ["tcp-services ports duplicated"]),
    ("leak", ["tcp-services ports leaked"]),
    ("pvc", ["PVCs deleted"]),
    ("password", ["passwords seen in 3 logs/XComs/Events"]),
])
def test_each_violation_is_caught_by_its_row(kind, row):
    assert failing(_break(kind)) == row


def test_an_earlier_try_left_running_is_caught():
    """The clean() state as built: try 1 of ok_0 still running after ok_0 finished on try 2."""
    assert failing(clean()) == ["Jobs left running by finished tasks"]


def test_parts_not_driven_say_so():
    obs = _break("none")
    obs.sedna, obs.tcp_services = None, None
    values = {r.check: r.value for r in audit(obs)}
    assert values["Sedna children missing / old spec"] == "not driven"
    assert values["tcp-services ports duplicate / leaked"] == "not driven"


def test_soak_dag_parses_with_its_outcome_mix():
    """The soak's DAG file imports in a DagBag (what the dag-processor does) and names each task's expected
    outcome by its prefix, which the auditor reads."""
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    from devstack.soak_dags.soak_training import EXPECTED

    folder = Path(__file__).resolve().parents[3] / "devstack" / "soak_dags"
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    tasks = bag.dags["soak_training"].task_ids
    kinds = sorted({t.split("_")[0] for t in tasks})
    assert len(tasks) == 25 and kinds == sorted(EXPECTED)


def test_secret_values_are_the_sensitive_entries_only():
    """The soak looks for the values of password/token/key entries and a pull secret's registry password and
    auth in every text; a user name or an endpoint (shown on purpose) is not counted as a leak."""
    import base64
    import json

    from devstack.soak import _secret_values

    def b(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    pull = json.dumps({"auths": {"registry.local": {"username": "bot", "password": "pw-123456", "auth": "Ym90OnB3"}}})
    secrets = [{"data": {"password": b("hunter2-long"), "username": b("alice-long-name"),
                         "endpoint": b("minio.storage:9000")}},
               {"data": {".dockerconfigjson": b(pull)}}, {"metadata": {"name": "empty"}}]
    assert sorted(_secret_values(secrets)) == ["Ym90OnB3", "hunter2-long", "pw-123456"]
