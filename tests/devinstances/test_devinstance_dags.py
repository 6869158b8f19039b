"""The development-instance DAGs: they import without a DB or cluster, their forms are titled and schema'd, and
the whole lifecycle runs through dag.test() on kubesim -- without the password ever reaching a task log, an
XCom, a rendered template or a Kubernetes Event."""

from __future__ import annotations

from pathlib import Path

import pytest
from devinstance_support import NS, script_activity, sts_of, wait_no_pod, wait_ready
from kubernetes import client

from operators.devinstances import inventory, tcp_services
from operators.devinstances.settings import Settings

DAGS = Path(__file__).resolve().parents[2] / "dags"
ACTIONS = ("create", "start", "stop", "delete")


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dags_import_with_titled_schemad_forms(bag):
    assert not {k: v for k, v in bag.import_errors.items() if "dev_instance" in k}
    for action in ACTIONS:
        dag = bag.dags[f"dev_instance_{action}"]
        assert dag.schedule is None or dag.timetable.summary == "None"
        params = dag.params
        for key in ("name", "team", "owner"):
            param = params.get_param(key)
            assert param.schema.get("title") and param.schema.get("description"), (action, key)
    create = bag.dags["dev_instance_create"].params
    from operators.platform import load_platform

    assert create.get_param("image").schema["enum"] == [i.name for i in load_platform().images]
    assert create.get_param("gpu").schema["maximum"] == 8 and create.get_param("cpu").schema["maximum"] == 64
    assert create.get_param("extra_ports").schema["maxItems"] == 5
    assert bag.dags["dev_instance_cull"].timetable.summary  # scheduled


def run(bag, action: str, **conf):
    dag_run = bag.dags[f"dev_instance_{action}"].test(run_conf={"team": NS, "name": "nb", "owner": "alice", **conf})
    return dag_run


def leaks(secret: str, airflow_home: Path, run_ids: list[str], k8s, captured: str) -> list[str]:
    """Every place the secret shows up: task logs on disk, captured output, XCom, rendered fields, Events."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    found = [str(p) for p in (airflow_home / "logs").rglob("*") if p.is_file() and secret in p.read_text(errors="ignore")]
    if secret in captured:
        found.append("captured task output")
    with create_session() as session:
        for x in session.query(XComModel).filter(XComModel.run_id.in_(run_ids)):
            if secret in str(x.value):
                found.append(f"xcom {x.dag_id}.{x.task_id}.{x.key}")
        for r in session.query(RenderedTaskInstanceFields).filter(RenderedTaskInstanceFields.run_id.in_(run_ids)):
            if secret in str(r.rendered_fields) or secret in str(r.k8s_pod_yaml):
                found.append(f"rendered fields {r.dag_id}.{r.task_id}")
    for ev in client.CoreV1Api(k8s).list_event_for_all_namespaces().items:
        if secret in str(ev.to_dict()):
            found.append(f"event {ev.metadata.name}")
    return found


@pytest.mark.usefixtures("kube_conn")
def test_lifecycle_through_the_dags_without_leaking_the_password(bag, k8s, team, airflow_db, capfd):
    settings = Settings()
    runs = [run(bag, "create", cpu=1, memory=2)]
    assert runs[-1].state == "success"
    wait_ready(k8s, "alice", "nb")
    passwords = [inventory.password(k8s, "alice", NS, "nb", caller="alice")]
    runs.append(run(bag, "stop"))
    wait_no_pod(k8s, "alice", "nb")
    runs.append(run(bag, "stop"))  # idempotent
    runs.append(run(bag, "start"))
    wait_ready(k8s, "alice", "nb")
    passwords.append(inventory.password(k8s, "alice", NS, "nb", caller="alice"))
    assert passwords[0] != passwords[1]
    assert all(r.state == "success" for r in runs)
    assert sts_of(k8s, "alice", "nb").metadata.annotations["skiff.io/last-stopped"]
    script_activity(k8s, "alice", "nb", 0.0)  # idle since 1970
    runs.append(bag.dags["dev_instance_cull"].test())
    assert runs[-1].state == "success" and sts_of(k8s, "alice", "nb").spec.replicas == 0
    runs.append(run(bag, "delete"))
    runs.append(run(bag, "delete"))  # a missing instance: says so, succeeds
    assert all(r.state == "success" for r in runs)
    assert client.CoreV1Api(k8s).read_namespaced_persistent_volume_claim("alice-home", NS)
    assert tcp_services.current(k8s, settings) == {}
    captured = "".join(capfd.readouterr())
    assert "ssh -p " in captured and "root@localhost" in captured  # the log gives the ssh line...
    for secret in passwords:  # ...and never the password
        assert leaks(secret, airflow_db, [r.run_id for r in runs], k8s, captured) == []


@pytest.mark.usefixtures("kube_conn")
def test_refused_runs_fail_with_the_reason(bag, k8s, team, airflow_db, capfd):
    assert run(bag, "create", image="no-such-image").state == "failed"
    assert "image='no-such-image': is not in the platform's image catalogue" in "".join(capfd.readouterr())
    assert run(bag, "create", owner=None).state == "failed"
    assert "pass owner in the run's conf" in "".join(capfd.readouterr())
    assert run(bag, "stop", name="ghost").state == "failed"
    assert "no development instance 'ghost' of 'alice'" in "".join(capfd.readouterr())
    assert not client.AppsV1Api(k8s).list_namespaced_stateful_set(NS).items
