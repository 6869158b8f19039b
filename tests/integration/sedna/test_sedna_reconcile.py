"""The Sedna reconcile against kubesim (garbage collection on), through the real HTTP client.

The sample pods name nodes that kubesim does not have ("edge-node"), so they stay Pending: the job stays
Running while a test deletes and edits things. Tests that need pods to finish put them on a real node.
"""

from __future__ import annotations

import json
import threading

import pytest

from operators.sedna.desired import SPEC_HASH_LABEL
from operators.sedna.kube import (
    DATASETS,
    DEPLOYMENTS,
    FL_JOBS,
    HPAS,
    JI_SERVICES,
    MODELS,
    PODS,
    SERVICES,
    Kube,
)
from operators.sedna.reconcile import reconcile_federated_learning, reconcile_joint_inference
from tests.support.sedna.sedna_helpers import (
    FL_SEL,
    JI,
    JI_SEL,
    JOB,
    NS,
    dataset,
    env_of,
    events_of,
    fl_sample,
    ji_sample,
    model,
    new_fl,
    new_ji,
    pods_of,
    wait_for,
)


def trainer_batch_sizes(pods) -> list[str]:
    return sorted(env_of(p)["batch_size"] for p in pods.values() if "-train-" in p["metadata"]["name"])


def test_fl_first_pass_creates_children_then_no_drift_means_no_writes(k8s, kube):
    job = new_fl(kube)
    s1 = reconcile_federated_learning(Kube(k8s))
    assert s1["created"] == 4 and not s1["errors"]
    pods = pods_of(kube)
    assert len(pods) == 3
    for p in pods.values():
        assert p["metadata"]["ownerReferences"] == [{
            "apiVersion": "sedna.io/v1alpha1", "kind": "FederatedLearningJob", "name": JOB,
            "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert kube.get(SERVICES, NS, f"{JOB}-aggregation")["spec"]["ports"][0]["port"] == 7363
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Running" and status["active"] == 3
    s2 = reconcile_federated_learning(Kube(k8s))
    assert s2["writes"] == 0, s2
    assert all(v == 1 for key, v in s2["requests"].items() if key.startswith("list ")), s2["requests"]


def test_deleted_training_pod_comes_back_with_same_spec_and_new_uid(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    name, victim = next((n, p) for n, p in pods_of(kube).items() if "-train-" in n)
    assert kube.delete(PODS, NS, name)
    wait_for(lambda: name not in pods_of(kube), what="pod deleted")
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["created"] == 1 and summary.get("deleted", 0) == 0
    back = pods_of(kube)[name]
    assert back["metadata"]["uid"] != victim["metadata"]["uid"]
    assert back["spec"]["containers"][0]["env"] == victim["spec"]["containers"][0]["env"]
    assert back["metadata"]["labels"] == victim["metadata"]["labels"]
    assert len(pods_of(kube)) == 3
    assert any(e["reason"] == "Recreated" and name in e["message"] for e in events_of(kube, JOB))
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def test_deleted_aggregation_service_comes_back(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    assert kube.delete(SERVICES, NS, f"{JOB}-aggregation")
    wait_for(lambda: kube.get(SERVICES, NS, f"{JOB}-aggregation") is None, what="service deleted")
    assert reconcile_federated_learning(Kube(k8s))["created"] == 1
    svc = kube.get(SERVICES, NS, f"{JOB}-aggregation")
    assert svc["spec"]["selector"]["federatedlearningjob.sedna.io/worker-type"] == "aggregation"


def test_batch_size_edit_replaces_every_pod_and_none_of_the_old_spec_returns(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    old = pods_of(kube)
    assert trainer_batch_sizes(old) == ["32", "32"]
    job = kube.get(FL_JOBS, NS, JOB)
    for w in job["spec"]["trainingWorkers"]:
        w["template"]["spec"]["containers"][0]["env"][0] = {"name": "batch_size", "value": "16"}
    edited = kube.merge_patch(FL_JOBS, NS, JOB, {"spec": {"trainingWorkers": job["spec"]["trainingWorkers"]}})
    assert edited["metadata"]["generation"] == job["metadata"]["generation"] + 1
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["deleted"] == 3 and summary["created"] == 3, summary
    for _ in range(2):  # and a later pass resurrects nothing
        pods = pods_of(kube)
        assert len(pods) == 3 and not set(pods) & set(old)
        assert trainer_batch_sizes(pods) == ["16", "16"]
        assert len({p["metadata"]["labels"][SPEC_HASH_LABEL] for p in pods.values()}) == 1
        assert reconcile_federated_learning(Kube(k8s))["writes"] == 0
    assert any(e["reason"] == "RolledOut" for e in events_of(kube, JOB))


def test_status_only_update_changes_nothing(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    before = pods_of(kube)
    job = kube.get(FL_JOBS, NS, JOB)
    patched = kube.merge_patch(FL_JOBS, NS, JOB, {"status": {"active": 99}}, sub="status")
    assert patched["metadata"]["generation"] == job["metadata"]["generation"]
    summary = reconcile_federated_learning(Kube(k8s))
    # the only write is the status correction back to what the pods say
    assert summary.get("created", 0) == summary.get("deleted", 0) == 0
    assert summary["requests"].get("patch/status federatedlearningjobs") == 1
    assert {n: p["metadata"]["uid"] for n, p in pods_of(kube).items()} == \
        {n: p["metadata"]["uid"] for n, p in before.items()}
    assert kube.get(FL_JOBS, NS, JOB)["status"]["active"] == 3


def test_two_jobs_in_one_namespace_each_trainer_uses_its_own_aggregator(k8s, kube):
    new_fl(kube, "job-a")
    new_fl(kube, "job-b")
    reconcile_federated_learning(Kube(k8s))
    for name in ("job-a", "job-b"):
        trainers = [p for n, p in pods_of(kube, name).items() if "-train-" in n]
        assert len(trainers) == 2
        assert {env_of(p)["AGG_IP"] for p in trainers} == {f"{name}-aggregation.{NS}"}
        assert kube.get(SERVICES, NS, f"{name}-aggregation") is not None


def test_two_reconciles_at_once_make_no_duplicates(k8s, kube):
    for i in range(5):
        new_fl(kube, f"job-{i}")
    barrier = threading.Barrier(3)
    results, errors = [], []

    def run():
        try:
            barrier.wait()
            results.append(reconcile_federated_learning(Kube(k8s)))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(not r["errors"] for r in results)
    for i in range(5):
        assert len(pods_of(kube, f"job-{i}")) == 3
    assert len(kube.list(SERVICES, NS, FL_SEL)) == 5
    assert sum(r.get("created", 0) for r in results) == 20  # each child created exactly once
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def test_missing_model_is_a_condition_and_no_pods_then_recovers(k8s, kube):
    job = fl_sample()
    job["spec"]["aggregationWorker"]["model"]["name"] = "no-such-model"
    kube.create(FL_JOBS, NS, job)
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary.get("created", 0) == 0
    assert pods_of(kube) == {}
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "ModelNotFound"
    assert "'no-such-model'" in failed["message"] and "spec.aggregationWorker.model.name" in failed["message"]
    assert any(e["type"] == "Warning" and e["reason"] == "ModelNotFound" for e in events_of(kube, JOB))
    # Failed is not terminal: once the Model exists the job gets its pods and the condition clears
    kube.create(MODELS, NS, model("no-such-model", "/models/x/model.ckpt"))
    assert reconcile_federated_learning(Kube(k8s))["created"] == 4
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Running"
    assert next(c for c in status["conditions"] if c["type"] == "Failed")["status"] == "False"


def test_leftover_child_with_dangling_owner_is_removed(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    stray = json.loads(json.dumps(next(iter(pods_of(kube).values()))))
    md = stray["metadata"]
    md.update(name="stray-pod", labels={**md["labels"], "federatedlearningjob.sedna.io/uid": "gone-uid"})
    for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generation", "managedFields"):
        md.pop(key, None)
    stray.pop("status", None)
    kube.create(PODS, NS, stray)
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["leftovers_deleted"] == 1
    assert "stray-pod" not in {p["metadata"]["name"] for p in kube.list(PODS, NS)}
    assert len(pods_of(kube)) == 3


def test_deleted_cr_children_go_through_gc_and_nothing_is_recreated(k8s, kube):
    new_fl(kube)
    new_ji(kube)
    reconcile_federated_learning(Kube(k8s))
    reconcile_joint_inference(Kube(k8s))
    assert kube.delete(FL_JOBS, NS, JOB) and kube.delete(JI_SERVICES, NS, JI)

    def all_gone():
        return not (kube.list(PODS, NS, FL_SEL) or kube.list(SERVICES, NS, FL_SEL)
                    or kube.list(DEPLOYMENTS, NS, JI_SEL) or kube.list(SERVICES, NS, JI_SEL))

    wait_for(all_gone, timeout=15, what="garbage collection of the children")
    fl, ji = reconcile_federated_learning(Kube(k8s)), reconcile_joint_inference(Kube(k8s))
    assert fl["writes"] == ji["writes"] == 0
    assert all_gone()


def test_finished_job_pods_deleted_are_not_recreated(k8s, kube):
    # on a real node every pod runs its default (short) time and succeeds
    job = fl_sample()
    for w in [job["spec"]["aggregationWorker"], *job["spec"]["trainingWorkers"]]:
        w["template"]["spec"]["nodeName"] = "cpu-1"
    kube.create(FL_JOBS, NS, job)
    reconcile_federated_learning(Kube(k8s))
    wait_for(lambda: all(p.get("status", {}).get("phase") == "Succeeded" for p in pods_of(kube).values()),
             timeout=15, what="pods succeeded")
    reconcile_federated_learning(Kube(k8s))
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Succeeded" and status["succeeded"] == 3
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in status["conditions"])
    for name in pods_of(kube):
        kube.delete(PODS, NS, name)
    wait_for(lambda: not pods_of(kube), what="pods deleted")
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary.get("created", 0) == 0 and summary["writes"] == 0
    assert pods_of(kube) == {}


def test_failed_is_not_terminal_the_job_recovers_when_the_failed_pod_is_replaced(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    name = next(n for n in pods_of(kube) if "-train-" in n)
    # what a kubelet reports for an evicted pod (pod templates cannot carry kubesim's scripting
    # annotations: the CRD prunes template metadata, as a real API server does)
    kube.merge_patch(PODS, NS, name, {"status": {"phase": "Failed", "reason": "Evicted"}}, sub="status")
    reconcile_federated_learning(Kube(k8s))
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Failed" and status["failed"] == 1
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and name in failed["message"]
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0  # a failed pod is kept (logs), not replaced
    # the user deletes the failed pod: it is recreated and the job is Running again, Failed cleared
    kube.delete(PODS, NS, name)
    wait_for(lambda: name not in pods_of(kube), what="pod deleted")
    assert reconcile_federated_learning(Kube(k8s))["created"] == 1
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Running" and status["failed"] == 0
    assert next(c for c in status["conditions"] if c["type"] == "Failed")["status"] == "False"


# ---------------------------------------------------------------- JointInferenceService


def test_ji_children_and_hem_edit_updates_the_edge_deployment_in_place(k8s, kube):
    new_ji(kube)
    assert reconcile_joint_inference(Kube(k8s))["created"] == 3
    edge_name = f"{JI}-deployment-edge"
    edge = kube.get(DEPLOYMENTS, NS, edge_name)
    cloud = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    assert json.loads(env_of(edge["spec"]["template"])["HEM_PARAMETERS"])[0]["value"] == "0.5"
    svc = kube.get(JI_SERVICES, NS, JI)
    params = svc["spec"]["edgeWorker"]["hardExampleMining"]["parameters"]
    params[0]["value"] = "0.8"
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hardExampleMining": {"parameters": params}}}})
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["updated"] == 1 and summary.get("created", 0) == 0 and summary.get("deleted", 0) == 0
    after = kube.get(DEPLOYMENTS, NS, edge_name)
    assert after["metadata"]["uid"] == edge["metadata"]["uid"]  # updated in place, so Kubernetes rolls it
    assert after["metadata"]["generation"] > edge["metadata"]["generation"]
    assert json.loads(env_of(after["spec"]["template"])["HEM_PARAMETERS"])[0]["value"] == "0.8"
    # the cloud Deployment's spec is untouched
    assert kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")["metadata"]["generation"] == \
        cloud["metadata"]["generation"]
    assert any(e["reason"] == "RolledOut" for e in events_of(kube, JI))


def test_ji_deleted_deployment_and_service_come_back(k8s, kube):
    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    kube.delete(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    kube.delete(SERVICES, NS, f"{JI}-cloud")
    wait_for(lambda: kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud") is None, what="deployment deleted")
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["created"] == 2
    assert kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud") is not None
    assert kube.get(SERVICES, NS, f"{JI}-cloud") is not None
    assert reconcile_joint_inference(Kube(k8s))["writes"] == 0


def test_ji_wrong_kind_owner_reference_is_repaired_and_gc_then_works(k8s, kube):
    svc = new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    name = f"{JI}-deployment-edge"
    dep = kube.get(DEPLOYMENTS, NS, name)
    wrong = [{**dep["metadata"]["ownerReferences"][0], "kind": "JointInference"}]  # Sedna's old bug
    kube.merge_patch(DEPLOYMENTS, NS, name, {"metadata": {"ownerReferences": wrong}})
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["owner_repaired"] == 1
    refs = kube.get(DEPLOYMENTS, NS, name)["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": "sedna.io/v1alpha1", "kind": "JointInferenceService", "name": JI,
                     "uid": svc["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert any(e["reason"] == "OwnerRepaired" for e in events_of(kube, JI))
    kube.delete(JI_SERVICES, NS, JI)
    wait_for(lambda: kube.get(DEPLOYMENTS, NS, name) is None, timeout=15, what="GC of the repaired child")


def test_ji_missing_model_then_recovered_clears_failed(k8s, kube):
    svc = ji_sample()
    svc["spec"]["cloudWorker"]["model"]["name"] = "big-model-not-yet"
    kube.create(JI_SERVICES, NS, svc)
    reconcile_joint_inference(Kube(k8s))
    assert kube.list(DEPLOYMENTS, NS, JI_SEL) == []
    failed = next(c for c in kube.get(JI_SERVICES, NS, JI)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and "big-model-not-yet" in failed["message"]
    kube.create(MODELS, NS, model("big-model-not-yet", "/data/big/big.pb"))
    assert reconcile_joint_inference(Kube(k8s))["created"] == 3
    conds = {c["type"]: c for c in kube.get(JI_SERVICES, NS, JI)["status"]["conditions"]}
    assert conds["Failed"]["status"] == "False" and conds["Running"]["status"] == "True"


def test_ji_name_taken_by_someone_elses_deployment_is_reported_not_touched(k8s, kube):
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": f"{JI}-deployment-cloud", "labels": {"app": "theirs"}},
              "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "theirs"}},
                       "template": {"metadata": {"labels": {"app": "theirs"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    before = kube.create(DEPLOYMENTS, NS, theirs)
    new_ji(kube)
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["created"] == 2 and "already exists" in summary["errors"][0]
    after = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    # untouched (its status moves with kubesim's Deployment controller; its metadata and spec do not)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["metadata"]["labels"] == {"app": "theirs"} and not after["metadata"].get("ownerReferences")
    failed = next(c for c in kube.get(JI_SERVICES, NS, JI)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "NameConflict"
    assert f"{JI}-deployment-cloud" in failed["message"]
    # once the owner of the name removes theirs, the service gets its Deployment and recovers
    kube.delete(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    wait_for(lambda: kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud") is None, what="their Deployment gone")
    assert reconcile_joint_inference(Kube(k8s))["created"] == 1
    status = kube.get(JI_SERVICES, NS, JI)["status"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Failed"]["status"] == "False" and conds["Running"]["status"] == "True"
    assert status["active"] == 2 and status["failed"] == 0


def test_child_that_lost_its_labels_but_is_owned_is_adopted(k8s, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    svc = kube.get(SERVICES, NS, f"{JOB}-aggregation")
    kube.replace(SERVICES, NS, f"{JOB}-aggregation", {**svc, "metadata": {**svc["metadata"], "labels": {}}})
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["adopted"] == 1 and not summary["errors"]
    labels = kube.get(SERVICES, NS, f"{JOB}-aggregation")["metadata"]["labels"]
    assert labels[f"{FL_SEL[:-4]}uid"] == svc["metadata"]["labels"][f"{FL_SEL[:-4]}uid"]
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0


def test_ji_hpa_follows_the_spec(k8s, kube):
    svc = ji_sample()
    svc["spec"]["edgeWorker"]["hpa"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}
    kube.create(JI_SERVICES, NS, svc)
    assert reconcile_joint_inference(Kube(k8s))["created"] == 4
    name = f"hpa-{JI}-deployment-edge"
    hpa = kube.get(HPAS, NS, name)
    assert hpa["spec"]["maxReplicas"] == 3 and hpa["spec"]["scaleTargetRef"]["name"] == f"{JI}-deployment-edge"
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": {"maxReplicas": 5}}}})
    assert reconcile_joint_inference(Kube(k8s))["updated"] == 1
    assert kube.get(HPAS, NS, name)["spec"]["maxReplicas"] == 5
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": None}}})
    assert reconcile_joint_inference(Kube(k8s))["deleted"] == 1
    assert kube.get(HPAS, NS, name) is None


def test_rbac_grants_exactly_the_verbs_the_reconcile_and_trigger_use(k8s, kube):
    """Every request a busy scenario makes is allowed by k8s_templates/rbac/sedna.yaml.j2, and every
    rule in it is used by the reconcile or the trigger (no spare verbs)."""
    from operators.sedna.install import rbac_manifests
    from operators.sedna.trigger import watched_resources

    docs = rbac_manifests(namespace="airflow", service_account="airflow-worker")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")   # the read-only part; the rest is
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "airflow-worker", "namespace": "airflow"}]
    granted = {(res, verb) for role in docs if role["kind"] == "ClusterRole"    # bound in team namespaces
               for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    used = set()

    def record(summary):
        for key in summary["requests"]:
            verb, res = key.split(" ")
            verb, _, sub = verb.partition("/")
            used.add((f"{res}/{sub}" if sub else res, verb))

    # create, status, events; roll-out (delete + create); owner repair; leftovers; adoption; in-place updates
    new_fl(kube)
    record(reconcile_federated_learning(Kube(k8s)))
    job = kube.get(FL_JOBS, NS, JOB)
    job["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["env"][0]["value"] = "8"
    kube.merge_patch(FL_JOBS, NS, JOB, {"spec": {"trainingWorkers": job["spec"]["trainingWorkers"]}})
    record(reconcile_federated_learning(Kube(k8s)))
    svc = kube.get(SERVICES, NS, f"{JOB}-aggregation")
    kube.replace(SERVICES, NS, svc["metadata"]["name"], {**svc, "metadata": {**svc["metadata"], "labels": {}}})
    record(reconcile_federated_learning(Kube(k8s)))
    pod = next(iter(pods_of(kube).values()))
    kube.merge_patch(PODS, NS, pod["metadata"]["name"], {"metadata": {"ownerReferences": [
        {**pod["metadata"]["ownerReferences"][0], "kind": "FederatedLearning"}]}})
    svc = kube.get(SERVICES, NS, f"{JOB}-aggregation")
    kube.merge_patch(SERVICES, NS, svc["metadata"]["name"], {"metadata": {"labels": {SPEC_HASH_LABEL: None}}})
    record(reconcile_federated_learning(Kube(k8s)))
    ji = ji_sample()
    ji["spec"]["edgeWorker"]["hpa"] = {"maxReplicas": 2}
    kube.create(JI_SERVICES, NS, ji)
    record(reconcile_joint_inference(Kube(k8s)))
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": {"maxReplicas": 3},
                                                                   "hardExampleMining": {"name": "CrossEntropy"}}}})
    record(reconcile_joint_inference(Kube(k8s)))
    dep = kube.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    kube.merge_patch(DEPLOYMENTS, NS, dep["metadata"]["name"], {"metadata": {"ownerReferences": [
        {**dep["metadata"]["ownerReferences"][0], "kind": "JointInference"}]}})
    record(reconcile_joint_inference(Kube(k8s)))
    kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": None}}})
    record(reconcile_joint_inference(Kube(k8s)))
    for kind in ("FederatedLearningJob", "JointInferenceService"):
        used |= {(w.res.plural, "watch") for w in watched_resources(kind)}
    assert used <= granted, used - granted
    # not exercised here: get (only when a create finds its name taken), delete of Services/Deployments
    # (leftovers of deleted CRs), patch of HPAs (owner repair), get of Secrets (credentialName); the tests
    # above and test_sedna_credentials cover those paths
    assert granted - used <= {("services", "delete"), ("deployments", "delete"), ("pods", "get"),
                              ("services", "get"), ("deployments", "get"), ("horizontalpodautoscalers", "get"),
                              ("horizontalpodautoscalers", "patch"), ("secrets", "get")}


def test_a_pass_interrupted_half_way_is_finished_by_the_next_without_duplicates(k8s, kube, kubesim):
    new_fl(kube)
    # an admission webhook refuses two creates (403: not transient; the access layer sends a 500 again); the
    # first three pod creates are the Pod Security dry runs of the three distinct pods (operators/sedna/
    # podsecurity.py), which leave any refusal but PodSecurity's to the real write: these two are refused
    kubesim.fail(verb="create", path="/pods$", status=403, count=5)
    first = reconcile_federated_learning(Kube(k8s))
    assert first["created"] == 2 and len(first["errors"]) == 2
    failed = next(c for c in kube.get(FL_JOBS, NS, JOB)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "CreateFailed"
    second = reconcile_federated_learning(Kube(k8s))
    assert second["created"] == 2 and not second["errors"]
    assert len(pods_of(kube)) == 3 and kube.get(SERVICES, NS, f"{JOB}-aggregation") is not None
    status = kube.get(FL_JOBS, NS, JOB)["status"]
    assert status["phase"] == "Running"
    assert next(c for c in status["conditions"] if c["type"] == "Failed")["status"] == "False"


def test_a_pass_rides_out_transient_errors_and_lost_answers_without_duplicates(k8s, kube, kubesim):
    """503s, a 429 and creates whose answers were lost after the API server committed them: the access
    layer sends them again, a create that meets its own earlier send (409) is recognised as this CR's."""
    new_fl(kube)
    kubesim.fail(verb="create", path="/pods$", status=503, count=2)
    kubesim.fail(verb="create", path="/services$", status=429, count=1)
    kubesim.lose_answers(verb="create", path="/pods$", count=2)
    first = reconcile_federated_learning(Kube(k8s))
    assert not first["errors"] and len(pods_of(kube)) == 3
    assert len(kube.list(SERVICES, NS, FL_SEL)) == 1
    assert kube.get(FL_JOBS, NS, JOB)["status"]["phase"] == "Running"
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0  # nothing left over for the next pass


def test_a_pass_that_listed_an_old_spec_does_not_act_on_it(k8s, kube):
    """A reconcile that observed generation 1 while generation 2 was rolled out by another must not bring
    generation-1 pods back: it re-reads the CR before acting and leaves it to a fresh pass."""
    from operators.sedna.kinds import Sources
    from operators.sedna.reconcile import _Pass

    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    stale = kube.get(FL_JOBS, NS, JOB)  # what the slow pass listed
    workers = stale["spec"]["trainingWorkers"]
    edited = json.loads(json.dumps(workers))
    edited[0]["template"]["spec"]["containers"][0]["env"][0]["value"] = "16"
    kube.merge_patch(FL_JOBS, NS, JOB, {"spec": {"trainingWorkers": edited}})
    reconcile_federated_learning(Kube(k8s))  # the fresh pass rolls out generation 2
    new_pods = pods_of(kube)
    slow = _Pass(Kube(k8s), "FederatedLearningJob", "http://localhost:9100")
    sources = Sources({m["metadata"]["name"]: m for m in kube.list(MODELS, NS)},
                      {d["metadata"]["name"]: d for d in kube.list(DATASETS, NS)}, {})
    actual = {"Pod": list(new_pods.values()), "Service": [kube.get(SERVICES, NS, f"{JOB}-aggregation")]}
    plan = slow._plan_one(stale, actual, sources)
    assert plan.actions  # it would delete the new pods and recreate generation-1 ones...
    slow._apply_one(plan, slow._current_generations(NS, [plan]))
    assert slow.summary.counts["skipped_stale"] == 1
    assert set(pods_of(kube)) == set(new_pods)
    assert trainer_batch_sizes(pods_of(kube)) == ["16", "32"]  # generation 2: first trainer 16, second 32


def test_missing_crds_is_a_clear_error(k8s):
    with pytest.raises(RuntimeError, match=r"\(federatedlearningjobs\.sedna\.io\) is not installed"):
        reconcile_federated_learning(Kube(k8s))


@pytest.mark.parametrize("sample, kind", [
    ("federatedlearningjob_v1alpha1.yaml", "FederatedLearningJob"),
    ("federatedlearningjob_v1alpha2.yaml", "FederatedLearningJob"),
    ("jointinferenceservice_v1alpha1.yaml", "JointInferenceService"),
    ("helmet_detection_inference.yaml", "JointInferenceService"),
])
def test_every_sample_reconciles_to_children_the_api_server_accepts(k8s, kube, sample, kind):
    """All sample CRs, with remote (s3/https) Model URLs and an HPA, give schema-valid children."""
    for m in kube.list(MODELS, NS):
        url = "s3://models/" + m["metadata"]["name"] + "/model.pb" if "big" in m["metadata"]["name"] \
            else "https://models.example.com/" + m["metadata"]["name"] + "/model.pb"
        kube.merge_patch(MODELS, NS, m["metadata"]["name"], {"spec": {"url": url}})
    if kind == "FederatedLearningJob":
        job = fl_sample(sample)
        job["spec"]["transmitter"] = {"s3": {"aggDataPath": "s3://bucket/agg/"}}
        kube.create(FL_JOBS, NS, job)
        summary = reconcile_federated_learning(Kube(k8s))
        expected = 4
    else:
        svc = ji_sample(sample)
        svc["spec"]["cloudWorker"]["hpa"] = {"minReplicas": 1, "maxReplicas": 2, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}
        kube.create(JI_SERVICES, NS, svc)
        summary = reconcile_joint_inference(Kube(k8s))
        expected = 4
    assert not summary["errors"] and summary["created"] == expected


def test_configured_namespaces_only(k8s, kube):
    from kubernetes import client

    client.CoreV1Api(k8s).create_namespace({"metadata": {"name": "team-a"}})
    kube.create(MODELS, "team-a", model("surface-defect-detection-model", "/m/model.ckpt", namespace="team-a"))
    for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        kube.create(DATASETS, "team-a", dataset(n, f"/d/{n}/t.txt", namespace="team-a"))
    kube.create(FL_JOBS, "team-a", fl_sample(namespace="team-a"))
    new_fl(kube)  # in "default", not configured
    summary = reconcile_federated_learning(Kube(k8s), namespaces=["team-a"])
    assert summary["created"] == 4 and summary["crs"] == 1
    assert len(kube.list(PODS, "team-a", FL_SEL)) == 3 and pods_of(kube) == {}


def test_in_kueue_mode_every_pod_of_a_team_namespace_names_its_local_queue(k8s, kube):
    """queueing: kueue: Kueue manages every pod of a team namespace (manageJobsWithoutQueueName) and gates one
    whose controller is no Kueue integration until a LocalQueue admits it (pod_webhook.go): the FL pods and the
    JI Deployments' pod templates carry the team's queue label and priority class; under quota, none."""
    from devstack.demo_setup import kueue_example_text
    from operators.platform import example_path, load_platform
    from operators.platform.loader import parse_platform
    from operators.sedna.reconcile import kueue_queue_labels, reconcile

    platform = parse_platform(kueue_example_text())
    labels = kueue_queue_labels(platform)["recsys"]
    assert labels == {"kueue.x-k8s.io/queue-name": "skiff", "kueue.x-k8s.io/priority-class": "skiff-scheduled"}
    assert kueue_queue_labels(load_platform(example_path())) == {}
    new_fl(kube), new_ji(kube)
    for kind in ("FederatedLearningJob", "JointInferenceService"):
        assert not reconcile(Kube(k8s), kind, queue_labels={NS: labels})["errors"]
    pods = pods_of(kube)
    assert len(pods) == 3 and all(labels.items() <= p["metadata"]["labels"].items() for p in pods.values())
    deployments = kube.list(DEPLOYMENTS, NS, f"{JI_SEL}={JI}")
    assert len(deployments) == 2
    assert all(labels.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in deployments)
    # a CR of a namespace that is no team's (no LocalQueue there) gets none
    new_fl(kube, name="plain")
    assert not reconcile(Kube(k8s), "FederatedLearningJob", queue_labels={"nlp": labels})["errors"]
    plain = pods_of(kube, "plain")
    assert len(plain) == 3 and not any("kueue.x-k8s.io/queue-name" in p["metadata"]["labels"] for p in plain.values())
