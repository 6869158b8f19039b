"""The training container is named ``train`` (issue 29: it was ``jupyter-job``, in every pod, reason and e-mail
subject); a Job created under the old name before an upgrade is still followed: its logs stream (the log API
needs the pod's real container name) and its failure names its container."""

from __future__ import annotations

from kubernetes import client

from operators.training.follow import FollowSettings, container_name, follow_job
from operators.training.naming import TaskInstanceKey
from tests.support.training.training_support import NAMESPACE, operator, sim


def test_the_container_is_train_and_the_name_is_read_from_the_pod():
    job = operator("named").build_manifest(TaskInstanceKey("d", "named", "r", 1))
    assert [c["name"] for c in job["spec"]["template"]["spec"]["containers"]] == ["train"]
    assert container_name({"spec": {"containers": [{"name": "train"}]}}) == "train"
    assert container_name({"spec": {"containers": [{"name": "jupyter-job"}]}}) == "jupyter-job"
    assert container_name({"spec": {"containers": [{"name": "sidecar"}, {"name": "train"}]}}) == "train"


async def test_a_job_made_under_the_old_name_streams_its_logs_and_names_its_container(k8s, k8s_async, team):
    manifest = operator("old", pod_annotations=sim(1, lines=3, exit_code=3)).build_manifest(
        TaskInstanceKey("d", "old", "r", 1))
    manifest["spec"]["template"]["spec"]["containers"][0]["name"] = "jupyter-job"   # as Skiff wrote it before
    name = client.BatchV1Api(k8s).create_namespaced_job(NAMESPACE, manifest).metadata.name
    lines: list[str] = []
    result = await follow_job(k8s_async, NAMESPACE, name, FollowSettings(), lines.append)
    assert [line.split("] ", 1)[1] for line in lines if line.startswith("[")] == ["line 1", "line 2", "line 3"]
    assert result["reason"].startswith("exit code 3: container jupyter-job in pod ")
