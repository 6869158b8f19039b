"""kubesim's scheduler: placement as kube-scheduler does it, observed through the `kubernetes` client."""
from __future__ import annotations

from kubernetes.client import CoreV1Api

from kubesim.testing import wait_until

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
ONLINE_TOLERATION = {"key": "node.netease.com/node-pool", "operator": "Equal", "value": "online",
                     "effect": "NoSchedule"}
PREFER_ONLINE = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 100, "preference": {"matchExpressions": [
        {"key": "node.netease.com/node-pool", "operator": "In", "values": ["online"]}]}}]}}


def pod(name, cpu="1", memory="1Gi", gpu=0, **spec) -> dict:
    res = {"cpu": cpu, "memory": memory}
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kubesim.io/duration": "60"}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox:1.36",
                                     "resources": {"requests": res, "limits": res}}], **spec}}


def bound(core, name, ns="default"):
    def check():
        p = core.read_namespaced_pod(name, ns)
        return p.spec.node_name
    return wait_until(check, 10)


def scheduled_condition(core, name, ns="default"):
    def check():
        p = core.read_namespaced_pod(name, ns)
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
    return wait_until(check, 10)


def test_gpu_pod_lands_on_gpu_node(k8s):
    """A pod requesting nvidia.com/gpu with the GPU toleration is bound to a GPU node (Scheduled event)."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("train", gpu=2, tolerations=[GPU_TOLERATION]))
    node = bound(core, "train")
    assert node in ("gpu-1", "gpu-2")
    cond = scheduled_condition(core, "train")
    assert cond.status == "True"
    events = wait_until(lambda: [e for e in core.list_namespaced_event("default").items
                                 if e.reason == "Scheduled" and e.involved_object.name == "train"])
    assert events[0].message == f"Successfully assigned default/train to {node}"
    assert events[0].source.component == "default-scheduler"


def test_cpu_pods_never_land_on_gpu_or_online_nodes(k8s):
    """Untolerated NoSchedule taints keep CPU pods off GPU and online-pool nodes, even when plain nodes
    are full: the extra pod stays Pending instead."""
    core = CoreV1Api(k8s)
    for i in range(4):       # 4 x 4 cpu fills cpu-1 and cpu-2 (8 cpu each)
        core.create_namespaced_pod("default", pod(f"cpu-{i}", cpu="4"))
    nodes = {bound(core, f"cpu-{i}") for i in range(4)}
    assert nodes == {"cpu-1", "cpu-2"}
    core.create_namespaced_pod("default", pod("extra", cpu="4"))
    cond = scheduled_condition(core, "extra")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    assert core.read_namespaced_pod("extra", "default").spec.node_name is None


def test_unschedulable_reason_and_event(k8s):
    """Nothing fits → Pending, PodScheduled=False/Unschedulable and a FailedScheduling event with the real
    message shape: per-reason node counts, sorted."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("huge", gpu=5, tolerations=[GPU_TOLERATION]))
    cond = scheduled_condition(core, "huge")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    # plain nodes pass taints and selectors but have no GPU: they count as Insufficient too
    assert cond.message.startswith("0/6 nodes are available: 2 node(s) had untolerated taint "
                                   "{node.netease.com/node-pool: online}, 4 Insufficient nvidia.com/gpu. "
                                   "preemption: 0/6 nodes are available"), cond.message
    ev = wait_until(lambda: [e for e in core.list_namespaced_event("default").items
                             if e.reason == "FailedScheduling"])
    assert ev[0].type == "Warning" and ev[0].message == cond.message


def test_node_selector_and_required_affinity(k8s):
    """nodeSelector and required node affinity (In / NotIn, matchFields metadata.name) restrict placement."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("sel", nodeSelector={"kubernetes.io/hostname": "cpu-2"}))
    assert bound(core, "sel") == "cpu-2"
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["online-2"]}]}]}}}
    core.create_namespaced_pod("default", pod("aff", affinity=affinity, tolerations=[ONLINE_TOLERATION]))
    assert bound(core, "aff") == "online-2"
    none = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                               "values": ["cpu-1", "cpu-2"]}]}]}}}
    core.create_namespaced_pod("default", pod("nowhere", affinity=none))
    cond = scheduled_condition(core, "nowhere")
    assert cond.status == "False"
    assert "2 node(s) didn't match Pod's node affinity/selector" in cond.message


def test_online_pool_preferred_then_fallback_when_full(k8s):
    """An online task tolerates the online taint and prefers the pool (weight 100); when the pool is full
    it falls back to plain nodes rather than waiting."""
    core = CoreV1Api(k8s)
    for i in range(2):
        core.create_namespaced_pod("default", pod(f"on-{i}", cpu="8", memory="4Gi", affinity=PREFER_ONLINE,
                                                  tolerations=[ONLINE_TOLERATION]))
    assert {bound(core, f"on-{i}") for i in range(2)} == {"online-1", "online-2"}
    core.create_namespaced_pod("default", pod("on-2", cpu="8", memory="4Gi", affinity=PREFER_ONLINE,
                                              tolerations=[ONLINE_TOLERATION]))
    assert bound(core, "on-2") in ("cpu-1", "cpu-2")


def test_least_allocated_node_breaks_ties(k8s):
    """With equal affinity scores, the least-allocated node wins: two pods spread over both CPU nodes."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("a", cpu="2"))
    first = bound(core, "a")
    core.create_namespaced_pod("default", pod("b", cpu="2"))
    assert bound(core, "b") != first


