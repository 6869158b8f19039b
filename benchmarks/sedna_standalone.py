"""Sedna reconcile latency under ``airflow standalone``: a training pod deleted by hand -> its replacement exists
(triggerer -> asset event -> scheduler -> worker -> reconcile), nothing triggered by hand. Part of the
``sedna`` benchmark section (``SEDNA_BENCH_STANDALONE=0`` skips it)."""

from __future__ import annotations

import time

from benchmarks.sedna import NS, REPO, _sample


def standalone_latency(samples: int = 12) -> list[float]:
    """Seconds from a training pod's deletion to its replacement existing, under ``airflow standalone``
    (triggerer -> asset event -> scheduler -> worker -> reconcile), nothing triggered by hand."""
    import httpx

    from devstack.stack import Stack
    from operators.sedna.install import install_crds
    from operators.sedna.kube import DATASETS, FL_JOBS, MODELS, PODS, Kube

    stack = Stack(REPO / ".airflow" / "bench-sedna", dags_dirs=[REPO / "dags"]).start()
    try:
        api = stack.k8s()
        kube = Kube(api)
        install_crds(kube)
        kube.create(MODELS, NS, {"apiVersion": "sedna.io/v1alpha1", "kind": "Model",
                                 "metadata": {"name": "surface-defect-detection-model"},
                                 "spec": {"url": "/models/sdd/model.ckpt", "format": "ckpt"}})
        for d in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
            kube.create(DATASETS, NS, {"apiVersion": "sedna.io/v1alpha1", "kind": "Dataset", "metadata": {"name": d},
                                       "spec": {"url": f"/data/{d}/train.txt", "format": "txt", "nodeName": "x"}})
        stack.unpause("reconcile_federated_learning")

        def until(pred, timeout, what):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if value := pred():
                    return value
                time.sleep(0.05)
            raise TimeoutError(what)

        until(lambda: httpx.get(f"{stack.kubesim_url}/kubesim/stats").json()["by_resource"].get(
            "watch federatedlearningjobs.sedna.io"), 120, "trigger watching")
        job = _sample("federatedlearningjob_v1alpha2.yaml")
        job["metadata"] = {"name": "latency", "namespace": NS}
        kube.create(FL_JOBS, NS, job)

        def trainers():
            return {p["metadata"]["name"]: p["metadata"]["uid"]
                    for p in kube.list(PODS, NS, "federatedlearningjob.sedna.io/name=latency")
                    if "-train-" in p["metadata"]["name"]}

        until(lambda: len(trainers()) == 2, 90, "first pods")
        out = []
        for i in range(samples):
            name, uid = sorted(trainers().items())[i % 2]
            t0 = time.monotonic()
            kube.delete(PODS, NS, name)
            until(lambda n=name, u=uid: trainers().get(n, u) != u, 60, f"{name} back")
            out.append(time.monotonic() - t0)
        return out
    finally:
        stack.stop()
