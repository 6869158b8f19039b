"""The built-in kinds' Table columns and cells, one entry per kind, as kube-apiserver prints them
(k8s.io/kubernetes/pkg/printers/internalversion/printers.go: `AddHandlers` for the columns, `printPod`,
`printJob`, `printNode`, `printDeployment`, `printStatefulSet`, `printService`, ... for the cells).

A column is (name, type, priority, description): the description is a literal or (definition, field) looked
up in the OpenAPI schema, as printers.go takes it from the types' SwaggerDoc.
"""
from __future__ import annotations

from datetime import datetime

from kubesim.apimachinery.clock import parse_time

META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
CORE = "io.k8s.api.core.v1."
APPS = "io.k8s.api.apps.v1."
BATCH = "io.k8s.api.batch.v1."
DISCOVERY = "io.k8s.api.discovery.v1."
HPA = "io.k8s.api.autoscaling.v2."
NAME = ("Name", "string", 0, (META, "name"))
AGE = ("Age", "string", 0, (META, "creationTimestamp"))
CONTAINERS = ("Containers", "string", 1, "Names of each container in the template.")
IMAGES = ("Images", "string", 1, "Images referenced by each container in the template.")

COLUMNS: dict[tuple[str, str], list[tuple]] = {
    ("", "pods"): [
        NAME, ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
        ("Status", "string", 0, "The aggregate status of the containers in this pod."),
        ("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when "
                                  "the last container in this pod has restarted."),
        AGE, ("IP", "string", 1, (CORE + "PodStatus", "podIP")), ("Node", "string", 1, (CORE + "PodSpec", "nodeName")),
        ("Nominated Node", "string", 1, (CORE + "PodStatus", "nominatedNodeName")),
        ("Readiness Gates", "string", 1, (CORE + "PodSpec", "readinessGates"))],
    ("batch", "jobs"): [
        NAME, ("Status", "string", 0, "Status of the job."),
        ("Completions", "string", 0, (BATCH + "JobStatus", "succeeded")),
        ("Duration", "string", 0, "Time required to complete the job."), AGE, CONTAINERS, IMAGES,
        ("Selector", "string", 1, (BATCH + "JobSpec", "selector"))],
    ("", "nodes"): [
        NAME, ("Status", "string", 0, "The status of the node"), ("Roles", "string", 0, "The roles of the node"),
        AGE, ("Version", "string", 0, (CORE + "NodeSystemInfo", "kubeletVersion")),
        ("Internal-IP", "string", 1, (CORE + "NodeStatus", "addresses")),
        ("External-IP", "string", 1, (CORE + "NodeStatus", "addresses")),
        ("OS-Image", "string", 1, (CORE + "NodeSystemInfo", "osImage")),
        ("Kernel-Version", "string", 1, (CORE + "NodeSystemInfo", "kernelVersion")),
        ("Container-Runtime", "string", 1, (CORE + "NodeSystemInfo", "containerRuntimeVersion"))],
    ("apps", "deployments"): [
        NAME, ("Ready", "string", 0, "Number of the pod with ready state"),
        ("Up-to-date", "string", 0, (APPS + "DeploymentStatus", "updatedReplicas")),
        ("Available", "string", 0, (APPS + "DeploymentStatus", "availableReplicas")), AGE, CONTAINERS, IMAGES,
        ("Selector", "string", 1, (APPS + "DeploymentSpec", "selector"))],
    ("apps", "replicasets"): [
        NAME, ("Desired", "integer", 0, (APPS + "ReplicaSetSpec", "replicas")),
        ("Current", "integer", 0, (APPS + "ReplicaSetStatus", "replicas")),
        ("Ready", "integer", 0, (APPS + "ReplicaSetStatus", "readyReplicas")), AGE, CONTAINERS, IMAGES,
        ("Selector", "string", 1, (APPS + "ReplicaSetSpec", "selector"))],
    ("apps", "statefulsets"): [
        NAME, ("Ready", "string", 0, "Number of the pod with ready state"), AGE, CONTAINERS, IMAGES],
    ("", "services"): [
        NAME, ("Type", "string", 0, (CORE + "ServiceSpec", "type")),
        ("Cluster-IP", "string", 0, (CORE + "ServiceSpec", "clusterIP")),
        ("External-IP", "string", 0, (CORE + "ServiceSpec", "externalIPs")),
        ("Port(s)", "string", 0, (CORE + "ServiceSpec", "ports")), AGE,
        ("Selector", "string", 1, (CORE + "ServiceSpec", "selector"))],
    ("", "endpoints"): [NAME, ("Endpoints", "string", 0, (CORE + "Endpoints", "subsets")), AGE],
    ("discovery.k8s.io", "endpointslices"): [
        NAME, ("AddressType", "string", 0, (DISCOVERY + "EndpointSlice", "addressType")),
        ("Ports", "string", 0, (DISCOVERY + "EndpointSlice", "ports")),
        ("Endpoints", "string", 0, (DISCOVERY + "EndpointSlice", "endpoints")), AGE],
    ("apps", "controllerrevisions"): [
        NAME, ("Controller", "string", 0, "Controller of the object"),
        ("Revision", "string", 0, (APPS + "ControllerRevision", "revision")), AGE],
    ("", "namespaces"): [NAME, ("Status", "string", 0, "The status of the namespace"), AGE],
    ("", "events"): [
        ("Last Seen", "string", 0, (CORE + "Event", "lastTimestamp")), ("Type", "string", 0, (CORE + "Event", "type")),
        ("Reason", "string", 0, (CORE + "Event", "reason")), ("Object", "string", 0, (CORE + "Event", "involvedObject")),
        ("Subobject", "string", 1, (CORE + "ObjectReference", "fieldPath")),
        ("Source", "string", 1, (CORE + "Event", "source")), ("Message", "string", 0, (CORE + "Event", "message")),
        ("First Seen", "string", 1, (CORE + "Event", "firstTimestamp")),
        ("Count", "string", 1, (CORE + "Event", "count")), ("Name", "string", 1, (META, "name"))],
    ("", "persistentvolumeclaims"): [
        NAME, ("Status", "string", 0, (CORE + "PersistentVolumeClaimStatus", "phase")),
        ("Volume", "string", 0, (CORE + "PersistentVolumeClaimSpec", "volumeName")),
        ("Capacity", "string", 0, (CORE + "PersistentVolumeClaimStatus", "capacity")),
        ("Access Modes", "string", 0, (CORE + "PersistentVolumeClaimStatus", "accessModes")),
        ("StorageClass", "string", 0, "StorageClass of the pvc"),
        ("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pvc"), AGE,
        ("VolumeMode", "string", 1, (CORE + "PersistentVolumeClaimSpec", "volumeMode"))],
    ("", "persistentvolumes"): [
        NAME, ("Capacity", "string", 0, (CORE + "PersistentVolumeSpec", "capacity")),
        ("Access Modes", "string", 0, (CORE + "PersistentVolumeSpec", "accessModes")),
        ("Reclaim Policy", "string", 0, (CORE + "PersistentVolumeSpec", "persistentVolumeReclaimPolicy")),
        ("Status", "string", 0, (CORE + "PersistentVolumeStatus", "phase")),
        ("Claim", "string", 0, (CORE + "PersistentVolumeSpec", "claimRef")),
        ("StorageClass", "string", 0, "StorageClass of the pv"),
        ("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pv"),
        ("Reason", "string", 0, (CORE + "PersistentVolumeStatus", "reason")), AGE,
        ("VolumeMode", "string", 1, (CORE + "PersistentVolumeSpec", "volumeMode"))],
    ("", "resourcequotas"): [
        NAME, AGE, ("Request", "string", 0, "Request represents a minimum amount of cpu/memory that a container may "
                                            "consume."),
        ("Limit", "string", 0, "Limits control the maximum amount of cpu/memory that a container may use independent "
                               "of contention on the node.")],
    ("rbac.authorization.k8s.io", "rolebindings"): [
        NAME, ("Role", "string", 0, ("io.k8s.api.rbac.v1.RoleBinding", "roleRef")), AGE,
        ("Users", "string", 1, "Users in the roleBinding"), ("Groups", "string", 1, "Groups in the roleBinding"),
        ("ServiceAccounts", "string", 1, "ServiceAccounts in the roleBinding")],
    ("rbac.authorization.k8s.io", "clusterrolebindings"): [
        NAME, ("Role", "string", 0, ("io.k8s.api.rbac.v1.ClusterRoleBinding", "roleRef")), AGE,
        ("Users", "string", 1, "Users in the clusterRoleBinding"),
        ("Groups", "string", 1, "Groups in the clusterRoleBinding"),
        ("ServiceAccounts", "string", 1, "ServiceAccounts in the clusterRoleBinding")],
    ("autoscaling", "horizontalpodautoscalers"): [
        NAME, ("Reference", "string", 0, (HPA + "HorizontalPodAutoscalerSpec", "scaleTargetRef")),
        ("Targets", "string", 0, (HPA + "HorizontalPodAutoscalerSpec", "metrics")),
        ("MinPods", "string", 0, (HPA + "HorizontalPodAutoscalerSpec", "minReplicas")),
        ("MaxPods", "string", 0, (HPA + "HorizontalPodAutoscalerSpec", "maxReplicas")),
        ("Replicas", "string", 0, (HPA + "HorizontalPodAutoscalerStatus", "currentReplicas")), AGE],
    ("", "configmaps"): [NAME, ("Data", "string", 0, (CORE + "ConfigMap", "data")), AGE],
    ("", "secrets"): [NAME, ("Type", "string", 0, (CORE + "Secret", "type")),
                      ("Data", "string", 0, (CORE + "Secret", "data")), AGE],
    ("", "serviceaccounts"): [NAME, ("Secrets", "string", 0, (CORE + "ServiceAccount", "secrets")), AGE],
    ("coordination.k8s.io", "leases"): [
        NAME, ("Holder", "string", 0, ("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")), AGE],
}


