"""operators.rbac renders Skiff's RBAC from k8s_templates/rbac/: bad input fails naming the field and value;
the rendered objects are what a cluster admin applies (kubesim validates them against the OpenAPI schema on
apply, as the tests in this folder do)."""
from __future__ import annotations

import pytest

from operators.rbac import FEATURES, install_manifests


def test_install_manifests_one_service_account_and_bindings_to_it():
    docs = install_manifests("ml-platform", "skiff-airflow", tcp_services="ingress-nginx/tcp-map")
    assert [d["kind"] for d in docs].count("ServiceAccount") == 1
    subjects = [s for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]]
    assert subjects and all(s == {"kind": "ServiceAccount", "name": "skiff-airflow", "namespace": "ml-platform"}
                            for s in subjects)
    tcp = next(d for d in docs if d["kind"] == "Role")
    assert tcp["metadata"]["namespace"] == "ingress-nginx" and tcp["rules"][0]["resourceNames"] == ["tcp-map"]
    assert all(d["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "skiff"} for d in docs)
    assert {d["metadata"]["name"] for d in install_manifests(features=["training"])} == {"skiff", "skiff-training"}
    assert len(install_manifests()) == len({(d["kind"], d["metadata"]["name"]) for d in install_manifests()})
    assert FEATURES == ("training", "sedna", "platform", "devinstances", "ui")


@pytest.mark.parametrize("kwargs, message", [
    ({"namespace": "Air Flow"}, "namespace: 'Air Flow' is not a valid name"),
    ({"service_account": ""}, "service_account: '' is not a valid name"),
    ({"features": ["training", "mining"]}, "features: ['mining'] are not Skiff features"),
    ({"tcp_services": "kube-system"}, "tcp_services name: '' is not a valid name"),
])
def test_install_manifests_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        install_manifests(**kwargs)
