"""Pure desired-state tests: the sample CRs (copied from Sedna, Apache-2.0, see samples/LICENSE) produce
the children Sedna's controller would create (SPEC §4), with Skiff's deterministic names and spec hashes."""

from __future__ import annotations

import json

import pytest

from operators.sedna.desired import (
    AGG_PORT,
    BIG_MODEL_PORT,
    FL_KIND,
    JI_KIND,
    SPEC_HASH_LABEL,
    desired_federated_learning,
    desired_joint_inference,
)
from operators.sedna.storage import convert_k8s_valid_name
from tests.support.sedna.sedna_helpers import dataset, env_of, fl_sample, ji_sample, model

FL_NS = "team-a"
MODEL = "surface-defect-detection-model"
DATASETS = ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset")


def fl_inputs(**over):
    job = fl_sample(namespace=FL_NS, uid="uid-fl-1")
    models = {MODEL: model(MODEL, "/models/sdd/model.ckpt")}
    datasets = {n: dataset(n, f"/data/{n}/train.txt") for n in DATASETS}
    return job, models, datasets


def rendered(desired):
    return [c.render() for c in desired.children]


def only_owner(obj, kind, name, uid):
    assert obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "sedna.io/v1alpha1", "kind": kind, "name": name, "uid": uid,
         "controller": True, "blockOwnerDeletion": True}
    ]


@pytest.mark.parametrize("sample", ["federatedlearningjob_v1alpha1.yaml", "federatedlearningjob_v1alpha2.yaml"])
def test_fl_sample_children_like_sedna(sample):
    job = fl_sample(sample, namespace=FL_NS, uid="uid-fl-1")
    models = {MODEL: model(MODEL, "/models/sdd/model.ckpt")}
    datasets = {n: dataset(n, f"/data/{n}/train.txt") for n in DATASETS}
    d = desired_federated_learning(job, models, datasets, lc_server="http://lc:9100")
    assert d.error is None
    objs = rendered(d)
    pods = [o for o in objs if o["kind"] == "Pod"]
    services = [o for o in objs if o["kind"] == "Service"]
    assert len(pods) == 3 and len(services) == 1
    agg = [p for p in pods if p["metadata"]["labels"]["federatedlearningjob.sedna.io/worker-type"] == "aggregation"]
    train = [p for p in pods if p["metadata"]["labels"]["federatedlearningjob.sedna.io/worker-type"] == "train"]
    assert len(agg) == 1 and len(train) == 2
    assert agg[0]["metadata"]["name"].startswith("surface-defect-detection-aggregation-")
    assert all(p["metadata"]["name"].startswith("surface-defect-detection-train-") for p in train)
    for o in objs:
        only_owner(o, FL_KIND, "surface-defect-detection", "uid-fl-1")
        labels = o["metadata"]["labels"]
        assert labels["federatedlearningjob.sedna.io/name"] == "surface-defect-detection"
        assert labels["federatedlearningjob.sedna.io/uid"] == "uid-fl-1"
        assert o["metadata"]["namespace"] == FL_NS
    for p in pods:
        assert p["spec"]["restartPolicy"] == "OnFailure"
    agg_env = env_of(agg[0])
    assert agg_env["NAMESPACE"] == FL_NS and agg_env["JOB_NAME"] == "surface-defect-detection"
    assert agg_env["AGG_BIND_PORT"] == "7363" and agg_env["PARTICIPANTS_COUNT"] == "2"
    assert agg_env["TRANSMITTER"] == "ws" and agg_env["MODEL_URL"] == "/home/data/models/sdd/model.ckpt"
    assert agg_env["WORKER_NAME"].startswith("aggworker-") and agg_env["exit_round"] in ("3", "10")
    for i, p in enumerate(sorted(train, key=lambda p: env_of(p)["DATASET_NAME"])):
        env = env_of(p)
        assert env["AGG_IP"] == f"surface-defect-detection-aggregation.{FL_NS}" and env["AGG_PORT"] == "7363"
        assert env["DATASET_NAME"] == DATASETS[i] and env["MODEL_NAME"] == MODEL
        assert env["TRAIN_DATASET_URL"] == f"/home/data/data/{DATASETS[i]}/train.txt"
        assert env["LC_SERVER"] == "http://lc:9100" and env["batch_size"] == "32"
        assert env["WORKER_NAME"].startswith("trainworker-") and env["PARTICIPANTS_COUNT"] == "2"
        assert "hostNetwork" not in p["spec"]  # Sedna forces it; Skiff does not (Pod Security baseline)
        # plain paths are hostPath mounts of the file's directory under /home/data, as in Sedna
        host_paths = {v["hostPath"]["path"] for v in p["spec"]["volumes"] if "hostPath" in v}
        assert {"/models/sdd/", f"/data/{DATASETS[i]}/"} <= host_paths
        mounts = {m["mountPath"] for m in p["spec"]["containers"][0]["volumeMounts"]}
        assert f"/home/data/data/{DATASETS[i]}/" in mounts
    svc = services[0]
    assert svc["metadata"]["name"] == "surface-defect-detection-aggregation"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "tcp-0", "protocol": "TCP", "port": AGG_PORT, "targetPort": AGG_PORT}]
    assert svc["spec"]["selector"]["federatedlearningjob.sedna.io/worker-type"] == "aggregation"


