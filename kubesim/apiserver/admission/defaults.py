"""API defaulting of the built-in kinds that clients rely on: pod spec and containers (restartPolicy,
dnsPolicy, schedulerName, imagePullPolicy, requests from limits...), Service clusterIP/nodePort allocation,
the Job selector and its labels, Deployment/StatefulSet strategies.

Upstream: pkg/apis/core/v1/defaults.go, pkg/apis/apps/v1/defaults.go, pkg/apis/batch/v1/defaults.go,
pkg/apis/autoscaling/v2/defaults.go (an HPA's minReplicas and its CPU metric),
pkg/registry/batch/job/strategy.go (`generateSelector`), pkg/registry/core/service/ipallocator.
"""
from __future__ import annotations

from kubesim.apiserver.registry.serviceips import ClusterIPs

# kinds whose spec.template is a PodTemplateSpec, and where the template sits
TEMPLATE_PATHS = {("batch", "jobs"): ("spec", "template"),
                  ("apps", "deployments"): ("spec", "template"),
                  ("apps", "replicasets"): ("spec", "template"),
                  ("apps", "statefulsets"): ("spec", "template"),
                  ("apps", "daemonsets"): ("spec", "template"),
                  ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template")}


def image_pull_policy(image: str) -> str:
    tail = (image or "").rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    tag = tail.rpartition(":")[2] if ":" in tail else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}


def default_probe(probe: dict) -> None:
    """pkg/apis/core/v1/defaults.go ``SetDefaults_Probe`` (timeoutSeconds 1, periodSeconds 10, successThreshold 1,
    failureThreshold 3) and ``SetDefaults_HTTPGetAction`` (path ``/``, scheme ``HTTP``): what ``kubectl describe``
    prints as ``timeout=1s period=10s #success=1 #failure=3`` (kubectl pkg/describe/describe.go ``DescribeProbe``;
    it printed ``timeout=0s #success=0`` without them)."""
    for k, v in PROBE_DEFAULTS.items():
        probe.setdefault(k, v)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def default_container(c: dict) -> None:
    c.setdefault("imagePullPolicy", image_pull_policy(c.get("image", "")))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = c.setdefault("resources", {})
    if isinstance(res, dict) and isinstance(res.get("limits"), dict):
        # requests default to limits for any resource that states only a limit (real API defaulting)
        requests = res.setdefault("requests", {})
        if isinstance(requests, dict):
            for k, v in res["limits"].items():
                requests.setdefault(k, v)
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(c.get(kind), dict):
            default_probe(c[kind])


def default_pod_spec(spec: dict, *, is_pod: bool) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                default_container(c)
    for v in spec.get("volumes") or []:
        for src in ("configMap", "secret"):
            if isinstance(v, dict) and isinstance(v.get(src), dict):
                v[src].setdefault("defaultMode", 420)
    if is_pod:
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        tolerations = spec.setdefault("tolerations", [])
        keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
        for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if taint not in keys:   # the DefaultTolerationSeconds admission plugin
                tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300})


def template_of(obj: dict, path: tuple[str, ...]) -> dict | None:
    cur = obj
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur if isinstance(cur, dict) else None


def default_object(rt, obj: dict, old: dict | None, ips: ClusterIPs) -> None:
    kind = (rt.group, rt.plural)
    spec = obj.get("spec")
    if kind == ("", "pods") and isinstance(spec, dict):
        default_pod_spec(spec, is_pod=True)
        return
    if kind in TEMPLATE_PATHS and isinstance(spec, dict):
        tmpl = template_of(obj, TEMPLATE_PATHS[kind])
        if tmpl is not None and isinstance(tmpl.get("spec"), dict):
            default_pod_spec(tmpl["spec"], is_pod=False)
    if kind == ("batch", "jobs") and isinstance(spec, dict):
        _default_job(obj, spec, old)
    elif kind == ("apps", "deployments") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("strategy", {"type": "RollingUpdate"})
        if spec["strategy"].get("type", "RollingUpdate") == "RollingUpdate":
            spec["strategy"].setdefault("type", "RollingUpdate")
            ru = spec["strategy"].setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == ("apps", "replicasets") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
    elif kind == ("apps", "statefulsets") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
        for t in spec.get("volumeClaimTemplates") or []:
            if isinstance(t, dict):
                t.setdefault("apiVersion", "v1")
                t.setdefault("kind", "PersistentVolumeClaim")
                t.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif kind == ("", "services") and isinstance(spec, dict):
        _default_service(spec, old, ips)
    elif kind == ("autoscaling", "horizontalpodautoscalers") and isinstance(spec, dict):
        # pkg/apis/autoscaling/v2/defaults.go SetDefaults_HorizontalPodAutoscaler (a given behavior's own
        # defaults, SetDefaults_HorizontalPodAutoscalerBehavior, are not filled in)
        spec.setdefault("minReplicas", 1)
        if not spec.get("metrics"):
            spec["metrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    elif kind == ("", "persistentvolumeclaims") and isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
        if old is None:
            obj["status"] = {"phase": "Pending"}


def _default_job(obj: dict, spec: dict, old: dict | None) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    # SetDefaults_Job: Failed when a podFailurePolicy is set (the only value validation then allows)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    if old is None and not spec.get("manualSelector"):
        uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                  "controller-uid": uid, "job-name": name}
        if "selector" not in spec:
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmpl = spec.get("template")
        if isinstance(tmpl, dict):
            md = tmpl.setdefault("metadata", {}) or {}
            tmpl["metadata"] = md
            md["labels"] = {**(md.get("labels") or {}), **labels}


def _default_service(spec: dict, old: dict | None, ips: ClusterIPs) -> None:
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    if spec["type"] == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if old is not None:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_ip
            spec["clusterIPs"] = (old.get("spec") or {}).get("clusterIPs") or [old_ip]
        return
    if not spec.get("clusterIP"):
        spec["clusterIP"] = ips.allocate()
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    if spec["clusterIP"] == "None":
        spec["clusterIPs"] = ["None"]
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        for p in spec.get("ports") or []:
            if isinstance(p, dict) and not p.get("nodePort"):
                p["nodePort"] = ips.node_port()
