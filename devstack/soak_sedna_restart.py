"""How long Sedna children deleted while the triggerer running the Sedna watch triggers is down take to come back.

``python -m devstack.soak_sedna_restart [--trials 3]``: the production profile (two triggerers) with the soak's
Sedna CRs (``devstack.soak_sedna``, 5 FederatedLearningJobs, 2 JointInferenceServices); once converged, each
trial SIGKILLs the triggerer that holds the Sedna asset triggers, deletes one child of each kind at once,
restarts that triggerer (as the soak does) and times how long until every CR has its wanted children again,
with no other change made and no faults. Prints one line per trial and the reconcile runs' types (asset-
triggered or the cron resync). Measures the soak's "Sedna time to converge" after a triggerer kill in
isolation, before and after a change to ``operators.sedna.trigger``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from devstack import soak_sedna
from devstack.airflow_env import REPO

SEDNA_TRIGGERS = ("SELECT DISTINCT t.triggerer_id FROM trigger t JOIN asset_watcher w ON w.trigger_id = t.id "
                  "WHERE t.classpath LIKE %s")


def _sedna_triggerer(stack) -> str:
    """The process name of the triggerer holding the Sedna triggers (waits until they are assigned)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ids = {r[0] for r in stack.query(SEDNA_TRIGGERS, "%SednaWatchTrigger")}
        names = [n for n, job in stack.triggerer_jobs.items() if job in ids]
        if names and None not in ids:
            return names[0]
        time.sleep(1)
    raise TimeoutError("the Sedna triggers were not assigned to a triggerer")


def _runs(stack) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in stack.query(
        "SELECT dag_id, run_type FROM dag_run WHERE dag_id LIKE %s ORDER BY id", "reconcile_%")]


def trial(stack, rng: random.Random) -> tuple[float | None, str, list[tuple[str, str]]]:
    from operators.sedna.kube import DEPLOYMENTS, PODS, Kube

    kube = Kube(stack.k8s())
    victim = _sedna_triggerer(stack)
    before = len(_runs(stack))
    stack.kill(victim)
    for res, sel in ((PODS, "federatedlearningjob.sedna.io/name=soak-fl-0"),
                     (DEPLOYMENTS, "jointinferenceservice.sedna.io/name=soak-ji-0")):
        kube.delete(res, soak_sedna.NS, rng.choice(kube.list(res, soak_sedna.NS, sel))["metadata"]["name"])
    t0 = time.monotonic()
    stack.start_triggerer(victim)
    _, converged = soak_sedna.wait_converged(stack.k8s(), 600)
    seconds = None if converged is None else time.monotonic() - t0  # from the deletions
    return seconds, victim, _runs(stack)[before:]


def main(argv: list[str] | None = None) -> int:
    from devstack.demo_setup import setup_demo
    from devstack.prod import ProdStack

    p = argparse.ArgumentParser(prog="python -m devstack.soak_sedna_restart", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    a = p.parse_args(argv)
    (REPO / ".airflow").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="sedna-restart-", dir=REPO / ".airflow"))
    stack = ProdStack(workdir, dags_dirs=[REPO / "dags"])
    stack.start(timeout=300)
    try:
        setup_demo(stack)
        soak_sedna.setup(stack.k8s(), 5, 2)
        _, first = soak_sedna.wait_converged(stack.k8s(), 600)
        print(f"initial convergence: {first if first is None else round(first)} s", flush=True)
        rng = random.Random(1)
        for i in range(a.trials):
            seconds, victim, runs = trial(stack, rng)
            took = "never" if seconds is None else f"{seconds:.0f} s"
            print(f"trial {i + 1}: killed {victim}, children back after {took}; reconcile runs meanwhile: {runs}",
                  flush=True)
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
