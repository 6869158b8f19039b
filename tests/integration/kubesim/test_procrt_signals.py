"""Stopping process pods as a kubelet does: a graceful DELETE (deletionTimestamp + grace period, SIGTERM,
SIGKILL after the grace period, then the kubelet's final delete), activeDeadlineSeconds, and the whole
process tree ending with the pod. Files on a claim's volume outlive the pod."""
from __future__ import annotations

import time

from kubesim.testing import wait_until
from tests.support.kubesim.procrt_support import last_state_before_removal, log, phase_is, pod

CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "home"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def on_home(name, script, **kw):
    return pod(name, ["bash", "-c", script], volumes=[{"name": "home", "persistentVolumeClaim": {"claimName": "home"}}],
               container={"volumeMounts": [{"name": "home", "mountPath": "/root"}]}, **kw)


def read_home(pcore, name, path):
    pcore.create_namespaced_pod("default", on_home(name, f"cat {path}"))
    phase_is(pcore, name, "Succeeded", "Failed")
    return log(pcore, name)


def gone(pcore, name):
    return not [p for p in pcore.list_namespaced_pod("default").items if p.metadata.name == name]


def test_delete_sends_sigterm_first_and_the_handlers_file_survives_on_the_claims_volume(pcore):
    """A DELETE keeps the pod (deletionTimestamp, deletionGracePeriodSeconds) while the kubelet stops it:
    the command's TERM handler runs and writes to the volume; the pod is then removed; a later pod mounting
    the same claim reads the file (the PV's directory outlives the pod)."""
    pcore.create_namespaced_persistent_volume_claim("default", CLAIM)
    pcore.create_namespaced_pod("default", on_home(
        "term", "trap 'echo got-term > /root/term.txt; exit 0' TERM; echo ready; sleep 60 & wait"))
    phase_is(pcore, "term", "Running")
    wait_until(lambda: log(pcore, "term") == "ready\n", 10)
    deleting = pcore.delete_namespaced_pod("term", "default", grace_period_seconds=20)
    assert deleting.metadata.deletion_timestamp and deleting.metadata.deletion_grace_period_seconds == 20
    wait_until(lambda: gone(pcore, "term"), 10, what="pod removed after its TERM handler exited")
    assert read_home(pcore, "reader", "/root/term.txt") == "got-term\n"


def test_a_command_ignoring_sigterm_is_killed_after_the_grace_period(pcore):
    """killContainer: SIGKILL once the grace period has passed (the last status: exit 137)."""
    pcore.create_namespaced_pod("default", pod("stubborn", ["bash", "-c", "trap '' TERM; echo ready; sleep 60 & wait"]))
    phase_is(pcore, "stubborn", "Running")
    wait_until(lambda: log(pcore, "stubborn") == "ready\n", 10)
    start = time.monotonic()
    deleting = pcore.delete_namespaced_pod("stubborn", "default", grace_period_seconds=1)
    last = last_state_before_removal(pcore, "stubborn", deleting.metadata.resource_version)
    assert time.monotonic() - start >= 0.9
    assert last.status.container_statuses[0].state.terminated.exit_code == 137


def test_active_deadline_stops_the_process_and_fails_the_pod_deadline_exceeded(pcore):
    pcore.create_namespaced_pod("default", pod("late", ["sleep", "60"], activeDeadlineSeconds=1,
                                              terminationGracePeriodSeconds=1))
    done = phase_is(pcore, "late", "Failed", timeout=15)
    assert done.status.reason == "DeadlineExceeded"
    assert done.status.container_statuses[0].state.terminated.exit_code == 137


def test_the_whole_process_tree_ends_with_the_pod(pcore, procsim_server):
    """A background child of the command is in the container's PID namespace and cgroup: it ends too."""
    pcore.create_namespaced_pod("default", pod("tree", ["bash", "-c", "sleep 300 & echo $!; wait"],
                                              terminationGracePeriodSeconds=0))
    phase_is(pcore, "tree", "Running")
    wait_until(lambda: log(pcore, "tree").strip(), 10)
    procs = procsim_server.cluster.kubelet.procs
    uid = pcore.read_namespaced_pod("tree", "default").metadata.uid
    group = procs.pods[uid].containers["main"].group
    pids = wait_until(lambda: len(group.pids()) >= 2 and group.pids(), 10)
    pcore.delete_namespaced_pod("tree", "default")
    wait_until(lambda: gone(pcore, "tree"), 10)

    def ended(pid: int) -> bool:
        """Gone, or a zombie. Read in one go: a process that exits between a check and the read answers ESRCH
        (ProcessLookupError) or ENOENT, which is the same answer."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] == "Z"
        except (FileNotFoundError, ProcessLookupError):
            return True

    def all_gone():
        return all(ended(p) for p in pids)
    wait_until(all_gone, 10, what="every process of the container ended")


def test_a_reclaim_policy_delete_volume_goes_with_its_claim(pcore, procsim_server):
    pcore.create_namespaced_persistent_volume_claim("default", CLAIM)
    pcore.create_namespaced_pod("default", on_home("writer", "echo hi > /root/f"))
    phase_is(pcore, "writer", "Succeeded")
    pv = wait_until(lambda: pcore.read_namespaced_persistent_volume_claim("home", "default").spec.volume_name, 5)
    import os
    pv_dir = procsim_server.cluster.kubelet.procs.dirs.pv_dir(pv)
    assert open(os.path.join(pv_dir, "f")).read() == "hi\n"
    pcore.delete_namespaced_pod("writer", "default")
    pcore.delete_namespaced_persistent_volume_claim("home", "default")
    wait_until(lambda: not os.path.exists(pv_dir), 10, what="the PV's directory removed with it")


def test_suspending_a_job_stops_its_process_with_sigterm_and_resuming_starts_it_again(pcore, procsim_server):
    """job_controller.go: a suspended Job's active pods are deleted (gracefully: SIGTERM reaches the
    process, which writes on the claim's volume); resumed, a new pod starts and finds the file (what Kueue's
    preemption and re-admission do through `spec.suspend`)."""
    from kubernetes.client import BatchV1Api
    batch = BatchV1Api(pcore.api_client)
    pcore.create_namespaced_persistent_volume_claim("default", CLAIM)
    script = ("cat /root/stopped 2>/dev/null || echo first; "
              "trap 'echo stopped-by-term > /root/stopped; exit 143' TERM; sleep 60 & wait")
    tpl = on_home("x", script)
    tpl["metadata"] = {"labels": {"app": "susp"}}
    batch.create_namespaced_job("default", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "susp"},
                                            "spec": {"backoffLimit": 3, "template": tpl}})

    def job_pods():
        return [p for p in pcore.list_namespaced_pod("default", label_selector="app=susp").items]
    first = wait_until(lambda: [p for p in job_pods() if p.status.phase == "Running"], 15)[0].metadata.name
    wait_until(lambda: log(pcore, first) == "first\n", 10)
    batch.patch_namespaced_job("susp", "default", {"spec": {"suspend": True}})
    wait_until(lambda: not job_pods(), 15, what="the suspended Job's pod stopped and removed")
    batch.patch_namespaced_job("susp", "default", {"spec": {"suspend": False}})
    second = wait_until(lambda: [p for p in job_pods() if p.status.phase == "Running"], 15)[0].metadata.name
    assert second != first
    wait_until(lambda: log(pcore, second) == "stopped-by-term\n", 10, what="the new pod reads what TERM wrote")
