"""The Airflow configuration Skiff's local stack and tests run with, as environment variables.

Everything is set by environment so that nothing outside the project-local ``AIRFLOW_HOME`` is touched and a
real deployment's ``airflow.cfg`` is never needed for the demo or the tests.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# SQLite has one writer at a time (Airflow already sets WAL, so readers never wait): a writer waits this long for
# the lock instead of pysqlite's 5 s. The dag-processor holds it for seconds at start-up; at 5 s the API server
# answered 500 "Database error" and the triggerer and scheduler crashed on "database is locked".
SQLITE_BUSY_TIMEOUT_S = 60
STACK_USERS = {"admin": "admin", "alice": "user", "bob": "user", "carol": "viewer"}  # user -> simple auth role


def kubernetes_connection_uri(kubeconfig: Path | str, namespace: str | None = None) -> str:
    """``kubernetes_default`` pointing at a kubeconfig file (what a user does for an out-of-cluster cluster)."""
    extra: dict = {"kube_config_path": str(kubeconfig)}
    if namespace:
        extra["namespace"] = namespace
    return json.dumps({"conn_type": "kubernetes", "extra": extra})


# Set for Airflow when kubesim's nodes are scripted (its default nodes: no process runs): the example DAGs then
# script their pods' outcomes with kubesim.io/* annotations (dags/training_recommendation_daily.py, last block).
SCRIPTED_NODES_ENV = {"SKIFF_KUBESIM_SCRIPTED_NODES": "1"}


def airflow_env(
    home: Path,
    *,
    dags_folder: Path | None = None,
    api_port: int | None = None,
    kubeconfig: Path | None = None,
    smtp_connection: str | None = None,
) -> dict[str, str]:
    """Environment variables for an Airflow whose state lives in ``home`` (SQLite, no examples)."""
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder or REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db?timeout={SQLITE_BUSY_TIMEOUT_S}",
        # New DAG files are picked up within seconds, not the default 5 minutes.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        # A DAG whose file was not re-parsed for 50 s is deactivated as "no longer present in file" (stale); on a
        # loaded 2-core machine dev_instance_create's file went 75 s unparsed and the DAG was deactivated for
        # half a minute (seen 2026-12-01: the page's New-instance button greyed out as "paused or not deployed").
        "AIRFLOW__DAG_PROCESSOR__STALE_DAG_THRESHOLD": "300",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "60",
        # A parse that waits out one SQLite lock (up to SQLITE_BUSY_TIMEOUT_S) must not be killed at the default
        # 50 s: a killed parse still counts as "parsed", and its DAGs, last parsed over 50 s before, are then
        # deactivated as stale (seen in the metrics e2e: POST dagRuns -> 404 "Dag not found" after a 60 s freeze)
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(2 * SQLITE_BUSY_TIMEOUT_S),
        # The scheduler reacts to asset events (Sedna reconcile) and deferred-task resumptions sooner than
        # its 1 s default; measured: pod deleted -> recreated p50 3.5 s -> 2.4 s (BENCHMARKS.md).
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
        # The demo's red runs at start-up ("reported failed by the executor while queued"): `airflow standalone`
        # starts every component at once and Skiff's platform DAGs are unpaused and due at once, so the scheduler
        # hands their first tasks to workers (a LocalExecutor of 32) while the api-server is not listening yet or,
        # once it is, while every worker's "task started" call waits on SQLite's single writer. The Task SDK
        # client gives that call 5 tries of 5 s each: "Connection refused" (the api-server listened 82 s after
        # the scheduler's first task on a busy 2-core machine, over 6 minutes when several test runs shared it),
        # then "ReadTimeout". A worker now waits as long as a SQLite writer may (SQLITE_BUSY_TIMEOUT_S) and tries
        # for about 8 minutes.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(SQLITE_BUSY_TIMEOUT_S),
        "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "20",
        "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX": "30",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # a task's stored keys (the training Job's id) are deleted in the transaction that stores SUCCESS: a retry
        # that still finds its Job id knows the success was never stored (operators/training/operator.py)
        "AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS": "True",
        # The platform file Skiff enforces and platform_sync applies: the packaged example.
        "AIRFLOW__SKIFF__PLATFORM_FILE": str(REPO / "operators" / "platform" / "example.yaml"),
        # Simple auth manager users: the admin plus the demo team's members and a read-only viewer, so the UI and
        # the per-user features (instances, passwords) are exercised by people who are not admins.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in STACK_USERS.items()),
        # Skiff's e-mails link to the task log in the UI.
        "AIRFLOW__SKIFF__UI_BASE_URL": f"http://localhost:{api_port or 8080}",
    }
    if api_port:
        env["AIRFLOW__API__HOST"] = "127.0.0.1"  # a laptop's demo is not served to its network (default 0.0.0.0)
        env["AIRFLOW__API__PORT"] = str(api_port)
        env["AIRFLOW__API__BASE_URL"] = f"http://localhost:{api_port}"
        env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://localhost:{api_port}/execution/"
    if kubeconfig:
        env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = kubernetes_connection_uri(kubeconfig)
    if smtp_connection:
        env["AIRFLOW_CONN_SMTP_DEFAULT"] = smtp_connection
    return env
