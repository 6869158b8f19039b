"""The soak's Sedna load: FederatedLearningJobs and JointInferenceServices (the samples of tests/*/sedna/, pods
kept running by a ``kubesim.io/duration`` template annotation) created before the faults, then edited and
having children deleted while they last; afterwards what each should have (``operators.sedna``'s own desired
state, computed from the CR as the reconcile DAG does) is compared with what it has, for the auditor."""

from __future__ import annotations

import copy
import random
import time

import yaml

from devstack.airflow_env import REPO
from devstack.soak_audit import SednaObs

SAMPLES = REPO / "tests" / "support" / "sedna" / "samples"
NS = "default"
PREFIX = "soak-"
LONG = {"kubesim.io/duration": "100000"}
SOURCES = {  # kind -> names created before the CRs
    "Model": ["surface-defect-detection-model", "helmet-detection-inference-little-model",
              "helmet-detection-inference-big-model"],
    "Dataset": ["edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"],
}


def _workers(cr: dict) -> list[dict]:
    s = cr["spec"]
    return [s["aggregationWorker"], *s["trainingWorkers"]] if "aggregationWorker" in s else \
        [s["cloudWorker"], s["edgeWorker"]]


def _cr(kind: str, i: int) -> dict:
    sample = "federatedlearningjob_v1alpha2.yaml" if kind == "fl" else "jointinferenceservice_v1alpha1.yaml"
    cr = yaml.safe_load((SAMPLES / sample).read_text())
    cr["metadata"] = {"name": f"{PREFIX}{kind}-{i}", "namespace": NS}
    for w in _workers(cr):
        meta = w["template"].setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **LONG}
        if str(w["template"]["spec"].get("nodeName", "")).startswith("$"):
            w["template"]["spec"]["nodeName"] = "edge-node"
    return cr


def setup(api, n_fl: int, n_ji: int) -> None:
    from operators.sedna.kube import DATASETS, FL_JOBS, JI_SERVICES, MODELS, Kube

    kube = Kube(api)
    for name in SOURCES["Model"]:
        kube.create(MODELS, NS, {"apiVersion": "sedna.io/v1alpha1", "kind": "Model", "metadata": {"name": name},
                                 "spec": {"url": f"/models/{name}/model.ckpt", "format": "ckpt"}})
    for name in SOURCES["Dataset"]:
        kube.create(DATASETS, NS, {"apiVersion": "sedna.io/v1alpha1", "kind": "Dataset", "metadata": {"name": name},
                                   "spec": {"url": f"/data/{name}/train.txt", "format": "txt",
                                            "nodeName": "edge-node"}})
    for i in range(n_fl):
        kube.create(FL_JOBS, NS, _cr("fl", i))
    for i in range(n_ji):
        kube.create(JI_SERVICES, NS, _cr("ji", i))


def disturb(api, rng: random.Random, n_fl: int, n_ji: int, step: int) -> str:
    """One edit (a worker's env changes: every child of that worker must be replaced) or one child deleted;
    the request may meet an injected fault, which is the soak's point: returns what was tried."""
    from operators.sedna.kube import DEPLOYMENTS, FL_JOBS, JI_SERVICES, PODS, Kube

    kube = Kube(api)
    kind, n = ("fl", n_fl) if rng.random() < n_fl / max(1, n_fl + n_ji) else ("ji", n_ji)
    name = f"{PREFIX}{kind}-{rng.randrange(max(1, n))}"
    res = FL_JOBS if kind == "fl" else JI_SERVICES
    try:
        if rng.random() < 0.5:
            cr = kube.get(res, NS, name)
            body = copy.deepcopy(cr)
            w = rng.choice(_workers(body))
            env = [e for e in w["template"]["spec"]["containers"][0].get("env") or [] if e["name"] != "SOAK_EDIT"]
            w["template"]["spec"]["containers"][0]["env"] = [*env, {"name": "SOAK_EDIT", "value": str(step)}]
            kube.replace(res, NS, name, body)
            return "edit"
        sel = f"{'federatedlearningjob' if kind == 'fl' else 'jointinferenceservice'}.sedna.io/name={name}"
        children = kube.list(PODS if kind == "fl" else DEPLOYMENTS, NS, sel)
        if children:
            kube.delete(PODS if kind == "fl" else DEPLOYMENTS, NS, rng.choice(children)["metadata"]["name"])
        return "delete"
    except Exception as e:  # an injected fault (or a conflict with the reconciler): tried, not done
        return f"failed: {type(e).__name__}"


def observe(api) -> list[SednaObs]:
    """Each soak CR: child name -> wanted spec hash (operators.sedna's desired state) and found one."""
    from operators.k8s import Kube
    from operators.sedna.desired import DEFAULT_LC_SERVER, SPEC_HASH_LABEL
    from operators.sedna.reconcile import _Pass

    out = []
    for kind in ("FederatedLearningJob", "JointInferenceService"):
        p = _Pass(Kube(api), kind, DEFAULT_LC_SERVER)
        crs = [c for c in p._list_crs(NS) if c["metadata"]["name"].startswith(PREFIX)]
        sources = p._sources(NS, crs)
        children = [o for objs in p._list_children(NS).values() for o in objs
                    if not o["metadata"].get("deletionTimestamp")]
        for cr in crs:
            if p.spec.finished(cr):
                continue
            desired = p.spec.desired(cr, sources[NS], DEFAULT_LC_SERVER)
            uid = cr["metadata"]["uid"]
            have = {o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(SPEC_HASH_LABEL, "")
                    for o in children if (o["metadata"].get("labels") or {}).get(p.spec.uid_label) == uid}
            out.append(SednaObs(kind, cr["metadata"]["name"], {c.name: c.spec_hash for c in desired.children}, have))
    return out


def converged(obs: list[SednaObs]) -> bool:
    return all(s.want and all(s.have.get(c) == h for c, h in s.want.items()) for s in obs)


def wait_converged(api, timeout: float) -> tuple[list[SednaObs], float | None]:
    """Poll until every soak CR has exactly its wanted children (or time is up): (last observation, seconds)."""
    t0 = time.monotonic()
    while True:
        obs = observe(api)
        if converged(obs):
            return obs, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            return obs, None
        time.sleep(2)
