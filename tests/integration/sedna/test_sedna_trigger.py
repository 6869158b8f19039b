"""SednaWatchTrigger against kubesim through kubernetes_asyncio: it fires on spec edits and child deletions,
ignores status-only updates, and survives a cut watch and 410 Gone."""

from __future__ import annotations

import asyncio

import pytest

from kubesim.testing import async_wait_until
from operators.sedna.kube import FL_JOBS, PODS, Kube
from operators.sedna.reconcile import reconcile_federated_learning
from operators.sedna.trigger import SednaWatchTrigger, fingerprint
from tests.support.sedna.sedna_helpers import JOB, NS, fl_sample, new_fl, pods_of, wait_for

EVENT_TIMEOUT = 10


async def started(trigger: SednaWatchTrigger, api, fire_on_start: bool = False):
    """The trigger's event stream, once every watch has listed, and a helper to get its next event."""
    ready = asyncio.Event()
    agen = trigger.events(api, ready, fire_on_start=fire_on_start)
    pending = asyncio.ensure_future(agen.__anext__())
    await asyncio.wait_for(ready.wait(), EVENT_TIMEOUT)

    async def next_event():
        nonlocal pending
        event = await asyncio.wait_for(pending, EVENT_TIMEOUT)
        pending = asyncio.ensure_future(agen.__anext__())
        return event.payload

    async def close():
        pending.cancel()  # cancels the generator's wait; its finally stops the watches
        try:
            await pending
        except (asyncio.CancelledError, StopAsyncIteration):
            pass
        await agen.aclose()

    return next_event, close


