"""Skiff's local stack: kubesim (a simulated cluster), an SMTP sink and ``airflow standalone``, as processes.

``make demo`` and the end-to-end tests both use :class:`Stack`. Its metadata DB is a private PostgreSQL
(``devstack.services.Postgres``: a fresh database in ``SKIFF_TEST_PG_URL``'s server, else Debian's on a free
port) unless ``db="sqlite"`` (or ``SKIFF_STACK_DB=sqlite``): SQLite has one writer at a time, and under load a
writer held its lock for up to 183 s, every other request waited out the 60 s busy timeout together (a 500 after
60.8 s on the Trigger dialog's unpause) and the scheduler and triggerer exited on "database is locked" (issue 29).
``airflow standalone`` never restarts a component that exits: :class:`Watchdog` notices one and restarts it,
saying so on stderr and in ``logs/watchdog.log``. Every process runs in its own session so that a
Ctrl-C in the terminal reaches only the stack, which then stops each process cleanly (Airflow with SIGINT, as
``airflow standalone`` expects; it ignores SIGINT when a script starts it in the background unless the default
handler is restored before exec, which :func:`_spawn` does).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path

import httpx

from devstack.airflow_env import REPO, SCRIPTED_NODES_ENV, SQLITE_BUSY_TIMEOUT_S, airflow_env
from devstack.ports import free_port  # noqa: F401 - also devstack.stack.free_port, as the tests import it
from devstack.smtp import read_maildir, smtp_connection_uri
from devstack.watchdog import Watchdog
from kubesim.kubeconfig import write_private

BIN = Path(sys.executable).parent
PROCESS_READY_S = 180  # kubesim took 55 s to say "ready" on a 2-core machine shared by several test runs


def free_port_range(size: int, low: int = 20000, high: int = 32000) -> str:
    """``"a-b"``: ``size`` consecutive loopback ports that are free now, at a random place below Linux's ephemeral
    range. A test stack's development instances get their external ports there (``[skiff] devinstance_port_range``)
    so that a test serving an instance's URL on loopback does not meet another stack's (a second test session on
    the same machine has its own block; the default 20000-29999 would give both 20000)."""
    import random

    for _ in range(200):
        base = random.randrange(low, high - size)
        try:
            for port in range(base, base + size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return f"{base}-{base + size - 1}"
    raise RuntimeError(f"no {size} consecutive free ports in {low}-{high}")


# Airflow 3.3's log server (the scheduler's and the triggerer's serve-logs child) calls
# ``uvicorn.run(..., host="", port=port)`` (airflow/utils/serve_logs/core.py, ``serve_logs``): every interface, and
# no setting, variable or hook changes the host ([logging] has only the ports). Each stack therefore gives it free
# ports, and says where it listens; it answers only requests signed with the stack's JWT secret (log_server.py,
# ``JWTAuthStaticFiles``).
LOG_SERVER_SETTINGS = ("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT")


def log_server_warning(env: dict[str, str]) -> str:
    """The line a stack prints at start: its log servers' ports, on every interface, and why."""
    worker, trigger = (env[k] for k in LOG_SERVER_SETTINGS)
    return (f"[stack] warning: Airflow's log servers listen on every interface, not only loopback (ports {worker} "
            "and " f"{trigger}): Airflow 3.3 hard-codes host=\"\" in airflow/utils/serve_logs/core.py, no setting "
            "changes it; they serve task logs only to requests signed with this stack's JWT secret")


def _restore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")  # noqa: SIM115 (the child owns it)
    return subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
        start_new_session=True,
        preexec_fn=_restore_sigint,
    )


def _wait_for_line(proc: subprocess.Popen, log: Path, pattern: str, timeout: float) -> re.Match:
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists():
            m = rx.search(log.read_text(errors="replace"))
            if m:
                return m
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode}; see {log}:\n{_tail(log)}")
        time.sleep(0.05)
    raise TimeoutError(f"{proc.args[:3]} not ready within {timeout}s; see {log}:\n{_tail(log)}")


def _log_line(item) -> str:
    """One structured task-log event as text; an exception's type and message follow its event."""
    if not isinstance(item, dict):
        return str(item)
    line = str(item.get("event", item))
    for err in item.get("error_detail") or []:
        if isinstance(err, dict):
            line += f"\n{err.get('exc_type', '')}: {err.get('exc_value', '')}"
    return line


def _tail(log: Path, n: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-n:]) if log.exists() else "(no output)"


