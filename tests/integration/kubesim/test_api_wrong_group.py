"""A resource addressed under the wrong API group is not found, whatever the verb: kube-apiserver routes a
path under a served group/version through go-restful, which has no ``secrets`` route under ``apps/v1``, and
answers the generic NotFound Status (k8s.io/apiserver/pkg/server/handler.go ``serviceErrorHandler`` ->
``apierrors.NewGenericServerResponse``). A client that pastes a user's text into a path (``team='x/../..'``)
must never reach the same-named object of the right group this way."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from kubernetes import client

REAL_BODY = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": "the server could not find the requested resource", "reason": "NotFound",
             "details": {}, "code": 404}


def send(url: str, method: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    content = "application/merge-patch+json" if method == "PATCH" else "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": content})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/apis/apps/v1/namespaces/default/secrets/pw", None),
    ("DELETE", "/apis/apps/v1/namespaces/default/secrets/pw", {"kind": "DeleteOptions", "apiVersion": "v1"}),
    ("PATCH", "/apis/apps/v1/namespaces/default/secrets/pw", {"stringData": {"password": "mine"}}),
    ("PUT", "/apis/apps/v1/namespaces/default/secrets/pw",
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pw"}, "stringData": {"password": "mine"}}),
    ("GET", "/apis/apps/v1/namespaces/default/secrets", None),
    ("DELETE", "/api/v1/namespaces/default/deployments/web", {"kind": "DeleteOptions", "apiVersion": "v1"}),
    ("DELETE", "/apis/batch/v1/namespaces/default/secrets/pw", {"kind": "DeleteOptions", "apiVersion": "v1"}),
])
def test_a_resource_under_the_wrong_group_is_404_and_untouched(kubesim, k8s, method, path, body):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_secret("default", {"metadata": {"name": "pw"}, "stringData": {"password": "hers"}})
    before = core.read_namespaced_secret("pw", "default")
    status, answer = send(kubesim.url + path, method, body)
    assert (status, answer) == (404, REAL_BODY)
    after = core.read_namespaced_secret("pw", "default")
    assert (after.metadata.uid, after.metadata.resource_version, after.data) == (
        before.metadata.uid, before.metadata.resource_version, before.data)
