"""A real Airflow api-server (``airflow api-server``, one worker) under a sub-path base URL, on kubesim.

The page's API tests talk to it over HTTP with tokens from ``POST /auth/token``, so Airflow's own
authentication and authorization answer every request, exactly as in production. ``[api] base_url`` is
``http://localhost:<port>/airflow/``: the plugin must work under a sub-path. No scheduler runs: a lifecycle
action is checked by the DAG run Airflow created (who triggered it, with which conf), not by its outcome; the
browser test on ``airflow standalone`` sees outcomes.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from devstack.airflow_env import REPO, SCRIPTED_NODES_ENV, airflow_env
from devstack.browser import chromium
from devstack.browser import missing as missing_browser
from devstack.stack import BIN, _spawn, _tail, free_port
from kubesim.testing import sync_api_client, wait_until
from operators.k8s import Kube
from tests.support.ui.ui_support import ARTIFACTS, SUB_PATH, TPU


@pytest.fixture
def browser(tmp_path):
    """Headless Debian chromium through selenium, always with /usr/bin/chromedriver (never a download)."""
    if missing_browser():
        pytest.fail(f"{', '.join(missing_browser())} missing: run `make browser` "
                    "(apt-get install chromium chromium-driver fonts-noto-cjk)")
    driver = chromium(tmp_path)
    try:
        yield driver
    finally:
        driver.quit()


def seed_teams(api, platform_file: Path | None = None) -> None:
    """The platform file (default: the example) applied to the cluster (teams, quotas, home PVCs, shared volumes)."""
    from operators.platform import example_path, load_platform
    from operators.teams import ensure_queues

    report = ensure_queues(Kube(api), load_platform(platform_file or example_path()))
    assert not report.errors, report.errors


class ApiServer:
    def __init__(self, url: str, home: Path, k8s, env: dict[str, str], log: Path | None = None):
        self.url, self.home, self.k8s, self.env, self.log = url, home, k8s, env, log
        self.http = httpx.Client(timeout=30)

    def password(self, user: str) -> str:
        import json

        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[user]

    def token(self, user: str) -> str:
        r = self.http.post(f"{self.url}/auth/token", json={"username": user, "password": self.password(user)})
        r.raise_for_status()
        return r.json()["access_token"]

    def airflow(self, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess:
        """An ``airflow`` CLI command on this server's metadata DB (e.g. ``dags test``: a real run, in-process)."""
        return subprocess.run([str(BIN / "airflow"), *argv], env=self.env, cwd=REPO, capture_output=True,
                              text=True, timeout=timeout)

    def client(self, user: str | None) -> httpx.Client:
        """An HTTP client for ``user``'s bearer token (``None``: anonymous), rooted at the plugin."""
        headers = {"Authorization": f"Bearer {self.token(user)}"} if user else {}
        return httpx.Client(base_url=f"{self.url}/skiff", headers=headers, timeout=30)


@pytest.fixture(scope="module")
def api_server(kubesim_server, tmp_path_factory):
    with serve(kubesim_server, tmp_path_factory.mktemp("ui-api")) as server:
        yield server


@pytest.fixture(scope="module")
def tpu_server(kubesim_server, tmp_path_factory):
    """The api-server and kubesim with the example platform file naming ``example.com/tpu`` as its GPU resource."""
    workdir = tmp_path_factory.mktemp("ui-tpu")
    example = (REPO / "operators" / "platform" / "example.yaml").read_text()
    assert "resource: nvidia.com/gpu" in example
    platform_file = workdir / "platform.yaml"
    platform_file.write_text(example.replace("resource: nvidia.com/gpu", f"resource: {TPU}"))
    with serve(kubesim_server, workdir, platform_file) as server:
        yield server


@contextmanager
def serve(kubesim_server, workdir: Path, platform_file: Path | None = None):
    """kubesim reset and seeded from ``platform_file`` (default: the example), and an api-server enforcing it, on
    a PostgreSQL of its own."""
    import secrets

    from devstack.services import Postgres

    kubesim_server.reset()
    kubeconfig = kubesim_server.write_kubeconfig(workdir / "kubeconfig")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(airflow_env(workdir / "airflow", dags_folder=REPO / "dags", api_port=port, kubeconfig=kubeconfig))
    env.update(SCRIPTED_NODES_ENV)  # kubesim's default nodes: the example DAGs script their outcomes
    # a PostgreSQL of its own, as the stacks have (issue 29): on SQLite five concurrent creates through the page
    # froze this api-server (two "creating dag run", one answered, then no request finished for 30 s and more)
    with ExitStack() as cleanup:  # the database goes whatever fails below
        pg = Postgres(REPO / ".airflow" / "services" / f"ui-{secrets.token_hex(4)}" / "postgres").start()
        cleanup.callback(pg.stop)
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = pg.sqlalchemy_url
        env["AIRFLOW__API__BASE_URL"] = f"http://localhost:{port}{SUB_PATH}/"
        env["AIRFLOW__API__WORKERS"] = "1"
        if platform_file is not None:
            env["AIRFLOW__SKIFF__PLATFORM_FILE"] = str(platform_file)
        for argv in (["db", "migrate"], ["dags", "reserialize"]):
            done = subprocess.run([str(BIN / "airflow"), *argv], env=env, cwd=REPO, capture_output=True, text=True)
            assert done.returncode == 0, f"airflow {' '.join(argv)}: {done.stderr[-2000:]}"
        log = ARTIFACTS / "api-server.log"  # kept after the run, for reading a failure
        log.unlink(missing_ok=True)
        proc = _spawn([str(BIN / "airflow"), "api-server", "--port", str(port), "--workers", "1"], log, env)
        url = f"http://localhost:{port}{SUB_PATH}"
        try:
            def healthy() -> bool:
                assert proc.poll() is None, f"api-server exited: {_tail(log)}"
                try:
                    return httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(healthy, timeout=600, interval=0.5, what="airflow api-server healthy")  # 90 s was short on a shared machine
            api = sync_api_client(kubesim_server.url)
            seed_teams(api, platform_file)
            yield ApiServer(url, workdir / "airflow", api, env, log)
            api.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


from tests.support.training.kueue_support import kueue_teams  # noqa: E402, F401 - the two-team Kueue fixture
