"""The patch merge keys of the built-in list fields: which lists strategic merge patch merges item by item
(and by which key), which it merges as sets, and which it replaces whole. Shared by strategic merge
(`patch.py`) and server-side apply's field sets (`apply.py`).

Upstream: the `patchStrategy`/`patchMergeKey` struct tags of k8s.io/api/core/v1/types.go, read by
k8s.io/apimachinery/pkg/util/strategicpatch/patch.go.
"""
from __future__ import annotations

# Patch merge keys of the built-in types (from their `patchMergeKey` tags). Lists not named here are
# atomic (replaced whole), as for PodSpec.tolerations, whose Go type has no patch strategy.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "imagePullSecrets": "name", "hostAliases": "ip", "resourceClaims": "name", "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey", "conditions": "type", "addresses": "type",
    "ownerReferences": "uid", "taints": "key",
}
# Lists of scalars merged as sets (patchStrategy=merge on []string).
PRIMITIVE_MERGE = {"finalizers"}


def merge_key(field: str, *lists) -> str | None:
    if field == "ports":
        # container ports merge on containerPort, service ports on port
        for lst in lists:
            for item in lst or []:
                if isinstance(item, dict) and "containerPort" in item:
                    return "containerPort"
        return "port"
    return MERGE_KEYS.get(field)
