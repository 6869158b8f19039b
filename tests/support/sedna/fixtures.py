"""The Sedna tests' cluster fixture: kubesim (from the project's kubesim.testing plugin) with the Sedna CRDs
installed and the Models/Datasets the sample CRs name."""

from __future__ import annotations

import pytest

from operators.sedna.install import install_crds
from operators.sedna.kube import DATASETS, MODELS, Kube
from tests.support.sedna.sedna_helpers import NS, dataset, model


@pytest.fixture
def kube(k8s):
    kube = Kube(k8s)
    install_crds(kube)
    kube.create(MODELS, NS, model("surface-defect-detection-model", "/models/sdd/model.ckpt"))
    for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        kube.create(DATASETS, NS, dataset(n, f"/data/{n}/train.txt"))
    kube.create(MODELS, NS, model("helmet-detection-inference-little-model", "/data/little/little.pb"))
    kube.create(MODELS, NS, model("helmet-detection-inference-big-model", "/data/big/big.pb"))
    return kube
