"""Pods on process nodes really run: exit codes, a kernel OOM kill, a command that does not exist, init
containers, env and volumes, as a kubelet over containerd reports them (kubesim/kubelet/procrt cites the sources)."""
from __future__ import annotations

import pytest

from tests.support.kubesim.procrt_support import events_for, log, phase_is, pod


def test_a_command_exiting_3_fails_the_pod_with_exit_code_3_and_its_output(pcore):
    """containerd reports the process's exit status; the kubelet: terminated, reason Error, exitCode 3."""
    pcore.create_namespaced_pod("default", pod("three", ["bash", "-c", "echo failing; echo to-stderr >&2; exit 3"]))
    done = phase_is(pcore, "three", "Failed")
    term = done.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (3, "Error")
    assert term.started_at and term.finished_at
    assert log(pcore, "three") == "failing\nto-stderr\n"


def test_going_over_the_memory_limit_is_a_kernel_oom_kill_reported_as_oomkilled_137(pcore):
    """The cgroup's limit makes the kernel kill the process (SIGKILL, 137); its OOM event -> OOMKilled."""
    hog = "a = []\nwhile True: a.append(bytearray(10 ** 7))"
    pcore.create_namespaced_pod("default", pod("hog", ["python3", "-c", hog],
                                              container={"resources": {"limits": {"memory": "64Mi"}}}))
    done = phase_is(pcore, "hog", "Failed", timeout=30)
    term = done.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (137, "OOMKilled")


def test_a_container_reads_its_own_limits_where_runc_mounts_its_cgroup(pcore):
    """runc mounts a container's own cgroup read-only at /sys/fs/cgroup/<controller> (v1, rootfs_linux.go
    mountCgroupV1) or cgroup2 in its cgroup namespace at /sys/fs/cgroup (v2): a process sizing itself by its
    limit (the JVM, numpy's users, the demo's train.py) reads the pod's limit, not the host's. Read-only."""
    from kubesim.kubelet.procrt.cgroups import Cgroups
    version = Cgroups().version
    if version is None:
        pytest.skip("no writable cgroup on this machine: limits are off (said at kubesim's start)")
    files = {"v1": ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
             "v2": ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/cpu.max")}[version]
    script = f"cat {files[0]} {files[1]}; (echo x > {files[0]}) 2>/dev/null && echo writable || echo read-only"
    pcore.create_namespaced_pod("default", pod("limits", ["bash", "-c", script], container={
        "resources": {"limits": {"memory": "96Mi", "cpu": "250m"}}}))
    phase_is(pcore, "limits", "Succeeded", timeout=30)
    memory, cpu, mode = log(pcore, "limits").split("\n")[:3]
    assert memory == str(96 * 2**20)
    assert cpu == ("25000" if version == "v1" else "25000 100000")   # MilliCPUToQuota: 250m of a 100 ms period
    assert mode == "read-only"


def test_a_command_that_does_not_exist_fails_to_start_with_the_runtimes_message(pcore):
    """runc's exec lookup fails: containerd's StartError, exit code 128, the message in the status and
    an Event `Error: ...`; the pod (restartPolicy Never) fails instead of hanging."""
    pcore.create_namespaced_pod("default", pod("nosuch", ["no-such-command", "--x"]))
    done = phase_is(pcore, "nosuch", "Failed")
    term = done.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (128, "StartError")
    assert 'exec: "no-such-command": executable file not found in $PATH' in term.message
    assert any("executable file not found" in e.message for e in events_for(pcore, "nosuch", "Failed"))


def test_restart_policy_on_failure_restarts_the_process_with_back_off(pcore):
    """computePodActions: a failed container restarts; restartCount and lastState.terminated count it."""
    pcore.create_namespaced_pod("default", pod("again", ["bash", "-c", "echo try; exit 1"], restart="OnFailure"))

    def restarted():
        p = pcore.read_namespaced_pod("again", "default")
        cs = (p.status.container_statuses or [None])[0]
        return cs if cs and cs.restart_count >= 2 else None
    from kubesim.testing import wait_until
    cs = wait_until(restarted, 15)
    assert cs.last_state.terminated.exit_code == 1
    assert log(pcore, "again", previous=True) == "try\n"


def test_init_containers_run_in_order_before_the_containers_and_share_volumes(pcore):
    """SyncPod: each init container runs to completion, in order, then the containers start."""
    spec = pod("inits", ["bash", "-c", "cat /work/order"],
               volumes=[{"name": "work", "emptyDir": {}}],
               container={"volumeMounts": [{"name": "work", "mountPath": "/work"}]})
    spec["spec"]["initContainers"] = [
        {"name": f"init-{i}", "image": "debian:12", "command": ["bash", "-c", f"echo init-{i} >> /work/order"],
         "volumeMounts": [{"name": "work", "mountPath": "/work"}]} for i in (1, 2)]
    pcore.create_namespaced_pod("default", spec)
    done = phase_is(pcore, "inits", "Succeeded")
    assert log(pcore, "inits") == "init-1\ninit-2\n"
    assert [s.state.terminated.reason for s in done.status.init_container_statuses] == ["Completed", "Completed"]


def test_skiffs_argv_runs_in_the_home_volume_with_the_images_virtualenv(pcore):
    """The command TrainingJobOperator builds (bash -ic 'cd -- "$1" && shift && exec "$@"' ...) on a claim
    mounted at /root, the image mapped to a virtualenv (numpy importable), its exit code its own."""
    pcore.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "alice-home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    home = {"volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "alice-home"}}]}
    mount = {"volumeMounts": [{"name": "home", "mountPath": "/root"}]}
    pcore.create_namespaced_pod("default", pod("setup", ["bash", "-c", "mkdir -p /root/recsys && printf '%s\\n' "
                                                        "'import numpy, sys' 'print(\"numpy\", numpy.__version__)' "
                                                        "'sys.exit(3)' > /root/recsys/train.py"], container=mount, **home))
    phase_is(pcore, "setup", "Succeeded")
    argv = ["bash", "-ic", 'cd -- "$1" && shift && exec "$@"', "bash", "/root/recsys", "python", "-u", "train.py"]
    pcore.create_namespaced_pod("default", pod("train", argv, container={**mount, "image": "skiff/venv"}, **home))
    done = phase_is(pcore, "train", "Failed")
    assert done.status.container_statuses[0].state.terminated.exit_code == 3
    assert "numpy 2." in log(pcore, "train")


