"""The LimitRanger and ResourceQuota admission plugins (the real 403 messages); the controller keeping each quota's
`status.used` is kubesim/controllers/resourcequota.py.

As in Kubernetes, pods in a terminal phase (Succeeded/Failed) use no quota; a quota that limits cpu or
memory refuses pods whose containers do not state the matching requests/limits.

The "status unknown" window: kube-apiserver's quota admission works from each quota's *status*, which only the
resourcequota controller writes (the API clears a new quota's status on create). Admission enforces the
resources in `status.hard`; a resource there that `status.used` lacks refuses the create with 403
`status unknown for quota: <name>, resources: <names>`. A brand-new quota's status is empty until the
controller's first sync, so in that window the real server does not enforce it at all: objects created then
slip past it, and a client that needs the quota to hold (Skiff's platform sync, before it creates PVCs) must
wait for the status. kubesim does the same. The window lasts `QuotaAdmission.status_lag` seconds after a
quota's spec is written (default 0: the controller is instantaneous and the status is filled in the same write).
"""
from __future__ import annotations

import time
from decimal import Decimal

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.resources import (  # noqa: F401  (pod_requests, qty: kubesim.apiserver.admission.resourcequota.qty still works)
    ZERO,
    add,
    containers_of,
    format_qty,
    pod_amounts,
    pod_requests,
    qty,
)

# quota names that count a kind's objects without the `count/` prefix
LEGACY_COUNTS = {"pods": ("", "pods"), "persistentvolumeclaims": ("", "persistentvolumeclaims"),
                 "services": ("", "services"), "configmaps": ("", "configmaps"), "secrets": ("", "secrets"),
                 "replicationcontrollers": ("", "replicationcontrollers"),
                 "resourcequotas": ("", "resourcequotas")}
