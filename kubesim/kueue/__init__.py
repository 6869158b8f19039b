"""Kueue (kubernetes-sigs/kueue v0.19, API kueue.x-k8s.io/v1beta2) simulated in kubesim, rule by rule.

Kueue's own CRDs (`crds/`, Apache-2.0: `LICENSE`) are served as CRDs once installed - `install(store)`,
`KubeSim(kueue=True)`/`python -m kubesim --kueue`, or any client creating them, as `helm install` does - and
its controller-manager runs inside kubesim's: `webhook.Webhook` (suspend/gate defaulting),
`controller.KueueScheduler` (queues, flavors, quota, preemption: `cycle`, `flavors`, `quota`, `preemption`),
`jobs.JobReconciler` (one Workload per Job; start, stop, requeue, finish) and
`podsready.PodsReadyReconciler` (waitForPodsReady: a Workload whose pods are not all ready in time is evicted,
requeued after a backoff, deactivated after backoffLimitCount), `config` (its manager Configuration:
`manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`, `waitForPodsReady`) and
`statefulsets.StatefulSetReconciler` (a set's pods gated by `kueue.x-k8s.io/admission` until its Workload is
admitted; scaled to 0 its quota is released). Each module's docstring cites the Kueue source file it follows.

Not simulated: plain pod groups outside StatefulSets, admission checks, TopologyAwareScheduling, fair sharing, hierarchical Cohort objects with
their own quota, `borrowWithinCohort`, partial admission, waitForPodsReady's blockAdmission, MultiKueue, the visibility
API; flavors match pods by nodeSelector only (not node affinity).
"""
from __future__ import annotations

import glob
import os
from functools import lru_cache

import yaml

CRD_DIR = os.path.join(os.path.dirname(__file__), "crds")


@lru_cache(maxsize=1)
def _crds() -> tuple:
    out = []
    for path in sorted(glob.glob(os.path.join(CRD_DIR, "*.yaml"))):
        with open(path) as f:
            out.append(yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    return tuple(out)


def crd_manifests() -> list[dict]:
    """Kueue's CustomResourceDefinitions (fresh copies)."""
    import copy
    return [copy.deepcopy(c) for c in _crds()]


def install(store) -> None:
    """Create Kueue's namespace and CRDs in `store` (what `helm install kueue -n kueue-system
    --create-namespace` does first); existing ones are kept. Its manager Configuration (`config.py`) is the
    ConfigMap `kueue-system/kueue-manager-config` a client may write; none means Kueue's defaults."""
    from kubesim.apimachinery.errors import ApiError
    try:
        store.create(store.registry.lookup("", "v1", "namespaces"), None,
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    except ApiError as e:
        if e.code != 409:
            raise
    rt = store.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for crd in crd_manifests():
        try:
            store.create(rt, None, crd)
        except ApiError as e:
            if e.code != 409:
                raise


def admission(cluster) -> list:
    from kubesim.kueue.webhook import Webhook
    return [Webhook(cluster.store)]


def controllers(cluster) -> list:
    from kubesim.kueue.controller import KueueScheduler
    from kubesim.kueue.jobs import JobReconciler
    from kubesim.kueue.podsready import PodsReadyReconciler
    from kubesim.kueue.statefulsets import StatefulSetReconciler
    return [KueueScheduler(cluster), JobReconciler(cluster), PodsReadyReconciler(cluster), StatefulSetReconciler(cluster)]
