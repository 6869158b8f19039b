"""Skiff's RBAC is enough: each feature's key scenario runs as Skiff's ServiceAccount, with only that
feature's roles installed (the cluster-wide read-only one, the team one bound in the team namespaces only), on an
RBAC-enforcing kubesim, and is refused nothing."""
from __future__ import annotations

import pytest

from operators.rbac import install_manifests
from tests.support.rbac.scenarios import SCENARIOS, SKIFF_NS, SKIFF_SA, skiff_denials, skiff_env


@pytest.mark.parametrize("feature", sorted(SCENARIOS))
def test_feature_scenario_runs_with_only_its_role(rbac_sim, tmp_path, feature):
    env = skiff_env(rbac_sim, tmp_path, install_manifests(SKIFF_NS, SKIFF_SA, features=[feature]), [feature])
    SCENARIOS[feature](env)
    assert skiff_denials(rbac_sim) == []