async def test_fires_on_spec_edit_not_on_status_update(k8s, k8s_async, kube):
    new_fl(kube, "job-a")
    new_fl(kube, "job-b")
    reconcile_federated_learning(Kube(k8s))
    next_event, close = await started(SednaWatchTrigger(coalesce_seconds=0.1), k8s_async)
    try:
        # a status-only update of job-a (what every reconcile does) must not fire; the edit of job-b does
        kube.merge_patch(FL_JOBS, NS, "job-a", {"status": {"active": 7}}, sub="status")
        job = kube.get(FL_JOBS, NS, "job-b")
        job["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["env"][0]["value"] = "16"
        kube.merge_patch(FL_JOBS, NS, "job-b", {"spec": {"trainingWorkers": job["spec"]["trainingWorkers"]}})
        payload = await next_event()
        assert payload["kind"] == "FederatedLearningJob"
        assert payload["sample"] == [f"MODIFIED CR {NS}/job-b"]
    finally:
        await close()


async def test_fires_once_on_start_for_what_changed_while_no_trigger_watched(k8s, k8s_async, kube):
    """A triggerer SIGKILLed: its triggers start again elsewhere ~30 s later. A child deleted meanwhile was
    seen by no watch; the restarted trigger fires once after listing, so a run restores it now rather than
    at the next cron resync (minutes)."""
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    name = sorted(pods_of(kube))[0]
    kube.delete(PODS, NS, name)  # no trigger running
    next_event, close = await started(SednaWatchTrigger(), k8s_async, fire_on_start=True)
    try:
        assert (await next_event())["sample"] == ["STARTED FederatedLearningJob watches (changes while no "
                                                 "trigger watched)"]
        assert reconcile_federated_learning(Kube(k8s))["created"] == 1 and name in pods_of(kube)
    finally:
        await close()


async def test_fires_on_child_deletion_and_coalesces_a_burst(k8s, k8s_async, kube):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    next_event, close = await started(SednaWatchTrigger(coalesce_seconds=0.5), k8s_async)
    try:
        names = sorted(pods_of(kube))
        for name in names:
            kube.delete(PODS, NS, name)
        payload = await next_event()
        assert {f"DELETED Pod {NS}/{n}" for n in names} == set(payload["sample"])
        assert payload["changes"] == 3  # one event for the burst, so one DAG run
    finally:
        await close()


async def test_survives_a_cut_watch_and_410_gone(k8s, k8s_async, kube, kubesim):
    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    next_event, close = await started(SednaWatchTrigger(coalesce_seconds=0.1), k8s_async)
    try:
        # the connection drops: the watch resumes from its resourceVersion and sees the next deletion
        await async_wait_until(lambda: kubesim.cut_watches() >= 5)  # all 5 open, and cut at once
        name = next(n for n in pods_of(kube) if "-train-" in n)
        kube.delete(PODS, NS, name)
        payload = await next_event()
        assert f"DELETED Pod {NS}/{name}" in payload["sample"]
        # history compacted: every re-watch gets 410 once, re-lists, and reports what it missed
        kubesim.fail(verb="watch", status=410, count=5)
        await async_wait_until(lambda: kubesim.cut_watches() >= 5)
        agg = next(n for n in pods_of(kube) if "-aggregation-" in n)
        kube.delete(PODS, NS, agg)
        payload = await next_event()
        assert any(s.startswith("RESYNC Pod") or s == f"DELETED Pod {NS}/{agg}" for s in payload["sample"])
        # and it keeps watching afterwards
        kube.delete(FL_JOBS, NS, JOB)
        wait_for(lambda: kube.get(FL_JOBS, NS, JOB) is None, what="CR deleted")
        payload = await next_event()
        while f"DELETED CR {NS}/{JOB}" not in payload["sample"]:  # GC's pod deletions may come first
            payload = await next_event()
    finally:
        await close()


def test_trigger_serializes_and_validates_kind():
    t = SednaWatchTrigger(kind="JointInferenceService", namespaces=["team-a"])
    path, kwargs = t.serialize()
    assert path == "operators.sedna.trigger.SednaWatchTrigger"
    assert SednaWatchTrigger(**kwargs).serialize() == (path, kwargs)
    with pytest.raises(ValueError, match="'JointInference'"):
        SednaWatchTrigger(kind="JointInference")


def test_fingerprint_ignores_status_and_pod_liveness_changes():
    job = fl_sample(uid="u")
    job["metadata"]["generation"] = 1
    assert fingerprint("CR", job) == fingerprint("CR", {**job, "status": {"phase": "Running"}})
    assert fingerprint("CR", job) != fingerprint("CR", {**job, "metadata": {**job["metadata"], "generation": 2}})
    pod = {"metadata": {"uid": "p", "labels": {"a": "b"}}, "status": {"phase": "Pending"}}
    assert fingerprint("Pod", pod) == fingerprint("Pod", {**pod, "status": {"phase": "Running"}})
    assert fingerprint("Pod", pod) != fingerprint("Pod", {**pod, "status": {"phase": "Failed"}})


async def test_fires_on_an_edit_of_a_cr_larger_than_64_kib(k8s, k8s_async, kube):
    new_fl(kube)
    next_event, close = await started(SednaWatchTrigger(), k8s_async)
    try:
        job = kube.get(FL_JOBS, NS, JOB)
        job["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "BIG", "value": "x" * 100_000})
        kube.merge_patch(FL_JOBS, NS, JOB, {"spec": {"trainingWorkers": job["spec"]["trainingWorkers"]}})
        assert (await next_event())["sample"] == [f"MODIFIED CR {NS}/{JOB}"]
    finally:
        await close()


async def test_fires_when_a_missing_model_appears(k8s, k8s_async, kube):
    from operators.sedna.kube import MODELS
    from tests.support.sedna.sedna_helpers import model

    next_event, close = await started(SednaWatchTrigger(), k8s_async)
    try:
        kube.create(MODELS, NS, model("late-model", "/m/late.pb"))
        assert (await next_event())["sample"] == [f"ADDED Model {NS}/late-model"]
    finally:
        await close()


# ---------------------------------------------------------------- JointInferenceService side


async def test_ji_fires_on_deployment_and_service_deletion(k8s, k8s_async, kube):
    from operators.sedna.kube import DEPLOYMENTS, SERVICES
    from operators.sedna.reconcile import reconcile_joint_inference
    from tests.support.sedna.sedna_helpers import JI, new_ji

    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    next_event, close = await started(SednaWatchTrigger(kind="JointInferenceService"), k8s_async)
    try:
        kube.delete(DEPLOYMENTS, NS, f"{JI}-deployment-edge")
        assert f"DELETED Deployment {NS}/{JI}-deployment-edge" in (await next_event())["sample"]
        kube.delete(SERVICES, NS, f"{JI}-cloud")
        payload = await next_event()
        while f"DELETED Service {NS}/{JI}-cloud" not in payload["sample"]:  # the edge pods' churn may come first
            payload = await next_event()
        assert payload["kind"] == "JointInferenceService"
    finally:
        await close()


async def test_ji_fires_on_a_hem_edit_not_on_status_only_updates(k8s, k8s_async, kube):
    from operators.sedna.kube import JI_SERVICES, MODELS
    from operators.sedna.reconcile import reconcile_joint_inference
    from tests.support.sedna.sedna_helpers import JI, model, new_ji

    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    next_event, close = await started(SednaWatchTrigger(kind="JointInferenceService"), k8s_async)
    try:
        # status-only updates (every reconcile writes some) must not fire: the first event is the marker
        # Model created after them, alone; then the HEM edit fires
        kube.merge_patch(JI_SERVICES, NS, JI, {"status": {"active": 5}}, sub="status")
        kube.merge_patch(JI_SERVICES, NS, JI, {"status": {"active": 2}}, sub="status")
        kube.create(MODELS, NS, model("marker", "/m/marker.pb"))
        seen = list((await next_event())["sample"])
        while f"ADDED Model {NS}/marker" not in seen:  # Deployment health changes may come first
            seen += (await next_event())["sample"]
        assert not [s for s in seen if " CR " in s], seen
        params = [{"key": "threshold_img", "value": "0.8"}]
        kube.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hardExampleMining": {"parameters": params}}}})
        payload = await next_event()
        assert payload["sample"] == [f"MODIFIED CR {NS}/{JI}"], payload
        # and the run it starts rolls the edge Deployment
        assert reconcile_joint_inference(Kube(k8s))["updated"] == 1
    finally:
        await close()


# ---------------------------------------------------------------- shared informers (the triggerer)


async def test_triggers_in_one_process_share_the_watches_they_have_in_common(k8s, k8s_async, kube, kubesim):
    """FL and JI triggers on one Informers (the triggerer's) share the Models watch; a second FL trigger
    joining running informers is ready at once from their cache, without a spurious event."""
    from kubesim.testing import async_api_client
    from operators.k8s.informer import Informers
    from operators.sedna.kube import MODELS
    from operators.sedna.trigger import watched_resources
    from tests.support.sedna.sedna_helpers import model

    new_fl(kube)
    reconcile_federated_learning(Kube(k8s))
    informers = Informers(lambda: async_api_client(kubesim.url))
    fl_next, fl_close = await started(SednaWatchTrigger(coalesce_seconds=0.1), informers)
    ji_next, ji_close = await started(SednaWatchTrigger(kind="JointInferenceService", coalesce_seconds=0.1),
                                      informers)
    late_next, late_close = await started(SednaWatchTrigger(coalesce_seconds=0.1), informers)
    try:
        keys = {(w.res, w.label_selector) for kind in ("FederatedLearningJob", "JointInferenceService")
                for w in watched_resources(kind)}
        assert informers.watches == len(keys) == len(watched_resources("FederatedLearningJob")) + len(
            watched_resources("JointInferenceService")) - 1  # the Models watch is shared
        await async_wait_until(lambda: kubesim.store.watch_count == len(keys))
        kube.create(MODELS, NS, model("shared-model", "/m/shared.pb"))
        for next_event in (fl_next, ji_next, late_next):  # the late joiner's first event is this one
            assert (await next_event())["sample"] == [f"ADDED Model {NS}/shared-model"]
    finally:
        for close in (late_close, ji_close, fl_close):
            await close()
    assert informers.watches == 0  # the last trigger out stopped them
