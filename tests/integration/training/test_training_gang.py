"""Distributed training steps through the operator (issue 35), on real processes: ``TrainingJobOperator(workers=N)``
makes one Indexed Job and a headless Service; the ranks find rank 0 by the name Skiff gives them
(SKIFF_MASTER_ADDR / MASTER_ADDR), exchange data over TCP between their pods, and every rank's lines reach the
task log prefixed with its rank; a failed rank ends the step at once, named with its pod and cause. kubesim's
process nodes run the argv Skiff builds; no Airflow stack."""

from __future__ import annotations

import json
import re

import pytest
from kubernetes import client

from operators import TrainingJobFailed
from operators.training.naming import LABEL_JOB
from tests.support.training import process_nodes
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import NAMESPACE, make_context, operator

# the cluster on real processes (process_nodes.py)
process_server, kubesim, kubeconfig = process_nodes.process_server, process_nodes.kubesim, process_nodes.kubeconfig

# rank 0 serves on its own address at SKIFF_MASTER_PORT and sums what every other rank sends; the others
# connect to SKIFF_MASTER_ADDR (retrying while rank 0 comes up) and send their rank; RANK_FAILS exits 3
PROGRAM = """\
import json, os, socket, sys, time
rank, n = int(os.environ["SKIFF_RANK"]), int(os.environ["SKIFF_WORKERS"])
assert os.environ["RANK"] == os.environ["NODE_RANK"] == str(rank) and os.environ["WORLD_SIZE"] == str(n)
assert os.environ["MASTER_ADDR"] == os.environ["SKIFF_MASTER_ADDR"]
tf = json.loads(os.environ["TF_CONFIG"])
print("rank", rank, "of", n, "tf index", tf["task"]["index"], "workers", len(tf["cluster"]["worker"]), flush=True)
if os.environ.get("RANK_FAILS") == str(rank):
    print("rank", rank, "gives up", flush=True)
    sys.exit(3)
port = int(os.environ["SKIFF_MASTER_PORT"])
if rank == 0:
    server = socket.create_server((socket.gethostbyname(socket.gethostname()), port))
    total = 0
    for _ in range(n - 1):
        c, _ = server.accept()
        total += int(c.makefile().readline())
        c.sendall(b"ok\\n"); c.close()
    print("rank 0 got the sum", total, flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            s = socket.create_connection((os.environ["SKIFF_MASTER_ADDR"], port), timeout=5)
            s.sendall(f"{rank}\\n".encode())
            if s.makefile().readline().strip() == "ok":
                break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("rank 0 never answered")
        time.sleep(0.1)
    print("rank", rank, "reached", os.environ["SKIFF_MASTER_ADDR"], flush=True)
    if os.environ.get("RANK_FAILS"):
        time.sleep(60)
"""




def gang(task_id: str, workers: int, **env):
    op = operator(task_id, entry_path=None, exec_command=["python", "-u", "-c", PROGRAM], workers=workers,
                  cpu=0.5, memory=0.5, env=env)
    return op, logged(op)


def test_three_workers_find_rank_0_by_name_and_every_rank_logs_with_its_rank(k8s, team):
    """workers=3: one Indexed Job (completions = parallelism = 3, FailJob on any exit code), a headless Service
    owned by it; ranks 1 and 2 reach rank 0 at SKIFF_MASTER_ADDR and rank 0 sums their ranks (3); the task log
    has each rank's lines prefixed with its rank."""
    op, lines = gang("gang3", 3)
    result = op.execute(make_context("gang3"))
    job = client.BatchV1Api(k8s).read_namespaced_job(result["name"], NAMESPACE)
    assert (job.spec.completion_mode, job.spec.completions, job.spec.parallelism) == ("Indexed", 3, 3)
    assert job.spec.pod_failure_policy.rules[0].action == "FailJob" and job.status.completed_indexes == "0-2"
    svc = client.CoreV1Api(k8s).read_namespaced_service(result["name"], NAMESPACE)
    assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses
    assert svc.metadata.owner_references[0].uid == job.metadata.uid
    text = "\n".join(lines.lines)
    pods = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p.metadata.name for p in
            client.CoreV1Api(k8s).list_namespaced_pod(NAMESPACE, label_selector=LABEL_JOB).items}
    assert f"[rank 0 {pods['0']}] rank 0 got the sum 3" in text
    master = f"{result['name']}-0.{result['name']}.{NAMESPACE}.svc"
    for r in (1, 2):
        assert f"[rank {r} {pods[str(r)]}] rank {r} of 3 tf index {r} workers 3" in text
        assert f"[rank {r} {pods[str(r)]}] rank {r} reached {master}" in text