def test_pending_pod_scheduled_when_capacity_frees(k8s):
    """An Unschedulable pod is retried when a pod on a fitting node goes away."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("big-1", cpu="8", memory="1Gi"))
    core.create_namespaced_pod("default", pod("big-2", cpu="8", memory="1Gi"))
    bound(core, "big-1"), bound(core, "big-2")
    core.create_namespaced_pod("default", pod("waiting", cpu="8", memory="1Gi"))
    assert scheduled_condition(core, "waiting").status == "False"
    core.delete_namespaced_pod("big-1", "default")
    assert bound(core, "waiting") in ("cpu-1", "cpu-2")


def test_pending_pod_scheduled_when_node_added(k8s):
    """A new node that fits makes an Unschedulable pod schedulable."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("wide", cpu="12"))
    assert scheduled_condition(core, "wide").status == "False"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "big-cpu"},
                      "status": {"capacity": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                                 "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}}})
    assert bound(core, "wide") == "big-cpu"


def test_user_set_node_name_binds_directly(k8s):
    """spec.nodeName set by the user bypasses the scheduler; the node's kubelet runs the pod."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("direct", nodeName="gpu-2"))
    wait_until(lambda: core.read_namespaced_pod("direct", "default").status.phase == "Running")
    assert core.read_namespaced_pod("direct", "default").spec.node_name == "gpu-2"
    assert not [e for e in core.list_namespaced_event("default").items if e.reason == "Scheduled"]


def test_affinity_operators_gt_lt_exists_doesnotexist(k8s):
    """Required node affinity with Gt/Lt on numeric labels and Exists/DoesNotExist."""
    core = CoreV1Api(k8s)
    for name, mem in (("mem-64", "64"), ("mem-512", "512")):
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": {"example.com/mem-gb": mem, "big": "yes"}},
                          "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})

    def affinity(*exprs):
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": list(exprs)}]}}}
    core.create_namespaced_pod("default", pod("gt", affinity=affinity(
        {"key": "example.com/mem-gb", "operator": "Gt", "values": ["100"]})))
    core.create_namespaced_pod("default", pod("lt", affinity=affinity(
        {"key": "example.com/mem-gb", "operator": "Lt", "values": ["100"]})))
    core.create_namespaced_pod("default", pod("plain", affinity=affinity(
        {"key": "big", "operator": "DoesNotExist"}, {"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"},
        {"key": "node.netease.com/node-pool", "operator": "DoesNotExist"})))
    core.create_namespaced_pod("default", pod("exists", affinity=affinity(
        {"key": "big", "operator": "Exists"}, {"key": "example.com/mem-gb", "operator": "In", "values": ["64"]})))
    assert bound(core, "gt") == "mem-512" and bound(core, "lt") == "mem-64"
    assert bound(core, "plain") in ("cpu-1", "cpu-2") and bound(core, "exists") == "mem-64"


def test_binding_subresource_from_another_scheduler(k8s):
    """A pod for another scheduler is left alone by default-scheduler; a Binding posted by that scheduler
    (POST pods/<name>/binding) assigns it and the node's kubelet runs it."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("custom", schedulerName="my-scheduler"))
    core.create_namespaced_pod("default", pod("later"))
    bound(core, "later")      # the scheduler works in order: it has seen "custom" and left it alone
    assert core.read_namespaced_pod("custom", "default").spec.node_name is None
    core.create_namespaced_pod_binding("custom", "default", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "custom"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "cpu-2"}}, _preload_content=False)
    wait_until(lambda: core.read_namespaced_pod("custom", "default").status.phase == "Running")
    cond = scheduled_condition(core, "custom")
    assert core.read_namespaced_pod("custom", "default").spec.node_name == "cpu-2" and cond.status == "True"


def test_missing_pvc_is_unschedulable_until_created(k8s):
    """A pod mounting a PVC that does not exist is Unschedulable (`persistentvolumeclaim "x" not found`)
    and is scheduled once the claim is created."""
    core = CoreV1Api(k8s)
    body = pod("mounts")
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "home-alice"}}]
    core.create_namespaced_pod("default", body)
    cond = scheduled_condition(core, "mounts")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    assert cond.message.startswith('0/6 nodes are available: persistentvolumeclaim "home-alice" not found. ')
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "home-alice"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    assert bound(core, "mounts") in ("cpu-1", "cpu-2")
