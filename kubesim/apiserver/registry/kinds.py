"""Resource types: the built-in kinds kubesim serves and the kinds registered by CRDs.

Upstream: the REST storage each API group installs (pkg/registry/<group>/rest/storage_<group>.go: plural,
short names, categories, subresources) and apiextensions-apiserver's pkg/apiserver/customresource_handler.go
(a served CRD version becomes a kind on the same storage).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

DEFAULT_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str            # "" for core
    version: str          # "v1"
    kind: str             # "Pod"
    plural: str           # "pods"
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    default_propagation: str = "Background"
    crd_schema: dict | None = field(default=None, compare=False, hash=False)
    categories: tuple[str, ...] = ()
    singular: str = ""
    storage: tuple[str, str] | None = None   # another resource's storage this one is a view of
    verbs: tuple[str, ...] = DEFAULT_VERBS

    @property
    def api_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def storage_key(self) -> tuple[str, str]:
        """All served versions of one resource share storage (as in etcd: one key per group/resource);
        events.k8s.io/v1 Events are a view of the core/v1 Events."""
        return self.storage or (self.group, self.plural)

    @property
    def is_custom(self) -> bool:
        return self.crd_schema is not None or self.group not in BUILTIN_GROUPS


def _rt(group, version, kind, plural, namespaced, subs=(), short=(), **kw) -> ResourceType:
    return ResourceType(group, version, kind, plural, namespaced, frozenset(subs), tuple(short), **kw)


BUILTINS: tuple[ResourceType, ...] = (
    _rt("", "v1", "Namespace", "namespaces", False, ["status"], ["ns"]),
    _rt("", "v1", "Pod", "pods", True, ["status", "log", "binding", "eviction"], ["po"], categories=("all",)),
    _rt("", "v1", "Service", "services", True, ["status"], ["svc"], categories=("all",)),
    _rt("", "v1", "ConfigMap", "configmaps", True, [], ["cm"]),
    _rt("", "v1", "Secret", "secrets", True),
    _rt("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ["status"], ["pvc"]),
    _rt("", "v1", "PersistentVolume", "persistentvolumes", False, ["status"], ["pv"]),
    _rt("", "v1", "Event", "events", True, [], ["ev"]),
    _rt("", "v1", "Node", "nodes", False, ["status"], ["no"]),
    _rt("", "v1", "ResourceQuota", "resourcequotas", True, ["status"], ["quota"]),
    _rt("", "v1", "LimitRange", "limitranges", True, [], ["limits"]),
    _rt("", "v1", "ServiceAccount", "serviceaccounts", True, ["token"], ["sa"]),
    _rt("", "v1", "Endpoints", "endpoints", True, [], ["ep"]),
    _rt("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    _rt("apps", "v1", "Deployment", "deployments", True, ["status", "scale"], ["deploy"], categories=("all",)),
    _rt("apps", "v1", "ReplicaSet", "replicasets", True, ["status", "scale"], ["rs"], categories=("all",)),
    _rt("apps", "v1", "StatefulSet", "statefulsets", True, ["status", "scale"], ["sts"], categories=("all",)),
    _rt("apps", "v1", "DaemonSet", "daemonsets", True, ["status"], ["ds"], categories=("all",)),
    _rt("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    # batch/v1 Job: a DELETE without a propagation policy orphans the pods (the real default).
    _rt("batch", "v1", "Job", "jobs", True, ["status"], default_propagation="Orphan", categories=("all",)),
    _rt("batch", "v1", "CronJob", "cronjobs", True, ["status"], ["cj"], categories=("all",)),
    _rt("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, ["status"], ["hpa"]),
    _rt("events.k8s.io", "v1", "Event", "events", True, [], ["ev"], storage=("", "events")),
    _rt("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _rt("coordination.k8s.io", "v1", "Lease", "leases", True),
    _rt("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
        ["status"], ["crd", "crds"]),
)
BUILTIN_GROUPS = frozenset(rt.group for rt in BUILTINS)

# Create-only kinds with no storage (nothing to get, list or watch): the review APIs, answered by routes
# (access_review.py), listed in discovery only. Upstream: pkg/registry/authorization/rest/
# storage_authorization.go and pkg/registry/authentication/rest/storage_authentication.go; namespaced as
# their REST storage says (only LocalSubjectAccessReview is namespaced).
_CREATE = ("create",)
REVIEWS: tuple[ResourceType, ...] = (
    _rt("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False, verbs=_CREATE),
    _rt("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False, verbs=_CREATE),
    _rt("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", True, verbs=_CREATE),
    _rt("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", False, verbs=_CREATE),
    _rt("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False, verbs=_CREATE),
    _rt("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=_CREATE),
)


def crd_resource_types(crd: dict) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = frozenset((ver.get("subresources") or {}).keys())
        schema = (ver.get("schema") or {}).get("openAPIV3Schema") or {}
        out.append(ResourceType(
            group=spec["group"], version=ver["name"], kind=names["kind"], plural=names["plural"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced", subresources=subs,
            short_names=tuple(names.get("shortNames") or ()), crd_schema=schema,
            categories=tuple(names.get("categories") or ()), singular=names.get("singular", "")))
    return out


class Registry:
    def __init__(self):
        self._lock = threading.RLock()
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rt in BUILTINS:
            self.register(rt)
        self._builtin = set(BUILTINS)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def register(self, rt: ResourceType) -> None:
        with self._lock:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt
            self._by_kind[(rt.api_version, rt.kind)] = rt

    def unregister(self, rt: ResourceType) -> None:
        with self._lock:
            self._by_path.pop((rt.group, rt.version, rt.plural), None)
            if self._by_kind.get((rt.api_version, rt.kind)) == rt:
                del self._by_kind[(rt.api_version, rt.kind)]

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._by_path.values())

    def custom(self) -> list[ResourceType]:
        return [rt for rt in self.all() if rt not in self._builtin]

    def versions_of(self, group: str, plural: str) -> list[ResourceType]:
        return [rt for rt in self.all() if rt.group == group and rt.plural == plural]

    def reset(self) -> None:
        """Drop every CRD-registered kind (per-test reset)."""
        for rt in self.custom():
            self.unregister(rt)