def human_duration(seconds: float) -> str:
    """apimachinery/pkg/util/duration/duration.go HumanDuration: 59s, 2m5s, 3h10m, 5d3h, 2y30d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(value: str | None, now: datetime) -> str:
    """printers.go translateTimestampSince: `<unknown>` for a missing time."""
    if not value:
        return "<unknown>"
    try:
        return human_duration((now - parse_time(value)).total_seconds())
    except ValueError:
        return "<unknown>"


def _age(obj: dict, now: datetime) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"), now)


def _containers(template_spec: dict) -> tuple[str, str]:
    cs = template_spec.get("containers") or []
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


def format_selector(sel: dict | None) -> str:
    """metav1.FormatLabelSelector: `app=x,tier in (a,b)`; `<none>` when empty."""
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), sorted(e.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(vals)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(vals)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _pod(obj: dict, now: datetime) -> list:
    """printPod: the status shown is the last container's waiting/terminated reason, else the phase."""
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    md = obj.get("metadata") or {}
    reason = st.get("reason") or st.get("phase") or ""
    restarts, ready, last_restart = 0, 0, None
    running = False
    for cs in reversed(st.get("containerStatuses") or []):
        restarts += cs.get("restartCount") or 0
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            t = state["terminated"]
            reason = f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode', 0)}"
        elif cs.get("ready") and "running" in state:
            running = True
            ready += 1
    if reason == "Completed" and running:
        ok = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        reason = "Running" if ok else "NotReady"
    if md.get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart:
        restarts_text = f"{restarts} ({since(last_restart, now)} ago)"
    ips = [p.get("ip") for p in st.get("podIPs") or [] if p.get("ip")] or ([st["podIP"]] if st.get("podIP") else [])
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        gates_text = f"{sum(conds.get(g.get('conditionType')) == 'True' for g in gates)}/{len(gates)}"
    return [md.get("name"), f"{ready}/{len(spec.get('containers') or [])}", reason, restarts_text,
            _age(obj, now), ips[0] if ips else "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", gates_text]


