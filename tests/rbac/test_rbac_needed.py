"""Every permission in Skiff's RBAC is needed: take any one away (one verb on one resource) and the scenario
of the feature that holds it is refused by the API server (kubesim enforcing RBAC records the 403).

`NEEDED` says which scenario needs each permission, so each removal runs that one scenario only.
`PENDING` holds the permissions of callers that are specified (issues 8 and 9) but not on this branch yet;
a test fails as soon as such a feature's DAG appears, so that its scenario gets written and its rules move
to `NEEDED`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from operators.rbac import install_manifests
from tests.rbac.scenarios import (
    SCENARIOS,
    SKIFF_NS,
    SKIFF_SA,
    atoms,
    denied,
    skiff_denials,
    skiff_env,
    without,
)

REPO = Path(__file__).resolve().parents[2]
T, S, P = "skiff-training", "skiff-sedna-reconcile", "skiff-platform"
RBAC = "rbac.authorization.k8s.io"


def _each(role: str, group: str, resource: str, verbs: str, scenario: str, name: str = "") -> dict:
    return {(role, group, resource, v, name): scenario for v in verbs.split()}


NEEDED: dict[tuple, str] = {
    **_each(T, "batch", "jobs", "create get list watch patch delete", "training"),
    **_each(T, "", "pods", "list watch", "training"),
    **_each(T, "", "pods/log", "get", "training"),
    **_each(T, "", "events", "list", "training"),
    **_each(T, "", "persistentvolumeclaims", "get", "training"),
    **_each(S, "sedna.io", "federatedlearningjobs", "get list watch", "sedna"),
    **_each(S, "sedna.io", "jointinferenceservices", "get list watch", "sedna"),
    **_each(S, "sedna.io", "federatedlearningjobs/status", "patch", "sedna"),
    **_each(S, "sedna.io", "jointinferenceservices/status", "patch", "sedna"),
    **_each(S, "sedna.io", "models", "list watch", "sedna"),
    **_each(S, "sedna.io", "datasets", "list watch", "sedna"),
    **_each(S, "", "pods", "get list watch create delete patch", "sedna"),
    **_each(S, "", "services", "get list watch create update patch delete", "sedna"),
    **_each(S, "apps", "deployments", "get list watch create update patch delete", "sedna"),
    **_each(S, "autoscaling", "horizontalpodautoscalers", "get list watch create update patch delete", "sedna"),
    **_each(S, "", "events", "create", "sedna"),
    **_each(P, "", "namespaces", "create", "platform"),
    **_each(P, "", "resourcequotas", "create get patch", "platform"),
    **_each(P, "", "persistentvolumeclaims", "create", "platform"),
    **_each(P, RBAC, "rolebindings", "create patch", "platform"),
    **{(P, RBAC, "clusterroles", "bind", n): "platform" for n in ("skiff-team", "skiff-team-member", "skiff-team-admin")},
}

# feature not on this branch yet -> (the DAG id that will run it, its permissions)
PENDING_FEATURES = {
    "platform sync and quota checks (issue 8)": ("platform_sync", [
        *_each(T, "", "resourcequotas", "get list", ""), *_each(P, "", "namespaces", "patch list", ""),
        *_each(P, "", "limitranges", "create patch", ""), *_each(P, "", "persistentvolumeclaims", "patch list", ""),
        *_each(P, "", "serviceaccounts", "create patch", "")]),
    "development instances (issue 9)": ("dev_instance_create", [
        *_each("skiff-team", "", "secrets", "get create update delete", ""),
        *_each("skiff-team", "", "configmaps", "get create update delete", ""),
        *_each("skiff-devinstances", "apps", "statefulsets", "get list create patch delete", ""),
        *_each("skiff-devinstances", "", "services", "get create delete", ""),
        *_each("skiff-devinstances", "", "pods", "list", ""),
        *_each("skiff-devinstances", "", "services/proxy", "get", ""),
        *_each("skiff-devinstances", "", "persistentvolumeclaims", "get list", ""),
        *_each("skiff-tcp-services", "", "configmaps", "get update", "", name="tcp-services")]),
}
PENDING = {atom for _dag, rules in PENDING_FEATURES.values() for atom in rules}
FEATURE_OF_ROLE = {T: "training", S: "sedna", P: "platform"}


def test_the_table_covers_every_permission_once():
    """Each permission the templates grant Skiff is in NEEDED or PENDING, and nothing else is."""
    granted = set(atoms(install_manifests()))
    assert len(granted) == len(atoms(install_manifests()))            # no permission granted twice in a role
    assert set(NEEDED) | PENDING == granted, {"untabled": granted - set(NEEDED) - PENDING,
                                              "not granted": (set(NEEDED) | PENDING) - granted}
    assert not set(NEEDED) & PENDING


@pytest.mark.parametrize("feature", sorted(PENDING_FEATURES))
def test_pending_features_are_not_on_this_branch_yet(feature):
    """A pending feature's DAG is not in dags/ yet; once it lands, its scenario must be added here."""
    dag_id = PENDING_FEATURES[feature][0]
    hits = [p.name for p in (REPO / "dags").glob("*.py") if re.search(rf"['\"]{dag_id}['\"]", p.read_text())]
    assert not hits, (f"{feature} has landed ({hits}): add its scenario to tests/rbac/scenarios.py and move "
                      f"its permissions from PENDING_FEATURES to NEEDED")


@pytest.mark.parametrize("atom", sorted(NEEDED), ids=lambda a: f"{a[0]}:{a[3]}:{a[2]}.{a[1]}{':' + a[4] if a[4] else ''}")
def test_removing_the_permission_gets_a_403(rbac_sim, tmp_path, atom):
    scenario = NEEDED[atom]
    feature = FEATURE_OF_ROLE[atom[0]]
    docs = without(install_manifests(SKIFF_NS, SKIFF_SA, features=[feature]), atom)
    assert set(atoms(docs)) == {a for a in atoms(install_manifests(SKIFF_NS, SKIFF_SA, features=[feature]))} - {atom}
    env = skiff_env(rbac_sim, tmp_path, docs)
    try:
        SCENARIOS[scenario](env)
    except Exception:          # the scenario may stop at the 403 (or carry on past a refused write)
        pass
    assert denied(rbac_sim, atom), f"no 403 for {atom} in scenario {scenario}; Skiff was refused: " \
                                   f"{skiff_denials(rbac_sim)}"
