"""CustomResourceDefinition rules of the registry: the checks on a new CRD, the status the apiextensions
controllers give it at once, and serving its kinds (registered on create and update, unregistered with
their objects deleted when the CRD goes).

Upstream: k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go (required group,
names, versions; the name must be `<plural>.<group>`), pkg/controller/status/naming_controller.go
(NamesAccepted, acceptedNames), pkg/controller/establish/establishing_controller.go (Established) and
pkg/apiserver/customresource_handler.go (one served kind per version, all on one storage).
"""
from __future__ import annotations

import json

from kubesim.apimachinery import errors
from kubesim.apiserver.registry.kinds import Registry, ResourceType, crd_resource_types


def is_crd(rt: ResourceType) -> bool:
    return rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io"


def precheck(registry: Registry, crd: dict) -> None:
    rt = registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes = []
    if not spec.get("group"):
        causes.append(("spec.group", "FieldValueRequired", "Required value"))
    if not names.get("plural"):
        causes.append(("spec.names.plural", "FieldValueRequired", "Required value"))
    if not names.get("kind"):
        causes.append(("spec.names.kind", "FieldValueRequired", "Required value"))
    if not spec.get("versions"):
        causes.append(("spec.versions", "FieldValueRequired", "Required value: must have exactly one "
                                                              "version marked as storage version"))
    name = crd["metadata"]["name"]
    if not causes and name != f"{names['plural']}.{spec['group']}":
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if causes:
        raise errors.invalid(rt, name, causes)


def establish(crd: dict, now: str) -> None:
    names = dict(crd["spec"]["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    crd["status"] = {
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
    }


def serve(registry: Registry, crd: dict, before: dict | None = None) -> None:
    """Serve the kinds of `crd` (instead of those of `before`, the CRD it replaced)."""
    if before is not None:
        for crt in crd_resource_types(before):
            registry.unregister(crt)
    for crt in crd_resource_types(crd):
        registry.register(crt)


def remove(store, crd: dict) -> None:
    """A deleted CRD: its objects are deleted and its kinds no longer served."""
    for crt in crd_resource_types(crd):
        bucket = store.storage.data.get(crt.storage_key, {})
        for key in list(bucket):
            if key in bucket:
                store.finalize_removal(crt, key, json.loads(bucket[key][1]))
        store.registry.unregister(crt)
