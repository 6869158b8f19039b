"""The production-like profile of the local stack: PostgreSQL metadata DB, ``CeleryExecutor`` on a Redis broker,
and every Airflow component as its own process, several of some, as a Helm deployment runs them
(``deploy/helm/values.yaml``): two schedulers, one Celery worker, two triggerers, a dag-processor and the
api-server. The end-to-end tests marked ``prod`` and ``benchmarks/prod_profile.py`` run on it; ``make demo``
stays on ``airflow standalone`` (:class:`devstack.stack.Stack`, on a PostgreSQL of its own too).

PostgreSQL and Redis come from ``devstack.services`` (a fresh database and Redis db per stack, in the servers
named by ``SKIFF_TEST_PG_URL`` / ``SKIFF_TEST_REDIS_URL``, or private instances).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import time
from base64 import urlsafe_b64encode
from pathlib import Path

from devstack.services import Postgres, Redis
from devstack.stack import BIN, LOG_SERVER_SETTINGS, Stack, _spawn, _stop_all, _tail, free_port
from devstack.watchdog import ProcessWatchdog

SCHEDULERS = 2
TRIGGERERS = 2
WORKER_CONCURRENCY = 16


def prod_airflow_env(db_url: str, broker_url: str) -> dict[str, str]:
    """The settings that differ from standalone: metadata DB, executor, broker and shared secrets (every
    component must sign and accept the same JWTs, as the Helm chart's shared secrets do)."""
    sa_url = db_url.replace("postgresql://", "postgresql+psycopg2://", 1)
    return {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sa_url,
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + sa_url,
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(WORKER_CONCURRENCY),
        "AIRFLOW__CORE__FERNET_KEY": urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "AIRFLOW__API__WORKERS": "1",
        # several schedulers, triggerers and a worker on one host: each log server needs its own port
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }


class ProdStack(Stack):
    """kubesim + SMTP sink + PostgreSQL + Redis + Airflow's components as separate processes."""

    def __init__(self, workdir: Path, **kw):
        super().__init__(workdir, **kw)
        self.pg = Postgres(self.services_dir / "postgres")
        self.redis = Redis(self.services_dir / "redis")
        self.triggerer_jobs: dict[str, int] = {}  # process name -> its TriggererJob id in the metadata DB
        self.commands: dict[str, tuple[list[str], dict[str, str]]] = {}  # component -> its argv, its own settings

    def _start_airflow(self, logs: Path) -> None:
        self.pg.start()
        self.redis.start()
        self.env.update(prod_airflow_env(self.pg.url, self.redis.url))
        migrate = _spawn([str(BIN / "airflow"), "db", "migrate"], logs / "migrate.log", self.env)
        if migrate.wait(timeout=300) != 0:
            raise RuntimeError(f"airflow db migrate failed: {_tail(logs / 'migrate.log')}")
        airflow = str(BIN / "airflow")
        self._component("api-server", [airflow, "api-server", "--port", str(self.airflow_port)], logs)
        for i in range(1, SCHEDULERS + 1):
            self._component(f"scheduler-{i}", [airflow, "scheduler"], logs)
        self._component("dag-processor", [airflow, "dag-processor"], logs)
        self._component("worker", [airflow, "celery", "worker", "--concurrency", str(WORKER_CONCURRENCY)], logs)
        for i in range(1, TRIGGERERS + 1):  # one after the other, to know which Job row is which process
            self.start_triggerer(f"triggerer-{i}")
        # nothing restarts a component here (Kubernetes restarts the chart's pods): the watchdog does, loudly
        self.watchdog = ProcessWatchdog(self.procs, self._restart, logs, names=lambda: list(self.commands))
        self.watchdog.start()

    def _restart(self, name: str):
        """``name`` again, as it was started; a log server on a new port (the dead one's may still hold the old)."""
        argv, env = self.commands[name]
        ports = {k: str(free_port()) for k in LOG_SERVER_SETTINGS if k in env or k in self.env}
        self._component(name, argv, self.workdir / "logs", **{**env, **ports})
        return self.procs[name]

    def start_triggerer(self, name: str) -> int:
        """Start (or restart) the triggerer ``name``; returns its new TriggererJob id."""
        logs = self.workdir / "logs"
        self._component(name, [str(BIN / "airflow"), "triggerer"], logs,
                        AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()))
        self.triggerer_jobs[name] = self._wait_new_triggerer_job(name)
        return self.triggerer_jobs[name]

    def _component(self, name: str, argv: list[str], logs: Path, **env: str) -> None:
        self.commands[name] = (argv, env)
        self.procs[name] = _spawn(argv, logs / f"{name}.log", {**self.env, **env})

    def _wait_new_triggerer_job(self, name: str, timeout: float = 120) -> int:
        known = set(self.triggerer_jobs.values())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited: {_tail(self.workdir / 'logs' / f'{name}.log')}")
            new = [i for i in self.triggerer_job_ids() if i not in known]
            if new:
                return new[0]
            time.sleep(0.2)
        raise TimeoutError(f"{name} registered no TriggererJob within {timeout}s: {_tail(self.workdir / 'logs' / f'{name}.log')}")

    def query(self, sql: str, *args) -> list[tuple]:
        """Read the metadata DB (what a platform team does with ``psql``)."""
        import psycopg2

        with psycopg2.connect(self.pg.url) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        conn.close()
        return rows

    def triggerer_job_ids(self) -> list[int]:
        return [r[0] for r in self.query(
            "SELECT id FROM job WHERE job_type = 'TriggererJob' AND state = 'running' ORDER BY id")]

    def triggers_by_triggerer(self) -> dict[int | None, int]:
        """How many triggers each TriggererJob holds (``None``: not assigned to any)."""
        return dict(self.query("SELECT triggerer_id, count(*) FROM trigger GROUP BY triggerer_id"))

    def kill(self, name: str) -> None:
        """SIGKILL a component and everything it started (no clean shutdown: a crashed pod), on purpose: the
        watchdog leaves it dead (the caller starts it again, e.g. ``start_triggerer``)."""
        self.expect_exit(name)
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def expect_exit(self, name: str) -> None:
        """``name`` is about to be stopped on purpose: the watchdog does not restart it."""
        if self.watchdog is not None:
            self.watchdog.expect_exit(name)

    def _stop_airflow(self) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
        airflow = [p for n, p in self.procs.items() if n in self.commands]
        _stop_all(airflow, signal.SIGTERM, timeout=20)

    def stop(self) -> None:
        try:
            super().stop()  # the PostgreSQL too
        finally:
            self.redis.stop()
            shutil.rmtree(self.services_dir, ignore_errors=True)


def make_stack(profile: str, workdir: Path, **kw) -> Stack:
    """``standalone`` (airflow standalone: the demo) or ``prod`` (PostgreSQL + Celery + Redis)."""
    if profile == "standalone":
        return Stack(workdir, **kw)
    if profile == "prod":
        return ProdStack(workdir, **kw)
    raise ValueError(f"unknown stack profile {profile!r}: expected 'standalone' or 'prod'")
