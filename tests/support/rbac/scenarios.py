"""Skiff's key scenarios per feature, run as Skiff's ServiceAccount against an RBAC-enforcing kubesim.

`skiff_env` installs Skiff's RBAC (all features, or some, optionally minus one permission) with the admin
identity, as a cluster admin does: the cluster-wide part, then Skiff's RoleBindings in the team namespace
`recsys` and in `default` (where the Sedna samples live: a namespace an admin opted in), writes the
ServiceAccount's kubeconfig and points `kubernetes_default` at it; each scenario then
does what the feature does in production (the operator, the reconcile passes, the trigger's watches, the
team set-up) through Skiff's own code. kubesim records every 403 (`sim.access.denials`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path

import kubernetes

from devstack.airflow_env import kubernetes_connection_uri
from kubesim.apiserver.auth.authz import ADMIN_TOKEN, write_service_account_kubeconfig
from kubesim.testing import sync_api_client
from operators.k8s import Kube
from operators.rbac import BOUND_IN, FEATURES, apply_manifests, install_manifests, team_manifests

SKIFF_NS, SKIFF_SA = "airflow", "skiff"
SKIFF_USER = f"system:serviceaccount:{SKIFF_NS}:{SKIFF_SA}"

TEAM = "recsys"
SEDNA_NS = "default"                      # tests/*/sedna/'s samples live there: bound like a team namespace
BOUND = (TEAM, SEDNA_NS)
RBAC = "rbac.authorization.k8s.io"

Atom = tuple[str, str, str, str, str]   # (role, apiGroup, resource, verb, resourceName or "")


def atoms(docs: list[dict]) -> list[Atom]:
    """Every single permission Skiff's roles grant, one verb on one resource each."""
    out = []
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role") or not _is_skiffs(doc):
            continue
        for rule in doc["rules"]:
            for g in rule["apiGroups"]:
                for res in rule["resources"]:
                    for v in rule["verbs"]:
                        for n in rule.get("resourceNames") or [""]:
                            out.append((doc["metadata"]["name"], g, res, v, n))
    return out


def _is_skiffs(role: dict) -> bool:
    """Roles granted to Skiff itself (all of the templates' roles but `skiff-member`, which is for people)."""
    labels = role["metadata"]["labels"]
    return labels.get("app.kubernetes.io/managed-by") == "skiff" and labels.get(BOUND_IN) != "team-people"


def without(docs: list[dict], atom: Atom) -> list[dict]:
    """`docs` with the one permission `atom` removed (its rule split so everything else stays granted)."""
    role, g, res, verb, name = atom
    out = copy.deepcopy(docs)
    for doc in out:
        if doc["kind"] not in ("ClusterRole", "Role") or doc["metadata"]["name"] != role:
            continue
        rules = []
        for rule in doc["rules"]:
            if g in rule["apiGroups"] and res in rule["resources"] and verb in rule["verbs"] and \
                    (not name or name in (rule.get("resourceNames") or [])):
                rules += _split(rule, g, res, verb, name)
            else:
                rules.append(rule)
        doc["rules"] = [r for r in rules if r["verbs"] and r["resources"] and r["apiGroups"]]
    return out


def _split(rule: dict, g: str, res: str, verb: str, name: str) -> list[dict]:
    def part(**kw):
        return {**rule, **kw}
    pieces = [part(apiGroups=[x for x in rule["apiGroups"] if x != g]),
              part(apiGroups=[g], resources=[x for x in rule["resources"] if x != res]),
              part(apiGroups=[g], resources=[res], verbs=[x for x in rule["verbs"] if x != verb])]
    names = rule.get("resourceNames") or []
    if name and len(names) > 1:
        pieces.append(part(apiGroups=[g], resources=[res], verbs=[verb], resourceNames=[x for x in names if x != name]))
    return pieces


