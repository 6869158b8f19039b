"""Preemption loses no work, on real processes (issue 28 part 1 on issue 27's process runtime): team nlp trains
the demo's model in two steps on the cohort's 8 GPUs (4 borrowed from recsys); recsys submits an online step,
Kueue reclaims its GPUs by preempting nlp's borrowing step, whose process receives SIGTERM (passed on by Skiff's
container script), saves a checkpoint mid-epoch and exits; the Job is suspended, admitted again once recsys'
step is done, and its new process - told SKIFF_RESUME=1 and SKIFF_PREEMPTIONS=1 through the pod template Skiff
wrote meanwhile - resumes from the checkpoint and ends with exactly the model the unpreempted step made.
The same for a 2-worker step (issue 35): the gang is preempted whole and both ranks resume from rank 0's checkpoint.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from devstack.demo_setup import install_demo_home
from kubesim.testing import wait_until
from tests.integration.training.test_training_kueue_preemption import jobs, start
from tests.support.kubesim.procrt_support import as_process_nodes
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import operator, sim

TRAIN = ["--epochs", "3", "--samples", "20000", "--throttle", "0.08", "--log-every", "10"]


@pytest.fixture(scope="module")
def process_kueue_server():
    from kubesim.kubelet.nodes import DEFAULT_NODES
    from kubesim.server import KubeSim

    server = KubeSim(kueue=True, nodes=as_process_nodes(DEFAULT_NODES)).start()
    yield server
    server.stop()


@pytest.fixture
def kubesim_kueue(process_kueue_server):
    """kueue_support.kueue_teams on process nodes: this module's override of the shared fixture."""
    process_kueue_server.reset()
    return process_kueue_server


def _file(api, namespace: str, pvc: str, path: str) -> str:
    """A file of a home volume, read the way a person would: a pod that mounts it and prints it."""
    core = client.CoreV1Api(api)
    name = f"cat-{abs(hash(path)) % 10**8}"
    # the team's LocalQueue: Kueue holds a pod without one in a team namespace (manageJobsWithoutQueueName)
    core.create_namespaced_pod(namespace, {"metadata": {"name": name, "labels": {
        "kueue.x-k8s.io/queue-name": "skiff"}}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "h", "persistentVolumeClaim": {"claimName": pvc}}],
        "containers": [{"name": "cat", "image": "debian:12", "command": ["cat", path],
                        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "h", "mountPath": "/root"}]}]}})
    wait_until(lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"), 30,
               what=f"{name} reading {path}")
    # raw bytes: the client would parse a JSON body into a dict and hand back its repr
    return core.read_namespaced_pod_log(name, namespace, _preload_content=False).data.decode()


def _reclaimed_by_recsys(steps: dict, gpu: int, what: str):
    """recsys' online step takes back `gpu` GPUs, so Kueue preempts one of nlp's borrowing `steps`; every run
    (recsys' and nlp's) then ends without error. The preempted step's id, the other's, and the preempted's lines."""
    online = operator("a1", owner="alice", namespace="recsys", gpu=gpu, online=True, pod_annotations=sim(3))
    a = start(online, "a1")
    victim_id = wait_until(lambda: next((t for t, (_, lines, _) in steps.items()
                                         if lines.has("was preempted by Kueue")), None), timeout=60, what=what)
    other_id = next(t for t in steps if t != victim_id)
    a["thread"].join(120)
    assert "error" not in a, a.get("error")
    for _, _, run in steps.values():
        run["thread"].join(300)
        assert "error" not in run, run.get("error")
    return victim_id, other_id, steps[victim_id][1]


