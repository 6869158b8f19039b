"""The soak's Sedna load and observation (devstack/soak_sedna.py) on kubesim, with the reconcile run directly
(the soak runs it through the platform DAGs): a reconciled CR is converged; an edit or a deleted child is seen
as stale / missing until the next reconcile, which converges it again."""
from __future__ import annotations

import random

from devstack import soak_sedna
from operators.k8s import Kube
from operators.sedna.install import install_crds
from operators.sedna.reconcile import reconcile_federated_learning, reconcile_joint_inference


def reconcile(api) -> None:
    reconcile_federated_learning(Kube(api), ["default"])
    reconcile_joint_inference(Kube(api), ["default"])


def test_observe_sees_missing_and_stale_children_until_reconciled(k8s):
    install_crds(Kube(k8s))
    soak_sedna.setup(k8s, n_fl=2, n_ji=1)
    assert not soak_sedna.converged(soak_sedna.observe(k8s))         # nothing made yet: all missing
    reconcile(k8s)
    obs = soak_sedna.observe(k8s)
    assert len(obs) == 3 and soak_sedna.converged(obs)
    rng = random.Random(3)
    done = [soak_sedna.disturb(k8s, rng, 2, 1, step) for step in range(6)]
    assert {"edit", "delete"} <= set(done)
    obs = soak_sedna.observe(k8s)
    broken = [s.name for s in obs if any(s.have.get(c) != h for c, h in s.want.items())]
    assert broken and not soak_sedna.converged(obs)
    reconcile(k8s)
    reconcile(k8s)                       # a replaced pod may need a pass after its old one is gone
    obs, seconds = soak_sedna.wait_converged(k8s, timeout=30)
    assert seconds is not None, [(s.name, s.want, s.have) for s in obs]
