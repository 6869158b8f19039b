"""kubesim's simulated nodes: the default set and the `--nodes FILE` format."""
from __future__ import annotations

import json

import kubernetes_validate
import pytest
from kubernetes.client import CoreV1Api

from kubesim.kubelet.nodes import load_nodes_file, node_manifests, parse_taint
from kubesim.server import KubeSim
from kubesim.testing import sync_api_client, wait_until


def test_default_nodes_are_schema_complete(k8s):
    """Six Ready nodes: cpu-1/2 (8 cpu, 32Gi), gpu-1/2 (16 cpu, 64Gi, 4 GPUs, GPU label + NoSchedule taint),
    online-1/2 (pool label + taint); each Node passes the strict 1.31 schema."""
    core = CoreV1Api(k8s)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert sorted(nodes) == ["cpu-1", "cpu-2", "gpu-1", "gpu-2", "online-1", "online-2"]
    assert nodes["cpu-1"].status.allocatable == {"cpu": "8", "memory": "32Gi", "pods": "110",
                                                 "ephemeral-storage": "100Gi"}
    gpu = nodes["gpu-1"]
    assert gpu.status.allocatable["nvidia.com/gpu"] == "4" and gpu.status.capacity["cpu"] == "16"
    assert gpu.metadata.labels["nvidia.com/gpu.present"] == "true"
    assert [(t.key, t.value, t.effect) for t in gpu.spec.taints] == [("nvidia.com/gpu", "true", "NoSchedule")]
    online = nodes["online-2"]
    assert online.metadata.labels["node.netease.com/node-pool"] == "online"
    assert [(t.key, t.value, t.effect) for t in online.spec.taints] == [
        ("node.netease.com/node-pool", "online", "NoSchedule")]
    assert not nodes["cpu-2"].spec.taints
    for n in nodes.values():
        assert {c.type: c.status for c in n.status.conditions}["Ready"] == "True"
        assert n.status.node_info.kubelet_version and n.status.addresses
        raw = json.loads(core.read_node(n.metadata.name, _preload_content=False).data)
        kubernetes_validate.validate(raw, "1.31", strict=True)


def test_nodes_file_compact_and_full_forms(tmp_path):
    """`--nodes FILE`: a YAML list of compact specs (name, cpu, memory, gpu, labels, taints "k=v:Effect")
    or full Node manifests; a kubesim started with it serves exactly those nodes and schedules on them."""
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "- {name: a100, cpu: 32, memory: 256Gi, gpu: 8, labels: {team: vision, nvidia.com/gpu.present: true},"
        " taints: ['nvidia.com/gpu=true:NoSchedule', 'dedicated:NoExecute']}\n"
        "- apiVersion: v1\n  kind: Node\n  metadata: {name: small, labels: {size: s}}\n"
        "  status: {capacity: {cpu: '2', memory: 4Gi, pods: '10'}}\n")
    sim = KubeSim(nodes=str(path)).start()
    try:
        api = sync_api_client(sim.url)
        core = CoreV1Api(api)
        nodes = {n.metadata.name: n for n in core.list_node().items}
        assert sorted(nodes) == ["a100", "small"]
        assert nodes["a100"].status.allocatable["nvidia.com/gpu"] == "8"
        assert nodes["a100"].metadata.labels["team"] == "vision"
        assert nodes["a100"].metadata.labels["nvidia.com/gpu.present"] == "true"     # YAML bool, as written
        assert [(t.key, t.value, t.effect) for t in nodes["a100"].spec.taints] == [
            ("nvidia.com/gpu", "true", "NoSchedule"), ("dedicated", None, "NoExecute")]
        assert nodes["small"].status.allocatable == {"cpu": "2", "memory": "4Gi", "pods": "10"}
        core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                               "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
        assert wait_until(lambda: core.read_namespaced_pod("p", "default").spec.node_name) == "small"
        api.close()
    finally:
        sim.stop()


def test_bad_nodes_file_is_refused_naming_the_problem(tmp_path):
    """A malformed nodes file fails with a message naming the node and the field."""
    path = tmp_path / "nodes.yaml"
    path.write_text("- {name: x, gpus: 2}\n")
    with pytest.raises(ValueError, match=r"node 'x': unknown field\(s\) \['gpus'\]"):
        load_nodes_file(str(path))
    with pytest.raises(ValueError, match="taint 'gpu:Sometimes'"):
        parse_taint("gpu:Sometimes")
    with pytest.raises(ValueError, match="duplicate node name"):
        node_manifests([{"name": "a"}, {"name": "a"}])
    path.write_text("name: x\n")
    with pytest.raises(ValueError, match="expected a YAML list"):
        load_nodes_file(str(path))