def _has(conditions, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions or [])


def _job(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    succeeded = st.get("succeeded") or 0
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 1) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    if st.get("startTime"):
        end = parse_time(st["completionTime"]) if st.get("completionTime") else now
        duration = human_duration((end - parse_time(st["startTime"])).total_seconds())
    conds = st.get("conditions")
    status = ("Complete" if _has(conds, "Complete") else "Failed" if _has(conds, "Failed")
              else "Terminating" if md.get("deletionTimestamp") else "Suspended" if _has(conds, "Suspended")
              else "FailureTarget" if _has(conds, "FailureTarget")
              else "SuccessCriteriaMet" if _has(conds, "SuccessCriteriaMet") else "Running")
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    return [md.get("name"), status, completions, duration, _age(obj, now), names, images,
            format_selector(spec.get("selector"))]


def _node(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    status = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if spec.get("unschedulable"):
        status.append("SchedulingDisabled")
    roles = set()
    for k, v in (md.get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/"):]:
            roles.add(k[len("node-role.kubernetes.io/"):])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    info = st.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in reversed(st.get("addresses") or [])}
    return [md.get("name"), ",".join(status), ",".join(sorted(roles)) or "<none>", _age(obj, now),
            info.get("kubeletVersion", ""), addrs.get("InternalIP") or "<none>", addrs.get("ExternalIP") or "<none>",
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _deployment(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    return [md.get("name"), f"{st.get('readyReplicas') or 0}/{spec.get('replicas', 1)}", st.get("updatedReplicas") or 0,
            st.get("availableReplicas") or 0, _age(obj, now), names, images, format_selector(spec.get("selector"))]


def _replicaset(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    return [md.get("name"), spec.get("replicas", 1), st.get("replicas") or 0, st.get("readyReplicas") or 0,
            _age(obj, now), names, images, format_selector(spec.get("selector"))]


def _statefulset(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    return [md.get("name"), f"{st.get('readyReplicas') or 0}/{spec.get('replicas', 1)}", _age(obj, now), names, images]


def _service(obj: dict, now: datetime) -> list:
    spec, md = obj.get("spec") or {}, obj.get("metadata") or {}
    typ = spec.get("type") or "ClusterIP"
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    if typ == "LoadBalancer":
        ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        ips = [i.get("ip") or i.get("hostname") for i in ingress] + list(spec.get("externalIPs") or [])
        external = ",".join(ips) or "<pending>"
    elif typ == "ExternalName":
        external = spec.get("externalName") or "<none>"
    ports = []
    for p in spec.get("ports") or []:
        text = f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort"):
            text = f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        ports.append(text)
    sel = spec.get("selector") or {}
    return [md.get("name"), typ, spec.get("clusterIP") or "<none>", external, ",".join(ports) or "<none>",
            _age(obj, now), ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"]


def _endpoints(obj: dict, now: datetime) -> list:
    shown = []
    for ss in obj.get("subsets") or []:
        for addr in ss.get("addresses") or []:
            for port in ss.get("ports") or [{}]:
                shown.append(f"{addr.get('ip')}:{port['port']}" if "port" in port else addr.get("ip"))
    text = ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")
    return [obj["metadata"].get("name"), text or "<none>", _age(obj, now)]


def _more(shown: list[str], count: int, most: int = 3) -> str:
    """printers.go listWithMoreString: the first three, `+ N more...`, `<unset>` when there is none."""
    text = ",".join(shown)
    if count > most:
        return f"{text} + {count - most} more..."
    return text or "<unset>"


def _endpointslice(obj: dict, now: datetime) -> list:
    """printEndpointSlice: formatDiscoveryPorts (a port's number, else its name, else `*`) and
    formatDiscoveryEndpoints (every endpoint's addresses)."""
    ports = [str(p["port"]) if p.get("port") is not None else p["name"] if p.get("name") is not None else "*"
             for p in obj.get("ports") or []]
    addrs = [a for ep in obj.get("endpoints") or [] for a in ep.get("addresses") or []]
    return [obj["metadata"].get("name"), obj.get("addressType", ""), _more(ports[:3], len(ports)),
            _more(addrs[:3], len(addrs)), _age(obj, now)]


def _controllerrevision(obj: dict, now: datetime) -> list:
    """printControllerRevision: the controller as `<kind>.<group>/<name>` (formatResourceName), lowercased."""
    md = obj.get("metadata") or {}
    ref = next((o for o in md.get("ownerReferences") or [] if o.get("controller")), None)
    owner = "<none>"
    if ref is not None:
        group = ref.get("apiVersion", "").rpartition("/")[0]
        owner = f"{ref.get('kind', '')}{'.' + group if group else ''}".lower() + f"/{ref.get('name', '')}"
    return [md.get("name"), owner, obj.get("revision", 0), _age(obj, now)]


def _event(obj: dict, now: datetime) -> list:
    first = since(obj.get("firstTimestamp") or obj.get("eventTime"), now)
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 1
    if obj.get("series"):
        last, count = since(obj["series"].get("lastObservedTime"), now), obj["series"].get("count") or count
    inv = obj.get("involvedObject") or {}
    target = f"{(inv.get('kind') or '').lower()}/{inv['name']}" if inv.get("name") else (inv.get("kind") or "").lower()
    src = obj.get("source") or {}
    source = ", ".join(x for x in (src.get("component") or obj.get("reportingComponent") or "",
                                   src.get("host") or obj.get("reportingInstance") or "") if x)
    return [last, obj.get("type", ""), obj.get("reason", ""), target, inv.get("fieldPath", ""), source,
            (obj.get("message") or "").strip(), first, count, obj["metadata"].get("name")]


_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _access_modes(modes) -> str:
    """``GetAccessModesAsString``: each mode once, in the order RWO, ROX, RWX, RWOP whatever the object's order."""
    return ",".join(short for mode, short in _MODES.items() if mode in (modes or []))


def _pvc(obj: dict, now: datetime) -> list:
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    phase = "Terminating" if md.get("deletionTimestamp") else st.get("phase", "")
    bound = bool(spec.get("volumeName"))
    capacity = ((st.get("capacity") or {}).get("storage") or "") if bound else ""
    modes = _access_modes(st.get("accessModes")) if bound else ""
    cls = spec.get("storageClassName") or (md.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return [md.get("name"), phase, spec.get("volumeName", ""), capacity, modes, cls,
            spec.get("volumeAttributesClassName") or "<unset>", _age(obj, now), spec.get("volumeMode") or "<unset>"]


def _pv(obj: dict, now: datetime) -> list:
    """printers.go ``printPersistentVolume``: the claim as namespace/name, the class from the beta annotation
    first (``GetPersistentVolumeClass``)."""
    spec, st, md = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""
    cls = (md.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", spec.get("storageClassName") or "")
    return [md.get("name"), (spec.get("capacity") or {}).get("storage", ""),
            _access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""),
            "Terminating" if md.get("deletionTimestamp") else st.get("phase", ""), claim, cls,
            spec.get("volumeAttributesClassName") or "<unset>", st.get("reason", ""), _age(obj, now),
            spec.get("volumeMode") or "<unset>"]


def _resourcequota(obj: dict, now: datetime) -> list:
    """printers.go ``printResourceQuota``: each resource of ``status.hard`` in name order as "name: used/hard";
    those named ``limits.*`` in the Limit column, the others in Request."""
    st = obj.get("status") or {}
    hard, used = st.get("hard") or {}, st.get("used") or {}
    request, limit = [], []
    for name in sorted(hard):
        parts = name.split(".")
        (limit if len(parts) > 1 and parts[0] == "limits" else request).append(
            f"{name}: {used.get(name, '0')}/{hard[name]}")
    return [(obj.get("metadata") or {}).get("name"), _age(obj, now), ", ".join(request), ", ".join(limit)]


def _binding(obj: dict, now: datetime) -> list:
    """printers.go ``printRoleBinding`` / ``printClusterRoleBinding``: the role as Kind/name, then the subjects
    as rbac's ``SubjectsStrings`` splits them (users, groups, service accounts as namespace/name)."""
    ref = obj.get("roleRef") or {}
    kinds: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for s in obj.get("subjects") or []:
        if s.get("kind") in kinds:
            kinds[s["kind"]].append(f"{s.get('namespace', '')}/{s.get('name', '')}" if s["kind"] == "ServiceAccount"
                                    else s.get("name", ""))
    return [(obj.get("metadata") or {}).get("name"), f"{ref.get('kind', '')}/{ref.get('name', '')}", _age(obj, now),
            ", ".join(kinds["User"]), ", ".join(kinds["Group"]), ", ".join(kinds["ServiceAccount"])]


# MetricSpec / MetricStatus: the field holding each metric type's source
_HPA_SOURCES = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods", "Object": "object",
                "External": "external"}


def _hpa_metric(spec: dict, status: dict | None) -> str:
    """One entry of printers.go ``formatHPAMetrics``: "current/target", "(avg)" for average values of External
    and Object metrics, the resource's name first for Resource and ContainerResource ones."""
    kind = spec.get("type")
    field = _HPA_SOURCES.get(kind, "")
    source = spec.get(field) or {}
    target, current = source.get("target") or {}, ((status or {}).get(field) or {}).get("current") or {}
    unknown = "<unknown>"
    if kind in ("External", "Object"):
        if target.get("averageValue") is not None:
            return f"{current.get('averageValue', unknown)}/{target['averageValue']} (avg)"
        return f"{current.get('value', unknown)}/{target.get('value', '')}"
    if kind == "Pods":
        return f"{current.get('averageValue', unknown)}/{target.get('averageValue', '')}"
    if kind in ("Resource", "ContainerResource"):
        name = source.get("name", "")
        if target.get("averageValue") is not None:
            return f"{name}: {current.get('averageValue', unknown)}/{target['averageValue']}"
        used = f"{current['averageUtilization']}%" if current.get("averageUtilization") is not None else unknown
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{name}: {used}/{goal}"
    return "<unknown type>"


def _hpa(obj: dict, now: datetime) -> list:
    """printers.go ``printHorizontalPodAutoscaler``: Kind/name of the target, at most two metrics then
    "+ N more...", ``<none>`` without metrics, ``<unset>`` without minReplicas."""
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    metrics, statuses = spec.get("metrics") or [], st.get("currentMetrics") or []
    shown = [_hpa_metric(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(metrics)]
    targets = ", ".join(shown[:2]) + (f" + {len(shown) - 2} more..." if len(shown) > 2 else "") if shown else "<none>"
    low = spec.get("minReplicas")
    return [(obj.get("metadata") or {}).get("name"), f"{ref.get('kind', '')}/{ref.get('name', '')}", targets,
            "<unset>" if low is None else str(low), int(spec.get("maxReplicas") or 0),
            int(st.get("currentReplicas") or 0), _age(obj, now)]


CELLS = {
    ("", "pods"): _pod,
    ("batch", "jobs"): _job,
    ("", "nodes"): _node,
    ("apps", "deployments"): _deployment,
    ("apps", "replicasets"): _replicaset,
    ("apps", "statefulsets"): _statefulset,
    ("", "services"): _service,
    ("", "endpoints"): _endpoints,
    ("discovery.k8s.io", "endpointslices"): _endpointslice,
    ("apps", "controllerrevisions"): _controllerrevision,
    ("", "namespaces"): lambda o, now: [o["metadata"].get("name"), (o.get("status") or {}).get("phase", ""),
                                        _age(o, now)],
    ("", "events"): _event,
    ("", "persistentvolumeclaims"): _pvc,
    ("", "persistentvolumes"): _pv,
    ("", "resourcequotas"): _resourcequota,
    ("autoscaling", "horizontalpodautoscalers"): _hpa,
    ("rbac.authorization.k8s.io", "rolebindings"): _binding,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _binding,
    ("", "configmaps"): lambda o, now: [o["metadata"].get("name"), len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                                        _age(o, now)],
    ("", "secrets"): lambda o, now: [o["metadata"].get("name"), o.get("type", ""), len(o.get("data") or {}), _age(o, now)],
    ("", "serviceaccounts"): lambda o, now: [o["metadata"].get("name"), len(o.get("secrets") or []), _age(o, now)],
    ("coordination.k8s.io", "leases"): lambda o, now: [o["metadata"].get("name"),
                                                       (o.get("spec") or {}).get("holderIdentity") or "<unknown>",
                                                       _age(o, now)],
}
