"""Install what the Sedna reconcile needs on a cluster: the 4 Sedna CRDs (``k8s_templates/sedna/crds``,
unchanged from kubeedge/sedna, Apache-2.0) and the RBAC for the Airflow service account
(``k8s_templates/rbac/sedna.yaml.j2``, also part of Skiff's whole RBAC: ``operators.rbac``). ``kubectl apply -f`` on the same files does the same."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from importlib.resources import files

import yaml

from operators.k8s.errors import KubeError
from operators.k8s.rest import Kube
from operators.templating import render

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@lru_cache(maxsize=1)
def _crd_json() -> str:
    # libyaml when available: the CRDs are 34,000 lines, ~2 s with the pure-Python loader
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    root = files("k8s_templates").joinpath("sedna", "crds")
    return json.dumps([yaml.load(p.read_text(), Loader=loader)
                       for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".yaml")])


def crd_manifests() -> list[dict]:
    return json.loads(_crd_json())


def rbac_manifests(namespace: str = "airflow", service_account: str = "airflow",
                   team_namespaces: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """The Sedna reconcile's ClusterRoles and the read-only one's binding, plus its RoleBindings in
    ``team_namespaces`` (the only namespaces where it acts; operators.rbac.team_manifests)."""
    from operators.rbac import team_manifests

    docs = render("rbac/sedna.yaml.j2", namespace=namespace, service_account=service_account)
    return docs + (team_manifests(team_namespaces, namespace, service_account, ["sedna"]) if team_namespaces else [])


def install_crds(kube: Kube, timeout: float = 10.0) -> list[str]:
    """Create the CRDs (existing ones are left alone) and wait until the API serves them."""
    names = []
    crds = crd_manifests()
    for crd in crds:
        try:
            kube.request("POST", CRD_PATH, body=crd)
        except KubeError as e:
            if e.status != 409:
                raise
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for crd in crds:
        spec = crd["spec"]
        path = f"/apis/{spec['group']}/{spec['versions'][0]['name']}/{spec['names']['plural']}"
        while True:
            try:
                kube.request("GET", path)
                break
            except KubeError as e:
                if e.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    return names