def test_a_finished_pods_sandbox_is_stopped_but_its_logs_stay(pcore, procsim_server):
    """A terminated pod keeps no process (its sandbox goes, as the kubelet stops it); its log is still served."""
    pcore.create_namespaced_pod("default", pod("brief", ["echo", "bye"]))
    phase_is(pcore, "brief", "Succeeded")
    procs = procsim_server.cluster.kubelet.procs
    uid = pcore.read_namespaced_pod("brief", "default").metadata.uid
    from kubesim.testing import wait_until
    wait_until(lambda: procs.pods[uid].sandbox is None and procs.runs_pod("default", "brief") is None, 10)
    assert log(pcore, "brief") == "bye\n"


def test_the_kubelet_keeps_a_starting_pods_task_through_a_garbage_collection(procsim_server, pcore, monkeypatch):
    """The event loop holds tasks weakly (asyncio's create_task docs: "Save a reference to the result of this
    function"). A start task nobody referenced, pending on a future only it held, was collected and its pod stayed
    ContainerCreating for good (the gang benchmark's 8-pod gangs: "Task was destroyed but it is pending!"). Here the
    start waits on such a future; a full collection must not close it."""
    import asyncio
    import gc
    import threading

    procs = procsim_server.cluster.kubelet.procs
    waiting, closed = threading.Event(), threading.Event()

    async def start_pod(run, pod):
        try:
            waiting.set()
            await asyncio.get_running_loop().create_future()     # referenced by this coroutine alone
        except GeneratorExit:                                      # what a collected coroutine gets from close()
            closed.set()
            raise

    monkeypatch.setattr(procs, "start_pod", start_pod)
    pcore.create_namespaced_pod("default", pod("held", ["sleep", "30"]))
    assert waiting.wait(15), "the kubelet never started the pod"
    gc.collect()
    assert not closed.is_set(), "the pending start task was garbage-collected"
