"""Workload controllers (Job, Deployment/ReplicaSet, StatefulSet, PVC binding) as kube-controller-manager
runs them, observed through the `kubernetes` client (and a `kubernetes_asyncio` watch for Job status)."""
from __future__ import annotations

from kubernetes.client import AppsV1Api, BatchV1Api, CoreV1Api
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch

from kubesim.testing import async_api_client, async_wait_until, wait_until


def job(name="train", restart="Never", annotations=None, resources=None, **spec) -> dict:
    container = {"name": "main", "image": "busybox:1.36"}
    if resources:
        container["resources"] = {"requests": resources, "limits": resources}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"annotations": {f"kubesim.io/{k}": str(v) for k, v in
                                                               (annotations or {}).items()}},
                                  "spec": {"restartPolicy": restart, "containers": [container]}}, **spec}}


def condition(j, type_):
    return next((c for c in (j.status.conditions or []) if c.type == type_ and c.status == "True"), None)


def finished(batch, name, type_):
    return wait_until(lambda: (lambda j: j if condition(j, type_) else None)(
        batch.read_namespaced_job(name, "default")), 15)


def job_events(core, name, reason):
    return [e for e in core.list_namespaced_event("default").items
            if e.involved_object.kind == "Job" and e.involved_object.name == name and e.reason == reason]


def test_job_success(k8s):
    """A Job creates `<job>-<5 random>` pods labelled job-name/controller-uid and owned by the Job, and
    completes with SuccessCriteriaMet + Complete, succeeded=1, startTime and completionTime."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    created = batch.create_namespaced_job("default", job())
    j = finished(batch, "train", "Complete")
    assert condition(j, "SuccessCriteriaMet").reason == "CompletionsReached"
    assert j.status.succeeded == 1 and not j.status.failed and not j.status.active
    assert j.status.start_time and j.status.completion_time
    (p,) = core.list_namespaced_pod("default", label_selector="job-name=train").items
    assert p.metadata.name.startswith("train-") and len(p.metadata.name) == len("train-") + 5
    labels = p.metadata.labels
    assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"] == created.metadata.uid
    assert labels["batch.kubernetes.io/job-name"] == "train"
    (ref,) = p.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Job", "train", created.metadata.uid, True, True)
    assert p.status.phase == "Succeeded"
    assert job_events(core, "train", "SuccessfulCreate")[0].message == f"Created pod: {p.metadata.name}"


def test_job_parallelism_and_completions(k8s):
    """completions=3, parallelism=2: at most 2 pods at a time, 3 successes in all."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(completions=3, parallelism=2, annotations={"duration": 0.2}))
    j = finished(batch, "train", "Complete")
    assert j.status.succeeded == 3
    assert len(core.list_namespaced_pod("default", label_selector="job-name=train").items) == 3


def test_job_backoff_limit(k8s):
    """Failing pods are replaced until failed > backoffLimit, then FailureTarget + Failed with reason
    BackoffLimitExceeded, "Job has reached the specified backoff limit"."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(backoffLimit=1, annotations={"exit-code": 2, "duration": 0.05}))
    j = finished(batch, "train", "Failed")
    failed = condition(j, "Failed")
    assert (failed.reason, failed.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert condition(j, "FailureTarget").reason == "BackoffLimitExceeded"
    assert j.status.failed == 2
    assert len(core.list_namespaced_pod("default", label_selector="job-name=train").items) == 2


def test_job_active_deadline(k8s):
    """activeDeadlineSeconds: active pods are killed, Failed with reason DeadlineExceeded."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(activeDeadlineSeconds=1, annotations={"duration": 60}))
    j = finished(batch, "train", "Failed")
    failed = condition(j, "Failed")
    assert (failed.reason, failed.message) == ("DeadlineExceeded", "Job was active longer than specified deadline")
    wait_until(lambda: not core.list_namespaced_pod("default", label_selector="job-name=train").items)
    assert job_events(core, "train", "DeadlineExceeded")


