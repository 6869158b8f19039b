"""Pod Security before any write: the pods a CR's actions would make, checked by the API server first.

A user writes a Sedna CR's pod templates; in a team namespace Kubernetes' PodSecurity admission enforces the
team's level (``pod-security.kubernetes.io/enforce``, from the platform file). A FederatedLearningJob whose
trainer template breaks it would get its aggregator and Service and then a refused trainer; a
JointInferenceService's Deployment would be created (workloads are only warned about) and its ReplicaSet would
fail to create pods where nobody reads it. So before a CR's first write, each distinct pod its create and
update actions would run is sent as a server-side dry run (``dryRun=All``: admitted or refused, never stored;
it needs only the ``create pods`` Skiff's Sedna role has), and a refusal stops that CR's actions with the API
server's own words (``violates PodSecurity "baseline:latest": hostPath volumes (...)``). The level is the
API server's to apply: nothing here knows the checks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from operators.sedna.plan import Action

POD_KINDS = ("Pod", "Deployment")


def pods_to_check(actions: Iterable[Action]) -> list[tuple[str, dict]]:
    """(child name, Pod manifest) for each distinct pod spec the create/update actions would run; pods that
    differ only in their containers' env are checked once (a FederatedLearningJob's trainers)."""
    seen, out = set(), []
    for a in actions:
        if a.verb not in ("create", "update") or a.kind not in POD_KINDS or a.child is None:
            continue
        body = a.child.render()
        if a.kind == "Pod":
            meta, spec = body["metadata"], body["spec"]
        else:
            template = body["spec"]["template"]
            meta, spec = template.get("metadata") or {}, template["spec"]
        key = json.dumps({k: v for k, v in spec.items() if k not in ("containers", "initContainers")} | {
            part: [{k: v for k, v in c.items() if k != "env"} for c in spec.get(part) or []]
            for part in ("containers", "initContainers")}, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec,
               "metadata": {"name": a.name, **{k: meta[k] for k in ("labels", "annotations") if k in meta}}}
        out.append((a.name, pod))
    return out


def refusal(kube, namespace: str, actions: Iterable[Action]) -> str | None:
    """PodSecurity's refusal (403 `violates PodSecurity`) of the first pod that would break the namespace's
    level, else None. Any other error (a webhook, RBAC, a fault) is left to the real write, which reports it
    as it always has."""
    from operators.k8s.errors import KubeError, api_error_message
    from operators.k8s.resource import PODS

    for _name, pod in pods_to_check(actions):
        try:
            kube.request("POST", PODS.path(namespace), query=[("dryRun", "All")], body=pod)
        except KubeError as e:
            if e.status == 403 and "violates PodSecurity" in str(e):
                return api_error_message(e)
    return None