# compute resources a quota can make mandatory on every container
MUST_SPECIFY = {"cpu": ("requests", "cpu"), "requests.cpu": ("requests", "cpu"),
                "memory": ("requests", "memory"), "requests.memory": ("requests", "memory"),
                "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}


def terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_usage(pod: dict) -> dict[str, Decimal]:
    """What one non-terminal pod charges against a quota."""
    usage = {"pods": Decimal(1), "count/pods": Decimal(1)}
    for kind in ("requests", "limits"):
        for r, a in pod_amounts(pod, kind).items():
            usage[f"{kind}.{r}"] = a
            if kind == "requests" and r in ("cpu", "memory", "ephemeral-storage"):
                usage[r] = a
    return usage


def pvc_usage(pvc: dict) -> dict[str, Decimal]:
    storage = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    usage = {"persistentvolumeclaims": Decimal(1), "count/persistentvolumeclaims": Decimal(1)}
    if storage is not None:
        usage["requests.storage"] = qty(storage)
    return usage


def count_key(rt) -> str:
    return f"count/{rt.plural}" + (f".{rt.group}" if rt.group else "")


def missing_specs(pod: dict, hard: dict) -> str | None:
    """kube's `must specify limits.cpu for: a,b; requests.cpu for: a` for a quota on compute resources."""
    required = sorted(name for name in hard if name in MUST_SPECIFY)
    missing: dict[str, list[str]] = {}
    for c in containers_of(pod, "containers") + containers_of(pod, "initContainers"):
        res = c.get("resources") or {}
        for name in required:
            kind, resource = MUST_SPECIFY[name]
            have = set(res.get(kind) or {}) | (set(res.get("limits") or {}) if kind == "requests" else set())
            if resource not in have:
                missing.setdefault(name, []).append(c.get("name", ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{n} for: {','.join(sorted(cs))}" for n, cs in sorted(missing.items()))


def _pretty(values: dict[str, Decimal]) -> str:
    return ",".join(f"{k}={format_qty(k, v)}" for k, v in sorted(values.items()))


class LimitRanger:
    """Admission plugin (between validation and quota, as in kube-apiserver): LimitRange defaults for
    containers (`default` -> limits, `defaultRequest` -> requests) and their `min`/`max` bounds."""

    def __init__(self, store):
        self.store = store
        self._lr = store.registry.lookup("", "v1", "limitranges")

    def __call__(self, req) -> None:
        if (req.operation != "CREATE" or req.subresource or (req.rt.group, req.rt.plural) != ("", "pods")
                or not req.namespace):
            return
        ranges, _ = self.store.list(self._lr, req.namespace)
        if not ranges:
            return
        pod = req.obj
        name = pod["metadata"].get("name", "")
        for lr in sorted(ranges, key=lambda r: r["metadata"]["name"]):
            for item in (lr.get("spec") or {}).get("limits") or []:
                if item.get("type") != "Container":
                    continue
                default = item.get("default") or {}
                default_request = {**default, **(item.get("defaultRequest") or {})}
                for c in containers_of(pod, "containers") + containers_of(pod, "initContainers"):
                    res = c.setdefault("resources", {})
                    limits = res.setdefault("limits", {}) if default else res.get("limits") or {}
                    for r, v in default.items():
                        limits.setdefault(r, v)
                    if default_request:
                        requests = res.setdefault("requests", {})
                        for r, v in default_request.items():
                            requests.setdefault(r, v)
                    self._bounds(name, c, item)

    @staticmethod
    def _bounds(name: str, c: dict, item: dict) -> None:
        res = c.get("resources") or {}
        for r, bound in (item.get("max") or {}).items():
            lim = (res.get("limits") or {}).get(r)
            if lim is None:
                raise ApiError(403, f'pods "{name}" is forbidden: maximum {r} usage per Container is {bound}.  No '
                                    "limit is specified", "Forbidden", name=name, kind="pods")
            if qty(lim) > qty(bound):
                raise ApiError(403, f'pods "{name}" is forbidden: maximum {r} usage per Container is {bound}, '
                                    f"but limit is {lim}", "Forbidden", name=name, kind="pods")
        for r, bound in (item.get("min") or {}).items():
            req = (res.get("requests") or {}).get(r)
            if req is None or qty(req) < qty(bound):
                raise ApiError(403, f'pods "{name}" is forbidden: minimum {r} usage per Container is {bound}, '
                                    f"but request is {req}", "Forbidden", name=name, kind="pods")


class QuotaAdmission:
    """Admission plugin (after validation): refuses creates that would exceed a ResourceQuota."""

    def __init__(self, store):
        self.store = store
        self.status_lag = 0.0          # seconds the controller takes to fill a new/changed quota's status
        self.status_due: dict[tuple[str, str], float] = {}   # (ns, name) -> monotonic time the lag ends
        self._rq = store.registry.lookup("", "v1", "resourcequotas")
        self._pods = store.registry.lookup("", "v1", "pods")
        self._pvcs = store.registry.lookup("", "v1", "persistentvolumeclaims")

    def __call__(self, req) -> None:
        if (req.rt.group, req.rt.plural) == ("", "resourcequotas") and not req.subresource and req.obj is not None:
            self._spec_written(req)
        if req.operation != "CREATE" or req.subresource or not req.namespace or not req.rt.namespaced:
            return
        if req.rt.plural == "events" and req.rt.group == "":
            return
        quotas, _ = self.store.list(self._rq, req.namespace)
        if not quotas:
            return
        obj, rt = req.obj, req.rt
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
        qualified = rt.plural if not rt.group else f"{rt.plural}.{rt.group}"
        if rt.group == "" and rt.plural == "pods":
            requested = pod_usage(obj)
        elif rt.group == "" and rt.plural == "persistentvolumeclaims":
            requested = pvc_usage(obj)
        else:
            requested = {count_key(rt): Decimal(1)}
            legacy = next((k for k, v in LEGACY_COUNTS.items() if v == (rt.group, rt.plural)), None)
            if legacy:
                requested[legacy] = Decimal(1)
        used: dict[str, Decimal] | None = None
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            status = quota.get("status") or {}
            # as kube-apiserver: admission enforces what the controller published in status.hard (nothing
            # before its first sync), not spec.hard
            hard = {k: qty(v) for k, v in (status.get("hard") or {}).items()}
            qname = quota["metadata"]["name"]
            if rt.group == "" and rt.plural == "pods" and not terminal(obj):
                why = missing_specs(obj, hard)
                if why:
                    raise ApiError(403, f'{qualified} "{name}" is forbidden: failed quota: {qname}: {why}',
                                   "Forbidden", name=name, group=rt.group, kind=rt.plural)
            tracked = {k: v for k, v in requested.items() if k in hard}
            if not tracked:
                continue
            unknown = sorted(k for k in tracked if k not in (status.get("used") or {}))
            if unknown:
                raise ApiError(403, f'{qualified} "{name}" is forbidden: status unknown for quota: {qname}, '
                                    f"resources: {','.join(unknown)}", "Forbidden", name=name, group=rt.group,
                               kind=rt.plural)
            if used is None:
                used = self.namespace_usage(req.namespace, rt)
            over = {k for k, v in tracked.items() if used.get(k, ZERO) + v > hard[k]}
            if over:
                raise ApiError(
                    403, f'{qualified} "{name}" is forbidden: exceeded quota: {qname}, '
                    f"requested: {_pretty({k: tracked[k] for k in over})}, "
                    f"used: {_pretty({k: used.get(k, ZERO) for k in over})}, "
                    f"limited: {_pretty({k: hard[k] for k in over})}",
                    "Forbidden", name=name, group=rt.group, kind=rt.plural)

    def _spec_written(self, req) -> None:
        """A quota's spec was created/updated: fill its status now (no lag) or open the unknown window."""

        key = (req.namespace, req.obj["metadata"].get("name", ""))
        old_hard = ((req.old or {}).get("spec") or {}).get("hard") if req.old is not None else None
        hard = (req.obj.get("spec") or {}).get("hard") or {}
        if req.operation == "UPDATE" and old_hard == hard:
            return
        if self.status_lag > 0:
            self.status_due[key] = time.monotonic() + self.status_lag
            return
        self.status_due.pop(key, None)
        used = usage_of(self.store, req.namespace, hard=hard)
        req.obj["status"] = {"hard": dict(hard), "used": {k: format_qty(k, used.get(k, ZERO)) for k in hard}}

    def lag_left(self, namespace: str, name: str) -> float:
        """Seconds before the controller may publish this quota's status (0: now)."""

        due = self.status_due.get((namespace, name))
        if due is None:
            return 0.0
        left = due - time.monotonic()
        if left <= 0:
            self.status_due.pop((namespace, name), None)
        return max(0.0, left)

    def namespace_usage(self, namespace: str, rt=None) -> dict[str, Decimal]:
        return usage_of(self.store, namespace, extra_kinds=[rt] if rt is not None else [])


def usage_of(store, namespace: str, extra_kinds=(), hard: dict | None = None, lister=None) -> dict[str, Decimal]:
    """What the namespace's objects use now. Admission reads the store (under its lock, so it is
    consistent); the controller passes `lister` (its informer cache) to avoid copying every object."""
    reg = store.registry
    lister = lister or (lambda rt, ns: store.list(rt, ns)[0])
    used: dict[str, Decimal] = {}
    pods = lister(reg.lookup("", "v1", "pods"), namespace)
    for pod in pods:
        if not terminal(pod):
            add(used, pod_usage(pod))
    pvcs = lister(reg.lookup("", "v1", "persistentvolumeclaims"), namespace)
    for pvc in pvcs:
        add(used, pvc_usage(pvc))
    kinds = {(rt.group, rt.plural): rt for rt in extra_kinds if rt is not None}
    for name in hard or {}:
        if name.startswith("count/"):
            plural, _, group = name[len("count/"):].partition(".")
            rt = next((r for r in reg.all() if r.plural == plural and r.group == group), None)
            if rt is not None:
                kinds[(group, plural)] = rt
        elif name in LEGACY_COUNTS:
            rt = reg.lookup("", "v1", LEGACY_COUNTS[name][1])
            if rt is not None:
                kinds[("", rt.plural)] = rt
    for (group, plural), rt in kinds.items():
        if (group, plural) in (("", "pods"), ("", "persistentvolumeclaims")):
            continue
        objs = lister(rt, namespace)
        used[count_key(rt)] = Decimal(len(objs))
        legacy = next((k for k, v in LEGACY_COUNTS.items() if v == (group, plural)), None)
        if legacy:
            used[legacy] = Decimal(len(objs))
    return used
