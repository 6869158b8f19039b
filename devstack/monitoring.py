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


def prometheus_config(scrape: dict, *, skiff_target: str, token_file: Path, statsd_target: str,
                      rules: list[Path] | tuple[Path, ...]) -> dict:
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
            "rule_files": [str(r) for r in rules], "scrape_configs": jobs}


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
        return airflow_settings(self.statsd_port, self.token)

    def start_bridge(self, logs: Path) -> subprocess.Popen:
        self.procs["statsd-bridge"] = self.spawn(
            [self.python, "-m", "devstack.statsd_bridge", "--udp-port", str(self.statsd_port),
             "--http-port", str(self.bridge_port)], logs / "statsd-bridge.log", {"PYTHONUNBUFFERED": "1"})
        return self.procs["statsd-bridge"]

    def start_prometheus(self, airflow_hostport: str, logs: Path) -> subprocess.Popen:
        if not PROMETHEUS.exists():
            raise RuntimeError("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
        work = self.workdir / "prometheus"
        work.mkdir(parents=True, exist_ok=True)
        token_file = work / "skiff-metrics-token"
        write_private(token_file, self.token)
        config = prometheus_config(yaml.safe_load((SHIPPED / "scrape.yaml").read_text()),
                                   skiff_target=airflow_hostport, token_file=token_file,
                                   statsd_target=f"127.0.0.1:{self.bridge_port}", rules=self.rules)
        (work / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.procs["prometheus"] = self.spawn(
            [str(PROMETHEUS), f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"], logs / "prometheus.log",
            {"PATH": "/usr/bin:/bin"})
        return self.procs["prometheus"]