def denied(sim, atom: Atom) -> bool:
    """Did kubesim refuse Skiff the permission `atom` (a 403 naming that verb on that resource)?"""
    _role, g, res, verb, name = atom
    for d in sim.access.denials:
        combined = f"{d.resource}/{d.subresource}" if d.subresource else d.resource
        if d.user.name == SKIFF_USER and d.api_group == g and combined == res and d.verb == verb and \
                (not name or d.name == name):
            return True
    return False


def skiff_denials(sim) -> list[str]:
    return [f"{d.verb} {d.resource}{'/' + d.subresource if d.subresource else ''}.{d.api_group} "
            f"ns={d.namespace} name={d.name}" for d in sim.access.denials if d.user.name == SKIFF_USER]


def stack_skiff_denials(stack) -> list[dict]:
    """``skiff_denials`` of a running stack's kubesim process, through its ``/kubesim/denials``, oldest first."""
    import httpx

    got = httpx.get(f"{stack.kubesim_url}/kubesim/denials", timeout=10).json()["denials"]
    return [d for d in got if d["user"] == SKIFF_USER]


@dataclass
class Env:
    sim: object
    admin: object           # kubernetes.client.ApiClient as kubesim's admin (system:masters)
    skiff: object           # ... as Skiff's ServiceAccount
    kubeconfig: Path        # Skiff's ServiceAccount kubeconfig
    features: tuple         # the features whose roles are installed (and bound in team namespaces)

    def add_team_namespace(self, namespace: str) -> None:
        """A cluster admin's step for a new team: its namespace and Skiff's RoleBindings there."""
        kubernetes.client.CoreV1Api(self.admin).create_namespace({"metadata": {"name": namespace}})
        apply_manifests(Kube(self.admin), team_manifests([namespace], SKIFF_NS, SKIFF_SA, self.features))


def skiff_env(sim, tmp_path: Path, docs: list[dict] | None = None, features: tuple | list = FEATURES) -> Env:
    """Install `docs` (default: the RBAC of `features`, all of Skiff's by default) as admin, bind Skiff's team
    roles of `features` in `BOUND`, then a client acting as Skiff."""
    admin = sync_api_client(sim.url, token=ADMIN_TOKEN)
    core = kubernetes.client.CoreV1Api(admin)
    for ns in (SKIFF_NS, TEAM):
        core.create_namespace({"metadata": {"name": ns}})
    apply_manifests(Kube(admin), docs if docs is not None else install_manifests(SKIFF_NS, SKIFF_SA, features))
    apply_manifests(Kube(admin), team_manifests(BOUND, SKIFF_NS, SKIFF_SA, features))
    if not _exists(core, SKIFF_NS, SKIFF_SA):     # a partial install still needs the identity
        core.create_namespaced_service_account(SKIFF_NS, {"metadata": {"name": SKIFF_SA}})
    path = write_service_account_kubeconfig(sim.url, SKIFF_NS, SKIFF_SA, tmp_path / "skiff.kubeconfig")
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = kubernetes_connection_uri(path)
    sim.access.denials.clear()
    return Env(sim, admin, kubernetes.config.new_client_from_config(str(path)), path, tuple(features))


def _exists(core, ns, name) -> bool:
    try:
        core.read_namespaced_service_account(name, ns)
        return True
    except kubernetes.client.exceptions.ApiException:
        return False


# ---- training -------------------------------------------------------------------------------------------

