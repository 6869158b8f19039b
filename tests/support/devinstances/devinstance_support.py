"""Shared helpers of the development-instance tests (plain data; the cluster is kubesim)."""

from __future__ import annotations

import json

from kubernetes import client

from kubesim.testing import wait_until
from operators.devinstances import naming
from operators.devinstances.spec import Image, build_request

NS = "recsys"
USERS = ["alice", "bob", *[f"user{i:02d}" for i in range(20)]]
CATALOGUE = (Image("tf2-cpu", "registry.local/nb:tf2.15", default=True),
             Image("tf2-gpu", "registry.local/nb:tf2.15-gpu", gpu=True))


def make_request(owner="alice", name="nb", **over):
    access = {f"{owner}-home": "rw", "datasets": "ro"}
    values = dict(owner=owner, name=name, team=NS, image="tf2-cpu", cpu=1, memory=2, gpu=0, mounts_=[],
                  extra_ports_=[], catalogue=CATALOGUE, default_image="tf2-cpu", home_pvc=f"{owner}-home",
                  access=access.get)
    values.update(over)
    return build_request(**values)


def sts_of(k8s, owner, name, ns=NS):
    return client.AppsV1Api(k8s).read_namespaced_stateful_set(naming.statefulset_name(owner, name), ns)


def wait_ready(k8s, owner, name, ns=NS, timeout=15):
    try:
        return wait_until(lambda: (sts_of(k8s, owner, name, ns).status.ready_replicas or 0) >= 1, timeout,
                          what=f"{owner}-{name} ready")
    except TimeoutError as exc:     # say why: the pod's state, its events and its log's end
        raise TimeoutError(f"{exc}\n{_why_not_ready(k8s, owner, name, ns)}") from None


def _why_not_ready(k8s, owner, name, ns) -> str:
    core, out = client.CoreV1Api(k8s), []
    try:
        pods = core.list_namespaced_pod(
            ns, label_selector=f"{naming.LABEL_INSTANCE}={name},{naming.LABEL_OWNER}={owner}").items
        for pod in pods:
            out.append(f"pod {pod.metadata.name}: {pod.status.phase} {pod.status.container_statuses}")
            events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod.metadata.name}")
            out += [f"  event {e.reason}: {(e.message or '')[:300]}" for e in events.items[-10:]]
            try:
                out.append("  log: " + core.read_namespaced_pod_log(pod.metadata.name, ns, tail_lines=30)[-3000:])
            except client.ApiException as e:
                out.append(f"  log: {e.status} {e.reason}")
    except client.ApiException as e:
        out.append(f"(could not read the pods: {e.status})")
    return "\n".join(out)


def wait_no_pod(k8s, owner, name, ns=NS, timeout=15):
    core = client.CoreV1Api(k8s)
    return wait_until(lambda: not core.list_namespaced_pod(
        ns, label_selector=f"{naming.LABEL_INSTANCE}={name},{naming.LABEL_OWNER}={owner}").items, timeout,
        what=f"{owner}-{name} pod gone")


def script_activity(k8s, owner, name, last_activity: float, ns=NS) -> None:
    """Make the instance's pod answer Jupyter's /metrics with ``last_activity`` (epoch seconds)."""
    body = ("# TYPE jupyter_server_last_activity_timestamp_seconds gauge\n"
            f"jupyter_server_last_activity_timestamp_seconds {last_activity!r}\n")
    client.CoreV1Api(k8s).patch_namespaced_pod(naming.pod_name(owner, name), ns, {"metadata": {"annotations": {
        "kubesim.io/http": json.dumps({"8888/metrics": body})}}})