def test_job_failed_create_on_quota_then_success_when_quota_frees(k8s):
    """Quota refuses the Job's pod: a FailedCreate Warning event with the API's message; the controller
    retries with back-off and creates the pod once the quota frees."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    core.create_namespaced_resource_quota("default", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "skiff-quota"},
        "spec": {"hard": {"requests.cpu": "2", "limits.cpu": "2"}}})
    hog = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "annotations": {"kubesim.io/duration": "60"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                    "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}
    core.create_namespaced_pod("default", hog)
    batch.create_namespaced_job("default", job(resources={"cpu": "1"}))
    ev = wait_until(lambda: job_events(core, "train", "FailedCreate"))
    assert ev[0].type == "Warning"
    assert ev[0].message.startswith('Error creating: pods "train-')
    assert ev[0].message.endswith('" is forbidden: exceeded quota: skiff-quota, requested: limits.cpu=1,'
                                  "requests.cpu=1, used: limits.cpu=2,requests.cpu=2, limited: limits.cpu=2,"
                                  "requests.cpu=2")
    core.delete_namespaced_pod("hog", "default")
    j = finished(batch, "train", "Complete")
    assert j.status.succeeded == 1


def test_job_ttl_after_finished_deletes_job_and_pods(k8s):
    """ttlSecondsAfterFinished: the finished Job is deleted (Background, so its pods go too)."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(ttlSecondsAfterFinished=1))
    wait_until(lambda: not batch.list_namespaced_job("default").items, 15)
    wait_until(lambda: not core.list_namespaced_pod("default").items)


def test_job_suspend_and_resume(k8s):
    """suspend=true: no pods, condition Suspended; resuming creates the pod and the Job completes."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(suspend=True))
    wait_until(lambda: condition(batch.read_namespaced_job("train", "default"), "Suspended"))
    assert not core.list_namespaced_pod("default").items
    batch.patch_namespaced_job("train", "default", {"spec": {"suspend": False}})
    finished(batch, "train", "Complete")


def test_suspending_a_running_job_is_not_a_failed_try(k8s):
    """A running Job suspended (as Kueue does on preemption), backoffLimit 0: its pod is deleted, not counted in
    status.failed, and resumed it runs a new pod to completion (job_controller.go: manageJob deletes a suspended
    Job's active pods with deleteJobPods, which removes their tracking finalizer before the DELETE, so
    trackJobStatusAndRemoveFinalizers never counts them)."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(annotations={"duration": "3"}, backoffLimit=0))
    first = wait_until(lambda: [p for p in core.list_namespaced_pod("default").items if p.status.phase == "Running"])
    batch.patch_namespaced_job("train", "default", {"spec": {"suspend": True}})
    wait_until(lambda: condition(batch.read_namespaced_job("train", "default"), "Suspended"))
    wait_until(lambda: not core.list_namespaced_pod("default").items, what="the suspended Job's pod deleted")
    assert not batch.read_namespaced_job("train", "default").status.failed
    batch.patch_namespaced_job("train", "default", {"spec": {"suspend": False}})
    finished(batch, "train", "Complete")
    done = batch.read_namespaced_job("train", "default")
    assert not done.status.failed and done.status.succeeded == 1
    assert all(p.metadata.name != first[0].metadata.name for p in core.list_namespaced_pod("default").items)


async def test_job_status_seen_by_async_watch(kubesim):
    """A kubernetes_asyncio watch on a Job sees its status reach the Complete condition."""
    async with async_api_client(kubesim.url) as api:
        batch = aclient.BatchV1Api(api)
        await batch.create_namespaced_job("default", job("watched"))
        seen = None
        w = awatch.Watch()
        async with w.stream(batch.list_namespaced_job, "default", timeout_seconds=10) as stream:
            async for ev in stream:
                j = ev["object"]
                if j.status and any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []):
                    seen = j
                    w.stop()
        assert seen is not None and seen.status.succeeded == 1


# ---- Deployment / ReplicaSet ---------------------------------------------------------------------------

def deployment(image="nginx:1.25", replicas=2) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


