"""kubesim's kubelet: pod lifecycle, scripted outcomes, restarts, logs and Events, through both clients."""
from __future__ import annotations

import json

import kubernetes_validate
import pytest
from kubernetes.client import CoreV1Api
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch

from kubesim.testing import async_wait_until, wait_until


def pod(name, restart="Never", containers=None, **annotations) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {f"kubesim.io/{k.replace('_', '-')}": str(v)
                                                       for k, v in annotations.items()}},
            "spec": {"restartPolicy": restart,
                     "containers": containers or [{"name": "main", "image": "busybox:1.36"}]}}


def phase_is(core, name, *phases):
    def check():
        p = core.read_namespaced_pod(name, "default")
        return p if p.status and p.status.phase in phases else None
    return wait_until(check, 10)


def events_for(core, name, reason=None):
    return [e for e in core.list_namespaced_event("default").items
            if e.involved_object.name == name and (reason is None or e.reason == reason)]


def log(core, name, **kw) -> str:
    # the sync client turns a log body into "b'...'" when it deserializes it: read the raw body
    return core.read_namespaced_pod_log(name, "default", _preload_content=False, **kw).data.decode()


def raw_pod(k8s, name) -> dict:
    resp = CoreV1Api(k8s).read_namespaced_pod(name, "default", _preload_content=False)
    return json.loads(resp.data)


def test_lifecycle_pending_running_succeeded_with_complete_status(k8s):
    """Bound pod: Pending (ContainerCreating) → Running → Succeeded, with the status a kubelet reports
    (conditions, IPs, startTime, qosClass, containerStatuses with imageID/containerID/state); the whole
    object passes the strict 1.31 schema."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("life", duration=0.5))
    running = phase_is(core, "life", "Running")
    cs = running.status.container_statuses[0]
    assert cs.ready and cs.started and cs.state.running.started_at is not None
    assert cs.image == "busybox:1.36" and cs.image_id.startswith("docker.io/library/busybox@sha256:")
    assert cs.container_id.startswith("containerd://")
    conds = {c.type: c.status for c in running.status.conditions}
    assert conds["Ready"] == conds["ContainersReady"] == conds["Initialized"] == conds["PodScheduled"] == "True"
    assert running.status.pod_ip and running.status.host_ip and running.status.start_time
    assert running.status.qos_class == "BestEffort"
    done = phase_is(core, "life", "Succeeded")
    term = done.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (0, "Completed") and term.finished_at >= term.started_at
    assert {c.type: c.status for c in done.status.conditions}["Ready"] == "False"
    kubernetes_validate.validate(raw_pod(k8s, "life"), "1.31", strict=True)
    reasons = [e.reason for e in events_for(core, "life")]
    for r in ("Scheduled", "Pulled", "Created", "Started"):
        assert r in reasons
    started = events_for(core, "life", "Started")[0]
    assert started.source.component == "kubelet" and started.source.host == done.spec.node_name
    assert started.involved_object.field_path == "spec.containers{main}" and started.count == 1


def test_scripted_exit_code_fails_pod_with_never(k8s):
    """restartPolicy Never: a non-zero exit → phase Failed, terminated reason Error with the exit code."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("bad", exit_code=3))
    p = phase_is(core, "bad", "Failed")
    term = p.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (3, "Error")


def test_scripted_oom_killed(k8s):
    """`kubesim.io/reason: OOMKilled` → terminated reason OOMKilled, exit code 137."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("oom", reason="OOMKilled"))
    p = phase_is(core, "oom", "Failed")
    term = p.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (137, "OOMKilled")
    kubernetes_validate.validate(raw_pod(k8s, "oom"), "1.31", strict=True)


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_image_pull_failure_stays_pending_with_failed_event(k8s, reason):
    """An image that cannot be pulled: the pod stays Pending with a waiting reason and a Warning `Failed`
    event `Failed to pull image "x": ...`."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("pull", reason=reason, containers=[
        {"name": "main", "image": "registry.example/nope:1"}]))
    ev = wait_until(lambda: [e for e in events_for(core, "pull", "Failed") if "pull image" in e.message])
    assert ev[0].type == "Warning" and ev[0].message.startswith('Failed to pull image "registry.example/nope:1": ')
    p = core.read_namespaced_pod("pull", "default")
    assert p.status.phase == "Pending"
    assert p.status.container_statuses[0].state.waiting.reason == reason
    kubernetes_validate.validate(raw_pod(k8s, "pull"), "1.31", strict=True)