def test_a_failed_rank_fails_the_step_at_once_naming_its_rank_pod_and_cause(k8s, team):
    """Rank 1 exits 3 while rank 0 waits for it: the Job fails at once (podFailurePolicy FailJob), the error
    names rank 1, its pod and exit code 3, and the alert's log lines are rank 1's."""
    op, _ = gang("gangfail", 2, RANK_FAILS="1")
    with pytest.raises(TrainingJobFailed) as err:
        op.execute(make_context("gangfail"))
    pods = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p.metadata.name for p in
            client.CoreV1Api(k8s).list_namespaced_pod(NAMESPACE, label_selector=LABEL_JOB).items}
    assert err.value.reason.startswith(f"rank 1 of 2 workers failed (pod {pods['1']}): exit code 3"), err.value.reason
    assert err.value.log_tail[-1] == f"[rank 1 {pods['1']}] rank 1 gives up", err.value.log_tail
    job = client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items[0]
    assert [c.reason for c in job.status.conditions if c.type == "Failed"] == ["PodFailurePolicy"]


def test_gang_env_and_manifest_are_pure():
    """The gang's variables: JOB_COMPLETION_INDEX first (from the annotation), then the rank by $(...), rank 0's
    stable name, torchrun's and TF_CONFIG; a user env naming one of them is refused for a gang."""
    from operators.training.naming import TaskInstanceKey

    op = operator("pure", workers=4)
    manifest = op.build_manifest(TaskInstanceKey("d", "pure", "r", 1))
    name = manifest["metadata"]["name"]
    env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.index("JOB_COMPLETION_INDEX") < names.index("SKIFF_RANK")
    values = {e["name"]: e.get("value") for e in env}
    assert values["SKIFF_MASTER_ADDR"] == values["MASTER_ADDR"] == f"{name}-0.{name}.{NAMESPACE}.svc"
    assert (values["WORLD_SIZE"], values["RANK"], values["MASTER_PORT"]) == ("4", "$(JOB_COMPLETION_INDEX)", "29500")
    tf = json.loads(values["TF_CONFIG"].replace("$(JOB_COMPLETION_INDEX)", "2"))
    assert tf["task"] == {"type": "worker", "index": 2} and len(tf["cluster"]["worker"]) == 4
    assert len(f"{name}-3") <= 63 and manifest["spec"]["template"]["spec"]["subdomain"] == name
    with pytest.raises(ValueError, match=r"env=.?'RANK'.?: is set by Skiff for each of the 4 workers"):
        operator("bad", workers=4, env={"RANK": "1"})
    operator("fine", workers=1, env={"RANK": "1"})      # a single-pod step's env is the user's
    with pytest.raises(ValueError, match=r"workers=0: must be a whole number from 1 to 64"):
        operator("zero", workers=0)


def test_a_success_that_cannot_be_recorded_fails_the_try_and_a_passing_refusal_is_retried(kubesim, k8s, team,
                                                                                          monkeypatch):
    """The reattach gap: the API server refuses the "success reported" patch. Refused twice, the third write
    lands (the Job carries the record); refused every time, the try fails saying so, instead of a warning that
    left the finished Job for a later clear to adopt without training."""
    from airflow.providers.common.compat.sdk import AirflowException

    from operators.training import operator as operator_module
    from operators.training.jobs import ANNOTATION_REPORTED
    from tests.support.training.training_support import sim

    monkeypatch.setattr(operator_module, "REPORT_BACKOFF", 0.01)
    kubesim.controls.add_fault(verb="patch", path=r"/jobs/", status=503, count=2)
    result = operator("rep1", pod_annotations=sim(0.2)).execute(make_context("rep1"))
    job = client.BatchV1Api(k8s).read_namespaced_job(result["name"], NAMESPACE)
    assert job.metadata.annotations[ANNOTATION_REPORTED] == "1"
    kubesim.controls.add_fault(verb="patch", path=r"/jobs/", status=403, count=None, message="patch refused")
    with pytest.raises(AirflowException, match=r"succeeded, but Skiff could not record that on it .*failing the try"):
        operator("rep2", pod_annotations=sim(0.2)).execute(make_context("rep2"))


