"""The simulated nodes: kubesim's default set and the `--nodes FILE` format (kubesim's own; the Node objects it
makes are what a kubelet registers: pkg/kubelet/kubelet_node_status.go `initialNode`, capacity = allocatable,
a Ready condition).

Default set (what SPEC §1 placement needs to be observable):

| nodes                  | cpu | memory | nvidia.com/gpu | labels / taints                                          |
| ---------------------- | --- | ------ | -------------- | -------------------------------------------------------- |
| `cpu-1`, `cpu-2`       | 8   | 32Gi   | -              | -                                                        |
| `gpu-1`, `gpu-2`       | 16  | 64Gi   | 4              | `nvidia.com/gpu.present=true`, taint `nvidia.com/gpu=true:NoSchedule` |
| `online-1`, `online-2` | 8   | 32Gi   | -              | label + taint `node.netease.com/node-pool=online:NoSchedule` |

Every node allows 110 pods.

`--nodes FILE` is a YAML list; each item is either a full Node manifest (`kind: Node`, used as given and
completed with a Ready status where missing) or the compact form::

    - name: big-gpu            # required
      cpu: 32                  # default 8
      memory: 128Gi            # default 32Gi
      gpu: 8                   # nvidia.com/gpu, default 0 (absent)
      pods: 110                # default 110
      labels: {team: a}        # extra labels
      taints: ["nvidia.com/gpu=true:NoSchedule", "dedicated:NoExecute"]   # key[=value]:Effect
      runtime: process         # pods really run as sandboxed processes (kubesim/kubelet/procrt); default: scripted
      images: {registry.local/recsys/train:1.0: /opt/venvs/train, "*": ../.venv}   # image -> host dir or
                               # virtualenv put first on PATH ("*": any other image; relative to the file)
      podPidsLimit: 4096       # the kubelet's podPidsLimit: processes and threads per pod (process nodes;
                               # default 4096 there, -1: unlimited as the kubelet's own default)
      seccompDefault: true     # the kubelet's seccompDefault: a container without a seccompProfile runs
                               # RuntimeDefault (process nodes; default true there, the kubelet's is false)

A process node carries the annotation `kubesim.io/runtime: process` (and `kubesim.io/images`, JSON,
`kubesim.io/pod-pids-limit`, `kubesim.io/seccomp-default`) and
reports `containerRuntimeVersion: kubesim-process://1.0`.
"""
from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable

import yaml

GPU = "nvidia.com/gpu"
GPU_TAINT = "nvidia.com/gpu=true:NoSchedule"
ONLINE_KEY = "node.netease.com/node-pool"
ONLINE_TAINT = f"{ONLINE_KEY}=online:NoSchedule"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
RUNTIMES = ("scripted", "process")
DEFAULT_POD_PIDS_LIMIT = 4096     # process nodes: a fork bomb stops here (the kubelet's own default is -1)

DEFAULT_NODES: list[dict] = [
    {"name": "cpu-1", "cpu": 8, "memory": "32Gi"},
    {"name": "cpu-2", "cpu": 8, "memory": "32Gi"},
    {"name": "gpu-1", "cpu": 16, "memory": "64Gi", "gpu": 4,
     "labels": {"nvidia.com/gpu.present": "true"}, "taints": [GPU_TAINT]},
    {"name": "gpu-2", "cpu": 16, "memory": "64Gi", "gpu": 4,
     "labels": {"nvidia.com/gpu.present": "true"}, "taints": [GPU_TAINT]},
    {"name": "online-1", "cpu": 8, "memory": "32Gi", "labels": {ONLINE_KEY: "online"}, "taints": [ONLINE_TAINT]},
    {"name": "online-2", "cpu": 8, "memory": "32Gi", "labels": {ONLINE_KEY: "online"}, "taints": [ONLINE_TAINT]},
]


