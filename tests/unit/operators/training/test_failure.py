"""failure.py: each cause of a failed or stuck Job gives a message naming it (pure, API-shaped dicts)."""

from operators.training import failure

JOB_FAILED = {"spec": {"backoffLimit": 0, "activeDeadlineSeconds": 60},
              "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True",
                                                      "reason": "BackoffLimitExceeded"}]}}


def pod(name="p-1", *, terminated=None, waiting=None, conditions=None, memory="4Gi"):
    state = {"terminated": terminated} if terminated else {"waiting": waiting} if waiting else {}
    return {"metadata": {"name": name, "creationTimestamp": "2026-11-29T11:00:00Z"},
            "spec": {"containers": [{"name": "train", "resources": {"limits": {"memory": memory}}}]},
            "status": {"conditions": conditions or [],
                       "containerStatuses": [{"name": "train", "image": "img:1", "state": state}]}}


def test_job_state():
    assert failure.job_state(JOB_FAILED) == "failed"
    assert failure.job_state({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == "succeeded"
    assert failure.job_state({"status": {"active": 1}}) == "active"


def test_exit_code_and_oom():
    assert failure.failure_reason(JOB_FAILED, [pod(terminated={"exitCode": 3, "reason": "Error"})], []).startswith(
        "exit code 3")
    oom = failure.failure_reason(JOB_FAILED, [pod(terminated={"exitCode": 137, "reason": "OOMKilled"})], [])
    assert oom.startswith("OOMKilled") and "4Gi" in oom


def test_deadline_exceeded():
    job = {"spec": {"activeDeadlineSeconds": 60}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    assert failure.failure_reason(job, [], []).startswith("DeadlineExceeded") and "60s" in \
        failure.failure_reason(job, [], [])


def test_blocking_problems():
    pull = failure.blocking_problem([pod(waiting={"reason": "ImagePullBackOff", "message": "not found"})], [])
    assert pull.kind == "fatal" and pull.message.startswith("ImagePullBackOff") and "img:1" in pull.message
    config = failure.blocking_problem([pod(waiting={"reason": "CreateContainerConfigError",
                                                    "message": 'secret "x" not found'})], [])
    assert config.kind == "fatal" and 'secret "x" not found' in config.message
    unsched = failure.blocking_problem([pod(conditions=[{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."}])], [])
    assert unsched.kind == "unschedulable" and "Insufficient nvidia.com/gpu" in unsched.message
    quota = failure.blocking_problem([], [{
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": "2026-11-29T11:00:01Z",
        "involvedObject": {"kind": "Job", "name": "j"},
        "message": 'Error creating: pods "j-abc" is forbidden: exceeded quota: skiff-quota, requested: '
                   "requests.cpu=4, used: requests.cpu=0, limited: requests.cpu=2"}])
    assert quota.kind == "quota"
    assert quota.message.startswith("exceeded quota: skiff-quota, requested: requests.cpu=4")
    assert failure.blocking_problem([pod(waiting={"reason": "ContainerCreating"})], []) is None


def test_an_evicted_pod_names_the_eviction_not_the_kill():
    """The kubelet's eviction kills the container (exit code 137): the reason is the pod's Evicted and message."""
    evicted = pod(terminated={"exitCode": 137, "reason": "Error"})
    evicted["status"].update(phase="Failed", reason="Evicted",
                             message="Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ")
    assert failure.failure_reason(JOB_FAILED, [evicted], []) == (
        "Evicted: pod p-1: Pod ephemeral local storage usage exceeds the total limit of containers 50Mi.")
