"""The development-instance DAGs: they import without a DB or cluster, their forms are titled and schema'd, and
the whole lifecycle runs through dag.test() on kubesim -- without the password ever reaching a task log, an
XCom, a rendered template or a Kubernetes Event."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kubernetes import client

from operators.devinstances import inventory, tcp_services
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import (
    NS,
    script_activity,
    sts_of,
    wait_no_pod,
    wait_ready,
)

DAGS = Path(__file__).resolve().parents[3] / "dags"
ACTIONS = ("create", "start", "stop", "delete")


@pytest.fixture(scope="module", autouse=True)
def platform_file():
    """The example platform file, set explicitly as an operator sets ``[skiff] platform_file``."""
    from operators.platform import ENV_PLATFORM_FILE, example_path

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_PLATFORM_FILE, str(example_path()))
        yield


@pytest.fixture(scope="module")
def bag(platform_file):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dags_import_with_titled_schemad_forms(bag):
    assert not {k: v for k, v in bag.import_errors.items() if "dev_instance" in k}
    for action in ACTIONS:
        dag = bag.dags[f"dev_instance_{action}"]
        assert dag.schedule is None
        params = dag.params
        for key in ("name", "team", "owner"):
            param = params.get_param(key)
            assert param.schema.get("title") and param.description, (action, key)
    create = bag.dags["dev_instance_create"].params
    for key in create:  # every field of the create form, not only the shared ones
        param = create.get_param(key)
        assert param.schema.get("title") and param.description and param.schema.get("type"), key
    from operators.platform import load_platform

    platform = load_platform()
    assert create.get_param("image").schema["enum"] == [i.name for i in platform.images]
    assert create.get_param("image").value == platform.default_image().name
    assert create.get_param("gpu").schema["maximum"] == 8 and create.get_param("cpu").schema["maximum"] == 64
    assert create.get_param("extra_ports").schema["maxItems"] == 5
    # Airflow's trigger form marks a field required unless "null" is one of its types: the optional JSON fields
    # are not, and each says what to write
    for key in ("mounts", "extra_ports"):
        schema = create.get_param(key).schema
        assert "null" in schema["type"] and "e.g. [" in create.get_param(key).description, (key, schema)
    assert create.get_param("team").schema["enum"] == [t.namespace for t in platform.teams]  # a menu, not free text
    cull = bag.dags["dev_instance_cull"]
    assert type(cull.timetable).__name__ == "CronTriggerTimetable" and cull.max_active_runs == 1


def run(bag, action: str, retries: int | None = None, **conf):
    """One dag.test() run; the DAG is parsed afresh each time (dag.test() keeps a run's conf in the DAG's params).
    ``retries`` replaces the task's (dag.test() waits out each retry's delay)."""
    from airflow.dag_processing.dagbag import DagBag

    dag_id = f"dev_instance_{action}"
    dag = DagBag(dag_folder=str(DAGS / f"{dag_id}.py")).dags[dag_id]
    if retries is not None:
        dag.get_task(action).retries = retries
    return dag.test(run_conf={"team": NS, "name": "nb", "owner": "alice", **conf})


def extra_links(run_id: str) -> dict[str, str]:
    """The create task's extra links as the UI reads them: XCom ``_link_<class>`` of the task instance."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.run_id == run_id, XComModel.key.like("_link_%")).all()
        return {x.key.removeprefix("_link_"): XComModel.deserialize_value(x) for x in rows}


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
def test_lifecycle_through_the_dags_without_leaking_the_password(bag, k8s, team, airflow_db, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    settings = Settings()
    runs = [run(bag, "create", cpu=1, memory=2)]
    assert runs[-1].state == "success"
    wait_ready(k8s, "alice", "nb")
    passwords = [inventory.password(Kube(k8s), "alice", NS, "nb", caller="alice")]
    urls = inventory.get_instance(Kube(k8s), "alice", NS, "nb", settings, with_idle=False).urls
    # the task's extra links (Airflow stores them in XCom when the task ends) open the instance
    assert extra_links(runs[0].run_id) == {"JupyterLink": urls["jupyter"], "CodeServerLink": urls["code-server"]}
    runs.append(run(bag, "stop"))
    wait_no_pod(k8s, "alice", "nb")
    runs.append(run(bag, "stop"))  # idempotent
    runs.append(run(bag, "start"))
    wait_ready(k8s, "alice", "nb")
    passwords.append(inventory.password(Kube(k8s), "alice", NS, "nb", caller="alice"))
    assert passwords[0] != passwords[1]
    assert all(r.state == "success" for r in runs)
    assert sts_of(k8s, "alice", "nb").metadata.annotations["skiff.io/last-stopped"]
    script_activity(k8s, "alice", "nb", 0.0)  # idle since 1970
    runs.append(run(bag, "cull"))
    assert runs[-1].state == "success" and sts_of(k8s, "alice", "nb").spec.replicas == 0
    runs.append(run(bag, "delete"))
    runs.append(run(bag, "delete"))  # a missing instance: says so, succeeds
    assert all(r.state == "success" for r in runs)
    assert client.CoreV1Api(k8s).read_namespaced_persistent_volume_claim("alice-home", NS)
    assert tcp_services.current(Kube(k8s), settings) == {}
    captured = "".join(capfd.readouterr()) + caplog.text  # the task logs: dag.test() runs tasks in-process
    assert "ssh -p " in captured and "root@localhost" in captured  # the log gives the ssh line...
    run_ids = [r.run_id for r in runs]
    # the search sees what the tasks logged and returned (so it would see a password there)
    seen = leaks("root@localhost", airflow_db, run_ids, k8s, captured)
    assert "captured task output" in seen and any(x.startswith("xcom dev_instance_create") for x in seen)
    for secret in passwords:  # ...and never the password
        assert leaks(secret, airflow_db, run_ids, k8s, captured) == []


@pytest.mark.usefixtures("kube_conn")
def test_refused_runs_fail_with_the_reason(bag, k8s, team, airflow_db, caplog, capfd):
    from airflow.sdk.exceptions import ParamValidationError

    for conf in ({"image": "no-such-image"}, {"cpu": 65}, {"extra_ports": [1, 2, 3, 4, 5, 6]}):
        with pytest.raises(ParamValidationError):  # the form's schema refuses before a run exists
            run(bag, "create", **conf)
    refusals = (({"owner": None}, "pass owner in the run's conf"),
                ({"team": "nlp"}, "home volume='alice-home': no such PersistentVolumeClaim in nlp"),
                ({"team": "nlp", "owner": "bob"}, "'bob' is not a member of this team"),
                ({"gpu": 1}, "image='tf2-cpu': is a CPU image"),
                ({"cpu": 9}, "CPU, quota 8"))  # recsys's quota in the platform file
    for conf, _ in refusals:
        assert run(bag, "create", **conf).state == "failed", conf
    # the refusal is what is checked here, not stop's retry policy for transient errors (3 retries 5, 10, 20 s
    # apart, which dag.test() waits out: 35 s), so the run has no retries
    assert run(bag, "stop", retries=0, name="ghost").state == "failed"
    output = "".join(capfd.readouterr()) + caplog.text  # the task logs (dag.test() runs tasks in-process)
    for reason in [r for _, r in refusals] + ["no development instance 'ghost' of 'alice'"]:
        assert reason in output
    assert not client.AppsV1Api(k8s).list_namespaced_stateful_set(NS).items