def parse_taint(text: str) -> dict:
    """`key[=value]:Effect` (kubectl taint syntax) -> a core/v1 Taint."""
    head, sep, effect = text.rpartition(":")
    if not sep or not head or effect not in TAINT_EFFECTS:
        raise ValueError(f"taint {text!r}: expected key[=value]:Effect with Effect one of {TAINT_EFFECTS}")
    key, _, value = head.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def node_manifest(spec: dict, index: int = 0) -> dict:
    """A schema-complete Node from the compact form (or a full manifest, completed)."""
    if spec.get("kind") == "Node":
        return _complete(copy.deepcopy(spec), index)
    unknown = set(spec) - {"name", "cpu", "memory", "gpu", "pods", "labels", "taints", "runtime", "images",
                          "podPidsLimit", "seccompDefault"}
    if unknown:
        raise ValueError(f"node {spec.get('name')!r}: unknown field(s) {sorted(unknown)}")
    if not spec.get("name"):
        raise ValueError(f"node #{index}: 'name' is required")
    name = str(spec["name"])
    capacity = {"cpu": str(spec.get("cpu", 8)), "memory": str(spec.get("memory", "32Gi")),
                "pods": str(spec.get("pods", 110)), "ephemeral-storage": "100Gi"}
    if int(spec.get("gpu", 0) or 0) > 0:
        capacity[GPU] = str(int(spec["gpu"]))
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              **{str(k): _label_value(v) for k, v in (spec.get("labels") or {}).items()}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
            "status": {"capacity": capacity, "allocatable": dict(capacity)}}
    taints = [parse_taint(t) if isinstance(t, str) else dict(t) for t in spec.get("taints") or []]
    if taints:
        node["spec"]["taints"] = taints
    runtime = spec.get("runtime", "scripted")
    if runtime not in RUNTIMES:
        raise ValueError(f"node {name!r}: runtime {str(runtime)[:50]!r}: expected one of {RUNTIMES}")
    if spec.get("images") is not None and not isinstance(spec["images"], dict):
        raise ValueError(f"node {name!r}: images: expected a map of image -> host directory")
    pids = spec.get("podPidsLimit", DEFAULT_POD_PIDS_LIMIT)
    if not isinstance(pids, int) or isinstance(pids, bool) or pids < -1 or pids == 0:
        raise ValueError(f"node {name!r}: podPidsLimit {str(pids)[:50]!r}: expected a positive integer or -1")
    seccomp_default = spec.get("seccompDefault", True)
    if not isinstance(seccomp_default, bool):
        raise ValueError(f"node {name!r}: seccompDefault {str(seccomp_default)[:50]!r}: expected true or false")
    if runtime == "process":
        node["metadata"]["annotations"] = {"kubesim.io/runtime": "process",
                                           "kubesim.io/images": json.dumps(spec.get("images") or {}),
                                           "kubesim.io/pod-pids-limit": str(pids),
                                           "kubesim.io/seccomp-default": str(seccomp_default).lower()}
        node = _complete(node, index)
        node["status"]["nodeInfo"]["containerRuntimeVersion"] = "kubesim-process://1.0"
        return node
    return _complete(node, index)


def _label_value(value) -> str:
    """YAML reads `true` as a bool: a label value is the text a user wrote (`true`, not `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _complete(node: dict, index: int) -> dict:
    """Fill what kubelets report (conditions, addresses, nodeInfo) where a manifest leaves it out."""
    name = node["metadata"]["name"]
    status = node.setdefault("status", {})
    status.setdefault("capacity", {"cpu": "8", "memory": "32Gi", "pods": "110"})
    status.setdefault("allocatable", dict(status["capacity"]))
    status.setdefault("conditions", [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
         "message": "kubelet has sufficient memory available"},
        {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
         "message": "kubelet has no disk pressure"},
        {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
         "message": "kubelet has sufficient PID available"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
    ])
    status.setdefault("addresses", [{"type": "InternalIP", "address": f"10.0.0.{10 + index}"},
                                    {"type": "Hostname", "address": name}])
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
    status.setdefault("nodeInfo", {
        "machineID": f"kubesim-{name}", "systemUUID": f"kubesim-{name}", "bootID": f"kubesim-{name}",
        "kernelVersion": "6.1.0-kubesim", "osImage": "kubesim", "containerRuntimeVersion": "kubesim://1.0",
        "kubeletVersion": "v1.31.0", "kubeProxyVersion": "v1.31.0", "operatingSystem": "linux",
        "architecture": "amd64"})
    return node


def node_manifests(specs: Iterable[dict] | None = None) -> list[dict]:
    specs = DEFAULT_NODES if specs is None else list(specs)
    names = [s.get("name") or (s.get("metadata") or {}).get("name") for s in specs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate node name(s): {sorted(dupes)}")
    return [node_manifest(s, i) for i, s in enumerate(specs)]


def load_nodes_file(path: str) -> list[dict]:
    """Read a `--nodes FILE` (see the module docstring) into Node manifests."""
    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a YAML list of nodes, got {type(data).__name__}")
    here = os.path.dirname(os.path.abspath(path))
    for spec in data:       # an image's directory relative to the file is relative to the file's directory
        if isinstance(spec, dict) and isinstance(spec.get("images"), dict):
            spec["images"] = {k: os.path.normpath(os.path.join(here, str(v))) for k, v in spec["images"].items()}
    return node_manifests(data)
