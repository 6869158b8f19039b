"""TrainingJobOperator against kubesim over HTTP: placement, failures, bad input, kill, watch resilience."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from kubernetes import client

from kubesim.testing import async_wait_until, wait_until
from operators import TrainingJobFailed, Volume
from operators.training.follow import FollowSettings, follow_job
from operators.training.naming import LABEL_JOB
from tests.support.training.training_support import NAMESPACE, make_context, operator, sim


def jobs(k8s) -> list:
    return client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items


def pods_of(k8s, job_name: str) -> list:
    return client.CoreV1Api(k8s).list_namespaced_pod(NAMESPACE, label_selector=f"{LABEL_JOB}={job_name}").items


def run(op, try_number: int = 1, **ctx):
    return op.execute(make_context(op.task_id, try_number, **ctx))


# ---- success, schema, placement ------------------------------------------------------------------------------

def test_cpu_job_succeeds_and_never_lands_on_gpu_or_online_nodes(k8s, team):
    result = run(operator("prep", pod_annotations=sim(0.3)))
    (job,) = jobs(k8s)
    assert result == {"namespace": NAMESPACE, "name": job.metadata.name, "uid": job.metadata.uid}
    assert job.status.succeeded == 1
    (pod,) = pods_of(k8s, job.metadata.name)
    assert pod.spec.node_name.startswith("cpu-")


def test_gpu_job_lands_on_a_gpu_node(k8s, team):
    run(operator("train", gpu=1, volumes=[Volume("recsys-datasets", "/data")], pod_annotations=sim(0.3)))
    (job,) = jobs(k8s)
    (pod,) = pods_of(k8s, job.metadata.name)
    assert pod.spec.node_name.startswith("gpu-")


def test_online_job_prefers_the_pool_and_falls_back_when_full(k8s, team):
    run(operator("online1", online=True, pod_annotations=sim(0.3)))
    (pod,) = pods_of(k8s, jobs(k8s)[0].metadata.name)
    assert pod.spec.node_name.startswith("online-")
    # fill both online nodes (8 cpu each), then the next online Job must run on an ordinary node
    core = client.CoreV1Api(k8s)
    for node in ("online-1", "online-2"):
        core.create_namespaced_pod(NAMESPACE, {
            "metadata": {"name": f"filler-{node}", "annotations": sim(600)},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "tolerations": [{"key": "node.netease.com/node-pool", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": "8", "memory": "1Gi"},
                                                   "limits": {"cpu": "8", "memory": "1Gi"}}}]}})
    run(operator("online2", online=True, pod_annotations=sim(0.3)))
    job2 = next(j for j in jobs(k8s) if "online2" in j.metadata.name)
    (pod2,) = pods_of(k8s, job2.metadata.name)
    assert pod2.spec.node_name.startswith("cpu-")


# ---- bad input: nothing is created --------------------------------------------------------------------------

def test_missing_pvc_fails_before_anything_is_created(k8s, team):
    with pytest.raises(ValueError, match=r"pvc='bob-home': no such PersistentVolumeClaim in namespace 'recsys'"):
        run(operator("nopvc", owner="bob"))
    with pytest.raises(ValueError, match=r"volumes\[0\].pvc='nope'"):
        run(operator("novol", volumes=[Volume("nope", "/data")]))
    assert jobs(k8s) == []


def test_templated_bad_value_fails_at_run_before_anything_is_created(k8s, team):
    op = operator("templated", cpu="{{ params.cpu }}")
    op.cpu = "-3"  # what rendering produced
    with pytest.raises(ValueError, match=r"cpu='-3'"):
        run(op)
    assert jobs(k8s) == []


# ---- failure causes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"pod_annotations": sim(0.3, lines=60, exit_code=3)}, r"exit code 3"),
        ({"pod_annotations": sim(0.3, lines=60, exit_code=137, reason="OOMKilled")}, r"OOMKilled.*1Gi"),
        ({"pod_annotations": sim(0.3, reason="ErrImagePull")}, r"ErrImagePull.*registry.local/recsys/train:1"),
        ({"pod_annotations": sim(0.3, reason="CreateContainerConfigError")}, r"CreateContainerConfigError"),
        ({"gpu": 5, "unschedulable_timeout": 0.5, "pod_annotations": sim(0.3)}, r"Unschedulable.*nvidia.com/gpu"),
        ({"cpu": 12, "unschedulable_timeout": 0.5, "pod_annotations": sim(0.3)},
         r"Unschedulable.*Insufficient cpu.*untolerated taint"),
        ({"execution_timeout": timedelta(seconds=1), "pod_annotations": sim(30)}, r"DeadlineExceeded.*1s"),
    ],
    ids=["exit-code", "oom", "image-pull", "config", "unschedulable-gpu", "unschedulable-taint", "deadline"],
)
def test_each_failure_cause_is_named(k8s, team, kwargs, expected, monkeypatch):
    if expected.startswith("Unschedulable"):
        # more than the example platform file's quota is refused before any Job exists
        # (tests/*/platform/); without a platform file the scheduler's own message is the reason
        monkeypatch.delenv("AIRFLOW__SKIFF__PLATFORM_FILE", raising=False)
    with pytest.raises(TrainingJobFailed, match=expected) as err:
        run(operator("fails", **kwargs))
    if "lines" in str(kwargs):
        assert err.value.log_tail == [f"line {i}" for i in range(11, 61)]  # the last 50 of 60
        assert "--- last 50 log lines ---" in str(err.value)
    # a Job stuck waiting (image, config, unschedulable) is removed so it cannot start later
    if err.value.reason.startswith(("ErrImagePull", "CreateContainerConfigError", "Unschedulable")):
        assert all(j.metadata.deletion_timestamp or False for j in jobs(k8s)) or jobs(k8s) == []


def _quota(k8s, cpu: str) -> None:
    client.CoreV1Api(k8s).create_namespaced_resource_quota(NAMESPACE, {
        "metadata": {"name": "skiff-quota"}, "spec": {"hard": {"requests.cpu": cpu, "limits.cpu": cpu}}})


def test_quota_refusal_fails_fast_with_the_quota_message(k8s, team):
    _quota(k8s, "1")
    with pytest.raises(TrainingJobFailed, match=r"exceeded quota: skiff-quota.*requests.cpu") as err:
        run(operator("greedy", cpu=2, quota_wait=0, pod_annotations=sim(0.3)))
    assert "exceeded quota" in err.value.reason


def test_quota_refusal_fails_after_the_configured_wait(k8s, team):
    import time

    _quota(k8s, "1")
    start = time.monotonic()
    with pytest.raises(TrainingJobFailed, match=r"exceeded quota: skiff-quota"):
        run(operator("greedy2", cpu=2, quota_wait=timedelta(seconds=3), pod_annotations=sim(0.3)))
    # it waited the configured 3 s (a lower bound: load only makes it longer); that it then failed on the
    # quota timer, not on a later one (pod discovery), is what the quota message above says
    assert time.monotonic() - start >= 3
    assert jobs(k8s) == [] or all(j.metadata.deletion_timestamp for j in jobs(k8s))  # refused Job removed


def test_quota_wait_lets_the_job_start_when_quota_frees_up(k8s, team):
    _quota(k8s, "1")
    core = client.CoreV1Api(k8s)
    op = operator("patient", cpu=2, quota_wait=None, pod_annotations=sim(0.3))

    def raise_quota_when_refused():
        wait_until(lambda: any(e.reason == "FailedCreate" for e in core.list_namespaced_event(NAMESPACE).items),
                   timeout=20)
        core.patch_namespaced_resource_quota("skiff-quota", NAMESPACE,
                                             {"spec": {"hard": {"requests.cpu": "4", "limits.cpu": "4"}}})

    t = threading.Thread(target=raise_quota_when_refused)
    t.start()
    result = run(op)
    t.join()
    assert client.BatchV1Api(k8s).read_namespaced_job(result["name"], NAMESPACE).status.succeeded == 1


async def test_no_pod_within_discovery_timeout_is_an_error(k8s, k8s_async, team):
    # a Job whose controller never creates a pod (here: suspended) fails after pod_discovery_timeout
    name = _create_job(k8s, "nopods", pod_annotations=sim(0.3), suspend=True)
    result, _ = await _follow(k8s_async, name, FollowSettings(pod_discovery_timeout=1.5))
    assert result["status"] == "failed" and result["kind"] == "discovery"
    assert f"no pod was created for Job {NAMESPACE}/{name} within 1.5s" in result["reason"]


# ---- logs, watch resilience ----------------------------------------------------------------------------------

async def _follow(k8s_async, name, settings=None, lines=None):
    got = [] if lines is None else lines
    return await follow_job(k8s_async, NAMESPACE, name, settings or FollowSettings(), got.append), got


def _create_job(k8s, task_id: str, suspend: bool = False, **kwargs) -> str:
    from operators.training.naming import TaskInstanceKey

    op = operator(task_id, **kwargs)
    manifest = op.build_manifest(TaskInstanceKey("training_tests", task_id, "r1", 1))
    manifest["spec"]["suspend"] = suspend
    return client.BatchV1Api(k8s).create_namespaced_job(NAMESPACE, manifest).metadata.name


async def test_logs_of_every_pod_stream_while_the_job_runs(k8s, k8s_async, team):
    name = _create_job(k8s, "logs", pod_annotations=sim(5, lines=10))  # margin for a loaded machine
    lines: list[str] = []
    task = asyncio.create_task(_follow(k8s_async, name, lines=lines))
    await async_wait_until(lambda: any(line.endswith("line 1") for line in lines), timeout=10)
    assert not task.done()  # the first line arrived while the Job was still running
    result, _ = await task
    assert result["status"] == "success"
    assert [line.split("] ", 1)[1] for line in lines if line.startswith("[")] == [f"line {i}" for i in range(1, 11)]


async def test_follow_survives_dropped_watches_and_410(k8s, k8s_async, team, kubesim):
    name = _create_job(k8s, "resilient", pod_annotations=sim(2))
    task = asyncio.create_task(_follow(k8s_async, name))
    await async_wait_until(lambda: kubesim.cut_watches() > 0, timeout=10)  # drop the open watches
    kubesim.fail(verb="watch", path="jobs", status=410, count=1)  # the resumed watch is told "Gone"
    kubesim.fail(verb="watch", path="pods", status=500, count=2)  # and the API server has a bad moment
    result, _ = await asyncio.wait_for(task, timeout=30)
    assert result["status"] == "success"


# ---- kill ----------------------------------------------------------------------------------------------------

def test_on_kill_deletes_the_job_in_sync_mode(k8s, team):
    op = operator("killme", pod_annotations=sim(60))
    errors: list[BaseException] = []

    def body():
        try:
            run(op)
        except BaseException as exc:  # noqa: BLE001 - the Job deletion ends the follower with a failure
            errors.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    wait_until(lambda: jobs(k8s) and pods_of(k8s, jobs(k8s)[0].metadata.name), timeout=10)
    op.on_kill()
    wait_until(lambda: jobs(k8s) == [] or all(j.metadata.deletion_timestamp for j in jobs(k8s)), timeout=10)
    t.join(30)
    assert errors and "deleted" in str(errors[0])


async def test_trigger_on_kill_deletes_the_job(k8s, team):
    from operators.training.trigger import TrainingJobTrigger

    name = _create_job(k8s, "killtrigger", pod_annotations=sim(60))
    trigger = TrainingJobTrigger(namespace=NAMESPACE, name=name)
    await trigger.on_kill()
    await async_wait_until(lambda: all(j.metadata.name != name or j.metadata.deletion_timestamp
                                       for j in jobs(k8s)), timeout=10)
    await async_wait_until(lambda: pods_of(k8s, name) == [], timeout=10)  # Background propagation took the pods


async def test_a_job_replaced_under_the_same_name_is_not_followed(k8s, k8s_async, team):
    name = _create_job(k8s, "replaced", pod_annotations=sim(5))
    result = await follow_job(k8s_async, NAMESPACE, name, FollowSettings(), [].append, uid="some-other-uid")
    assert result["status"] == "failed" and result["kind"] == "deleted"
