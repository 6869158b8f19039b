"""/openapi/v2 and /openapi/v3 built from the schema kubesim validates with (openapi.py), and
`fieldValidation=Strict` (field_validation.py). Debian's kubectl reading them is tests/integration/kubesim/test_kubectl.py."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from kubesim.apiserver.endpoints.openapi_proto import _varint  # noqa: F401  (the encoder the reader below inverts)

FL_CRD_PATH = "k8s_templates/sedna/crds/sedna.io_federatedlearningjobs.yaml"


def get(sim, path: str, accept: str = "application/json") -> tuple[int, bytes, str]:
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read(), resp.headers["Content-Type"]


def send(sim, method: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(sim.url + path, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """The top-level (field number, value) pairs of a protobuf message."""
    out, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        if key & 7 == 2:
            n, i = _read_varint(data, i)
            out.append((key >> 3, data[i:i + n]))
            i += n
        else:
            v, i = _read_varint(data, i)
            out.append((key >> 3, v))
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def job(field: str = "imagePullPolicy") -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox", field: "Always"}]}}}}


def test_v2_json_is_swagger_with_kinds(apisim):
    status, body, ctype = get(apisim, "/openapi/v2")
    doc = json.loads(body)
    assert (status, ctype, doc["swagger"]) == (200, "application/json", "2.0")
    defs = doc["definitions"]
    jobdef = defs["io.k8s.api.batch.v1.Job"]
    assert jobdef["x-kubernetes-group-version-kind"] == [{"group": "batch", "kind": "Job", "version": "v1"}]
    assert jobdef["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.batch.v1.JobSpec"
    assert defs["io.k8s.api.batch.v1.JobSpec"]["properties"]["backoffLimit"]["type"] == "integer"
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {"type": "string", "format": "int-or-string"}


def test_v2_protobuf_for_client_go(apisim):
    """client-go's discovery asks for gnostic protobuf; the Document's swagger (1), info (2), definitions (9)."""
    status, body, ctype = get(apisim, "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert (status, ctype) == (200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    top = dict(fields(body))
    assert top[1] == b"2.0"
    names = {dict(fields(named))[1].decode() for _n, named in fields(top[9])}
    assert {"io.k8s.api.batch.v1.Job", "io.k8s.api.core.v1.Pod"} <= names and len(names) > 500


def test_crds_contribute_their_schema(apisim):
    crd = yaml.safe_load((Path(__file__).resolve().parents[3] / FL_CRD_PATH).read_text())
    assert send(apisim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    doc = json.loads(get(apisim, "/openapi/v2")[1])
    fl = doc["definitions"]["io.sedna.v1alpha1.FederatedLearningJob"]
    assert fl["x-kubernetes-group-version-kind"] == [{"group": "sedna.io", "kind": "FederatedLearningJob",
                                                      "version": "v1alpha1"}]
    assert fl["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert "aggregationWorker" in fl["properties"]["spec"]["properties"]
    index = json.loads(get(apisim, "/openapi/v3")[1])["paths"]
    assert index["apis/sedna.io/v1alpha1"]["serverRelativeURL"].startswith("/openapi/v3/apis/sedna.io/v1alpha1?hash=")


def test_v3_documents_declare_field_validation(apisim):
    index = json.loads(get(apisim, "/openapi/v3")[1])["paths"]
    assert {"api/v1", "apis/batch/v1", "apis/apps/v1"} <= set(index)
    doc = json.loads(get(apisim, index["apis/batch/v1"]["serverRelativeURL"])[1])
    assert doc["openapi"] == "3.0.0"
    schemas = doc["components"]["schemas"]
    assert schemas["io.k8s.api.batch.v1.Job"]["properties"]["spec"]["$ref"] == \
        "#/components/schemas/io.k8s.api.batch.v1.JobSpec"
    patch = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


def test_strict_field_validation_refuses_unknown_fields_before_writing(kubesim):
    status, body = send(kubesim, "POST", "/apis/batch/v1/namespaces/default/jobs?fieldValidation=Strict",
                        job("imagePulPolicy"))
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == ('Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field '
                               '"spec.template.spec.containers[0].imagePulPolicy"')
    assert json.loads(get(kubesim, "/apis/batch/v1/namespaces/default/jobs")[1])["items"] == []   # nothing written
    status, created = send(kubesim, "POST", "/apis/batch/v1/namespaces/default/jobs", job("imagePulPolicy"))
    assert status == 201   # no fieldValidation: the unknown field is dropped (the real default, Warn)
    assert "imagePulPolicy" not in created["spec"]["template"]["spec"]["containers"][0]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "imagee": "x"}]}}}}
    req = urllib.request.Request(kubesim.url + "/apis/batch/v1/namespaces/default/jobs/j?fieldValidation=Strict",
                                 data=json.dumps(patch).encode(), method="PATCH",
                                 headers={"Content-Type": "application/strategic-merge-patch+json"})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("the patch was accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 400 and 'unknown field \\"spec.template.spec.containers[0].imagee\\"' in e.read().decode()
