"""``metrics.k8s.io/v1beta1`` as metrics-server serves it: NodeMetrics and PodMetrics, get and list (a label
selector on lists), read from the kubelet's usage sampler (kubelet/stats.py), so ``kubectl top node`` and
``kubectl top pod [--containers]`` work against kubesim as against a cluster with metrics-server.

What metrics-server does and this copies (github.com/kubernetes-sigs/metrics-server):
* pkg/api/install.go: the group is served (and in discovery) with two read-only kinds, ``nodes`` (cluster-scoped,
  kind NodeMetrics) and ``pods`` (namespaced, kind PodMetrics), verbs get and list.
* pkg/storage/types.go ``resourceUsage``: CPU is the rate between the last two readings, in nanocores; memory the
  last working set, in bytes; ``window`` their distance, ``timestamp`` the last reading's time.
* pkg/storage/pod.go ``GetMetrics``: a pod is listed only once every container has two readings; its timestamp
  is its containers' earliest. pkg/api/pod.go ``Get``: a pod without metrics is 404, named ``<ns>/<name>``
  (``podmetrics.metrics.k8s.io "ns/name" not found``); a pod that does not exist, the pod's own 404.
* ``metadata.creationTimestamp`` is the time of the answer, and the labels are the pod's or node's.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import parse_label_selector
from kubesim.apiserver.endpoints.wire import response
from kubesim.apiserver.registry.kinds import ResourceType

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
KINDS = (ResourceType(GROUP, VERSION, "NodeMetrics", "nodes", False, verbs=("get", "list")),
         ResourceType(GROUP, VERSION, "PodMetrics", "pods", True, verbs=("get", "list")))
PATH = re.compile(r"^/apis/metrics\.k8s\.io/v1beta1/(?:namespaces/(?P<ns>[^/]+)/)?(?P<plural>nodes|pods)"
                  r"(?:/(?P<name>[^/]+))?$")


def served(store) -> tuple[ResourceType, ...]:
    """The kinds in discovery: only while a kubelet samples usage (no cluster, no metrics-server)."""
    return KINDS if (store.kubelet.stats if store.kubelet is not None else None) is not None else ()


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` for the window (``15.002s``, ``1m0.5s``), as metav1.Duration marshals it."""
    minutes, rest = divmod(round(seconds, 9), 60)
    text = f"{rest:.9f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def cpu_quantity(cores: float) -> str:
    """Nanocores, as metrics-server writes them (``uint64Quantity(.., DecimalSI, -9)``: ``1000123456n``)."""
    return f"{max(0, int(cores * 1e9))}n"


def memory_quantity(value: int) -> str:
    """Bytes in resource.Quantity's canonical BinarySI form (``307200Ki``; ``0``)."""
    for suffix, size in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
                         ("Ki", 1 << 10)):
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(max(0, value))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_metrics(store, sampler, node: dict) -> dict | None:
    u = sampler.node_usage(node["metadata"]["name"])
    if u is None:
        return None
    t, window, cores, memory = u
    return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"name": node["metadata"]["name"], "creationTimestamp": _now(),
                         "labels": node["metadata"].get("labels") or {}},
            "timestamp": _stamp(t), "window": go_duration(window),
            "usage": {"cpu": cpu_quantity(cores), "memory": memory_quantity(memory)}}


def pod_metrics(sampler, pod: dict) -> dict | None:
    md = pod["metadata"]
    u = sampler.pod_usage(md["namespace"], md["name"])
    if u is None:
        return None
    t, window, containers = u
    return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"name": md["name"], "namespace": md["namespace"], "creationTimestamp": _now(),
                         "labels": md.get("labels") or {}},
            "timestamp": _stamp(t), "window": go_duration(window),
            "containers": [{"name": name, "usage": {"cpu": cpu_quantity(cores), "memory": memory_quantity(mem)}}
                           for name, (cores, mem) in sorted(containers.items())]}


def _list(kind: str, items: list[dict], rv: str) -> dict:
    return {"kind": f"{kind}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {"resourceVersion": rv},
            "items": items}


def answer(store, plural: str, namespace: str | None, name: str | None, label_selector: str | None) -> dict:
    """The document for one GET (metrics-server's pkg/api node.go and pod.go)."""
    sampler = (store.kubelet.stats if store.kubelet is not None else None)
    if sampler is None:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    rt = store.registry.lookup("", "v1", plural)
    if name is not None:
        obj = store.get(rt, namespace, name)            # the node's / pod's own 404 when it does not exist
        doc = node_metrics(store, sampler, obj) if plural == "nodes" else pod_metrics(sampler, obj)
        if doc is None:
            key = name if plural == "nodes" else f"{namespace}/{name}"
            kind = "nodemetrics" if plural == "nodes" else "podmetrics"
            raise ApiError(404, f'{kind}.{GROUP} "{key}" not found', "NotFound", name=key, group=GROUP,
                           kind=kind)
        return doc
    selector = parse_label_selector(label_selector)
    items, rv = store.list(rt, namespace)
    objs = [o for o in items if selector.matches(o["metadata"].get("labels"))]
    if plural == "nodes":
        docs = [node_metrics(store, sampler, o) for o in objs]
    else:
        docs = [pod_metrics(sampler, o) for o in objs]
    return _list("NodeMetrics" if plural == "nodes" else "PodMetrics", [d for d in docs if d is not None], rv)


def add_metrics_routes(api) -> None:
    """GET of the metrics kinds on an ``ApiServer`` (behind its middleware: RBAC on ``metrics.k8s.io``)."""
    async def handle(request, match: re.Match):
        if request.method != "GET":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        plural, ns = match["plural"], match["ns"]
        if plural == "nodes" and ns is not None or plural == "pods" and ns is None and match["name"]:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return response(answer(api.store, plural, ns, match["name"], request.query.get("labelSelector")))

    api.routes.append((PATH, handle))
