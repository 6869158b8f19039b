"""``make soak``: Skiff under sustained faults on the production profile, then an audit of its invariants.

``python -m devstack.soak [--minutes 10] [--seed 1] [--faults 0.2] [--runs N] [--kill-every 60]``: starts
kubesim + the production profile (``devstack.prod``: PostgreSQL, Celery worker, two schedulers, two triggerers
as separate processes) with the example platform file, turns kubesim's rate-based faults on (``--faults`` of
the requests fail 500/503/429/reset/slow, resumed watches get 410 Gone, watches are cut every 30 s), triggers
``soak_training`` runs (``devstack/soak_dags``: 25 training tasks each, mixed outcomes) spread over the time
and SIGKILLs the Celery worker or a triggerer every ``--kill-every`` s, restarting it at once, while
``--fl`` FederatedLearningJobs and ``--ji`` JointInferenceServices are edited and lose children once a second
(``devstack.soak_sedna``) and alice creates / stops / deletes development instances every 20 s
(``devstack.soak_devinstances``). Then faults stop, the Sedna CRs are let converge (timed), the runs are let finish (bounded), and ``devstack.soak_audit`` checks what kubesim and Airflow's REST
API show. The table goes to stdout and ``.artifacts/soak.md``; exit 1 if any invariant fails.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devstack import soak_devinstances, soak_sedna
from devstack.airflow_env import REPO
from devstack.soak_audit import Observed, TaskObs, audit, table

DAG_ID = "soak_training"
TASKS_PER_RUN = 25
ARTIFACT = REPO / ".artifacts" / "soak.md"
SETTINGS = {  # a SIGKILLed worker's tasks are noticed in seconds, not the defaults' minutes
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "90",
}


@dataclass
class SoakConfig:
    minutes: float = 10.0
    seed: int = 1
    faults: float = 0.2
    runs: int = 5                    # soak_training runs (25 tasks each)
    kill_every: float = 60.0
    fl_jobs: int = 50                # FederatedLearningJobs and JointInferenceServices edited / disturbed
    ji_services: int = 20
    dev_every: float = 20.0          # seconds between development-instance actions (0: none)
    settle_minutes: float = 10.0     # after the faults stop, how long the runs may take to finish
    workdir: Path | None = None


@dataclass
class SoakResult:
    config: SoakConfig
    run_ids: list[str] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)
    sedna_actions: list[str] = field(default_factory=list)
    dev_actions: list[str] = field(default_factory=list)
    dev_runs: list[tuple[str, str]] = field(default_factory=list)   # (dag id, run id) of dev_instance_* runs
    injected: dict[str, int] = field(default_factory=dict)
    observed: Observed | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in audit(self.observed))

    def markdown(self) -> str:
        c = self.config
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.injected.items())) or "none"
        return (f"Seed {c.seed}; kubesim faults at {c.faults:.0%} of requests (500 / 503 / 429 + Retry-After /"
                f" connection reset / 1 s slow, drawn evenly; resumed watches 410 Gone at the same rate) and every"
                f" watch cut every 30 s; {c.minutes:g} min of faults on the production profile (PostgreSQL, Celery,"
                f" 2 schedulers, 2 triggerers), {len(self.run_ids)} `soak_training` runs ="
                f" {len(self.observed.tasks)} training tasks (ok / exit code 3 / OOMKilled / quota wait),"
                f" {len(self.kills)} SIGKILLs + restarts ({_tally(self.kills)}); {c.fl_jobs} FederatedLearningJobs and"
                f" {c.ji_services} JointInferenceServices disturbed {len(self.sedna_actions)} times"
                f" ({_tally(self.sedna_actions)}); {len(self.dev_actions)} development-instance actions"
                f" ({_tally(self.dev_actions)});"
                f" total {self.seconds / 60:.1f} min.\n\n"
                f"Faults injected: {faults}.\n\n" + table(audit(self.observed)))


def _tally(items: list[str]) -> str:
    counts: dict[str, int] = {}
    for i in items:
        counts[i] = counts.get(i, 0) + 1
    return ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) or "none"


def _post(url: str, body: dict | None, method: str = "POST") -> dict:
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def _kill_and_restart(stack, victim: str) -> None:
    stack.kill(victim)
    if victim == "worker":
        from devstack.prod import WORKER_CONCURRENCY
        from devstack.stack import BIN

        stack._component("worker", [str(BIN / "airflow"), "celery", "worker", "--concurrency",
                                    str(WORKER_CONCURRENCY)], stack.workdir / "logs")
    else:
        stack.start_triggerer(victim)


def _drive(stack, cfg: SoakConfig, result: SoakResult) -> None:
    """Trigger the runs spread over the time and kill a component every ``kill_every`` s, until time is up."""
    rng = random.Random(cfg.seed)
    start = time.monotonic()
    end = start + cfg.minutes * 60
    next_kill = start + cfg.kill_every
    next_dev = start
    victims = ["worker", "triggerer-1", "triggerer-2"]
    api = stack.k8s()
    while time.monotonic() < end:
        now = time.monotonic()
        due = min(cfg.runs, 1 + int((now - start) / (cfg.minutes * 60) * cfg.runs))
        while len(result.run_ids) < due:
            result.run_ids.append(stack.trigger(DAG_ID))
        if now >= next_kill:
            victim = rng.choice(victims)
            _kill_and_restart(stack, victim)
            result.kills.append(victim)
            next_kill = time.monotonic() + cfg.kill_every
        if cfg.dev_every and now >= next_dev:
            result.dev_actions.append(soak_devinstances.step(stack, rng, result.dev_runs))
            next_dev = now + cfg.dev_every
        if cfg.fl_jobs + cfg.ji_services:
            result.sedna_actions.append(soak_sedna.disturb(api, rng, cfg.fl_jobs, cfg.ji_services,
                                                           len(result.sedna_actions)))
        time.sleep(1)


def _settle(stack, runs: list[tuple[str, str]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(stack.run_state(dag, r) in ("success", "failed") for dag, r in runs):
            return
        time.sleep(5)


def _items(api_client, path: str) -> list[dict]:
    resp = api_client.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False,
                               _return_http_data_only=True)
    return json.loads(resp.data)["items"]


SECRET_KEY_WORDS = ("password", "token", "secret", "key")


def _secret_values(secrets: list[dict]) -> list[str]:
    """The sensitive values the cluster's Secrets hold: values of password/token/key entries and the
    password / auth of each registry in a pull secret (not, say, a user name or an endpoint, which may be
    shown)."""
    values = []
    for s in secrets:
        for k, v in (s.get("data") or {}).items():
            text = base64.b64decode(v).decode(errors="replace")
            if k == ".dockerconfigjson":
                auths = (json.loads(text) or {}).get("auths") or {}
                values += [a[f] for a in auths.values() for f in ("password", "auth") if a.get(f)]
            elif any(w in k.lower() for w in SECRET_KEY_WORDS) and len(text) >= 8:
                values.append(text)
    return values


def _log(stack, run_id: str, task_id: str, try_number: int) -> str:
    try:
        return stack.task_log(DAG_ID, run_id, task_id, try_number)
    except RuntimeError as e:  # a try whose worker was killed before it wrote a log: nothing to leak
        return str(e)


def observe(stack, run_ids: list[str], pvcs_before: set[str]) -> Observed:
    """The thin shell: read kubesim (admin) and Airflow's REST API into an ``Observed`` for the auditor."""
    from devstack.soak_dags.soak_training import EXPECTED

    obs = Observed(pvcs_before=pvcs_before)
    texts = obs.texts
    for run_id in run_ids:
        for ti in stack.task_instances(DAG_ID, run_id):
            kind = ti["task_id"].split("_")[0]
            obs.tasks.append(TaskObs(DAG_ID, run_id, ti["task_id"], ti["state"], ti["try_number"], EXPECTED[kind],
                                     ti.get("map_index", -1)))
            for t in range(1, (ti["try_number"] or 0) + 1):
                texts[f"log {run_id}/{ti['task_id']}/{t}"] = _log(stack, run_id, ti["task_id"], t)
            xcoms = stack.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{ti['task_id']}"
                                     "/xcomEntries", ok=(200, 404))
            texts[f"xcom {run_id}/{ti['task_id']}"] = json.dumps(xcoms)
    api = stack.k8s()
    obs.jobs = [j for j in _items(api, "/apis/batch/v1/jobs")
                if (j["metadata"].get("annotations") or {}).get("skiff.io/dag-id") == DAG_ID]
    for ev in _items(api, "/api/v1/events"):
        texts[f"event {ev['metadata']['namespace']}/{ev['metadata']['name']}"] = json.dumps(ev)
    obs.passwords = _secret_values(_items(api, "/api/v1/secrets"))
    obs.pvcs_after = _pvcs(api)
    obs.tcp_services, obs.live_services = soak_devinstances.ports(api)
    return obs