def web_pods(core, image=None):
    pods = [p for p in core.list_namespaced_pod("default", label_selector="app=web").items
            if p.status and p.status.phase == "Running"]
    return [p for p in pods if image is None or p.spec.containers[0].image == image]


def test_deployment_rolls_out_and_reports_status(k8s):
    """A Deployment makes a ReplicaSet `<deploy>-<pod-template-hash>` whose pods run; status reports
    observedGeneration, replicas/ready/available/updated and Available/Progressing. A template change
    makes a new ReplicaSet and scales the old one to 0."""
    apps, core = AppsV1Api(k8s), CoreV1Api(k8s)
    apps.create_namespaced_deployment("default", deployment())

    def rolled(image, generation):
        d = apps.read_namespaced_deployment("web", "default")
        s = d.status
        ok = (s and s.observed_generation == generation and s.updated_replicas == 2 and s.ready_replicas == 2
              and s.available_replicas == 2 and s.replicas == 2 and len(web_pods(core, image)) == 2)
        return d if ok else None
    d = wait_until(lambda: rolled("nginx:1.25", 1))
    conds = {c.type: c for c in d.status.conditions}
    assert conds["Available"].status == "True" and conds["Progressing"].reason == "NewReplicaSetAvailable"
    (rs1,) = apps.list_namespaced_replica_set("default").items
    phash = rs1.metadata.labels["pod-template-hash"]
    assert rs1.metadata.name == f"web-{phash}" and rs1.metadata.owner_references[0].kind == "Deployment"
    assert web_pods(core)[0].metadata.name.startswith(f"web-{phash}-")

    apps.patch_namespaced_deployment("web", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.26"}]}}}})
    wait_until(lambda: rolled("nginx:1.26", 2))
    wait_until(lambda: len(web_pods(core)) == 2)
    sets = {rs.metadata.name: rs.spec.replicas for rs in apps.list_namespaced_replica_set("default").items}
    assert sets[rs1.metadata.name] == 0 and sorted(sets.values()) == [0, 2]


def test_replicaset_heals_deleted_pod(k8s):
    """Deleting one of a Deployment's pods: its ReplicaSet creates a replacement."""
    apps, core = AppsV1Api(k8s), CoreV1Api(k8s)
    apps.create_namespaced_deployment("default", deployment(replicas=2))
    pods = wait_until(lambda: (lambda ps: ps if len(ps) == 2 else None)(web_pods(core)))
    core.delete_namespaced_pod(pods[0].metadata.name, "default")
    after = wait_until(lambda: (lambda ps: ps if len(ps) == 2 and pods[0].metadata.name not in
                                {p.metadata.name for p in ps} else None)(web_pods(core)))
    assert pods[1].metadata.name in {p.metadata.name for p in after}


def test_deployment_scale_down(k8s):
    """Lowering replicas removes pods down to the new count."""
    apps, core = AppsV1Api(k8s), CoreV1Api(k8s)
    apps.create_namespaced_deployment("default", deployment(replicas=3))
    wait_until(lambda: len(web_pods(core)) == 3)
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_until(lambda: len(core.list_namespaced_pod("default", label_selector="app=web").items) == 1)


# ---- StatefulSet -----------------------------------------------------------------------------------------

def test_statefulset_stop_and_start_keeps_pvcs(k8s):
    """Ordinal pods `name-0`... with the pod-name label and PVCs `<template>-<sts>-<i>` (Bound); replicas 0
    deletes the pods but keeps the PVCs; back to 1 the pod returns with the same claim."""
    apps, core = AppsV1Api(k8s), CoreV1Api(k8s)
    apps.create_namespaced_stateful_set("default", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "nb"},
        "spec": {"replicas": 2, "serviceName": "nb", "selector": {"matchLabels": {"app": "nb"}},
                 "template": {"metadata": {"labels": {"app": "nb"}},
                              "spec": {"containers": [{"name": "lab", "image": "jupyter/base:2024",
                                                       "volumeMounts": [{"name": "home", "mountPath": "/home"}]}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "home"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}}]}})

    def running(n):
        pods = [p for p in core.list_namespaced_pod("default", label_selector="app=nb").items
                if p.status and p.status.phase == "Running"]
        return pods if len(pods) == n else None
    pods = wait_until(lambda: running(2))
    assert sorted(p.metadata.name for p in pods) == ["nb-0", "nb-1"]
    assert pods[0].metadata.labels["statefulset.kubernetes.io/pod-name"] == pods[0].metadata.name
    claims = {v.persistent_volume_claim.claim_name for p in pods for v in p.spec.volumes if v.persistent_volume_claim}
    assert claims == {"home-nb-0", "home-nb-1"}
    wait_until(lambda: all(c.status.phase == "Bound" for c in
                           core.list_namespaced_persistent_volume_claim("default").items))
    assert core.read_namespaced_persistent_volume_claim("home-nb-0", "default").status.capacity == {"storage": "5Gi"}
    s = wait_until(lambda: (lambda s: s if s.status.ready_replicas == 2 else None)(
        apps.read_namespaced_stateful_set("nb", "default")))
    assert s.status.replicas == 2 and s.status.observed_generation == 1

    apps.patch_namespaced_stateful_set("nb", "default", {"spec": {"replicas": 0}})
    wait_until(lambda: not core.list_namespaced_pod("default", label_selector="app=nb").items)
    assert {c.metadata.name for c in core.list_namespaced_persistent_volume_claim("default").items} == \
        {"home-nb-0", "home-nb-1"}
    apps.patch_namespaced_stateful_set("nb", "default", {"spec": {"replicas": 1}})
    (p,) = wait_until(lambda: running(1))
    assert p.metadata.name == "nb-0"
    assert [v.persistent_volume_claim.claim_name for v in p.spec.volumes if v.persistent_volume_claim] == ["home-nb-0"]
    apps.delete_namespaced_stateful_set("nb", "default")
    wait_until(lambda: not core.list_namespaced_pod("default", label_selector="app=nb").items)
    assert len(core.list_namespaced_persistent_volume_claim("default").items) == 2   # PVCs outlive the set


