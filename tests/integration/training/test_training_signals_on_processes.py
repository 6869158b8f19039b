"""Kill, timeout and retry through the training operator, on real processes (issue 27 part 3): kubesim's process
nodes run the argv Skiff builds (``bash -ic SCRIPT ...`` then the program), no Airflow stack.

- ``on_kill`` (a user marks the task failed) and the task's time running out (the Job's
  ``activeDeadlineSeconds`` = ``execution_timeout``; the triggerer's defer timeout) stop the step's process with
  SIGTERM first: its handler writes a file on the owner's home volume and exits before the grace period; a
  program that ignores SIGTERM is SIGKILLed once the grace period is over (exit 137).
- A retry's process finds what the failed try left in ``SKIFF_CHECKPOINT_DIR`` (on the home volume).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kubernetes import client

from kubesim.testing import wait_until
from operators import TrainingJobFailed
from operators.training.naming import LABEL_JOB
from tests.support.kubesim.procrt_support import last_state_before_removal
from tests.support.training import process_nodes
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import NAMESPACE, make_context, operator

# the cluster on real processes (process_nodes.py)
process_server, kubesim, kubeconfig = process_nodes.process_server, process_nodes.kubesim, process_nodes.kubeconfig

# SIGTERM's handler writes "SIGTERM <token>" to $MARK, then exits 42 (a SIGKILL would be 137), or returns and
# waits on when STUBBORN=1 (a program that goes on ignoring the request to stop)
ON_TERM = """\
import os, signal, sys
def on_term(signum, frame):
    with open(os.environ["MARK"], "w") as f:
        f.write("SIGTERM " + os.environ["TOKEN"] + "\\n")
    print("handler wrote", os.environ["MARK"], flush=True)
    if os.environ.get("STUBBORN") != "1":
        sys.exit(42)
signal.signal(signal.SIGTERM, on_term)
print("ready", os.environ["TOKEN"], flush=True)
while True:
    signal.pause()
"""

# try 1 saves into the step's checkpoint directory and fails; a later try prints what it found there
RETRY = """\
import os, sys
path = os.path.join(os.environ["SKIFF_CHECKPOINT_DIR"], "state.txt")
if os.environ["SKIFF_TRY_NUMBER"] == "1":
    with open(path, "w") as f:
        f.write("saved by try 1: " + os.environ["TOKEN"])
    print("try 1 saved", path, "and fails", flush=True)
    sys.exit(1)
with open(path) as f:
    found = f.read()
print("try", os.environ["SKIFF_TRY_NUMBER"], "resume", os.environ["SKIFF_RESUME"], "found:", found, flush=True)
"""




def step(task_id: str, program: str, token: str, **kwargs):
    env = {"TOKEN": token, "MARK": f"/root/{task_id}.txt", **kwargs.pop("env", {})}
    op = operator(task_id, entry_path=None, exec_command=["python", "-u", "-c", program], env=env, **kwargs)
    return op, logged(op)


def run_in_thread(op, context) -> dict:
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = op.execute(context)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def pods(k8s) -> list:
    return client.CoreV1Api(k8s).list_namespaced_pod(NAMESPACE, label_selector=LABEL_JOB).items


def pod_log(k8s, name: str) -> str:
    try:
        return client.CoreV1Api(k8s).read_namespaced_pod_log(name, NAMESPACE, _preload_content=False).data.decode()
    except client.ApiException:
        return ""


def home_file(k8s, path: str) -> str:
    """A file of alice's home volume, read the way a person would: a pod that mounts it and prints it."""
    core = client.CoreV1Api(k8s)
    name = f"cat-{abs(hash(path)) % 10**8}"
    core.create_namespaced_pod(NAMESPACE, {"metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "h", "persistentVolumeClaim": {"claimName": "alice-home"}}],
        "containers": [{"name": "cat", "image": "debian:12",
                        "command": ["bash", "-c", f'cat -- "{path}" 2>/dev/null || echo "(no {path})"'],
                        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "h", "mountPath": "/root"}]}]}})
    wait_until(lambda: core.read_namespaced_pod(name, NAMESPACE).status.phase in ("Succeeded", "Failed"), 30,
               what=f"{name} reading {path}")
    text = pod_log(k8s, name)
    core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
    return text