def training(env: Env) -> None:
    """A Job that succeeds (look for a Job to adopt, check PVCs, create, follow the Job, its pods and logs,
    mark it reported), its status read as a reattaching retry does, a failing Job explained from events,
    a kill deleting the Job."""
    from tests.support.training.training_support import make_context, operator, sim

    core = kubernetes.client.CoreV1Api(env.admin)
    for claim in ("alice-home", "shared-data"):
        core.create_namespaced_persistent_volume_claim(TEAM, {
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    op = operator("ok", pod_annotations=sim(0.2, lines=3))
    ref = op.execute(make_context("ok"))
    from operators.training.operator import clear_on_success

    # what a reattaching retry reads: with [state_store] clear_on_success a stored, reported Job is a crashed
    # try's, so it reads "succeeded" (operator.get_job_status since fbb84c3); without it "reported"
    assert op.get_job_status(ref, make_context("ok")) == ("succeeded" if clear_on_success() else "reported")
    bad = operator("bad", pod_annotations=sim(0.1, exit_code=3), retries=0)
    try:
        bad.execute(make_context("bad"))
        raise AssertionError("the failing Job must fail the task")
    except Exception as e:        # TrainingJobFailed (or a 403 when a permission is missing)
        if isinstance(e, AssertionError):
            raise
    op.on_kill()
    _training_queued(env)


KUEUE_PLATFORM = """\
version: 1
queueing: kueue
teams:
  - name: recsys
    quota: {cpu: "4", memory: 8Gi, storage: 10Gi}
    members:
      - {user: alice, email: alice@example.com}
"""


def _training_queued(env: Env) -> None:
    """With queueing: kueue (Kueue installed, its objects and the team's LocalQueue applied by an admin): a
    step created suspended in the queue, followed through its Workload and LocalQueue until Kueue runs it."""
    from kubesim import kueue
    from operators.platform import parse_platform
    from operators.platform.kueue import cluster_objects, team_objects
    from tests.support.training.training_support import make_context, operator, sim

    kueue.install(env.sim.store)
    path = env.kubeconfig.parent / "kueue-platform.yaml"
    path.write_text(KUEUE_PLATFORM)
    platform = parse_platform(KUEUE_PLATFORM, str(path))
    objs = cluster_objects(platform, {}) + team_objects(platform, platform.team(TEAM), {})
    for doc in objs:
        co = kubernetes.client.CustomObjectsApi(env.admin)
        if doc["kind"] == "LocalQueue":
            co.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", TEAM, "localqueues", doc)
        else:
            plural = {"ResourceFlavor": "resourceflavors", "WorkloadPriorityClass": "workloadpriorityclasses",
                      "ClusterQueue": "clusterqueues"}[doc["kind"]]
            co.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, doc)
    before = os.environ.get("AIRFLOW__SKIFF__PLATFORM_FILE")
    os.environ["AIRFLOW__SKIFF__PLATFORM_FILE"] = str(path)
    try:
        op = operator("queued", pod_annotations=sim(0.2))
        op.execute(make_context("queued"))
    finally:  # the session's setting back (deleting it left every later scenario without a platform file)
        if before is None:
            del os.environ["AIRFLOW__SKIFF__PLATFORM_FILE"]
        else:
            os.environ["AIRFLOW__SKIFF__PLATFORM_FILE"] = before


# ---- Sedna ----------------------------------------------------------------------------------------------

def sedna(env: Env) -> None:
    """The reconcile passes through every kind of action (create, status, events, roll-out, owner repair,
    adoption of an unlabelled child, name conflicts, leftovers, in-place updates, HPA removal) and the
    watch trigger's list + watch of every resource it follows."""
    from operators.sedna.install import install_crds
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
    from operators.sedna.reconcile import reconcile_federated_learning as fl
    from operators.sedna.reconcile import reconcile_joint_inference as ji
    from tests.support.sedna.sedna_helpers import JI, JOB, NS, dataset, ji_sample, model, new_fl, pods_of

    admin = Kube(env.admin)
    install_crds(admin)
    kubernetes.client.CoreV1Api(env.admin).create_namespaced_secret(NS, {
        "metadata": {"name": "s3-creds", "annotations": {"s3-endpoint": "minio:9000"}},
        "stringData": {"ACCESS_KEY_ID": "id", "SECRET_ACCESS_KEY": "key"}})
    sdd_model = model("surface-defect-detection-model", "s3://models/sdd/model.ckpt")
    sdd_model["spec"]["credentialName"] = "s3-creds"              # the reconcile reads that Secret (get)
    admin.create(MODELS, NS, sdd_model)
    for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        admin.create(DATASETS, NS, dataset(n, f"/data/{n}/train.txt"))
    admin.create(MODELS, NS, model("helmet-detection-inference-little-model", "/data/little/little.pb"))
    admin.create(MODELS, NS, model("helmet-detection-inference-big-model", "/data/big/big.pb"))
    api = Kube(env.skiff)
    _sedna_watches(env)
    new_fl(admin)
    fl(api)                                                     # create children, status, events
    job = admin.get(FL_JOBS, NS, JOB)
    job["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["env"][0]["value"] = "8"
    admin.merge_patch(FL_JOBS, NS, JOB, {"spec": {"trainingWorkers": job["spec"]["trainingWorkers"]}})
    fl(api)                                                     # roll-out: delete + create pods
    _strip_labels(admin, SERVICES, NS, f"{JOB}-aggregation")
    pod = next(iter(pods_of(admin).values()))
    _strip_labels(admin, PODS, NS, pod["metadata"]["name"])
    fl(api)                                                     # 409 on create -> get -> adopt (patch)
    pod = next(iter(pods_of(admin).values()))
    admin.merge_patch(PODS, NS, pod["metadata"]["name"], {"metadata": {"ownerReferences": [
        {**pod["metadata"]["ownerReferences"][0], "kind": "FederatedLearning"}]}})
    _stray(admin, PODS, pod, "stray-pod", "federatedlearningjob.sedna.io/uid")
    fl(api)                                                     # owner repair (patch), leftover pod (delete)
    svc = admin.get(SERVICES, NS, f"{JOB}-aggregation")
    admin.replace(SERVICES, NS, svc["metadata"]["name"], {**svc, "spec": {**svc["spec"], "ports": [
        {"name": "x", "port": 1, "targetPort": 1, "protocol": "TCP"}]}})
    _stray(admin, SERVICES, svc, "stray-svc", "federatedlearningjob.sedna.io/uid")
    admin.merge_patch(SERVICES, NS, f"{JOB}-aggregation", {"metadata": {"labels": {
        "skiff.io/spec-hash": "changed"}}})
    fl(api)                                                     # service updated in place, leftover service
    sample = ji_sample()
    sample["spec"]["edgeWorker"]["hpa"] = {"maxReplicas": 2}
    admin.create(JI_SERVICES, NS, sample)
    ji(api)                                                     # deployments, services, HPA created
    admin.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": {"maxReplicas": 3},
                                                                     "hardExampleMining": {"name": "CrossEntropy"}}}})
    ji(api)                                                     # deployment + HPA updated in place
    dep = admin.get(DEPLOYMENTS, NS, f"{JI}-deployment-cloud")
    admin.merge_patch(DEPLOYMENTS, NS, dep["metadata"]["name"], {"metadata": {"ownerReferences": [
        {**dep["metadata"]["ownerReferences"][0], "kind": "JointInference"}]}})
    hpa = admin.list(HPAS, NS, "jointinferenceservice.sedna.io/uid")[0]
    admin.merge_patch(HPAS, NS, hpa["metadata"]["name"], {"metadata": {"ownerReferences": [
        {**hpa["metadata"]["ownerReferences"][0], "kind": "JointInference"}]}})
    _stray(admin, DEPLOYMENTS, dep, "stray-dep", "jointinferenceservice.sedna.io/uid")
    ji(api)                                                     # owner repair (patch), leftover deployment
    for res, name in ((DEPLOYMENTS, f"{JI}-deployment-cloud"), (HPAS, hpa["metadata"]["name"])):
        _strip_labels(admin, res, NS, name)
    ji(api)                                                     # 409 -> get -> adopt
    admin.merge_patch(JI_SERVICES, NS, JI, {"spec": {"edgeWorker": {"hpa": None}}})
    ji(api)                                                     # HPA removed (delete)


