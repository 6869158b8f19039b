"""A node's usage series through the API server's node proxy, as a production Prometheus scrapes them:

* ``/api/v1/nodes/<node>/proxy/metrics/cadvisor``: the kubelet's cAdvisor series (kubelet
  pkg/kubelet/server/server.go serves ``/metrics/cadvisor``; the names, help and labels are cAdvisor's,
  metrics/prometheus.go: ``container_cpu_usage_seconds_total{cpu="total"}``, ``container_memory_working_set_bytes``,
  ``container_spec_memory_limit_bytes``... with ``container``, ``id``, ``image``, ``name``, ``namespace``,
  ``pod``; each sample with its reading's timestamp in milliseconds, as cAdvisor writes them).
* ``/api/v1/nodes/<node>:9400/proxy/metrics``: NVIDIA dcgm-exporter's series (the DaemonSet listens on 9400;
  ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_DEV_FB_FREE`` with ``gpu``, ``UUID``, ``device``,
  ``modelName``, ``Hostname`` and, with its Kubernetes mapping on, ``pod``, ``namespace``, ``container``), one GPU
  per ``nvidia.com/gpu`` a running pod holds. kubesim has no GPUs: the values are SIMULATED (a pod's
  ``kubesim.io/gpu-util`` annotation or the percent its process writes in ``/tmp/kubesim-gpu-util``), and the
  HELP text says so.

Both read the kubelet's last readings (kubelet/stats.py): one pass over the node's containers per scrape, no
request to the API's storage, so a scrape costs the same whatever else runs.
"""
from __future__ import annotations

import re

from aiohttp import web

from kubesim.apimachinery.errors import ApiError

PATH = re.compile(r"^/api/v1/nodes/(?P<node>[^/:]+)(?::(?P<port>\d+))?/proxy/(?P<path>.*)$")
DCGM_PORT = "9400"
GPU_MEMORY_MIB = 40960          # the simulated card's frame buffer (an A100 40GB)
GPU_MODEL = "NVIDIA A100-SXM4-40GB (kubesim: simulated)"
SIMULATED = " SIMULATED by kubesim: no GPU is read, the value is the pod's kubesim.io/gpu-util or the percent " \
            "its process wrote to /tmp/kubesim-gpu-util."

CADVISOR = (  # name, type, help (cAdvisor metrics/prometheus.go), value of a stats.Point
    ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed in seconds.",
     lambda p: p.reading.cpu_ns / 1e9),
    ("container_memory_working_set_bytes", "gauge", "Current working set in bytes.",
     lambda p: p.reading.working_set),
    ("container_memory_usage_bytes", "gauge", "Current memory usage in bytes, including all memory regardless "
     "of when it was accessed", lambda p: p.reading.usage),
    ("container_memory_rss", "gauge", "Size of RSS in bytes.", lambda p: p.reading.rss),
    ("container_memory_cache", "gauge", "Number of bytes of page cache memory.", lambda p: p.reading.cache),
    ("container_memory_max_usage_bytes", "gauge", "Maximum memory usage recorded in bytes",
     lambda p: p.reading.peak),
    ("container_spec_memory_limit_bytes", "gauge", "Memory limit for the container.", lambda p: p.limit_memory),
    ("container_spec_cpu_quota", "gauge", "CPU quota of the container.",
     lambda p: int(p.limit_cpu * 100000) if p.limit_cpu else None),
    ("container_spec_cpu_period", "gauge", "CPU period of the container.",
     lambda p: 100000 if p.limit_cpu else None),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds.",
     lambda p: p.start),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict) -> str:
    return "{" + ",".join(f'{k}="{_label(str(v))}"' for k, v in pairs.items()) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))


def _node_pods(sampler, node: str):
    return sorted((pp for pp in sampler.last.values() if pp.node == node), key=lambda pp: (pp.namespace, pp.name))


def cadvisor_text(sampler, node: str) -> str:
    """The node's containers as the kubelet's /metrics/cadvisor writes them (Prometheus text format 0.0.4)."""
    out = []
    pods = _node_pods(sampler, node)
    for name, kind, help_text, value in CADVISOR:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for pp in pods:
            for cname, p in sorted(pp.containers.items()):
                v = value(p)
                if v is None:
                    continue
                cid = f"{pp.uid}-{cname}"
                labels = {"container": cname, **({"cpu": "total"} if name.startswith("container_cpu") else {}),
                          "id": f"/kubepods/pod{pp.uid}/{cid}", "image": p.image,
                          "name": cid, "namespace": pp.namespace, "pod": pp.name}
                out.append(f"{name}{_labels(labels)} {_number(v)} {int(p.time * 1000)}")
    return "\n".join(out) + "\n"


def dcgm_text(sampler, node: str) -> str:
    """dcgm-exporter's series for every GPU a running pod on the node holds (simulated values)."""
    gpus = []
    for pp in _node_pods(sampler, node):
        for cname, p in sorted(pp.containers.items()):
            gpus += [(pp, cname, p)] * p.gpus
    series = (("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda p: p.reading.gpu_util or 0.0),
              ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
               lambda p: int(GPU_MEMORY_MIB * (p.reading.gpu_util or 0.0) / 100)),
              ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
               lambda p: GPU_MEMORY_MIB - int(GPU_MEMORY_MIB * (p.reading.gpu_util or 0.0) / 100)))
    out = []
    for name, help_text, value in series:
        out += [f"# HELP {name} {help_text}{SIMULATED}", f"# TYPE {name} gauge"]
        for index, (pp, cname, p) in enumerate(gpus):
            labels = {"gpu": index, "UUID": f"GPU-kubesim-{node}-{index}", "device": f"nvidia{index}",
                      "modelName": GPU_MODEL, "Hostname": node, "container": cname, "namespace": pp.namespace,
                      "pod": pp.name}
            out.append(f"{name}{_labels(labels)} {_number(value(p))}")
    return "\n".join(out) + "\n"


def add_node_metrics_route(api) -> None:
    """GET ``nodes/<node>[:port]/proxy/<path>`` on an ``ApiServer`` (RBAC ``nodes/proxy`` as on the real one)."""
    async def handle(request, match: re.Match):
        store = api.store
        node, port, path = match["node"], match["port"], match["path"].rstrip("/")
        store.get(store.registry.lookup("", "v1", "nodes"), None, node)        # the node's 404
        sampler = (store.kubelet.stats if store.kubelet is not None else None)
        if request.method != "GET" or sampler is None:
            raise ApiError(503, f"no kubelet answers for node {node}", "ServiceUnavailable")
        if port in (None, "10250") and path == "metrics/cadvisor":
            text = cadvisor_text(sampler, node)
        elif port == DCGM_PORT and path == "metrics":
            text = dcgm_text(sampler, node)
        else:
            raise ApiError(503, f"error trying to reach service: dial tcp {node}:{port or 10250}: connect: "
                                f"connection refused (kubesim serves /metrics/cadvisor and :{DCGM_PORT}/metrics)",
                           "ServiceUnavailable")
        return web.Response(body=text.encode(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    api.routes.append((PATH, handle))
