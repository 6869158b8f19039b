"""A pod's status as its kubelet reports it, computed from the pod and its run (`podruns.PodRun`): phase,
the five pod conditions with their lastTransitionTime kept while the status holds, container and init
container statuses, IPs, QoS class. Pure.

Upstream: pkg/kubelet/kubelet_pods.go (`generateAPIPodStatus`, `convertToAPIContainerStatuses`) and
pkg/kubelet/status/generate.go (`GeneratePodReadyCondition`, `GenerateContainersReadyCondition`...).
"""
from __future__ import annotations

import hashlib

from kubesim.apimachinery.qos import qos_class
from kubesim.kubelet.podruns import TERMINAL, PodRun, image_id


def _condition(old: list[dict], type_: str, status: str, now: str, reason: str | None = None,
               message: str | None = None) -> dict:
    prev = next((c for c in old if c.get("type") == type_), None)
    since = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get(
        "lastTransitionTime") else now
    cond = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _container_status(c, ready: bool) -> dict:
    attempt = c.attempt
    cs = {"name": c.name, "image": c.image, "imageID": image_id(c.image) if attempt else "",
          "ready": ready, "started": c.running, "restartCount": c.restart_count, "state": c.state,
          "lastState": c.last_state}
    if attempt is not None:
        cs["containerID"] = attempt.container_id
    return cs


def pod_status(pod: dict, run: PodRun, now: str) -> dict:
    """The pod's status as its kubelet reports it (a pure function of the pod and its run)."""
    old = (pod.get("status") or {}).get("conditions") or []
    statuses = []
    for spec in pod["spec"].get("containers") or []:
        c = run.containers.get(spec["name"])
        if c is not None:
            statuses.append(_container_status(c, c.running and run.phase == "Running" and c.ready is not False))
    not_ready = [s["name"] for s in statuses if not s["ready"]]
    ready = "False" if not_ready or run.phase != "Running" else "True"
    if run.phase in TERMINAL:
        why = ("PodCompleted", None) if run.phase == "Succeeded" else ("PodFailed", None)
    elif not_ready:
        why = ("ContainersNotReady", f"containers with unready status: [{' '.join(not_ready)}]")
    else:
        why = (None, None)
    pending_init = [n for n, c in run.init_containers.items()
                    if (c.state.get("terminated") or {}).get("exitCode") != 0]
    initialized = not pending_init
    init_why = (None, None) if initialized else (
        "ContainersNotInitialized", f"containers with incomplete status: [{' '.join(pending_init)}]")
    scheduled = next((c for c in old if c.get("type") == "PodScheduled"), None) or _condition(
        old, "PodScheduled", "True", now)
    conditions = [
        _condition(old, "PodReadyToStartContainers", "True" if run.phase != "Pending" or any(
            s["imageID"] for s in statuses) else "False", now),
        _condition(old, "Initialized", "True" if initialized else "False", now, *init_why),
        _condition(old, "Ready", ready, now, *why),
        _condition(old, "ContainersReady", ready, now, *why),
        scheduled,
    ]
    status = {"phase": run.phase, "conditions": conditions, "hostIP": run.host_ip,
              "hostIPs": [{"ip": run.host_ip}], "podIP": run.pod_ip, "podIPs": [{"ip": run.pod_ip}],
              "startTime": run.start_time, "qosClass": qos_class(pod["spec"]), "containerStatuses": statuses}
    if run.reason:
        status["reason"] = run.reason
        status["message"] = run.message
    if run.init_containers:
        status["initContainerStatuses"] = [
            _container_status(c, "terminated" in c.state and c.state["terminated"].get("exitCode") == 0)
            for c in run.init_containers.values()]
    elif pod["spec"].get("initContainers"):
        status["initContainerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": image_id(c.get("image", "")),
             "containerID": f"containerd://{hashlib.sha256((run.uid + c['name']).encode()).hexdigest()}",
             "ready": True, "started": False, "restartCount": 0, "lastState": {},
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": run.start_time,
                                      "finishedAt": run.start_time}}}
            for c in pod["spec"]["initContainers"]]
    return status