def test_job_pod_deleted_while_running_counts_as_failed(k8s):
    """A Job's pod deleted before it finished counts as failed (as with the real pod-tracking finalizers):
    with backoffLimit 0 the Job fails with BackoffLimitExceeded."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(backoffLimit=0, annotations={"duration": 60}))
    (p,) = wait_until(lambda: core.list_namespaced_pod("default", label_selector="job-name=train").items)
    core.delete_namespaced_pod(p.metadata.name, "default")
    j = finished(batch, "train", "Failed")
    assert condition(j, "Failed").reason == "BackoffLimitExceeded" and j.status.failed == 1


def test_service_endpoints_follow_ready_pods(k8s):
    """A Service with a selector gets Endpoints listing the ready matching pods' IPs and target ports;
    they follow pods coming and going, and go with the Service."""
    apps, core = AppsV1Api(k8s), CoreV1Api(k8s)
    core.create_namespaced_service("default", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    apps.create_namespaced_deployment("default", deployment(replicas=2))

    def addresses():
        try:
            ep = core.read_namespaced_endpoints("web", "default")
        except Exception:
            return None
        return sorted(a.ip for s in ep.subsets or [] for a in s.addresses or [])
    pods = wait_until(lambda: (lambda ps: ps if len(ps) == 2 else None)(web_pods(core)))
    assert wait_until(lambda: addresses() == sorted(p.status.pod_ip for p in pods))
    ep = core.read_namespaced_endpoints("web", "default")
    assert [(p.name, p.port) for p in ep.subsets[0].ports] == [("http", 8080)]
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_until(lambda: len(addresses() or []) == 1)
    core.delete_namespaced_service("web", "default")
    wait_until(lambda: "web" not in [e.metadata.name for e in core.list_namespaced_endpoints("default").items])


async def test_rolling_update_respects_max_surge_and_unavailable(kubesim):
    """RollingUpdate (maxSurge 1, maxUnavailable 0): a kubernetes_asyncio watch on the ReplicaSets sees
    the replicas of all sets together never exceed 4+1 while the new set scales up step by step and the
    old one down to 0."""
    async with async_api_client(kubesim.url) as api:
        apps = aclient.AppsV1Api(api)
        body = deployment(replicas=4)
        body["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        await apps.create_namespaced_deployment("default", body)

        async def available(n):
            d = await apps.read_namespaced_deployment("web", "default")
            return d.status and d.status.available_replicas == n and d.status.updated_replicas == n
        await async_wait_until(lambda: available(4))
        w = awatch.Watch()
        replicas: dict[str, int] = {}
        available_of: dict[str, int] = {}
        peak, steps = 0, set()
        async with w.stream(apps.list_namespaced_replica_set, "default", timeout_seconds=20) as stream:
            await apps.patch_namespaced_deployment("web", "default", {"spec": {"template": {"spec": {
                "containers": [{"name": "web", "image": "nginx:1.26"}]}}}})
            async for ev in stream:
                rs = ev["object"]
                replicas[rs.metadata.name] = rs.spec.replicas
                available_of[rs.metadata.name] = (rs.status.available_replicas or 0) if rs.status else 0
                peak = max(peak, sum(replicas.values()))
                first = next(iter(replicas))           # the old set, listed when the watch started
                new = [r for r in replicas if r != first]
                if new:
                    steps.add(replicas[new[0]])
                    if replicas[first] == 0 and replicas[new[0]] == 4 and available_of[new[0]] == 4:
                        w.stop()
        assert peak == 5 and {1, 2, 3, 4} <= steps
        assert await async_wait_until(lambda: available(4))


def test_rollout_steps_pure():
    """One rollout step as the deployment controller computes it (25%/25% of 4 = surge 1, unavailable 1;
    Recreate: the new set waits until the old pods are gone)."""
    from kubesim.controllers.workloads.deployment import rollout_targets
    rolling = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}
    assert rollout_targets(rolling, 4, (0, 0), [(4, 4, 4)]) == (1, [3])     # 5 pods at most, 3 available
    assert rollout_targets(rolling, 4, (1, 1), [(3, 3, 3)]) == (2, [2])
    assert rollout_targets(rolling, 4, (4, 4), [(0, 0, 0)]) == (4, [0])
    assert rollout_targets(rolling, 2, (4, 4), []) == (2, [])                # plain scale down
    recreate = {"strategy": {"type": "Recreate"}}
    assert rollout_targets(recreate, 3, (0, 0), [(3, 3, 3)]) == (0, [0])
    assert rollout_targets(recreate, 3, (0, 0), [(0, 0, 0)]) == (3, [0])


def test_hpa_keeps_target_within_bounds_without_metrics(k8s):
    """An HPA without a metrics server (kubesim has none, like a bare cluster) cannot read metrics
    (ScalingActive=False/FailedGetResourceMetric) but scales its Deployment into [minReplicas, maxReplicas]
    with a SuccessfulRescale event."""
    from kubernetes.client import AutoscalingV2Api
    apps, core, hpas = AppsV1Api(k8s), CoreV1Api(k8s), AutoscalingV2Api(k8s)
    apps.create_namespaced_deployment("default", deployment(replicas=1))
    hpas.create_namespaced_horizontal_pod_autoscaler("default", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 3}})
    wait_until(lambda: len(web_pods(core)) == 2)
    h = wait_until(lambda: (lambda h: h if h.status and h.status.desired_replicas == 2 and
                            h.status.current_replicas == 2 else None)(
        hpas.read_namespaced_horizontal_pod_autoscaler("web", "default")))
    conds = {c.type: c for c in h.status.conditions}
    assert conds["AbleToScale"].status == "True" and conds["ScalingActive"].reason == "FailedGetResourceMetric"
    events = [e for e in core.list_namespaced_event("default").items if e.reason == "SuccessfulRescale"]
    assert events[0].message == "New size: 2; reason: Current number of replicas below Spec.MinReplicas"
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 9}})
    wait_until(lambda: apps.read_namespaced_deployment("web", "default").spec.replicas == 3)
    wait_until(lambda: len(web_pods(core)) == 3)