def _strip_labels(kube, res, ns, name) -> None:
    obj = kube.get(res, ns, name)
    kube.replace(res, ns, name, {**obj, "metadata": {**obj["metadata"], "labels": {}}})


def _stray(kube, res, like: dict, name: str, uid_label: str) -> None:
    """A child of a CR that no longer exists (dangling uid label, no owner): a leftover to remove."""
    obj = json.loads(json.dumps(like))
    md = obj["metadata"]
    md.update(name=name, labels={**(md.get("labels") or {}), uid_label: "gone-uid"})
    for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generation", "managedFields"):
        md.pop(key, None)
    obj.pop("status", None)
    if res.plural == "services":
        obj["spec"].pop("clusterIP", None)
        obj["spec"].pop("clusterIPs", None)
    kube.create(res, md["namespace"], obj)


def _sedna_watches(env: Env) -> None:
    """Both watch triggers list and open a watch on everything they follow (or are refused)."""
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig

    from kubesim.testing import async_wait_until
    from operators.sedna.desired import FL_KIND, JI_KIND
    from operators.sedna.trigger import SednaWatchTrigger, watched_resources

    def watches() -> int:
        return env.sim.stats()["by_verb"].get("watch", 0)

    async def run() -> None:
        cfg = aclient.Configuration()
        await aconfig.load_kube_config(config_file=str(env.kubeconfig), client_configuration=cfg)
        async with aclient.ApiClient(cfg) as api:
            for kind in (FL_KIND, JI_KIND):
                want = watches() + len(watched_resources(kind))
                gen = SednaWatchTrigger(kind=kind, namespaces=None).events(api)
                task = asyncio.ensure_future(gen.__anext__())
                try:
                    await async_wait_until(lambda w=want: watches() >= w or skiff_denials(env.sim), timeout=10)
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    await gen.aclose()
    asyncio.run(run())


