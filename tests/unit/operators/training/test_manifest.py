"""Pure parts: names/labels, input validation, the rendered Job (schema-valid, SPEC §1 shape, placement)."""

from datetime import timedelta

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.core.names import is_dns_label, is_label_value
from operators.training.manifest import job_manifest
from operators.training.naming import TaskInstanceKey, job_name
from operators.training.spec import SCRIPT, Volume, build_spec

POOL = ("node.netease.com/node-pool", "online")
KEY = TaskInstanceKey("training_recommendation_daily", "train_model", "scheduled__2026-11-29T00:00:00+00:00", 1)


def spec(**over):
    values = dict(image="registry/recsys/train:1.4", namespace="recsys", work_dir="/root/recsys",
                  exec_command="python -u", entry_path="train.py", run_args=["--epochs", "3"],
                  env={"ENV_TEST": "1"}, cpu=2, memory=4, gpu=0, pvc="alice-home", volumes_=None,
                  online=False, pool_key=POOL[0], pool_value=POOL[1])
    values.update(over)
    return build_spec(**values)


def manifest(**over):
    return job_manifest(spec(**over), KEY, execution_timeout=timedelta(hours=2), ttl_seconds_after_finished=600)


def test_reference_shape_and_schema():
    job = manifest(gpu=2, volumes_=[Volume("recsys-datasets", "/data"), {"pvc": "out", "mount_path": "/out",
                                                                     "read_only": False}])
    kubernetes_validate.validate(job, "1.33", strict=True)
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "train"
    assert container["resources"]["requests"] == container["resources"]["limits"] == {
        "cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "2"}
    assert container["command"][:3] == ["/bin/bash", "-ic", SCRIPT]
    # no task instance yet (parse time): no checkpoint directory ("") and nothing to remove ("keep")
    assert container["command"][4:] == ["/root/recsys", "", "keep", "python", "-u", "/root/train.py", "--epochs", "3"]
    assert container["env"] == [{"name": "ENV_TEST", "value": "1"}]
    assert container["volumeMounts"] == [
        {"name": "root-dir", "mountPath": "/root"},
        {"name": "vol-0", "mountPath": "/data", "readOnly": True},
        {"name": "vol-1", "mountPath": "/out", "readOnly": False},
    ]
    assert pod["volumes"][0] == {"name": "root-dir", "persistentVolumeClaim": {"claimName": "alice-home"}}
    assert pod["restartPolicy"] == "Never"


def test_gpu_toleration_iff_gpu_and_online_pool_preference():
    cpu_job = manifest()["spec"]["template"]["spec"]
    assert "tolerations" not in cpu_job and "affinity" not in cpu_job
    assert "nvidia.com/gpu" not in cpu_job["containers"][0]["resources"]["limits"]
    gpu_online = manifest(gpu=1, online=True)["spec"]["template"]["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in gpu_online[
        "tolerations"]
    assert {"key": POOL[0], "operator": "Equal", "value": POOL[1], "effect": "NoSchedule"} in gpu_online[
        "tolerations"]
    (pref,) = gpu_online["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pref == {"weight": 100, "preference": {"matchExpressions": [
        {"key": POOL[0], "operator": "In", "values": [POOL[1]]}]}}
    custom = manifest(online=True, pool_key="example.com/pool", pool_value="prod")["spec"]["template"]["spec"]
    assert custom["tolerations"][0]["key"] == "example.com/pool" and custom["tolerations"][0]["value"] == "prod"


def test_node_pools_of_the_platform_file_set_the_gpu_resource_and_the_taints():
    from operators.platform import NodePools

    pools = NodePools(gpu_resource="example.com/gpu", gpu_taint_key="example.com/gpu-node", gpu_taint_value="yes",
                      gpu_taint_effect="NoExecute", online_taint_effect="PreferNoSchedule")
    job = manifest(gpu=1, online=True, node_pools=pools)
    kubernetes_validate.validate(job, "1.33", strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "4Gi", "example.com/gpu": "1"}
    assert pod["tolerations"] == [
        {"key": "example.com/gpu-node", "operator": "Equal", "value": "yes", "effect": "NoExecute"},
        {"key": POOL[0], "operator": "Equal", "value": POOL[1], "effect": "PreferNoSchedule"}]


def test_labels_and_annotations_trace_back_to_the_task_instance():
    job = manifest()
    labels, annotations = job["metadata"]["labels"], job["metadata"]["annotations"]
    assert labels["app.kubernetes.io/managed-by"] == "skiff"
    assert labels["skiff.io/dag-id"] == "training_recommendation_daily"
    assert labels["skiff.io/run-id"] == "scheduled__2026-11-29T00_00_00_00_00"
    assert labels["skiff.io/try-number"] == "1"
    assert annotations["skiff.io/run-id"] == KEY.run_id
    assert all(is_label_value(v) for v in labels.values())
    assert job["spec"]["template"]["metadata"]["labels"] == labels


ids = st.text(min_size=1, max_size=250)


@settings(max_examples=200, deadline=None)
@given(dag=ids, task=ids, run=ids, try_number=st.integers(1, 10_000), map_index=st.integers(-1, 10_000))
def test_job_names_are_dns_labels_and_unique_per_try(dag, task, run, try_number, map_index):
    key = TaskInstanceKey(dag, task, run, try_number, map_index)
    name = job_name(key)
    assert is_dns_label(name)
    assert name != job_name(TaskInstanceKey(dag, task, run, try_number + 1, map_index))
    assert name != job_name(TaskInstanceKey(dag, task, run + "x", try_number, map_index))


@pytest.mark.parametrize(
    ("over", "field", "value"),
    [
        ({"cpu": -1}, "cpu", "-1"), ({"cpu": "lots"}, "cpu", "'lots'"), ({"cpu": 0}, "cpu", "0"),
        ({"memory": -2}, "memory", "-2"), ({"memory": "4G"}, "memory", "'4G'"),
        ({"gpu": 0.5}, "gpu", "0.5"), ({"gpu": -1}, "gpu", "-1"), ({"gpu": True}, "gpu", "True"),
        ({"image": ""}, "image", "''"), ({"image": None}, "image", "None"),
        ({"namespace": "Team_A"}, "namespace", "'Team_A'"), ({"pvc": "Bad PVC"}, "pvc", "'Bad PVC'"),
        ({"run_args": "--epochs 3"}, "run_args", "'--epochs 3'"), ({"env": {"1X=": "v"}}, "env", "'1X='"),
        ({"exec_command": "python 'unclosed"}, "exec_command", "\"python 'unclosed\""),
        ({"entry_path": "a\x00b"}, "entry_path", "'a\\x00b'"),
        ({"volumes_": [Volume("data", "relative")]}, "volumes[0].mount_path", "'relative'"),
        ({"volumes_": [Volume("data", "/root")]}, "volumes[0].mount_path", "'/root'"),
        ({"online": "yes"}, "online", "'yes'"), ({"pool_key": "bad key!"}, "online_pool_key", "'bad key!'"),
    ],
)
def test_bad_input_names_field_and_value(over, field, value):
    with pytest.raises(ValueError) as err:
        spec(**over)
    assert str(err.value).startswith(f"{field}={value}:")


def test_numbers_normalise_to_quantities():
    s = spec(cpu="500m", memory=0.5, gpu=2.0)
    assert (s.cpu, s.memory_gi, s.gpu) == ("500m", "0.5", 2)
