"""Status bodies for 404 / 409 / 422, byte for byte as kube-apiserver writes them.

The expected bytes below are written down from kube-apiserver's source, not from kubesim:
- the bodies: k8s.io/apimachinery/pkg/api/errors/errors.go (`NewNotFound`: `%s %q not found` with details
  name/group/kind=resource; `NewAlreadyExists`: `%s %q already exists`; `NewConflict`: `Operation cannot be
  fulfilled on %s %q: %v`; `NewInvalid`: `%s %q is invalid: %v` with `GroupKind.String()` (`Job.batch`) and
  one cause per field error: reason, message (`ErrorBody()`), field);
- the field order: metav1.Status (kind, apiVersion, metadata, status, message, reason, details, code) and
  StatusDetails (name, group, kind, uid, causes, retryAfterSeconds) in apimachinery/pkg/apis/meta/v1/types.go;
- the encoding: apimachinery/pkg/runtime/serializer/json/json.go ends in `json.NewEncoder(w).Encode(obj)`:
  compact, `<>&` escaped as \\u003c..., and a trailing newline;
- the 1123-subdomain message: apimachinery/pkg/util/validation/validation.go (`dns1123SubdomainErrorMsg`).
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

HEAD = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
SUBDOMAIN = (r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             r"must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def call(sim, method: str, path: str, body: dict | None = None) -> tuple[int, bytes, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers["Content-Type"]


def cm(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


@pytest.mark.parametrize("path, expected", [
    ("/api/v1/namespaces/default/pods/nope",
     b'"message":"pods \\"nope\\" not found","reason":"NotFound","details":{"name":"nope","kind":"pods"},'
     b'"code":404}\n'),
    ("/apis/batch/v1/namespaces/default/jobs/nope",
     b'"message":"jobs.batch \\"nope\\" not found","reason":"NotFound",'
     b'"details":{"name":"nope","group":"batch","kind":"jobs"},"code":404}\n'),
    # Go's %q keeps `<` and the encoder escapes it (SetEscapeHTML)
    ("/api/v1/namespaces/default/configmaps/a%3Cb",
     b'"message":"configmaps \\"a\\u003cb\\" not found","reason":"NotFound",'
     b'"details":{"name":"a\\u003cb","kind":"configmaps"},"code":404}\n'),
])
def test_404_bodies(kubesim, path, expected):
    status, body, ctype = call(kubesim, "GET", path)
    assert (status, ctype) == (404, "application/json")
    assert body == HEAD + expected


def test_409_already_exists_and_conflict_bodies(kubesim):
    assert call(kubesim, "POST", "/api/v1/namespaces/default/configmaps", cm("cm"))[0] == 201
    status, body, _ = call(kubesim, "POST", "/api/v1/namespaces/default/configmaps", cm("cm"))
    assert status == 409
    assert body == HEAD + (b'"message":"configmaps \\"cm\\" already exists","reason":"AlreadyExists",'
                           b'"details":{"name":"cm","kind":"configmaps"},"code":409}\n')
    stale = {**cm("cm"), "metadata": {"name": "cm", "resourceVersion": "1"}}
    status, body, _ = call(kubesim, "PUT", "/api/v1/namespaces/default/configmaps/cm", stale)
    assert status == 409
    assert body == HEAD + (b'"message":"Operation cannot be fulfilled on configmaps \\"cm\\": the object has been '
                           b'modified; please apply your changes to the latest version and try again",'
                           b'"reason":"Conflict","details":{"name":"cm","kind":"configmaps"},"code":409}\n')


def test_422_invalid_bodies_name_the_group_kind_and_each_cause(kubesim):
    detail = 'Invalid value: \\"Bad_Name\\": ' + SUBDOMAIN
    status, body, _ = call(kubesim, "POST", "/api/v1/namespaces/default/configmaps", cm("Bad_Name"))
    assert status == 422
    assert body == HEAD + (
        '"message":"ConfigMap \\"Bad_Name\\" is invalid: metadata.name: ' + detail + '","reason":"Invalid",'
        '"details":{"name":"Bad_Name","kind":"ConfigMap","causes":[{"reason":"FieldValueInvalid","message":"'
        + detail + '","field":"metadata.name"}]},"code":422}\n').encode()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "Bad_Name"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    status, body, _ = call(kubesim, "POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 422
    assert body == HEAD + (
        '"message":"Job.batch \\"Bad_Name\\" is invalid: metadata.name: ' + detail + '","reason":"Invalid",'
        '"details":{"name":"Bad_Name","group":"batch","kind":"Job","causes":[{"reason":"FieldValueInvalid",'
        '"message":"' + detail + '","field":"metadata.name"}]},"code":422}\n').encode()
