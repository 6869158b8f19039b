"""What a DELETE does before anything is removed: preconditions, the propagation policy, and the finalizers
that turn a delete into "being deleted" (deletionTimestamp set, object kept until they are gone).

Upstream: k8s.io/apiserver/pkg/registry/rest/delete.go (`BeforeDelete`: uid and resourceVersion
preconditions, deletionTimestamp on first delete), k8s.io/apiserver/pkg/registry/generic/registry/store.go
(`deletionFinalizersForGarbageCollection`: Foreground adds `foregroundDeletion`, Orphan adds `orphan`, a
Background delete of an object already being deleted drops them) and
staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation (the supported propagation policies), and
graceful pod deletion: pkg/registry/core/pod/strategy.go (`CheckGracefulDelete`: the request's
gracePeriodSeconds, else the pod's terminationGracePeriodSeconds (30); 0 for an unbound or terminated pod)
with rest.BeforeDelete's `deletionTimestamp = now + grace` (the kubelet then deletes it with grace 0).
kubesim deletes gracefully only the pods its kubelet runs as processes (`graceful` says which). Pure.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from kubesim.apimachinery import errors
from kubesim.apimachinery.clock import Clock
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry.kinds import ResourceType

POLICIES = (None, "Background", "Foreground", "Orphan")


def check(rt: ResourceType, name: str, md: dict, preconditions: dict | None, propagation: str | None) -> None:
    """409 on a failed uid or resourceVersion precondition, 400 on an unknown propagation policy."""
    pre = preconditions or {}
    if pre.get("uid") and pre["uid"] != md["uid"]:
        raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                        f"UID in object meta: {md['uid']}")
    if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
        raise errors.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                                        f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                        f"{md['resourceVersion']}")
    if propagation not in POLICIES:
        raise ApiError(400, f"DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: "
                            f"Unsupported value: \"{propagation}\": supported values: \"Foreground\", "
                            f"\"Background\", \"Orphan\"", "BadRequest")


def finalizers_for(policy: str, md: dict) -> list[str]:
    """The object's finalizers after a delete with `policy`."""
    finalizers = list(md.get("finalizers") or [])
    if policy == "Foreground" and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    if policy == "Orphan" and "orphan" not in finalizers:
        finalizers.append("orphan")
    if policy == "Background" and md.get("deletionTimestamp"):
        finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
    return finalizers


def mark_deleting(md: dict, finalizers: list[str], now: str, grace_period_seconds: int | None) -> None:
    """`md` of an object that stays until its finalizers are done (first delete: deletionTimestamp)."""
    if not md.get("deletionTimestamp"):
        md["deletionTimestamp"] = now
        md["deletionGracePeriodSeconds"] = grace_period_seconds or 0
        md["generation"] = md.get("generation", 1) + 1
    if finalizers:
        md["finalizers"] = finalizers


def pod_grace_period(rt: ResourceType, pod: dict, requested: int | None, graceful) -> int:
    """Seconds a pod DELETE waits for the kubelet (0: removed at once)."""
    if rt.group != "" or rt.plural != "pods" or graceful is None or requested == 0:
        return 0
    if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    if not graceful(pod):
        return 0
    if requested is not None:
        return max(0, int(requested))
    value = pod["spec"].get("terminationGracePeriodSeconds")
    return 30 if value is None else int(value)


def mark_graceful(md: dict, finalizers: list[str], now: datetime, grace: int) -> None:
    """A graceful delete: deletionTimestamp at now + grace, deletionGracePeriodSeconds = grace."""
    md["deletionTimestamp"] = Clock.rfc3339(now + timedelta(seconds=grace))
    md["deletionGracePeriodSeconds"] = grace
    md["generation"] = md.get("generation", 1) + 1
    if finalizers:
        md["finalizers"] = finalizers