def test_create_container_config_error(k8s):
    """CreateContainerConfigError: the container never starts; Pending, waiting reason, Warning event."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("cfg", reason="CreateContainerConfigError",
                                              message='secret "db" not found'))
    wait_until(lambda: events_for(core, "cfg", "Failed"))
    p = core.read_namespaced_pod("cfg", "default")
    waiting = p.status.container_statuses[0].state.waiting
    assert p.status.phase == "Pending"
    assert (waiting.reason, waiting.message) == ("CreateContainerConfigError", 'secret "db" not found')


def test_on_failure_restarts_container(k8s):
    """OnFailure: a failing container restarts (restartCount+1, lastState.terminated) and the pod stays
    Running; a BackOff event is recorded; logs of the previous run stay readable."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("flaky", restart="OnFailure", exit_code=1, duration=0.1,
                                              logs="boom"))
    def restarted():
        p = core.read_namespaced_pod("flaky", "default")
        cs = (p.status.container_statuses or [None])[0]
        return p if cs and cs.restart_count >= 2 else None
    p = wait_until(restarted)
    cs = p.status.container_statuses[0]
    assert p.status.phase == "Running"
    assert cs.last_state.terminated.exit_code == 1 and cs.last_state.terminated.reason == "Error"
    assert events_for(core, "flaky", "BackOff")
    assert log(core, "flaky", previous=True) == "boom\n"


def test_always_restarts_even_after_success(k8s):
    """restartPolicy Always restarts a container that exited 0 (reason Completed in lastState)."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("srv", restart="Always", duration=0.1))
    def restarted():
        cs = (core.read_namespaced_pod("srv", "default").status.container_statuses or [None])[0]
        return cs if cs and cs.restart_count >= 1 and cs.last_state.terminated else None
    cs = wait_until(restarted)
    assert cs.last_state.terminated.reason == "Completed" and cs.last_state.terminated.exit_code == 0


def test_active_deadline_seconds_fails_pod(k8s):
    """activeDeadlineSeconds: the kubelet kills the pod → Failed, reason DeadlineExceeded."""
    core = CoreV1Api(k8s)
    body = pod("slow", duration=30)
    body["spec"]["activeDeadlineSeconds"] = 1
    core.create_namespaced_pod("default", body)
    p = phase_is(core, "slow", "Failed")
    assert p.status.reason == "DeadlineExceeded"
    assert p.status.message == "Pod was active on the node longer than the specified deadline"
    assert p.status.container_statuses[0].state.terminated.exit_code == 137


def test_logs_tail_and_timestamps(k8s):
    """Logs: `kubesim.io/log-lines` lines; tailLines and timestamps (RFC 3339 nano prefix)."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("logs", log_lines=5, duration=0.1))
    phase_is(core, "logs", "Succeeded")
    assert log(core, "logs") == "".join(f"line {i}\n" for i in range(1, 6))
    assert log(core, "logs", tail_lines=2) == "line 4\nline 5\n"
    stamped = log(core, "logs", timestamps=True).splitlines()
    assert len(stamped) == 5 and stamped[0].endswith("Z line 1") and stamped[0][:4].isdigit()


