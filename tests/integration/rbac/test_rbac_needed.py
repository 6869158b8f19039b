"""Every permission in Skiff's RBAC is needed: take any one away (one verb on one resource) and the scenario
of the feature that holds it is refused by the API server (kubesim enforcing RBAC records the 403).

`NEEDED` says which scenario needs each permission, so each removal runs that one scenario only.
`UNPROVEN` names the few permissions whose caller exists but is not reached by these scenarios (with why).
"""
from __future__ import annotations

import pytest

from operators.rbac import install_manifests
from tests.support.rbac.scenarios import (
    SCENARIOS,
    SKIFF_NS,
    SKIFF_SA,
    atoms,
    denied,
    skiff_denials,
    skiff_env,
    without,
)

T, S, P, D, U = "skiff-training", "skiff-sedna-reconcile", "skiff-platform", "skiff-devinstances", "skiff-ui"
SO, PO, DO, UO = "skiff-sedna-observe", "skiff-platform-observe", "skiff-devinstances-observe", "skiff-ui-observe"
RBAC = "rbac.authorization.k8s.io"


def _each(role: str, group: str, resource: str, verbs: str, scenario: str, name: str = "") -> dict:
    return {(role, group, resource, v, name): scenario for v in verbs.split()}


NEEDED: dict[tuple, str] = {
    **_each(T, "batch", "jobs", "create get list watch patch delete", "training"),
    **_each(T, "", "pods", "list watch", "training"),
    **_each(T, "", "pods/log", "get", "training"),
    **_each(T, "", "events", "list", "training"),
    **_each(T, "metrics.k8s.io", "pods", "list", "training"),
    **_each(T, "", "persistentvolumeclaims", "get", "training"),
    **_each(T, "kueue.x-k8s.io", "workloads", "list watch", "training"),
    **_each(T, "kueue.x-k8s.io", "localqueues", "list watch", "training"),
    **_each(S, "sedna.io", "federatedlearningjobs", "get", "sedna"),
    **_each(S, "sedna.io", "jointinferenceservices", "get", "sedna"),
    **_each(S, "sedna.io", "federatedlearningjobs/status", "patch", "sedna"),
    **_each(S, "sedna.io", "jointinferenceservices/status", "patch", "sedna"),
    **_each(S, "", "pods", "get create delete patch", "sedna"),
    **_each(S, "", "services", "get create update patch delete", "sedna"),
    **_each(S, "apps", "deployments", "get create update patch delete", "sedna"),
    **_each(S, "autoscaling", "horizontalpodautoscalers", "get create update patch delete", "sedna"),
    **_each(S, "", "events", "create", "sedna"),
    **_each(S, "", "secrets", "get", "sedna"),
    **{(SO, "sedna.io", res, v, ""): "sedna" for res in ("federatedlearningjobs", "jointinferenceservices", "models",
                                                         "datasets") for v in ("list", "watch")},
    **{(SO, g, res, v, ""): "sedna" for g, res in (("", "pods"), ("", "services"), ("apps", "deployments"),
                                                   ("autoscaling", "horizontalpodautoscalers"))
       for v in ("list", "watch")},
    **_each(P, "", "namespaces", "patch", "platform"),
    **{(P, "", res, v, ""): "platform" for res in ("resourcequotas", "limitranges", "serviceaccounts",
                                                   "persistentvolumeclaims") for v in ("create", "patch")
       if (res, v) != ("serviceaccounts", "create")},
    **_each(P, RBAC, "rolebindings", "create patch", "platform"),
    **_each(P, "", "resourcequotas", "get", "platform"),
    **_each(P, RBAC, "clusterroles", "bind", "platform", name="skiff-member"),
    **{(PO, "", res, "list", ""): "platform" for res in ("namespaces", "resourcequotas", "limitranges",
                                                         "serviceaccounts", "persistentvolumeclaims")},
    **_each(PO, RBAC, "rolebindings", "list", "platform"),
    **_each(PO, "batch", "jobs", "list", "platform"),
    **_each(P, "kueue.x-k8s.io", "localqueues", "create patch", "platform"),
    **{(PO, "kueue.x-k8s.io", res, "list", ""): "platform" for res in (
        "resourceflavors", "workloadpriorityclasses", "clusterqueues", "localqueues")},
    **_each(D, "apps", "statefulsets", "get create patch delete", "devinstances"),
    **_each(D, "", "services", "create delete", "devinstances"),
    **_each(D, "", "configmaps", "create delete", "devinstances"),
    **_each(D, "", "secrets", "get create update delete", "devinstances"),
    **_each(D, "", "services/proxy", "get", "devinstances"),
    **_each(D, "", "persistentvolumeclaims", "get", "devinstances"),
    **_each(DO, "apps", "statefulsets", "list", "devinstances"),
    **_each(DO, "", "pods", "list", "devinstances"),
    **_each(DO, "metrics.k8s.io", "pods", "list", "devinstances"),
    **_each("skiff-tcp-services", "", "configmaps", "get update", "devinstances", name="tcp-services"),
    **{(UO, g, res, "list", ""): "ui" for g, res in (
        ("", "resourcequotas"), ("", "pods"), ("", "services"), ("", "events"), ("batch", "jobs"),
        ("apps", "deployments"), ("apps", "statefulsets"), ("autoscaling", "horizontalpodautoscalers"),
        ("sedna.io", "federatedlearningjobs"), ("sedna.io", "jointinferenceservices"), ("sedna.io", "models"),
        ("sedna.io", "datasets"), ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "workloads"),
        ("metrics.k8s.io", "pods"))},
    **_each(U, "", "services/proxy", "get", "ui"),   # operators/ui/idle_times (the idle time)
    **_each(U, "", "secrets", "get", "ui"),          # operators/ui/instances.password
    **_each(U, "apps", "statefulsets", "get", "ui"),
}

