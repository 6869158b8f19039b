"""Metrics on for a local stack (``make demo``): Airflow's StatsD to the statsd bridge (``devstack.statsd_bridge``,
the chart's statsd-exporter's mappings), Skiff's endpoint behind a token, and Debian's Prometheus on loopback
loaded with the shipped ``deploy/monitoring/scrape.yaml`` (targets and token file pointed at this stack) and
``alerts.yaml``. docs/operations.md "Metrics and alerts" is the production form (Helm).

``airflow_settings`` and ``prometheus_config`` are pure; ``Monitoring`` starts and stops the two processes.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import yaml

from devstack.ports import free_udp_port
from kubesim.kubeconfig import write_private

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "deploy" / "monitoring"
PROMETHEUS = Path("/usr/bin/prometheus")
INTERVAL = "10s"  # the demo's scrape and rule interval: data within seconds of an event, not the shipped 30 s
# the demo's metrics travel by StatsD: the rules of every transport and StatsD's (alerts.yaml's header)
RULES = (SHIPPED / "alerts.yaml", SHIPPED / "alerts-statsd.yaml")
PAGES = ("alerts", "rules", "targets")   # the Prometheus pages the demo prints
READY_TIMEOUT_S = 120  # Prometheus' start (its TSDB, the rules) on a busy 2-core machine


def page_addresses(url: str, get) -> dict[str, str]:
    """Each of ``PAGES`` at the address that opens on this Prometheus (``get(address)`` -> HTTP status): the
    React UI's ``/<page>``, else the classic UI's ``/classic/<page>`` (Debian's 2.42 package serves only the
    classic UI: ``/alerts`` is a 404 there, issue 36). A page neither answers is left out."""
    out = {}
    for page in PAGES:
        for address in (f"{url}/{page}", f"{url}/classic/{page}"):
            try:
                if get(address) == 200:
                    out[page] = address
                    break
            except OSError:
                continue
    return out


def airflow_settings(statsd_port: int, token: str) -> dict[str, str]:
    """What deploy/monitoring/helm-values.yaml sets, for a stack: StatsD with InfluxDB tags, the endpoint token."""
    return {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd_port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
        "AIRFLOW__SKIFF__METRICS_TOKEN": token,
        "AIRFLOW__SKIFF__METRICS_CACHE_SECONDS": "5",
    }


def usage_jobs(shipped: dict, *, server: str, ca_file: Path, token_file: Path, nodes_file: Path) -> list[dict]:
    """The shipped usage jobs (``scrape-usage.yaml``: cAdvisor and dcgm-exporter through the API server's node
    proxy) pointed at this stack's kubesim: its address, CA and admin token. Debian's Prometheus (2.42+ds) is
    built without kubernetes_sd ("field kubernetes_sd_configs not found"), so the job's node discovery is a
    file_sd file (``node_targets``) with the labels kubernetes_sd's node role gives (__meta_kubernetes_node_name),
    and the shipped relabelling applies unchanged."""
    host = server.split("://", 1)[1].rstrip("/")
    jobs = []
    for job in yaml.safe_load(yaml.safe_dump(shipped))["scrape_configs"]:
        auth = {"tls_config": {"ca_file": str(ca_file)}, "authorization": {"credentials_file": str(token_file)}}
        job.update(auth, scrape_interval=INTERVAL)
        del job["kubernetes_sd_configs"]
        job["file_sd_configs"] = [{"files": [str(nodes_file)], "refresh_interval": "30s"}]
        for rule in job["relabel_configs"]:
            if rule.get("target_label") == "__address__":
                rule["replacement"] = host
        jobs.append(job)
    return jobs


def node_targets(server: str, nodes: list[str]) -> list[dict]:
    """file_sd targets, one per node, labelled as kubernetes_sd's node role labels them."""
    host = server.split("://", 1)[1].rstrip("/")
    return [{"targets": [host], "labels": {"__meta_kubernetes_node_name": n}} for n in sorted(nodes)]