def test_logs_of_pending_pod_are_a_bad_request(k8s):
    """Before its container starts, the kubelet answers 400 `... is waiting to start: <reason>`."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("pull", reason="ErrImagePull"))
    wait_until(lambda: events_for(core, "pull", "Failed"))
    from kubernetes.client.exceptions import ApiException
    with pytest.raises(ApiException) as info:
        log(core, "pull")
    assert info.value.status == 400
    assert json.loads(info.value.body)["message"] == \
        'container "main" in pod "pull" is waiting to start: ErrImagePull'


async def test_log_follow_sees_lines_progressively(kubesim):
    """`follow=true` (kubernetes_asyncio): lines arrive as they are written over the run, and the stream
    ends when the container ends."""
    from kubesim.testing import async_api_client
    async with async_api_client(kubesim.url) as api:
        core = aclient.CoreV1Api(api)
        await core.create_namespaced_pod("default", pod("follow", log_lines=5, duration=2.0))

        async def running():
            p = await core.read_namespaced_pod("follow", "default")
            return p.status.phase == "Running"
        await async_wait_until(running)
        resp = await core.read_namespaced_pod_log("follow", "default", follow=True, _preload_content=False)
        lines, written_at_first = [], None
        async for raw in resp.content:
            lines.append(raw.decode().rstrip("\n"))
            if written_at_first is None:      # the log as the kubelet had written it when line 1 reached us
                written_at_first = await core.read_namespaced_pod_log("follow", "default")
        resp.release()
        assert lines == [f"line {i}" for i in range(1, 6)]
        # progressive: line 1 arrived while the run was still writing (5 lines evenly over 2 s)
        assert "line 1" in written_at_first and "line 5" not in written_at_first
        p = await core.read_namespaced_pod("follow", "default")
        assert p.status.phase in ("Running", "Succeeded")


async def test_watch_sees_phase_transitions(kubesim):
    """A watch (kubernetes_asyncio) on a pod sees Pending → Running → Succeeded as MODIFIED events."""
    from kubesim.testing import async_api_client
    async with async_api_client(kubesim.url) as api:
        core = aclient.CoreV1Api(api)
        created = await core.create_namespaced_pod("default", pod("watched", duration=0.2))
        phases = []
        w = awatch.Watch()
        # from the creation's resourceVersion: every later change is seen even if the pod has already finished
        # by the time the watch starts (a loaded machine)
        async with w.stream(core.list_namespaced_pod, "default", field_selector="metadata.name=watched",
                            resource_version=created.metadata.resource_version, timeout_seconds=10) as stream:
            async for ev in stream:
                phase = ev["object"].status.phase if ev["object"].status else None
                if not phases or phases[-1] != phase:
                    phases.append(phase)
                if phase == "Succeeded":
                    w.stop()
        assert phases[-2:] == ["Running", "Succeeded"]


def test_deleting_running_pod_stops_it(k8s):
    """Deleting a running pod removes it (kubesim: at once, no grace period) with a Killing event."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("victim", duration=60))
    phase_is(core, "victim", "Running")
    core.delete_namespaced_pod("victim", "default")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == []
    ev = wait_until(lambda: events_for(core, "victim", "Killing"))
    assert ev[0].message == "Stopping container main"


def test_repeated_events_are_aggregated(k8s):
    """A repeated event (same object, reason, message) bumps `count` and `lastTimestamp` instead of
    creating a new Event, as client-go's recorder does: BackOff during a crash loop."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("loop", restart="Always", exit_code=1, duration=0.05))
    ev = wait_until(lambda: [e for e in events_for(core, "loop", "BackOff") if e.count >= 2])
    assert len(events_for(core, "loop", "BackOff")) == 1
    assert ev[0].last_timestamp >= ev[0].first_timestamp


def test_event_names_sort_in_the_order_they_happened(k8s):
    """An Event is named `<object>.<hex of UnixNano>` (client-go tools/record/event.go makeEvent), so the list,
    in name order as the API server returns it (and `kubectl get events`), shows a pod's life in order."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("ordered", duration=0.2))
    phase_is(core, "ordered", "Succeeded")
    events = wait_until(lambda: (lambda es: es if {"Started"} <= {e.reason for e in es} else None)(
        events_for(core, "ordered")), what="the pod's events")
    names = [e.metadata.name for e in events]
    assert names == sorted(names)
    reasons = [e.reason for e in events]
    assert reasons.index("Scheduled") < reasons.index("Pulled") < reasons.index("Created") < \
        reasons.index("Started"), reasons
    for e in events:
        prefix, _, stamp = e.metadata.name.rpartition(".")
        assert prefix == "ordered" and len(stamp) == 16
        assert abs(int(stamp, 16) / 1e9 - e.first_timestamp.timestamp()) < 1.5    # the event's own time