def test_the_user_guides_torchrun_line_reaches_the_container_for_kubernetes_to_expand():
    """The launch line of docs/user-guide.md: `$(NODE_RANK)` and friends go into the container's argv as written
    (the kubelet expands them from the worker's environment, which defines them)."""
    from operators.training.naming import TaskInstanceKey

    argv = ["torchrun", "--nnodes=4", "--nproc-per-node=8", "--node-rank=$(NODE_RANK)",
            "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
    op = operator("ddp", workers=4, exec_command=argv, entry_path="recsys/train_ddp.py", run_args=[])
    container = op.build_manifest(TaskInstanceKey("d", "ddp", "r", 1))["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-7:] == [*argv, "/root/recsys/train_ddp.py"]
    assert {"NODE_RANK", "MASTER_ADDR", "MASTER_PORT"} <= {e["name"] for e in container["env"]}


def test_the_demo_trains_data_parallel_on_two_workers_with_the_one_worker_accuracy(k8s, team):
    """dags/training_data_parallel.py's three steps on alice's home volume (devstack/demo_home/recsys): train_dp.py
    on 1 worker, then on 2 (the ranks exchange gradients over TCP between their pods), then compare.py prints
    the speed-up and checks the validation AUC is the one-worker AUC."""
    from devstack.demo_setup import install_demo_home

    assert install_demo_home(k8s, owner="alice", team=NAMESPACE) == "Succeeded"
    train = ["--epochs", "1", "--samples", "8000", "--throttle", "0.02"]
    for task_id, workers, out in (("dp1", 1, "one"), ("dp2", 2, "two")):
        op = operator(task_id, work_dir="/root/recsys", exec_command="python -u", entry_path="recsys/train_dp.py",
                      run_args=[*train, "--model-out", f"/root/models/dp/{out}"], workers=workers)
        trained = logged(op)
        op.execute(make_context(task_id))
    # the lines the demo shows (devstack/__main__.py show_data_parallel): each rank's rendezvous, by name
    assert any(re.search(r"^\[rank 0 \S+\] rank 0: all 2 workers connected$", line) for line in trained.lines)
    assert any(re.search(r"^\[rank 1 \S+\] rank 1: connected to rank 0 at \S+-0\.\S+\.recsys\.svc:29500$", line)
               for line in trained.lines), trained.lines
    op = operator("cmp", work_dir="/root/recsys", exec_command="python -u", entry_path="recsys/compare.py",
                  run_args=["--one", "/root/models/dp/one", "--many", "/root/models/dp/two"])
    lines = logged(op)
    op.execute(make_context("cmp"))
    said = [line for line in lines.lines if "speed-up on 2 workers" in line]
    assert said and "AUC difference 0.00" in said[0], lines.lines


def test_the_page_counts_a_gang_as_one_step_with_its_pods():
    """Skiff's page: one row per task instance; a 4-worker step's row says 4 pods and their GPUs together."""
    from datetime import UTC, datetime

    from operators.ui import views

    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    ti = {"dag_id": "d", "task_id": "t", "run_id": "r", "state": "running", "try_number": 1, "map_index": -1,
          "start_date": now}
    job = {"metadata": {"name": "j", "namespace": "recsys"}, "spec": {"completionMode": "Indexed", "completions": 4}}
    pod = {"spec": {"nodeName": "gpu-1", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
           "status": {"phase": "Running"}}
    row = views.training_row(ti, job, pod, now=now)
    assert (row["workers"], row["gpu"], row["node"]) == (4, 8, "gpu-1")
    single = views.training_row(ti, {**job, "spec": {}}, pod, now=now)
    assert (single["workers"], single["gpu"]) == (1, 2)