def _pvcs(api) -> set[str]:
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in _items(api, "/api/v1/persistentvolumeclaims")}


def run_soak(cfg: SoakConfig) -> SoakResult:
    from devstack.demo_setup import setup_demo
    from devstack.prod import ProdStack

    t0 = time.monotonic()
    result = SoakResult(cfg)
    if cfg.workdir is None:
        (REPO / ".airflow").mkdir(exist_ok=True)  # a fresh clone has none yet
    workdir = cfg.workdir or Path(tempfile.mkdtemp(prefix="soak-", dir=REPO / ".airflow"))
    stack = ProdStack(workdir, dags_dirs=[REPO / "dags", REPO / "devstack" / "soak_dags"], rbac=True,
                      airflow_settings=SETTINGS)
    stack.start(timeout=300)
    try:
        setup_demo(stack)
        soak_sedna.setup(stack.k8s(), cfg.fl_jobs, cfg.ji_services)
        stack.unpause(DAG_ID)
        pvcs_before = _pvcs(stack.k8s())
        _post(f"{stack.kubesim_url}/kubesim/chaos", {"rate": cfg.faults, "seed": cfg.seed, "cut_every": 30})
        try:
            _drive(stack, cfg, result)
        finally:
            result.injected = _post(f"{stack.kubesim_url}/kubesim/chaos", None, "GET").get("injected", {})
            _post(f"{stack.kubesim_url}/kubesim/chaos", None, "DELETE")
        # time to converge counts from the end of faults and disturbances
        sedna, converge = soak_sedna.wait_converged(stack.k8s(), cfg.settle_minutes * 60)
        _settle(stack, [(DAG_ID, r) for r in result.run_ids] + result.dev_runs, cfg.settle_minutes * 60)
        result.observed = observe(stack, result.run_ids, pvcs_before)
        result.observed.sedna, result.observed.converge_seconds = sedna, converge
    finally:
        stack.stop()
    result.seconds = time.monotonic() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devstack.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="how long faults and kills last (default 10)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", type=float, default=0.2, help="fraction of kubesim requests that fail (0.2)")
    p.add_argument("--runs", type=int, default=None, help="soak_training runs of 25 tasks (default: 1 per 2 min)")
    p.add_argument("--kill-every", type=float, default=60.0, help="seconds between SIGKILLs (60)")
    p.add_argument("--fl", type=int, default=50, help="FederatedLearningJobs (50)")
    p.add_argument("--ji", type=int, default=20, help="JointInferenceServices (20)")
    a = p.parse_args(argv)
    runs = a.runs if a.runs is not None else max(1, round(a.minutes / 2))
    result = run_soak(SoakConfig(a.minutes, a.seed, a.faults, runs, a.kill_every, a.fl, a.ji))
    text = "## Soak under faults\n\n" + result.markdown()
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(text)
    print(text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
