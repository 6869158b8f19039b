"""Helpers for the Sedna tests: sample CRs (copied from kubeedge/sedna, Apache-2.0, samples/LICENSE),
Model/Dataset objects, env lookup, and polling a condition with a deadline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kubesim.testing import wait_until
from operators.sedna.kube import EVENTS, FL_JOBS, JI_SERVICES, PODS

SAMPLES = Path(__file__).parent / "samples"
NS = "default"
JOB = "surface-defect-detection"
JI = "helmet-detection-inference-example"
FL_SEL = "federatedlearningjob.sedna.io/name"
JI_SEL = "jointinferenceservice.sedna.io/name"



def new_fl(kube, name=JOB, **template_changes) -> dict:
    job = fl_sample()
    job["metadata"]["name"] = name
    for w in [job["spec"]["aggregationWorker"], *job["spec"]["trainingWorkers"]]:
        w["template"].update(template_changes)
    return kube.create(FL_JOBS, NS, job)


def new_ji(kube) -> dict:
    return kube.create(JI_SERVICES, NS, ji_sample())


def pods_of(kube, name=JOB) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kube.list(PODS, NS, f"{FL_SEL}={name}")
            if not p["metadata"].get("deletionTimestamp")}


def events_of(kube, name) -> list[dict]:
    return [e for e in kube.list(EVENTS, NS) if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") in ("FederatedLearningJob", "JointInferenceService")]



def load_sample(name: str) -> dict:
    return yaml.safe_load((SAMPLES / name).read_text())


def _with_meta(obj: dict, namespace: str, uid: str | None) -> dict:
    obj["metadata"]["namespace"] = namespace
    if uid is not None:
        obj["metadata"]["uid"] = uid
    return obj


def fl_sample(name: str = "federatedlearningjob_v1alpha2.yaml", namespace: str = "default",
              uid: str | None = None) -> dict:
    return _with_meta(load_sample(name), namespace, uid)


def ji_sample(name: str = "jointinferenceservice_v1alpha1.yaml", namespace: str = "default",
              uid: str | None = None) -> dict:
    obj = _with_meta(load_sample(name), namespace, uid)
    for worker in ("cloudWorker", "edgeWorker"):  # the helmet sample has shell placeholders
        spec = obj["spec"][worker]["template"]["spec"]
        if str(spec.get("nodeName", "")).startswith("$"):
            spec["nodeName"] = "edge-node"
    return obj


def model(name: str, url: str, namespace: str = "default") -> dict:
    return {"apiVersion": "sedna.io/v1alpha1", "kind": "Model",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"url": url, "format": "ckpt"}}


def dataset(name: str, url: str, namespace: str = "default") -> dict:
    return {"apiVersion": "sedna.io/v1alpha1", "kind": "Dataset",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"url": url, "format": "txt", "nodeName": "edge-node"}}


def env_of(obj: dict, container: int = 0) -> dict[str, str]:
    """The env of a pod (or pod template) container as a dict."""
    spec = obj["spec"]
    return {e["name"]: e.get("value") for e in spec["containers"][container].get("env") or []}


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout`` seconds."""
    return wait_until(predicate, timeout, interval, what)