def _stop_all(procs: list[subprocess.Popen | None], sig: int, timeout: float = 30) -> None:
    """Signal every process, then wait for each (SIGKILL to its session after ``timeout``)."""
    live = [p for p in procs if p is not None and p.poll() is None]
    for proc in live:
        proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    for proc in live:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Stack:
    """kubesim + SMTP sink + ``airflow standalone`` under ``workdir`` (kept between runs, reset by ``fresh``)."""

    def __init__(self, workdir: Path, *, dags_dirs: list[Path] | None = None, nodes_file: Path | None = None,
                 fresh: bool = True, airflow_port: int | None = None, rbac: bool = False,
                 airflow_settings: dict[str, str] | None = None, kueue: bool = False,
                 platform_text: str | None = None, db: str | None = None, tls: bool = False,
                 people: list[str] | None = None, metrics: bool = False):
        self.workdir = workdir.resolve()
        # the metadata DB: "postgres" (default) or "sqlite" (selectable: SKIFF_STACK_DB=sqlite)
        self.db = db or os.environ.get("SKIFF_STACK_DB") or "postgres"
        if self.db not in ("postgres", "sqlite"):
            raise ValueError(f"db={self.db[:40]!r}: expected 'postgres' or 'sqlite'")
        self.services_dir = REPO / ".airflow" / "services" / f"{self.workdir.name}-{os.urandom(4).hex()}"
        self.pg = None  # devstack.services.Postgres when db == "postgres"
        # tls: kubesim serves HTTPS (kubectl sends a token only over TLS); people: a token and a kubeconfig each
        # (devstack/people.py), in ``kubeconfigs``
        self.tls = tls or bool(people)
        self.people = list(people or [])
        self.kubeconfigs: dict[str, Path] = {}
        # metrics: StatsD to the statsd bridge, Skiff's endpoint, a local Prometheus (devstack/monitoring.py)
        self.monitoring = None
        if metrics:
            from devstack.monitoring import Monitoring

            self.monitoring = Monitoring(self.workdir, free_port=free_port, spawn=_spawn, python=sys.executable)
        self.watchdog: Watchdog | None = None
        # kueue: kubesim simulates Kueue (``--kueue``) and the platform file says ``queueing: kueue``
        # (``platform_text``, else the example switched to it), written to the workdir and in force for Airflow
        self.kueue = kueue
        self.platform_text = platform_text
        self.platform_file: Path | None = None
        self.airflow_settings = airflow_settings or {}  # AIRFLOW__* overrides, e.g. for a benchmark
        self.dags_dirs = dags_dirs or [REPO / "dags"]
        self.nodes_file = nodes_file
        self.fresh = fresh
        self.airflow_port = airflow_port or free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.kubesim_url = ""
        self.kubeconfig = self.workdir / "kubeconfig"      # kubesim's admin (the harness: CRDs, teams)
        # rbac: kubesim enforces RBAC and Airflow's kubernetes_default is Skiff's ServiceAccount (devstack/rbac.py)
        self.rbac = rbac
        self.skiff_kubeconfig = self.workdir / "skiff.kubeconfig" if rbac else self.kubeconfig
        self.maildir = self.workdir / "mail"
        self.home = self.workdir / "airflow"
        self.env: dict[str, str] = {}
        self._tokens: dict[str, str] = {}
        self._http = httpx.Client(timeout=SQLITE_BUSY_TIMEOUT_S + 30)  # a write may wait that long for the lock

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self, timeout: float = 180) -> Stack:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        if self.fresh and self.workdir.exists():
            import shutil

            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        logs = self.workdir / "logs"
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        base_env["PATH"] = f"{BIN}{os.pathsep}{base_env.get('PATH', '')}"
        base_env["PYTHONUNBUFFERED"] = "1"

        argv = [sys.executable, "-m", "kubesim", "--port", str(free_port()), "--kubeconfig", str(self.kubeconfig)]
        if self.nodes_file:
            argv += ["--nodes", str(self.nodes_file)]
        if self.rbac:
            argv += ["--authz", "rbac"]
        if self.kueue:
            argv += ["--kueue"]
        if self.tls:
            argv += ["--tls"]
        tokens: dict[str, str] = {}
        if self.people:
            from devstack.people import token_file

            text, tokens = token_file(self.people)
            write_private(self.workdir / "tokens.csv", text)     # every person's bearer token
            argv += ["--token-auth-file", str(self.workdir / "tokens.csv")]
        self._write_platform_file()
        self.procs["kubesim"] = _spawn(argv, logs / "kubesim.log", base_env)
        if self.monitoring is not None:
            self.procs["statsd-bridge"] = self.monitoring.start_bridge(logs)

        smtp_port = free_port()
        self.procs["smtp"] = _spawn(
            [sys.executable, "-m", "devstack.smtp", "--port", str(smtp_port), "--maildir", str(self.maildir)],
            logs / "smtp.log", base_env,
        )
        self.kubesim_url = _wait_for_line(
            self.procs["kubesim"], logs / "kubesim.log", r"kubesim ready (\S+)", PROCESS_READY_S).group(1)
        _wait_for_line(self.procs["smtp"], logs / "smtp.log", r"smtp ready", PROCESS_READY_S)
        if tokens:
            from devstack.people import write_kubeconfigs

            self.kubeconfigs = write_kubeconfigs(self.kubeconfig, tokens, self.workdir)
        if self.rbac:
            from devstack.rbac import install_skiff_rbac

            install_skiff_rbac(self.kubeconfig, self.skiff_kubeconfig, platform_file=self.platform_file)
        self._install_cluster_prerequisites()

        dags = self.workdir / "dags"
        dags.mkdir(exist_ok=True)
        for d in self.dags_dirs:  # one dags folder that holds every requested directory
            link = dags / d.name
            if not link.exists():
                link.symlink_to(d.resolve(), target_is_directory=True)
        self.env = {
            **base_env,
            **airflow_env(self.home, dags_folder=dags, api_port=self.airflow_port, kubeconfig=self.skiff_kubeconfig,
                          smtp_connection=smtp_connection_uri(smtp_port)),
            **({"AIRFLOW__SKIFF__PLATFORM_FILE": str(self.platform_file)} if self.platform_file else {}),
            **(self.monitoring.settings() if self.monitoring is not None else {}),
            # the example DAGs script their pods' outcomes only for kubesim's scripted nodes; on process nodes
            # (the demo's) their steps really run (dags/training_recommendation_daily.py, last block)
            **(SCRIPTED_NODES_ENV if self.scripted_nodes() else {}),
            **self.airflow_settings,
        }
        self._start_airflow(logs)
        self._wait_healthy(timeout)
        if self.monitoring is not None:
            self.procs["prometheus"] = self.monitoring.start_prometheus(f"localhost:{self.airflow_port}", logs,
                                                                        kubeconfig=self.kubeconfig)

    def scripted_nodes(self) -> bool:
        """Whether any of kubesim's nodes is scripted (no ``runtime: process``): the default nodes are. The nodes
        file is read into Node manifests, where a process node is marked by an annotation (it has no ``runtime``
        key: reading one said "scripted" for the demo's nodes, and the demo's pipeline printed scripted lines)."""
        if not self.nodes_file:
            return True
        from kubesim.kubelet.nodes import load_nodes_file
        from kubesim.kubelet.procrt.pods import is_process_node

        return not all(is_process_node(node) for node in load_nodes_file(str(self.nodes_file)))

    def _write_platform_file(self) -> None:
        """The platform file in force when it is not the packaged example (``airflow_env``'s default): the given
        text, or with ``kueue`` the example switched to ``queueing: kueue`` (each team's nominal quota then
        defaults to its ResourceQuota's, docs/operations.md)."""
        text = self.platform_text
        if text is None and self.kueue:
            from devstack.demo_setup import kueue_example_text

            text = kueue_example_text()
        if text is not None:
            self.platform_file = self.workdir / "platform.yaml"
            self.platform_file.write_text(text)

    def _install_cluster_prerequisites(self) -> None:
        """What a platform team installs before Airflow (docs/operations.md "Install"): Sedna's CRDs. Skiff's
        platform DAGs start unpaused, so their watch triggers start with Airflow and find the CRDs served."""
        from operators.k8s import Kube
        from operators.sedna.install import install_crds

        install_crds(Kube(self.k8s()))
        if self.platform_file and not self.rbac:  # under RBAC install_skiff_rbac applied them
            from operators.platform import load_platform
            from operators.rbac import apply_manifests, platform_team_manifests

            # the cluster admin's step for the file's teams: namespaces and, with queueing: kueue, Kueue's
            # flavors, priority classes and ClusterQueues
            apply_manifests(Kube(self.k8s()), platform_team_manifests(load_platform(self.platform_file)))

    def _start_airflow(self, logs: Path) -> None:
        """``airflow standalone``: every component in one process tree, on the stack's PostgreSQL (or SQLite),
        watched by :class:`Watchdog` (the production profile, ``devstack.prod.ProdStack``, starts each component
        on its own instead). Each log server gets a free port: the defaults 8793/8794 would make a second stack
        on the machine fail to bind."""
        if self.db == "postgres":
            from devstack.services import Postgres

            self.pg = Postgres(self.services_dir / "postgres").start()
            self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = self.pg.sqlalchemy_url
        for setting in LOG_SERVER_SETTINGS:
            self.env.setdefault(setting, str(free_port()))
        self._warn(log_server_warning(self.env))
        self.procs["airflow"] = _spawn([str(BIN / "airflow"), "standalone"], logs / "airflow.log", self.env)
        self.watchdog = Watchdog(self.procs["airflow"], self.env, logs, spawn=_spawn,
                                 airflow=str(BIN / "airflow"), free_port=free_port)

    def _warn(self, line: str) -> None:
        """On stderr (the demo's terminal) and in ``logs/stack.log``; a reader gone never stops the stack."""
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "logs" / "stack.log", "a") as f:
            f.write(line + "\n")
        try:
            print(line, file=sys.stderr, flush=True)
        except OSError:
            pass

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                health = self._http.get(f"{self.airflow_url}/api/v2/monitor/health").json()
                parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
                if all((health.get(p) or {}).get("status") == "healthy" for p in parts):
                    if self.watchdog is not None:  # healthy: every component runs (the api-server answered)
                        from devstack.watchdog import COMPONENTS

                        self.watchdog.start(COMPONENTS)
                    return
                last = json.dumps(health)
            except (httpx.HTTPError, ValueError) as e:
                last = repr(e)
            time.sleep(0.5)
        raise TimeoutError(f"airflow not healthy within {timeout}s: {last}")

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {_tail(self.workdir / 'logs' / f'{name}.log')}")

    def _stop_airflow(self) -> None:
        """SIGINT: ``airflow standalone`` shuts its components down; components the watchdog restarted get
        SIGTERM, as the Helm chart's pods do."""
        restarted = self.watchdog.stop() if self.watchdog is not None else []
        _stop_all([self.procs.get("airflow")], signal.SIGINT)
        _stop_all(restarted, signal.SIGTERM)
        for proc in restarted:  # what a restarted component started (its log server, its workers)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Stop Airflow first, then the sink and kubesim, then the metadata DB."""
        try:
            self._stop_airflow()
            _stop_all([self.procs.get(n) for n in ("smtp", "kubesim", "statsd-bridge", "prometheus")],
                      signal.SIGTERM)
            for proc in self.procs.values():  # anything a component left behind in its session
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            self.procs.clear()
            self._http.close()
        finally:
            if self.pg is not None:
                self.pg.stop()
                import shutil

                shutil.rmtree(self.services_dir, ignore_errors=True)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- Airflow REST API ------------------------------------------------------------------------------------
    @property
    def airflow_url(self) -> str:
        return f"http://localhost:{self.airflow_port}"

    @property
    def admin_password(self) -> str:
        return self.password("admin")

    def password(self, user: str) -> str:
        """A simple-auth-manager user's generated password (users: ``airflow_env``)."""
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]

    def _auth(self, user: str = "admin") -> dict[str, str]:
        if user not in self._tokens:
            r = self._http.post(f"{self.airflow_url}/auth/token",
                                json={"username": user, "password": self.password(user)})
            r.raise_for_status()
            self._tokens[user] = r.json()["access_token"]
        return {"Authorization": f"Bearer {self._tokens[user]}"}

    def api(self, method: str, path: str, json: dict | None = None, *, ok=(200, 201, 204), user: str = "admin"):
        """A REST API call as ``user`` (logged in with their password); a SQLite "Database error" is sent again
        (``operators.platform.pools.send_retrying_database_errors`` says when that happens and why it is safe)."""
        from operators.platform.pools import send_retrying_database_errors

        r = send_retrying_database_errors(
            lambda: self._http.request(method, f"{self.airflow_url}{path}", json=json, headers=self._auth(user)))
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
        return r.json() if r.content else {}

    def wait_dag(self, dag_id: str, timeout: float = 90) -> dict:
        """Wait until the dag-processor has parsed ``dag_id``; raise with its import errors if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self._http.get(f"{self.airflow_url}/api/v2/dags/{dag_id}", headers=self._auth())
            if r.status_code == 200:
                return r.json()
            time.sleep(0.5)
        errors = self.api("GET", "/api/v2/importErrors")
        raise TimeoutError(f"DAG {dag_id} not parsed within {timeout}s; import errors: {errors}")

    def unpause(self, dag_id: str) -> None:
        self.wait_dag(dag_id)
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: dict | None = None, *, user: str = "admin") -> str:
        """Trigger a run as ``user`` (its ``triggering_user_name``)."""
        self.unpause(dag_id)
        run = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}},
                       user=user)
        return run["dag_run_id"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(0.5)
        raise TimeoutError(f"{dag_id} run {run_id} still {state} after {timeout}s: {self.task_instances(dag_id, run_id)}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task log as text, one event a line (the API serves logs as JSON, 406 for text/plain)."""
        body = self.api(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}?full_content=true",
        )
        content = body.get("content")
        if isinstance(content, list):
            return "\n".join(_log_line(i) for i in content)
        return str(content)

    def mails(self) -> list[EmailMessage]:
        return read_maildir(self.maildir)

    def k8s(self):
        """A ``kubernetes`` ApiClient for the stack's kubesim."""
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig))
