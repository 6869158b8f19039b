"""operators.rbac renders Skiff's RBAC from k8s_templates/rbac/: bad input fails naming the field and value;
the rendered objects are what a cluster admin applies (kubesim validates them against the OpenAPI schema on
apply, as the tests in this folder do)."""
from __future__ import annotations

import pytest

from operators.rbac import BOUND_IN, FEATURES, install_manifests, main, team_manifests, team_roles


def test_install_manifests_one_service_account_and_bindings_to_it():
    docs = install_manifests("ml-platform", "skiff-airflow", tcp_services="ingress-nginx/tcp-map")
    assert [d["kind"] for d in docs].count("ServiceAccount") == 1
    subjects = [s for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]]
    assert subjects and all(s == {"kind": "ServiceAccount", "name": "skiff-airflow", "namespace": "ml-platform"}
                            for s in subjects)
    tcp = next(d for d in docs if d["kind"] == "Role")
    assert tcp["metadata"]["namespace"] == "ingress-nginx" and tcp["rules"][0]["resourceNames"] == ["tcp-map"]
    assert all(d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "skiff" for d in docs)
    assert {d["metadata"]["name"] for d in install_manifests(features=["training"])} == {"skiff", "skiff-training"}
    assert len(install_manifests()) == len({(d["kind"], d["metadata"]["name"]) for d in install_manifests()})
    assert FEATURES == ("training", "sedna", "platform", "devinstances", "ui")


def test_what_acts_is_bound_in_team_namespaces_and_only_reads_are_cluster_wide():
    """The install binds cluster-wide only roles labelled `cluster`, and those only list or watch (never a
    Secret or ConfigMap); every role that acts is labelled `team-namespaces` and bound by team_manifests."""
    docs = install_manifests()
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    cluster_bound = {d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    assert cluster_bound == {n for n, r in roles.items() if r["metadata"]["labels"][BOUND_IN] == "cluster"}
    for name in cluster_bound:
        for rule in roles[name]["rules"]:
            assert set(rule["verbs"]) <= {"list", "watch"}, (name, rule)
            assert not {"secrets", "configmaps"} & set(rule["resources"]), (name, rule)
    assert set(team_roles()) == {"skiff-training", "skiff-sedna-reconcile", "skiff-platform", "skiff-devinstances",
                                 "skiff-ui"}
    bindings = team_manifests(["recsys", "nlp"], "ml-platform", "skiff-airflow")
    assert {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in bindings} == {
        (ns, r) for ns in ("recsys", "nlp") for r in team_roles()}
    assert all(b["kind"] == "RoleBinding" and b["subjects"] == [
        {"kind": "ServiceAccount", "name": "skiff-airflow", "namespace": "ml-platform"}] for b in bindings)
    assert [b["roleRef"]["name"] for b in team_manifests(["x"], features=["training"])] == ["skiff-training"]


def test_the_cli_prints_what_an_admin_applies(capsys):
    import yaml

    assert main(["teams", "--platform", "operators/platform/example.yaml"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == ["recsys", "nlp"]
    assert len([d for d in docs if d["kind"] == "RoleBinding"]) == 2 * len(team_roles())
    assert main(["teams", "Bad_NS"]) == 2
    assert "team_namespaces[0]: 'Bad_NS' is not a valid name" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [
    ({"namespace": "Air Flow"}, "namespace: 'Air Flow' is not a valid name"),
    ({"service_account": ""}, "service_account: '' is not a valid name"),
    ({"features": ["training", "mining"]}, "features: ['mining'] are not Skiff features"),
    ({"tcp_services": "kube-system"}, "tcp_services name: '' is not a valid name"),
])
def test_install_manifests_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        install_manifests(**kwargs)


def test_team_manifests_bad_input():
    with pytest.raises(ValueError, match=r"team_namespaces\[1\]: 'kube system' is not a valid name"):
        team_manifests(["recsys", "kube system"])
    with pytest.raises(ValueError, match=r"features: \['mining'\] are not Skiff features"):
        team_manifests(["recsys"], features=["mining"])