def test_a_preempted_step_saves_on_sigterm_resumes_and_ends_with_the_same_model(kueue_teams):
    import json

    api = kueue_teams
    assert install_demo_home(api, owner="carol", team="nlp", queue="skiff") == "Succeeded"
    steps = {}
    for task_id in ("b1", "b2"):       # 4 GPUs each: nlp's own 4, then recsys' idle 4 (borrowed)
        op = operator(task_id, owner="carol", namespace="nlp", gpu=4, work_dir="/root/recsys",
                      exec_command="python -u", entry_path="recsys/train.py",
                      run_args=[*TRAIN, "--model-out", f"/root/models/{task_id}"], pod_discovery_timeout=60)
        steps[task_id] = (op, logged(op), start(op, task_id))
    wait_until(lambda: all(lines.has("epoch 1/3 batch 20/") for _, lines, _ in steps.values()), timeout=120,
               what="both nlp steps training")

    victim_id, other_id, victim_lines = _reclaimed_by_recsys(steps, gpu=4, what="an nlp step preempted")

    said = victim_lines.lines
    saved = next(line for line in said if "SIGTERM: saved a checkpoint at epoch" in line)
    assert "/root/.skiff/checkpoints/training_tests/" in saved
    where = saved.split("saved a checkpoint at ")[1].split(" to ")[0]          # "epoch E batch B"
    assert any(f"resuming from the checkpoint at {where}" in line for line in said), said[-40:]
    assert any("train.py: try 1, resume=1, preemptions=1" in line for line in said)
    assert victim_lines.has("resumed: Kueue admitted it again after 1 preemption(s)")
    assert len(jobs(api, "nlp")) == 2                                           # the same Job, started again
    models = {t: json.loads(_file(api, "nlp", "carol-home", f"/root/models/{t}/metrics.json")) for t in steps}
    assert models[victim_id]["model_sha256"] == models[other_id]["model_sha256"]
    assert (models[victim_id]["resumed"], models[victim_id]["preemptions"]) == (1, 1)
    assert (models[other_id]["resumed"], models[other_id]["preemptions"]) == (0, 0)


DP_TRAIN = ["--epochs", "4", "--samples", "20000", "--throttle", "0.1"]


def test_a_preempted_two_worker_step_resumes_both_ranks_from_the_checkpoint_with_the_same_model(kueue_teams):
    """Issue 35 on real processes: nlp runs two 2-worker steps of train_dp.py (2 GPUs a worker: nlp's own 4,
    then recsys' idle 4, borrowed); recsys' online step reclaims 2 GPUs, so Kueue preempts the borrowing gang
    whole: both ranks get SIGTERM, the Job is suspended, admitted again once recsys' step is done, and both new
    ranks resume after the epoch rank 0 saved, ending with exactly the model of the gang nobody interrupted."""
    import json

    api = kueue_teams
    assert install_demo_home(api, owner="carol", team="nlp", queue="skiff") == "Succeeded"
    steps = {}
    for task_id in ("g1", "g2"):
        op = operator(task_id, owner="carol", namespace="nlp", gpu=2, workers=2, cpu=0.5, memory=0.5,
                      work_dir="/root/recsys", exec_command="python -u", entry_path="recsys/train_dp.py",
                      run_args=[*DP_TRAIN, "--model-out", f"/root/models/{task_id}"], pod_discovery_timeout=60)
        steps[task_id] = (op, logged(op), start(op, task_id))
    wait_until(lambda: all(lines.has("rank 0: epoch 1/4") for _, lines, _ in steps.values()), timeout=180,
               what="both nlp gangs past their first checkpoint")

    victim_id, other_id, victim_lines = _reclaimed_by_recsys(steps, gpu=2, what="an nlp gang preempted")

    said = victim_lines.lines
    models = {t: json.loads(_file(api, "nlp", "carol-home", f"/root/models/{t}/metrics.json")) for t in steps}
    after = models[victim_id]["resumed_after_epoch"]
    assert 1 <= after < 4, models[victim_id]
    for rank in (0, 1):     # both ranks stopped, and both came back from the same checkpoint
        assert any(f"] rank {rank}: SIGTERM: stopping" in line for line in said), said[-40:]
        assert any(f"] rank {rank}: resuming after epoch {after} from /root/.skiff/checkpoints/" in line
                   for line in said), said[-40:]
    assert victim_lines.has("resumed: Kueue admitted it again after 1 preemption(s)")
    assert len(jobs(api, "nlp")) == 2                                           # the same Job, started again
    assert models[victim_id]["model_sha256"] == models[other_id]["model_sha256"]
    assert (models[victim_id]["preemptions"], models[other_id]["preemptions"]) == (1, 0)
    assert models[other_id]["resumed_after_epoch"] == 0
    steps_other = steps[other_id][1]
    assert not steps_other.has("resuming after epoch")
