"""credentialName on Models and Datasets (S3 keys from a Secret), as Sedna's controller supports it
(runtime/secret_injector.go): the storage initializer and the worker get ACCESS_KEY_ID and SECRET_ACCESS_KEY
from the Secret, and S3_ENDPOINT_URL from its ``s3-endpoint`` annotation. Unlike Sedna, which copies the
values into the pod spec, the keys travel as ``secretKeyRef``: no secret value is in any child."""

from __future__ import annotations

import base64
import json

from operators.sedna.desired import desired_federated_learning, desired_joint_inference
from operators.sedna.kube import DEPLOYMENTS, FL_JOBS, JI_SERVICES, MODELS, SECRETS, Kube
from operators.sedna.reconcile import reconcile_federated_learning, reconcile_joint_inference
from tests.support.sedna.sedna_helpers import JI, JI_SEL, NS, dataset, fl_sample, ji_sample, model, pods_of

MODEL = "surface-defect-detection-model"
DATASETS = ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset")
KEY_ID, SECRET_KEY = "AKIAEXAMPLEKEYID0001", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def s3_secret(name="minio-creds", keys=("ACCESS_KEY_ID", "SECRET_ACCESS_KEY"), endpoint="minio.storage:9000",
              https=False) -> dict:
    values = {"ACCESS_KEY_ID": KEY_ID, "SECRET_ACCESS_KEY": SECRET_KEY}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "annotations": {"s3-endpoint": endpoint, "s3-usehttps": "1" if https else "0"}},
            "data": {k: base64.b64encode(values[k].encode()).decode() for k in keys}}


def summary_of(secret: dict) -> dict:
    from operators.sedna.storage import secret_summary

    return secret_summary(secret)


def env_entries(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env") or []}


def assert_s3_env(container: dict, secret: str, endpoint: str) -> None:
    env = env_entries(container)
    assert env["S3_ENDPOINT_URL"] == {"name": "S3_ENDPOINT_URL", "value": endpoint}
    for key in ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY"):
        assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def test_fl_s3_model_with_credentials_pure():
    job = fl_sample(uid="uid-1")
    models = {MODEL: model(MODEL, "s3://models/sdd/model.ckpt")}
    models[MODEL]["spec"]["credentialName"] = "minio-creds"
    datasets = {d: dataset(d, f"/d/{d}/t.txt") for d in DATASETS}
    secrets = {"minio-creds": summary_of(s3_secret())}
    d = desired_federated_learning(job, models, datasets, secrets=secrets)
    assert d.error is None
    for pod in (c.render() for c in d.children if c.kind == "Pod"):
        init = next(c for c in pod["spec"]["initContainers"] if c["name"] == "storage-initializer")
        assert_s3_env(init, "minio-creds", "http://minio.storage:9000")
        assert_s3_env(pod["spec"]["containers"][0], "minio-creds", "http://minio.storage:9000")
        assert env_entries(pod["spec"]["containers"][0])["MODEL_URL"]["value"] == "/downloads/models/sdd/model.ckpt"
    # the Secret's name and endpoint shape the pods; its key values never reach the desired children
    other = desired_federated_learning(job, models, datasets, secrets={"minio-creds": summary_of(
        s3_secret(endpoint="minio.other:9000", https=True))})
    assert other.children[0].spec_hash != d.children[0].spec_hash
    assert "https://minio.other:9000" in json.dumps(other.children[0].render())


def test_a_secret_without_a_key_is_a_condition_naming_secret_and_key():
    svc = ji_sample(uid="uid-2")
    models = {m: model(m, f"s3://models/{m}.pb") for m in ("helmet-detection-inference-little-model",
                                                           "helmet-detection-inference-big-model")}
    models["helmet-detection-inference-big-model"]["spec"]["credentialName"] = "half"
    d = desired_joint_inference(svc, models, secrets={"half": summary_of(s3_secret("half", keys=("ACCESS_KEY_ID",)))})
    assert d.children == () and d.error.reason == "SecretKeyMissing"
    assert "'half'" in str(d.error) and "'SECRET_ACCESS_KEY'" in str(d.error)
    assert "helmet-detection-inference-big-model" in str(d.error)


def test_fl_on_kubesim_gets_keys_by_reference_never_by_value(k8s, kube):
    kube.create(SECRETS, NS, s3_secret())
    m = model(MODEL, "s3://models/sdd/model.ckpt")
    m["spec"]["credentialName"] = "minio-creds"
    kube.merge_patch(MODELS, NS, MODEL, {"spec": m["spec"]})
    kube.create(FL_JOBS, NS, fl_sample())
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["created"] == 4 and not summary["errors"], summary
    pods = pods_of(kube)
    assert len(pods) == 3
    text = json.dumps(pods)
    for secret in (KEY_ID, SECRET_KEY, base64.b64encode(SECRET_KEY.encode()).decode()):
        assert secret not in text
    for pod in pods.values():
        assert_s3_env(pod["spec"]["initContainers"][0], "minio-creds", "http://minio.storage:9000")
        assert_s3_env(pod["spec"]["containers"][0], "minio-creds", "http://minio.storage:9000")
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def test_ji_missing_secret_is_a_condition_then_the_secret_appears(k8s, kube):
    m = kube.get(MODELS, NS, "helmet-detection-inference-big-model")
    kube.merge_patch(MODELS, NS, m["metadata"]["name"], {"spec": {"url": "s3://models/big.pb",
                                                                  "credentialName": "big-creds"}})
    kube.create(JI_SERVICES, NS, ji_sample())
    reconcile_joint_inference(Kube(k8s))
    assert kube.list(DEPLOYMENTS, NS, JI_SEL) == []
    failed = next(c for c in kube.get(JI_SERVICES, NS, JI)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "SecretNotFound"
    assert "'big-creds'" in failed["message"] and f"namespace '{NS}'" in failed["message"]
    kube.create(SECRETS, NS, s3_secret("big-creds", https=True))
    assert reconcile_joint_inference(Kube(k8s))["created"] == 3
    cloud = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")["spec"]["template"]["spec"]
    assert_s3_env(cloud["containers"][0], "big-creds", "https://minio.storage:9000")
    assert_s3_env(cloud["initContainers"][0], "big-creds", "https://minio.storage:9000")
    edge = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-edge")["spec"]["template"]["spec"]
    assert "ACCESS_KEY_ID" not in env_entries(edge["containers"][0])  # the little model needs no keys
    conds = {c["type"]: c for c in kube.get(JI_SERVICES, NS, JI)["status"]["conditions"]}
    assert conds["Failed"]["status"] == "False"
    assert reconcile_joint_inference(Kube(k8s))["writes"] == 0