# ---- platform file: sync and usage --------------------------------------------------------------------

def platform(env: Env) -> None:
    """The example platform file synced twice as Skiff (first run applies every team object in the two team
    namespaces a cluster admin made and bound Skiff in, the Namespaces' labels included; the second only
    lists), and the usage report (quotas, finished Jobs)."""
    from operators.platform import load_platform
    from operators.platform.sync import sync_cluster
    from operators.platform.usage import usage

    example = load_platform(Path(__file__).resolve().parents[3] / "operators" / "platform" / "example.yaml")
    env.add_team_namespace("nlp")              # recsys: bound by skiff_env
    env.sim.cluster.quota.status_lag = 0.3     # the quota controller takes a moment, as on a real cluster
    first = sync_cluster(Kube(env.skiff), example, quota_timeout=10)
    assert first.applied and not first.errors, first.errors
    assert not sync_cluster(Kube(env.skiff), example, quota_timeout=10).applied
    usage(Kube(env.skiff), example)
    # queueing: kueue (Kueue installed, its cluster-wide objects applied by a cluster admin): the LocalQueues
    from kubesim import kueue
    from operators.platform import parse_platform
    from operators.rbac import apply_manifests, platform_team_manifests

    kueue.install(env.sim.store)
    queued = parse_platform(Path(example.source).read_text().replace("queueing: quota", "queueing: kueue"))
    apply_manifests(Kube(env.admin), [d for d in platform_team_manifests(queued, SKIFF_NS, SKIFF_SA, env.features)
                                if d["apiVersion"].startswith("kueue.x-k8s.io/")])
    first = sync_cluster(Kube(env.skiff), queued, quota_timeout=10)
    assert not first.errors and any(a.startswith("LocalQueue/") for a in first.applied), first
    assert not sync_cluster(Kube(env.skiff), queued, quota_timeout=10).applied


# ---- development instances -----------------------------------------------------------------------------