# callers that exist but that these scenarios do not reach, and why (each must name its caller)
UNPROVEN: dict[tuple, str] = {
    **_each(T, "", "resourcequotas", "get", "operators/training/admission.admit: only with a platform file"),
    **_each(T, "", "services", "create", "operators/training/jobs.py ensure_workers_service: a step with "
            "workers > 1 only (the training scenario runs one worker)"),
    **_each(D, "", "resourcequotas", "get", "operators/devinstances/operator.py: the DAG operator's quota check"),
    **_each(P, "", "serviceaccounts", "create", "operators/platform/sync.py applies the team's ServiceAccount "
            "`default`; on a new namespace the apply can come before the ServiceAccount controller made it"),
}
FEATURE_OF_ROLE = {T: "training", S: "sedna", SO: "sedna", P: "platform", PO: "platform", D: "devinstances",
                   DO: "devinstances", "skiff-tcp-services": "devinstances", U: "ui", UO: "ui"}


def test_the_table_covers_every_permission_once():
    """Each permission the templates grant Skiff is in NEEDED or UNPROVEN, and nothing else is."""
    granted = set(atoms(install_manifests()))
    assert len(granted) == len(atoms(install_manifests()))            # no permission granted twice in a role
    assert set(NEEDED) | set(UNPROVEN) == granted, {
        "untabled": granted - set(NEEDED) - set(UNPROVEN), "not granted": (set(NEEDED) | set(UNPROVEN)) - granted}
    assert not set(NEEDED) & set(UNPROVEN)
    assert len(UNPROVEN) <= 5        # a new unproven permission needs a scenario, not an entry here


@pytest.mark.parametrize("atom", sorted(NEEDED), ids=lambda a: f"{a[0]}:{a[3]}:{a[2]}.{a[1]}{':' + a[4] if a[4] else ''}")
def test_removing_the_permission_gets_a_403(rbac_sim, tmp_path, atom):
    scenario = NEEDED[atom]
    feature = FEATURE_OF_ROLE[atom[0]]
    docs = without(install_manifests(SKIFF_NS, SKIFF_SA, features=[feature]), atom)
    assert set(atoms(docs)) == {a for a in atoms(install_manifests(SKIFF_NS, SKIFF_SA, features=[feature]))} - {atom}
    env = skiff_env(rbac_sim, tmp_path, docs, [feature])
    try:
        SCENARIOS[scenario](env)
    except Exception:          # the scenario may stop at the 403 (or carry on past a refused write)
        pass
    assert denied(rbac_sim, atom), f"no 403 for {atom} in scenario {scenario}; Skiff was refused: " \
                                   f"{skiff_denials(rbac_sim)}"