@pytest.mark.parametrize("stubborn", [False, True], ids=["handler-exits", "ignores-sigterm"])
def test_on_kill_sends_sigterm_before_sigkill(k8s, team, stubborn):
    """What Airflow calls when a user marks the running task failed: the Job goes, its pod is deleted with the
    step's grace period: SIGTERM reaches the program (through Skiff's container script), whose handler writes
    on the home volume; it exits by itself long before a 30 s grace period, or is SIGKILLed after a 1 s one."""
    token = "kill-stubborn" if stubborn else "kill-exits"
    op, lines = step("killed", ON_TERM, token, env={"STUBBORN": "1" if stubborn else "0"},
                     termination_grace_period=1 if stubborn else 30)
    run = run_in_thread(op, make_context("killed"))
    wait_until(lambda: lines.has(f"ready {token}") or "error" in run, 60, what="the program's ready line in the task log")
    assert "error" not in run, run.get("error")
    (pod,) = pods(k8s)
    assert pod.spec.termination_grace_period_seconds == (1 if stubborn else 30)

    op.on_kill()
    last = last_state_before_removal(client.CoreV1Api(k8s), pod.metadata.name, pod.metadata.resource_version,
                                     namespace=NAMESPACE, timeout=25)
    run["thread"].join(30)
    # the handler's own exit status, not the SIGKILL's 137 (which the 30 s grace period would only give later)
    assert last.status.container_statuses[0].state.terminated.exit_code == (137 if stubborn else 42)
    assert home_file(k8s, "/root/killed.txt") == f"SIGTERM {token}\n"
    assert not client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items


def test_execution_timeout_stops_the_process_with_sigterm_first(k8s, team):
    """The task's time is up: the Job's activeDeadlineSeconds (= execution_timeout) makes the Job controller
    delete the pod: the program's SIGTERM handler runs and the try fails naming the deadline."""
    op, lines = step("late", ON_TERM, "deadline", execution_timeout=timedelta(seconds=6), termination_grace_period=30)
    run = run_in_thread(op, make_context("late"))
    wait_until(lambda: lines.has("ready deadline") or "error" in run, 60, what="the program's ready line")
    run["thread"].join(60)
    assert not run["thread"].is_alive()
    assert isinstance(run.get("error"), TrainingJobFailed), run
    assert "DeadlineExceeded" in str(run["error"]), run["error"]
    assert home_file(k8s, "/root/late.txt") == "SIGTERM deadline\n"


def test_trigger_timeout_stops_the_process_with_sigterm_first(k8s, team):
    """Deferred: the triggerer gives up at the defer timeout and Airflow resumes the task with __fail__: the
    operator deletes the try's Job and the program's SIGTERM handler runs."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import TaskDeferralTimeout

    op, _ = step("deferred", ON_TERM, "trigger", deferrable=True, termination_grace_period=30)
    ctx = make_context("deferred")
    with pytest.raises(TaskDeferred):
        op.execute(ctx)
    (pod,) = wait_until(lambda: pods(k8s), 30, what="the Job's pod")
    wait_until(lambda: "ready trigger" in pod_log(k8s, pod.metadata.name), 60, what="the program's ready line")
    pod = client.CoreV1Api(k8s).read_namespaced_pod(pod.metadata.name, NAMESPACE)

    with pytest.raises(TaskDeferralTimeout):
        step("deferred", ON_TERM, "trigger", deferrable=True)[0].resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, ctx)
    last = last_state_before_removal(client.CoreV1Api(k8s), pod.metadata.name, pod.metadata.resource_version,
                                     namespace=NAMESPACE, timeout=25)
    assert last.status.container_statuses[0].state.terminated.exit_code == 42
    assert home_file(k8s, "/root/deferred.txt") == "SIGTERM trigger\n"


def test_a_retrys_process_finds_the_previous_trys_checkpoint_files(k8s, team):
    op1, lines1 = step("retried", RETRY, "run-7")
    with pytest.raises(TrainingJobFailed) as failed:
        op1.execute(make_context("retried", 1))
    assert "exit code 1" in str(failed.value), failed.value
    assert lines1.has("try 1 saved /root/.skiff/checkpoints/training_tests/retried/")

    op2, lines2 = step("retried", RETRY, "run-7")
    op2.execute(make_context("retried", 2))
    assert lines2.has("try 2 resume 1 found: saved by try 1: run-7"), lines2.lines[-20:]
    assert len(client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items) == 2       # a Job per try
    # try 2 exited 0: Skiff's container script removed the step's checkpoint directory
    ckpt = next(line for line in lines1.lines if "try 1 saved" in line).split()[3]
    assert home_file(k8s, ckpt) == f"(no {ckpt})\n"
