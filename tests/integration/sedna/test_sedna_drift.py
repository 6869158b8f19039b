"""Hand-edited children are reverted (compared with the desired spec as ``kubectl diff`` would), and a CR
being deleted (held by a finalizer) gets nothing recreated or updated. Against kubesim, real client."""

from __future__ import annotations

import json

from operators.sedna.drift import drifted
from operators.sedna.kube import DEPLOYMENTS, FL_JOBS, JI_SERVICES, PODS, SERVICES, Kube
from operators.sedna.reconcile import reconcile_federated_learning, reconcile_joint_inference
from tests.support.sedna.sedna_helpers import (
    FL_SEL,
    JI,
    JI_SEL,
    JOB,
    NS,
    env_of,
    events_of,
    new_fl,
    new_ji,
    pods_of,
    wait_for,
)

HOLD = "test.skiff.io/hold"


def test_drift_is_what_kubectl_diff_shows_not_api_defaults():
    want = {"spec": {"containers": [{"name": "main", "image": "a:1", "env": [{"name": "X", "value": "1"}],
                                     "resources": {"limits": {"cpu": "1000m"}}}],
                     "volumes": [{"name": "data", "hostPath": {"path": "/d"}}], "tolerations": [{"key": "k"}],
                     "annotations": {}}}
    live = json.loads(json.dumps(want))
    c = live["spec"]["containers"][0]
    # what the API server adds or normalises, and another manager's list items
    c.update(terminationMessagePath="/dev/termination-log", imagePullPolicy="IfNotPresent")
    c["resources"]["limits"]["cpu"] = "1"
    c["env"].append({"name": "INJECTED", "value": "by a webhook"})
    live["spec"]["volumes"].append({"name": "kube-api-access-x", "projected": {}})
    live["spec"]["tolerations"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
    live["spec"].pop("annotations")
    live["spec"]["dnsPolicy"] = "ClusterFirst"
    assert drifted(want, live) == []
    hpa = {"spec": {"maxReplicas": 3, "metrics": [{"type": "Pods", "pods": {"target": {"averageValue": "0.5"}}}]}}
    hpa_live = json.loads(json.dumps(hpa))
    hpa_live["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "500m"  # canonicalised
    assert drifted(hpa, hpa_live) == []
    c["image"] = "a:2"
    c["env"][0]["value"] = "2"
    assert drifted(want, live) == ["spec.containers[main].image", "spec.containers[main].env[X].value"]


def test_ji_deployment_image_edited_by_hand_is_reverted_in_place(k8s, kube):
    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    name = f"{JI}-deployment-cloud"
    dep = kube.get(DEPLOYMENTS, NS, name)
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "evil/miner:latest"
    kube.replace(DEPLOYMENTS, NS, name, {k: v for k, v in dep.items() if k != "status"})
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["reverted"] == 1 and summary.get("created", 0) == 0, summary
    after = kube.get(DEPLOYMENTS, NS, name)
    assert after["metadata"]["uid"] == dep["metadata"]["uid"]
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == image
    event = next(e for e in events_of(kube, JI) if e["reason"] == "DriftReverted")
    assert name in event["message"] and "image" in event["message"]
    assert reconcile_joint_inference(Kube(k8s))["writes"] == 0


def test_fl_service_port_edited_by_hand_is_reverted_and_keeps_its_cluster_ip(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    name = f"{JOB}-aggregation"
    svc = kube.get(SERVICES, NS, name)
    svc["spec"]["ports"][0]["port"] = 8080
    kube.replace(SERVICES, NS, name, svc)
    assert reconcile_federated_learning(Kube(k8s))["reverted"] == 1
    after = kube.get(SERVICES, NS, name)
    assert after["spec"]["ports"][0]["port"] == 7363
    assert after["spec"].get("clusterIP") == svc["spec"].get("clusterIP")
    assert any(e["reason"] == "DriftReverted" and name in e["message"] for e in events_of(kube, JOB))
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def test_fl_pod_replaced_by_hand_with_other_env_is_replaced_by_the_desired_one(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    name, pod = next((n, p) for n, p in pods_of(kube).items() if "-train-" in n)
    assert env_of(pod)["batch_size"] == "32"
    forged = json.loads(json.dumps(pod))  # same name, labels and owner; another batch size
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        forged["metadata"].pop(key, None)
    forged.pop("status", None)
    forged["spec"]["containers"][0]["env"][0]["value"] = "1024"
    kube.delete(PODS, NS, name)
    wait_for(lambda: name not in pods_of(kube), what="pod deleted")
    kube.create(PODS, NS, forged)
    summary = reconcile_federated_learning(Kube(k8s))  # a pod's spec is immutable: deleted, recreated next pass
    assert summary["reverted"] == 1 and "batch_size" in json.dumps(summary["actions"])
    event = next(e for e in events_of(kube, JOB) if e["reason"] == "DriftReverted")
    assert name in event["message"] and "env[batch_size].value" in event["message"]
    wait_for(lambda: name not in pods_of(kube), what="forged pod deleted")
    assert reconcile_federated_learning(Kube(k8s))["created"] == 1
    assert env_of(pods_of(kube)[name])["batch_size"] == "32"
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def hold_and_delete(kube, res, name):
    kube.merge_patch(res, NS, name, {"metadata": {"finalizers": [HOLD]}})
    kube.delete(res, NS, name)
    return wait_for(lambda: (kube.get(res, NS, name) or {}).get("metadata", {}).get("deletionTimestamp"),
                    what=f"{name} terminating")


def release(kube, res, name):
    kube.merge_patch(res, NS, name, {"metadata": {"finalizers": None}})
    wait_for(lambda: kube.get(res, NS, name) is None, what=f"{name} gone")


def test_fl_job_being_deleted_gets_no_recreated_or_rolled_pods(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    victim = next(iter(pods_of(kube)))
    hold_and_delete(kube, FL_JOBS, JOB)
    kube.delete(PODS, NS, victim)
    wait_for(lambda: victim not in pods_of(kube), what="pod deleted")
    before = {n: p["metadata"]["uid"] for n, p in pods_of(kube).items()}
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["skipped_deleting"] == 1 and summary["writes"] == 0, summary
    assert {n: p["metadata"]["uid"] for n, p in pods_of(kube).items()} == before
    release(kube, FL_JOBS, JOB)
    wait_for(lambda: not kube.list(PODS, NS, FL_SEL), what="garbage collection")


def test_ji_service_being_deleted_gets_no_recreated_or_updated_deployments(k8s, kube):
    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    edge = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-edge")
    hold_and_delete(kube, JI_SERVICES, JI)
    kube.delete(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    wait_for(lambda: kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud") is None, what="deployment deleted")
    # a spec edit while it is being deleted rolls nothing either
    params = [{"key": "threshold_img", "value": "0.9"}]
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hardExampleMining": {"parameters": params}}}})
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["skipped_deleting"] == 1 and summary["writes"] == 0, summary
    assert kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud") is None
    assert kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-edge")["metadata"]["generation"] == \
        edge["metadata"]["generation"]
    release(kube, JI_SERVICES, JI)
    wait_for(lambda: not kube.list(DEPLOYMENTS, NS, JI_SEL), what="garbage collection")
