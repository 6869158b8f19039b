"""The pure diff and status functions, without a cluster."""

from __future__ import annotations

import json

from operators.sedna.desired import SPEC_HASH_LABEL, desired_federated_learning
from operators.sedna.plan import Action, action_events, fl_status, plan_children, status_event, updated_body
from tests.support.sedna.sedna_helpers import dataset, fl_sample, model

MODEL = "surface-defect-detection-model"
DATASETS = ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset")
NOW = "2026-11-29T12:00:00Z"


def desired(job=None):
    job = job or fl_sample(uid="uid-1")
    return desired_federated_learning(job, {MODEL: model(MODEL, "/m/model.ckpt")},
                                      {d: dataset(d, f"/d/{d}/t.txt") for d in DATASETS})


def observed(d, **meta_changes):
    """The desired children as the API server would show them (uids, resourceVersions)."""
    out: dict[str, list[dict]] = {}
    for i, c in enumerate(d.children):
        obj = json.loads(json.dumps(c.render()))  # render() is cached: never mutate it
        obj["metadata"].update(uid=f"child-{i}", resourceVersion=str(i + 1), **meta_changes)
        out.setdefault(c.kind, []).append(obj)
    return out


def test_no_drift_means_no_actions():
    d = desired()
    assert plan_children(d, observed(d), first_pass=False) == []


def test_missing_children_are_created_and_old_spec_pods_deleted():
    d = desired()
    actual = observed(d)
    gone = actual["Pod"].pop(1)["metadata"]["name"]
    stale = dict(actual["Pod"][0], metadata={**actual["Pod"][0]["metadata"], "name": "old-pod",
                                             "labels": {**actual["Pod"][0]["metadata"]["labels"],
                                                        SPEC_HASH_LABEL: "0ld"}})
    actual["Pod"].append(stale)
    actions = {(a.verb, a.name, a.reason) for a in plan_children(d, actual, first_pass=False)}
    assert actions == {("create", gone, "Recreated"), ("delete", "old-pod", "RolledOut")}


def test_terminating_children_are_left_alone_and_not_recreated_yet():
    d = desired()
    actual = observed(d)
    actual["Pod"][0]["metadata"]["deletionTimestamp"] = NOW
    assert plan_children(d, actual, first_pass=False) == []


def test_wrong_owner_is_repaired_and_finished_jobs_get_only_repairs():
    d = desired()
    actual = observed(d)
    actual["Service"][0]["metadata"]["ownerReferences"][0]["kind"] = "FederatedLearning"
    missing = actual["Pod"].pop()["metadata"]["name"]
    actions = {(a.verb, a.kind, a.name) for a in plan_children(d, actual, first_pass=False)}
    assert ("repair-owner", "Service", f"{d.name}-aggregation") in actions and ("create", "Pod", missing) in actions
    finished = plan_children(d, actual, first_pass=False, finished=True)
    assert [(a.verb, a.kind) for a in finished] == [("repair-owner", "Service")]


def test_fl_status_phases_and_failed_is_not_terminal():
    job = fl_sample(uid="uid-1")
    d = desired(job)
    pods = observed(d)["Pod"]
    for p, phase in zip(pods, ("Running", "Failed", "Running"), strict=True):
        p["status"] = {"phase": phase}
    failed = fl_status(job, d, pods, error=None, error_reason="", now=NOW)
    assert failed["phase"] == "Failed" and (failed["active"], failed["failed"]) == (2, 1)
    job["status"] = failed
    pods[1]["status"] = {"phase": "Pending"}  # the failed pod was replaced
    later = "2026-11-29T12:05:00Z"
    recovered = fl_status(job, d, pods, error=None, error_reason="", now=later)
    conds = {c["type"]: c for c in recovered["conditions"]}
    assert recovered["phase"] == "Running"
    assert conds["Failed"]["status"] == "False" and conds["Failed"]["lastProbeTime"] == later
    assert recovered["startTime"] == NOW  # kept from the first pass
    job["status"] = recovered
    assert fl_status(job, d, pods, error=None, error_reason="", now="2026-11-29T13:00:00Z") == recovered
    for p in pods:
        p["status"] = {"phase": "Succeeded"}
    done = fl_status(job, d, pods, error=None, error_reason="", now=later)
    assert done["phase"] == "Succeeded" and done["completionTime"] == later
    assert {c["type"]: c["status"] for c in done["conditions"]}["Complete"] == "True"


def test_an_in_place_update_takes_skiffs_fields_and_keeps_what_others_own():
    """The PUT body: the live object (its resourceVersion: 409 if it moved), Skiff's labels and owner, the
    fields Skiff owns; a Deployment keeps its replicas (the HPA's), a Service its clusterIP; no status."""
    want_meta = {"name": "x", "labels": {"a": "new"}, "ownerReferences": [{"uid": "cr"}]}
    live_meta = {"name": "x", "labels": {"a": "old"}, "resourceVersion": "7", "uid": "u", "annotations": {"k": "v"}}
    dep = updated_body("Deployment",
                       {"metadata": live_meta, "spec": {"replicas": 5, "template": {"old": 1}}, "status": {"r": 5}},
                       {"metadata": want_meta, "spec": {"replicas": 1, "template": {"new": 1}}})
    assert dep == {"metadata": {**live_meta, "labels": {"a": "new"}, "ownerReferences": [{"uid": "cr"}]},
                   "spec": {"replicas": 5, "template": {"new": 1}}}
    svc = updated_body("Service", {"metadata": live_meta, "spec": {"clusterIP": "10.0.0.9", "ports": [{"port": 1}],
                                                                  "selector": {}, "type": "ClusterIP"}},
                       {"metadata": want_meta, "spec": {"ports": [{"port": 2}], "selector": {"s": "1"},
                                                        "type": "NodePort"}})
    assert svc["spec"] == {"clusterIP": "10.0.0.9", "ports": [{"port": 2}], "selector": {"s": "1"}, "type": "NodePort"}
    hpa = updated_body("HorizontalPodAutoscaler", {"metadata": live_meta, "spec": {"maxReplicas": 9, "x": 1}},
                       {"metadata": want_meta, "spec": {"maxReplicas": 3}})
    assert hpa["spec"] == {"maxReplicas": 3}


def test_one_event_per_reason_naming_every_child_and_what_drifted():
    done = [Action("create", "Pod", "p1", "Recreated"), Action("create", "Pod", "p2", "Recreated"),
            Action("update", "Deployment", "d", "DriftReverted", detail="spec.template.spec.containers[c].image")]
    assert action_events(done) == [
        ("Normal", "Recreated", "recreated (deleted by hand or lost): Pod p1, Pod p2"),
        ("Normal", "DriftReverted", "reverted hand edits of: Deployment d (spec.template.spec.containers[c].image)")]
    assert action_events([]) == []


def test_a_warning_event_when_the_cr_turns_failed_not_while_it_stays_failed():
    running = {"conditions": [{"type": "Failed", "status": "False"}]}
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "SecretNotFound", "message": "no 's'"}]}
    assert status_event(running, failed) == ("Warning", "SecretNotFound", "no 's'")
    assert status_event({}, failed) == ("Warning", "SecretNotFound", "no 's'")
    assert status_event(failed, failed) is None and status_event(failed, running) is None