def kube_credentials(kubeconfig: Path, work: Path) -> tuple[str, Path, Path]:
    """(server, CA file, token file) of a kubeconfig's current context, the CA and token written under ``work``."""
    import base64

    cfg = yaml.safe_load(kubeconfig.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    ca_file, token_file = work / "kube-ca.crt", work / "kube-token"
    ca_file.write_bytes(base64.b64decode(cluster.get("certificate-authority-data", "")))
    token_file.write_text(cfg["users"][0]["user"]["token"])
    token_file.chmod(0o600)
    return cluster["server"], ca_file, token_file


def usage_scrape(kubeconfig: Path, work: Path) -> tuple[list[dict], list[Path]]:
    """The shipped usage jobs and rules for the cluster of ``kubeconfig`` (its nodes listed now, into
    ``work/nodes.json``; its CA and token written under ``work``)."""
    import json

    from kubernetes.client import CoreV1Api
    from kubernetes.config import new_client_from_config

    server, ca_file, token_file = kube_credentials(kubeconfig, work)
    with new_client_from_config(config_file=str(kubeconfig)) as api:
        nodes = [n.metadata.name for n in CoreV1Api(api).list_node().items]
    (work / "nodes.json").write_text(json.dumps(node_targets(server, nodes)))
    jobs = usage_jobs(yaml.safe_load((SHIPPED / "scrape-usage.yaml").read_text()), server=server, ca_file=ca_file,
                      token_file=token_file, nodes_file=work / "nodes.json")
    return jobs, [SHIPPED / "usage-alerts.yaml"]


def prometheus_config(scrape: dict, *, skiff_target: str, token_file: Path, statsd_target: str,
                      rules: list[Path] | tuple[Path, ...], extra_jobs: list[dict] = (),
                      extra_rules: list[Path] = ()) -> dict:
    """The shipped scrape jobs with this stack's targets and token file, the shipped rules, short intervals."""
    jobs = []
    for job in yaml.safe_load(yaml.safe_dump(scrape))["scrape_configs"]:
        job["scrape_interval"] = INTERVAL
        if job["job_name"] == "skiff":
            job["authorization"]["credentials_file"] = str(token_file)
            job["static_configs"] = [{"targets": [skiff_target]}]
        elif job["job_name"] == "airflow-statsd":
            job["static_configs"] = [{"targets": [statsd_target]}]
        jobs.append(job)
    return {"global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
            "rule_files": [*map(str, rules), *map(str, extra_rules)], "scrape_configs": jobs + list(extra_jobs)}


class Monitoring:
    """The statsd bridge (started before Airflow) and Prometheus (once Airflow answers) under ``workdir``."""

    def __init__(self, workdir: Path, *, free_port, spawn, python: str):
        self.workdir, self.spawn, self.python = workdir, spawn, python
        self.token = secrets.token_urlsafe(24)
        # StatsD is UDP: a port free for TCP may be another process's UDP port (a statsd-bridge that failed to
        # bind with "Address already in use" stopped a test stack at start)
        self.statsd_port, self.bridge_port, self.port = free_udp_port(), free_port(), free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.rules = list(RULES)  # the shipped rules (a test may load a copy with a shorter `for`)
        self.usage_rules: list[Path] | None = None  # None: the shipped usage-alerts.yaml (a test: a shorter copy)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pages(self) -> dict[str, str]:
        """``page_addresses`` of the running Prometheus."""
        import httpx

        def get(address: str) -> int:
            try:
                return httpx.get(address, timeout=5, follow_redirects=True).status_code
            except httpx.HTTPError as exc:
                raise OSError(str(exc)) from exc
        return page_addresses(self.url, get)

    def settings(self) -> dict[str, str]:
        """Airflow's settings for this stack; the usage report reads its GPU efficiency from this Prometheus."""
        return {**airflow_settings(self.statsd_port, self.token), "AIRFLOW__SKIFF__PROMETHEUS_URL": self.url}

    def start_bridge(self, logs: Path) -> subprocess.Popen:
        self.procs["statsd-bridge"] = self.spawn(
            [self.python, "-m", "devstack.statsd_bridge", "--udp-port", str(self.statsd_port),
             "--http-port", str(self.bridge_port)], logs / "statsd-bridge.log", {"PYTHONUNBUFFERED": "1"})
        return self.procs["statsd-bridge"]

    def start_prometheus(self, airflow_hostport: str, logs: Path, kubeconfig: Path | None = None) -> subprocess.Popen:
        """``kubeconfig``: kubesim's admin, for the usage jobs (scrape-usage.yaml) and rules (usage-alerts.yaml)."""
        if not PROMETHEUS.exists():
            raise RuntimeError("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
        work = self.workdir / "prometheus"
        work.mkdir(parents=True, exist_ok=True)
        token_file = work / "skiff-metrics-token"
        write_private(token_file, self.token)
        extra_jobs, extra_rules = usage_scrape(kubeconfig, work) if kubeconfig is not None else ([], [])
        extra_rules = self.usage_rules if self.usage_rules is not None and kubeconfig is not None else extra_rules
        config = prometheus_config(yaml.safe_load((SHIPPED / "scrape.yaml").read_text()),
                                   skiff_target=airflow_hostport, token_file=token_file,
                                   statsd_target=f"127.0.0.1:{self.bridge_port}", rules=self.rules,
                                   extra_jobs=extra_jobs, extra_rules=extra_rules)
        (work / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.procs["prometheus"] = self.spawn(
            [str(PROMETHEUS), f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"], logs / "prometheus.log",
            {"PATH": "/usr/bin:/bin"})
        self.wait_ready(self.procs["prometheus"], logs / "prometheus.log")
        return self.procs["prometheus"]

    def wait_ready(self, proc: subprocess.Popen, log: Path, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until Prometheus answers ``/-/ready``: before that its pages answer 503 (or nothing), and the demo
        printed only the page that happened to answer first (issue 36: ``targets`` alone, no alerts or rules)."""
        import time

        import httpx

        def _tail() -> str:
            return "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else "(no output)"

        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {proc.returncode}: {_tail()}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"prometheus not ready at {self.url}/-/ready within {timeout:.0f} s: {_tail()}")
            time.sleep(0.3)