def devinstances(env: Env) -> None:
    """An instance created (ports in ingress-nginx's tcp-services), listed with its state and password,
    culled when idle (read through the service proxy), started again, deleted."""
    from operators.devinstances import culler, inventory, lifecycle
    from operators.devinstances.settings import Settings
    from tests.support.devinstances.devinstance_support import make_request, script_activity, wait_ready

    # usage idleness on: the culler also reads the instances' PodMetrics
    settings = Settings(host="dev.example.com", idle_seconds=60, usage_idle_seconds=3600)
    core = kubernetes.client.CoreV1Api(env.admin)
    for claim in ("alice-home", "datasets"):
        core.create_namespaced_persistent_volume_claim(TEAM, {
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    core.create_namespaced_config_map(settings.tcp_namespace, {"metadata": {"name": settings.tcp_name}})  # ingress-nginx's
    api = Kube(env.skiff)
    lifecycle.create(api, make_request(mounts_=[{"pvc": "datasets", "path": "/data"}]), settings)
    wait_ready(env.admin, "alice", "nb")
    inventory.list_instances(api, "alice", settings)
    inventory.password(api, "alice", TEAM, "nb", caller="alice")
    script_activity(env.admin, "alice", "nb", 0.0)                        # idle since 1970
    culler.cull(api, settings)
    lifecycle.start(api, "alice", TEAM, "nb")
    lifecycle.delete(api, "alice", TEAM, "nb", settings)


# ---- Skiff's page in the Airflow UI ---------------------------------------------------------------------

def ui(env: Env) -> None:
    """The page's data as the plugin reads it: team quotas, the training table, the Sedna table (with an FL
    job and its children present), the instances' StatefulSets and pods, an instance's idleness and password."""
    from operators.sedna.install import install_crds
    from operators.sedna.kube import DATASETS, MODELS
    from operators.sedna.kube import Kube as SednaKube
    from operators.ui import sources
    from tests.support.sedna.sedna_helpers import NS, dataset, model, new_fl

    admin = SednaKube(env.admin)
    install_crds(admin)
    admin.create(MODELS, NS, model("surface-defect-detection-model", "/models/sdd/model.ckpt"))
    for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        admin.create(DATASETS, NS, dataset(n, f"/data/{n}/train.txt"))
    new_fl(admin)
    k = Kube(env.skiff)
    sources.quotas(k, None)
    sources.training(k, None)
    assert sources.sedna(k)["installed"]
    # with Kueue installed (queueing: kueue) the page reads Skiff's ClusterQueues and the Workloads
    from kubesim import kueue
    kueue.install(env.sim.store)
    sources.queues(k, None)
    sources.queue_reasons(k)
    sources.pod_metrics(k)  # the rows' live usage (the metrics API)
    sources.list_all(k, "apps/v1", "statefulsets", labels="skiff.io/kind=dev-instance")
    # an instance (made by the admin here): its idleness through the service proxy, its password to its owner
    from operators.devinstances import idle, inventory, lifecycle
    from operators.devinstances.settings import Settings
    from tests.support.devinstances.devinstance_support import make_request, script_activity, wait_ready

    # usage idleness on: the culler also reads the instances' PodMetrics
    settings = Settings(host="dev.example.com", idle_seconds=60, usage_idle_seconds=3600)
    core = kubernetes.client.CoreV1Api(env.admin)
    core.create_namespaced_persistent_volume_claim(TEAM, {
        "metadata": {"name": "alice-home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    core.create_namespaced_config_map(settings.tcp_namespace, {"metadata": {"name": settings.tcp_name}})
    lifecycle.create(Kube(env.admin), make_request(), settings)
    wait_ready(env.admin, "alice", "nb")
    script_activity(env.admin, "alice", "nb", 0.0)
    last, why = idle.read_last_activity(Kube(env.skiff), TEAM, "alice--nb")
    assert last is not None, why
    assert inventory.password(Kube(env.skiff), "alice", TEAM, "nb", caller="alice")


SCENARIOS = {"training": training, "sedna": sedna, "platform": platform, "devinstances": devinstances, "ui": ui}
