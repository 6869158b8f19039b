"""The demo's metrics path (issue 29 item 3): Airflow's StatsD lines -> the statsd bridge (the chart's
statsd-exporter mappings) -> Prometheus, loaded with the shipped scrape jobs and rules. The bridge's rules
follow statsd_exporter (pkg/line's InfluxDB tags, pkg/mapper's globs, a counter series made at its first event)."""

from __future__ import annotations

import yaml
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from devstack.monitoring import RULES, SHIPPED, Monitoring, airflow_settings, prometheus_config
from devstack.statsd_bridge import Bridge, load_mappings, map_name, parse_line


def test_parse_line_reads_influxdb_tags_counters_and_timers():
    assert parse_line("airflow.skiff.training.failed,team=recsys,reason=OOMKilled:1|c") == (
        "airflow.skiff.training.failed", {"team": "recsys", "reason": "OOMKilled"}, 1.0, "counter")
    assert parse_line("airflow.skiff.training.queue_wait,team=nlp:1500|ms") == (
        "airflow.skiff.training.queue_wait", {"team": "nlp"}, 1500.0, "observer")
    assert parse_line("airflow.scheduler_heartbeat:1|c") == ("airflow.scheduler_heartbeat", {}, 1.0, "counter")
    assert parse_line("not a sample") is None


def test_map_name_is_the_charts_mapping():
    mappings = load_mappings()
    assert map_name(mappings, "airflow.skiff.platform_sync.runs", "counter")["name"] == "skiff_platform_sync_runs_total"
    assert map_name(mappings, "airflow.skiff.training.queue_wait", "observer")["name"] == \
        "skiff_training_queue_wait_seconds"
    assert map_name(mappings, "airflow.scheduler_heartbeat", "counter") is None


def _samples(bridge: Bridge) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(bridge.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_counter_series_appears_at_its_first_event_and_counts_every_one():
    bridge = Bridge(load_mappings())
    assert ("skiff_training_failed_total", (("reason", "OOMKilled"), ("team", "recsys"))) not in _samples(bridge)
    for line in ["airflow.skiff.training.failed,team=recsys,reason=OOMKilled:1|c"] * 3 + [
            "airflow.skiff.training.queue_wait,team=recsys:2500|ms", "airflow.scheduler_heartbeat:1|c", "junk"]:
        bridge.handle(line)
    got = _samples(bridge)
    assert got[("skiff_training_failed_total", (("reason", "OOMKilled"), ("team", "recsys")))] == 3
    assert got[("skiff_training_queue_wait_seconds_sum", (("team", "recsys"),))] == 2.5  # ms -> s
    assert got[("skiff_training_queue_wait_seconds_bucket", (("le", "5.0"), ("team", "recsys")))] == 1
    assert got[("statsd_exporter_samples_total", ())] == 5  # every sample, Airflow's own included; not junk


def test_prometheus_gets_the_shipped_jobs_pointed_at_the_stack_and_the_shipped_rules(tmp_path):
    scrape = yaml.safe_load((SHIPPED / "scrape.yaml").read_text())
    cfg = prometheus_config(scrape, skiff_target="localhost:8080", token_file=tmp_path / "t",
                            statsd_target="127.0.0.1:9102", rules=RULES)
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {j["job_name"] for j in scrape["scrape_configs"]}
    assert jobs["skiff"]["metrics_path"] == "/skiff-metrics/metrics"  # shipped, kept
    assert jobs["skiff"]["static_configs"] == [{"targets": ["localhost:8080"]}]
    assert jobs["skiff"]["authorization"] == {"type": "Bearer", "credentials_file": str(tmp_path / "t")}
    assert jobs["airflow-statsd"]["static_configs"] == [{"targets": ["127.0.0.1:9102"]}]
    # the demo's transport is StatsD: the rules of every transport and StatsD's, never OpenTelemetry's (issue 36)
    assert cfg["rule_files"] == [str(SHIPPED / "alerts.yaml"), str(SHIPPED / "alerts-statsd.yaml")]
    settings = airflow_settings(9125, "tok")
    assert settings["AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED"] == "True"  # else Airflow drops every tag
    assert settings["AIRFLOW__METRICS__STATSD_PORT"] == "9125" and settings["AIRFLOW__SKIFF__METRICS_TOKEN"] == "tok"
    # the stack's usage report reads its GPU efficiency (held and used GPU-hours) from the stack's Prometheus
    monitoring = Monitoring(tmp_path, free_port=lambda: 9090, spawn=None, python="")
    assert monitoring.settings()["AIRFLOW__SKIFF__PROMETHEUS_URL"] == monitoring.url == "http://127.0.0.1:9090"


def test_every_prometheus_address_the_demo_prints_opens_on_the_prometheus_it_runs(tmp_path):
    """issue 36: the demo printed ``/alerts``, a 404 on Debian's Prometheus 2.42 (its package serves only the
    classic UI, ``/classic/alerts``). The addresses come from the running Prometheus, and each one opens."""
    import httpx

    from devstack.monitoring import PAGES, Monitoring
    from tests.support.metrics.prometheus_support import running_prometheus

    job = {"job_name": "none", "static_configs": [{"targets": ["127.0.0.1:9"]}]}
    with running_prometheus(tmp_path, job, "1m") as prom:
        monitoring = Monitoring(tmp_path, free_port=lambda: 0, spawn=None, python="")
        monitoring.port = int(prom.url.rsplit(":", 1)[1])
        pages = monitoring.pages()
        assert sorted(pages) == sorted(PAGES), pages
        for page, address in pages.items():
            r = httpx.get(address, timeout=10, follow_redirects=True)
            assert r.status_code == 200 and page in r.text.lower(), (address, r.status_code)


def test_the_demos_prometheus_is_ready_when_started_so_every_page_it_prints_opens(tmp_path):
    """issue 36, a newcomer's run: the demo printed only ``targets``: it asked for the pages right after spawning
    Prometheus, which on the busy machine answered its alerts and rules pages only later. ``start_prometheus``
    returns a Prometheus that is ready, here one that starts 2 s late (as under load): every page at once."""
    import sys

    from devstack.monitoring import PAGES, Monitoring
    from devstack.stack import _spawn, free_port

    def late(argv, log, env):  # Debian's Prometheus, exec'ed 2 s after the spawn
        return _spawn(["/bin/sh", "-c", 'sleep 2; exec "$@"', "sh", *argv], log, env)

    logs = tmp_path / "logs"
    logs.mkdir()
    monitoring = Monitoring(tmp_path, free_port=free_port, spawn=late, python=sys.executable)
    proc = monitoring.start_prometheus("127.0.0.1:9", logs)
    try:
        assert sorted(monitoring.pages()) == sorted(PAGES)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