def test_pod_held_by_finalizer_is_stopped_when_deleted(k8s):
    """Deleting a running pod that has a finalizer: it stays (deletionTimestamp) but the kubelet stops
    its containers (exit 137) and it reaches a terminal phase; removing the finalizer removes it."""
    core = CoreV1Api(k8s)
    body = pod("held", duration=60)
    body["metadata"]["finalizers"] = ["example.com/keep"]
    core.create_namespaced_pod("default", body)
    phase_is(core, "held", "Running")
    core.delete_namespaced_pod("held", "default")
    p = phase_is(core, "held", "Failed")
    assert p.metadata.deletion_timestamp is not None
    assert p.status.container_statuses[0].state.terminated.exit_code == 137
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    wait_until(lambda: not core.list_namespaced_pod("default").items)


def test_timing_is_configurable():
    """`Timing` sets the cluster clock: with a 60 s start delay a bound pod stays Pending in
    ContainerCreating (its kubelet has admitted it: IPs and startTime are set)."""
    from kubesim.cluster import Timing
    from kubesim.server import KubeSim
    from kubesim.testing import sync_api_client
    sim = KubeSim(timing=Timing(pod_start=60)).start()
    try:
        api = sync_api_client(sim.url)
        core = CoreV1Api(api)
        core.create_namespaced_pod("default", pod("slow-start"))

        def admitted():
            p = core.read_namespaced_pod("slow-start", "default")
            return p if p.status.container_statuses else None
        p = wait_until(admitted)
        assert p.status.phase == "Pending" and p.status.pod_ip and p.status.start_time
        assert p.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
        api.close()
    finally:
        sim.stop()


def test_missing_configmap_env_is_create_container_config_error_until_created(k8s):
    """An env var from a ConfigMap that does not exist: the container waits in CreateContainerConfigError
    (`configmap "x" not found`, Warning `Failed` event); once the ConfigMap exists the kubelet starts it."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("needs-cfg", duration=0.1, containers=[{
        "name": "main", "image": "busybox:1.36",
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}}],
        "envFrom": [{"secretRef": {"name": "maybe", "optional": True}}]}]))
    ev = wait_until(lambda: events_for(core, "needs-cfg", "Failed"))
    assert ev[0].message == 'Error: configmap "settings" not found'
    waiting = core.read_namespaced_pod("needs-cfg", "default").status.container_statuses[0].state.waiting
    assert (waiting.reason, waiting.message) == ("CreateContainerConfigError", 'configmap "settings" not found')
    core.create_namespaced_config_map("default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "settings"}, "data": {"a": "1"}})
    phase_is(core, "needs-cfg", "Succeeded")


def test_missing_secret_volume_fails_mount(k8s):
    """A Secret volume that does not exist: the pod stays ContainerCreating with a FailedMount event."""
    core = CoreV1Api(k8s)
    body = pod("needs-secret", duration=0.1)
    body["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": "s3"}}]
    core.create_namespaced_pod("default", body)
    ev = wait_until(lambda: events_for(core, "needs-secret", "FailedMount"))
    assert ev[0].type == "Warning" and ev[0].message == 'MountVolume.SetUp failed for volume "creds" : secret "s3" not found'
    p = core.read_namespaced_pod("needs-secret", "default")
    assert p.status.phase == "Pending"
    assert p.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    core.create_namespaced_secret("default", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"}})
    phase_is(core, "needs-secret", "Succeeded")