def test_fl_names_and_hash_are_deterministic_and_follow_the_spec():
    job, models, datasets = fl_inputs()
    a = desired_federated_learning(job, models, datasets)
    b = desired_federated_learning(json.loads(json.dumps(job)), models, datasets)
    assert [c.name for c in a.children] == [c.name for c in b.children]
    pods = [c for c in a.children if c.kind == "Pod"]
    assert len({c.spec_hash for c in pods}) == 1
    assert all(p.render()["metadata"]["labels"][SPEC_HASH_LABEL] == pods[0].spec_hash for p in pods)
    # a status-only change computes the same children
    job["status"] = {"phase": "Running", "active": 3}
    assert [c.name for c in desired_federated_learning(job, models, datasets).children] == [c.name for c in a.children]
    # an edit (batch_size 32 -> 16) gives new pod names and hash; the Service is unchanged
    job["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["env"][0]["value"] = "16"
    c = desired_federated_learning(job, models, datasets)
    new_pods = [x for x in c.children if x.kind == "Pod"]
    assert not {p.name for p in new_pods} & {p.name for p in pods}
    assert new_pods[0].spec_hash != pods[0].spec_hash
    assert c.by_kind("Service") .keys() == a.by_kind("Service").keys()
    assert [x.spec_hash for x in c.children if x.kind == "Service"] == [x.spec_hash for x in a.children if x.kind == "Service"]
    # a re-created CR (new uid) never reuses its predecessor's pod names
    job2, _, _ = fl_inputs()
    job2["metadata"]["uid"] = "uid-fl-2"
    d = desired_federated_learning(job2, models, datasets)
    assert not {p.name for p in d.children if p.kind == "Pod"} & {p.name for p in pods}


def test_two_jobs_each_trainer_points_at_its_own_aggregator():
    job_a, models, datasets = fl_inputs()
    job_b = json.loads(json.dumps(job_a))
    job_b["metadata"].update(name="other-job", uid="uid-fl-b")
    for job in (job_a, job_b):
        for obj in rendered(desired_federated_learning(job, models, datasets)):
            if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith(job["metadata"]["name"] + "-train-"):
                assert env_of(obj)["AGG_IP"] == f"{job['metadata']['name']}-aggregation.{FL_NS}"


@pytest.mark.parametrize(
    "breaker, reason, words",
    [
        (lambda job, m, d: m.clear(), "ModelNotFound",
         ["surface-defect-detection-model", "spec.aggregationWorker.model.name", FL_NS]),
        (lambda job, m, d: d.pop(DATASETS[1]), "DatasetNotFound",
         [DATASETS[1], "spec.trainingWorkers[1].dataset.name"]),
        (lambda job, m, d: job["spec"].update(pretrainedModel={"name": "nope"}), "ModelNotFound",
         ["'nope'", "spec.pretrainedModel.name"]),
        (lambda job, m, d: job["spec"].update(trainingWorkers=[]), "InvalidSpec", ["spec.trainingWorkers"]),
        (lambda job, m, d: m[MODEL]["spec"].update(credentialName="s3-secret"), "SecretNotFound",
         ["credentialName", "'s3-secret'"]),
        (lambda job, m, d: d[DATASETS[0]]["spec"].update(url="data/train.txt"), "InvalidSpec",
         ["spec.url", "'data/train.txt'", "absolute"]),
        # urlsplit raises on this one: a condition, not an exception that stops the pass
        (lambda job, m, d: m[MODEL]["spec"].update(url="s3://[bucket/model"), "InvalidSpec",
         ["spec.url", "'s3://[bucket/model'", "not a valid URL"]),
        # the pods' names would pass, the Service's (a DNS-1035 label) would not: nothing at all is created
        (lambda job, m, d: job["metadata"].update(name="j" * 55), "InvalidName",
         ["Service", "'" + "j" * 55 + "-aggregation'", "67 characters", "63"]),
        (lambda job, m, d: job["metadata"].update(name="j" * 70), "InvalidName",
         ["label value", "70 characters"]),
    ],
)
def test_fl_bad_input_is_an_error_naming_field_and_value_and_no_children(breaker, reason, words):
    job, models, datasets = fl_inputs()
    breaker(job, models, datasets)
    d = desired_federated_learning(job, models, datasets)
    assert d.children == ()
    assert d.error is not None and d.error.reason == reason
    for w in words:
        assert w in str(d.error)


def test_fl_s3_transmitter_and_remote_urls():
    job, models, datasets = fl_inputs()
    job["spec"]["transmitter"] = {"s3": {"aggDataPath": "s3://bucket/agg/"}}
    models[MODEL]["spec"]["url"] = "https://models.example.com/sdd/model.ckpt"
    datasets[DATASETS[0]]["spec"]["url"] = "hdfs://nn/data/train.txt"
    objs = rendered(desired_federated_learning(job, models, datasets))
    agg = next(o for o in objs if o["kind"] == "Pod" and "-aggregation-" in o["metadata"]["name"])
    env = env_of(agg)
    assert env["TRANSMITTER"] == "s3"
    assert env["AGG_DATA_PATH"] == "/downloads/bucket/agg/"
    assert env["MODEL_URL"] == "/downloads/models.example.com/sdd/model.ckpt"
    init = agg["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["storage-initializer"]
    assert init[0]["args"] == ["https://models.example.com/sdd/model.ckpt", "/downloads/models.example.com/sdd/",
                               "s3://bucket/agg/", "/downloads/bucket/agg/"]
    assert {"name": "sedna-storage-initializer", "emptyDir": {}} in agg["spec"]["volumes"]
    trainer = next(o for o in objs if o["kind"] == "Pod" and env_of(o).get("DATASET_NAME") == DATASETS[0])
    assert env_of(trainer)["TRAIN_DATASET_URL"] == "hdfs://nn/data/train.txt"  # unknown scheme: passed through


def test_fl_template_restart_policy_wins():
    job, models, datasets = fl_inputs()
    job["spec"]["trainingWorkers"][0]["template"]["spec"]["restartPolicy"] = "Never"
    objs = rendered(desired_federated_learning(job, models, datasets))
    policies = sorted(o["spec"]["restartPolicy"] for o in objs if o["kind"] == "Pod")
    assert policies == ["Never", "OnFailure", "OnFailure"]


JI_MODELS = {
    "helmet-detection-inference-little-model": model("helmet-detection-inference-little-model",
                                                     "/data/little-model/yolov3_resnet18.pb"),
    "helmet-detection-inference-big-model": model("helmet-detection-inference-big-model",
                                                  "/data/big-model/yolov3_darknet.pb"),
}


@pytest.mark.parametrize("sample", ["jointinferenceservice_v1alpha1.yaml", "helmet_detection_inference.yaml"])
def test_ji_sample_children_like_sedna(sample):
    svc = ji_sample(sample, namespace="default", uid="uid-ji-1")
    d = desired_joint_inference(svc, JI_MODELS, lc_server="http://lc:9100")
    assert d.error is None
    objs = {o["metadata"]["name"]: o for o in rendered(d)}
    name = "helmet-detection-inference-example"
    assert set(objs) == {f"{name}-deployment-cloud", f"{name}-deployment-edge", f"{name}-cloud"}
    for o in objs.values():
        only_owner(o, JI_KIND, name, "uid-ji-1")
        assert o["metadata"]["labels"]["jointinferenceservice.sedna.io/uid"] == "uid-ji-1"
    cloud, edge, service = objs[f"{name}-deployment-cloud"], objs[f"{name}-deployment-edge"], objs[f"{name}-cloud"]
    for dep, wt in ((cloud, "cloud"), (edge, "edge")):
        assert dep["apiVersion"] == "apps/v1" and dep["kind"] == "Deployment"
        sel = dep["spec"]["selector"]["matchLabels"]
        assert sel["jointinferenceservice.sedna.io/worker-type"] == wt
        assert sel.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    edge_env = env_of(edge["spec"]["template"])
    assert edge_env["BIG_MODEL_IP"] == f"{name}-cloud.default" and edge_env["BIG_MODEL_PORT"] == "5000"
    assert edge_env["HEM_NAME"] == "IBT"
    params = json.loads(edge_env["HEM_PARAMETERS"])
    assert [p["key"] for p in params] == ["threshold_img", "threshold_box"]
    assert edge_env["MODEL_URL"] == "/home/data/data/little-model/yolov3_resnet18.pb"
    assert edge_env["SERVICE_NAME"] == name and edge_env["NAMESPACE"] == "default"
    assert edge_env["WORKER_NAME"].startswith("edgeworker-") and edge_env["LC_SERVER"] == "http://lc:9100"
    cloud_env = env_of(cloud["spec"]["template"])
    assert cloud_env["BIG_MODEL_BIND_PORT"] == "5000" and cloud_env["SERVICE_NAME"] == name
    assert cloud_env["MODEL_URL"] == "/home/data/data/big-model/yolov3_darknet.pb"
    assert service["spec"]["ports"] == [
        {"name": "tcp-0", "protocol": "TCP", "port": BIG_MODEL_PORT, "targetPort": BIG_MODEL_PORT}
    ]
    assert service["spec"]["selector"]["jointinferenceservice.sedna.io/worker-type"] == "cloud"
    # the user's own volumes and mounts are kept next to the model's hostPath mount
    edge_volumes = {v["name"] for v in edge["spec"]["template"]["spec"]["volumes"]}
    assert "outputdir" in edge_volumes and convert_k8s_valid_name("/data/little-model/") in edge_volumes


def test_ji_hpa_and_per_worker_hashes():
    svc = ji_sample(namespace="default", uid="uid-ji-1")
    base = {c.name: c.spec_hash for c in desired_joint_inference(svc, JI_MODELS).children}
    svc["spec"]["edgeWorker"]["hpa"] = {"minReplicas": 1, "maxReplicas": 4, "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}
    d = desired_joint_inference(svc, JI_MODELS)
    hpa = d.by_kind("HorizontalPodAutoscaler")
    name = "hpa-helmet-detection-inference-example-deployment-edge"
    assert list(hpa) == [name]
    obj = hpa[name].render()
    assert obj["apiVersion"] == "autoscaling/v2"
    assert obj["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "helmet-detection-inference-example-deployment-edge"}
    assert obj["spec"]["maxReplicas"] == 4 and obj["spec"]["minReplicas"] == 1
    # editing the edge HEM parameter changes only the edge Deployment's hash
    svc["spec"]["edgeWorker"]["hardExampleMining"]["parameters"][0]["value"] = "0.7"
    after = {c.name: c.spec_hash for c in desired_joint_inference(svc, JI_MODELS).children}
    changed = {n for n in base if base[n] != after[n]}
    assert changed == {"helmet-detection-inference-example-deployment-edge"}


def test_ji_missing_model_is_an_error():
    svc = ji_sample(namespace="default", uid="uid-ji-1")
    d = desired_joint_inference(svc, {k: v for k, v in JI_MODELS.items() if "big" not in k})
    assert d.children == () and d.error.reason == "ModelNotFound"
    assert "helmet-detection-inference-big-model" in str(d.error) and "spec.cloudWorker.model.name" in str(d.error)


def test_convert_k8s_valid_name_like_sedna():
    assert convert_k8s_valid_name("/data/little-model/") == "data-little-modelz"
    assert convert_k8s_valid_name("/") == "sedna-default-volume-name"
    assert len(convert_k8s_valid_name("/" + "a" * 100)) == 63
