"""deploy/monitoring/: the alert rules (judged by Debian's promtool), the dashboard, the Helm values, the docs.

The dashboard's and rules' PromQL is also run by a real Prometheus in test_metrics_e2e.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import yaml

from devstack.statsd_bridge import map_name
from operators.metrics import catalogue as c
from tests.support.metrics.prometheus_support import MONITORING
from tests.support.metrics.prometheus_support import run_tool as _run

REPO = Path(__file__).resolve().parents[3]
# alerts.yaml whatever the transport, plus the one of the transport in use (alerts.yaml's header)
RULE_FILES = ("alerts.yaml", "alerts-statsd.yaml", "alerts-otel.yaml")


def _rules(*files: str) -> list[dict]:
    return [r for f in files or RULE_FILES for g in yaml.safe_load((MONITORING / f).read_text())["groups"]
            for r in g["rules"]]


def test_promtool_checks_the_alert_rules(promtool):
    done = _run(promtool, "check", "rules", *RULE_FILES)
    assert done.returncode == 0 and done.stdout.count("SUCCESS") == 3, done.stdout + done.stderr
    assert len(_rules()) == 9 and len(_rules("alerts-statsd.yaml")) == len(_rules("alerts-otel.yaml")) == 1


def test_promtool_refuses_a_broken_rule(promtool, tmp_path):
    """The check above can fail: a rule with a PromQL typo is refused."""
    rules = (MONITORING / "alerts.yaml").read_text().replace(
        "expr: skiff_sedna_crs{phase=\"Failed\"} > 0", "expr: skiff_sedna_crs{phase=\"Failed\" > 0")
    (tmp_path / "alerts.yaml").write_text(rules)
    done = _run(promtool, "check", "rules", "alerts.yaml", cwd=tmp_path)
    assert done.returncode != 0 and "SkiffSednaCrFailed" in done.stdout + done.stderr


def test_promtool_unit_tests_of_the_alerts_pass(promtool):
    done = _run(promtool, "test", "rules", "alerts.test.yaml", "alerts-statsd.test.yaml")
    assert done.returncode == 0 and done.stdout.count("SUCCESS") == 2, done.stdout + done.stderr


def test_a_healthy_statsd_stack_is_tested_against_every_alert_it_loads_and_no_transport_rule_of_another():
    """alerts-statsd.test.yaml's healthy stack (issue 36: SkiffOtelSilent fired on every healthy StatsD demo):
    each alert of the files a StatsD site loads is expected silent at 15 and 30 minutes; no OTel rule there."""
    test = yaml.safe_load((MONITORING / "alerts-statsd.test.yaml").read_text())
    assert test["rule_files"] == ["alerts.yaml", "alerts-statsd.yaml"]
    (healthy,) = test["tests"]
    loaded = {r["alert"] for r in _rules(*test["rule_files"])}
    assert "SkiffStatsdSilent" in loaded and "SkiffOtelSilent" not in loaded
    for at in ("15m", "30m"):
        checked = {c["alertname"] for c in healthy["alert_rule_test"] if c["eval_time"] == at and c["exp_alerts"] == []}
        assert checked == loaded, (at, loaded ^ checked)


def test_promtool_unit_tests_fail_when_an_alert_misbehaves(promtool, tmp_path):
    """The GPU alert with ``for: 20m`` fires at 29 minutes, which the unit test says it must not."""
    for name in ("alerts.test.yaml", *RULE_FILES):
        shutil.copy(MONITORING / name, tmp_path)
    assert _run(promtool, "test", "rules", "alerts.test.yaml", cwd=tmp_path).returncode == 0   # the copy passes
    (tmp_path / "alerts.yaml").write_text((MONITORING / "alerts.yaml").read_text().replace("for: 30m", "for: 20m"))
    assert _run(promtool, "test", "rules", "alerts.test.yaml", cwd=tmp_path).returncode != 0


def _referenced(expr: str) -> set[str]:
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"\bskiff_[a-z_]+", expr)}


def test_dashboard_has_a_row_per_concern_and_only_catalogued_metrics():
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Training", "Queues and quota", "Instances", "Sedna", "Skiff's own health", "Usage: used against held"]
    known = {m.prom for m in c.all_metrics()}
    used = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= _referenced(target["expr"])
    for rule in _rules():
        used |= _referenced(rule["expr"])
    assert used <= known, used - known
    assert {m.prom for m in c.all_metrics() if m.stat} - used == set()  # every event metric is on the dashboard


def test_helm_values_turn_metrics_on_and_map_skiffs_events_to_their_prometheus_names():
    base = yaml.safe_load((REPO / "deploy" / "helm" / "values.yaml").read_text())
    overlay = yaml.safe_load((MONITORING / "helm-values.yaml").read_text())

    def merge(a, b):  # Helm's -f layering: maps merge, everything else is replaced
        if isinstance(a, dict) and isinstance(b, dict):
            return {**a, **{k: merge(a.get(k), v) for k, v in b.items()}}
        return b

    values = merge(base, overlay)
    schema = json.loads((REPO / "deploy" / "helm" / "values.schema.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(values)]
    assert errors == []
    assert values["config"]["metrics"]["statsd_on"] == "True" and values["statsd"]["enabled"]
    assert values["config"]["metrics"]["statsd_influxdb_enabled"] == "True"  # else Airflow drops every tag
    assert values["config"]["skiff"]["prometheus_url"].startswith("http")  # the usage report's GPU efficiency
    assert values["secret"] == base["secret"]  # the connections of the base file survive the layering
    token = next(e for e in values["apiServer"]["env"] if e["name"] == "AIRFLOW__SKIFF__METRICS_TOKEN")
    assert "secretKeyRef" in token["valueFrom"]  # from a Kubernetes Secret, never a value in the file
    for m in (m for m in c.all_metrics() if m.stat):
        kind = "observer" if m.type == c.TIMING else "counter"
        assert map_name(values["statsd"]["extraMappings"], f"airflow.{m.stat}", kind)["name"] == m.prom, m


def test_operations_guide_explains_every_metric_and_alert():
    guide = (REPO / "docs" / "operations.md").read_text()
    missing = [m.prom for m in c.all_metrics() if m.prom not in guide]
    missing += [r["alert"] for r in _rules() if r["alert"] not in guide]
    assert missing == []


def test_no_rule_or_panel_counts_an_event_counter_with_increase_or_rate():
    """statsd-exporter creates an event counter's series at its first event, already at 1: increase() and rate()
    never count that sample (issue 29: 4 of 8 failures lost). Rules and panels use the exact form instead
    (alerts.yaml's header); its promtool tests feed series born at their first event."""
    events = {m.prom for m in c.all_metrics() if m.stat and m.type == c.COUNTER}
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [r["expr"] for r in _rules()]
    lossy = [e for e in exprs if re.search(r"\b(increase|rate|irate)\((" + "|".join(events) + r")\b", e)]
    assert lossy == []
    assert sum("offset" in e for e in exprs) >= 10  # the exact form is there, not just the functions gone


def _chart_values_errors(values_file: str, schema_file: str, folder: Path = MONITORING) -> list[str]:
    values = yaml.safe_load((folder / values_file).read_text())
    schema = json.loads((MONITORING / "charts" / schema_file).read_text())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(values)]


def test_metrics_server_and_dcgm_exporter_values_match_their_charts_keys():
    """Neither chart ships a values schema, so charts/*.schema.json hold the keys and types of each chart's
    values.yaml (at the commit their titles name): a key the chart does not have (Helm ignores it silently) or a
    wrong type fails here. What Skiff relies on is set: the 15 s resolution its figures assume, the GPU series'
    pod mapping, the GPU nodes' taints tolerated."""
    for values, schema in (("metrics-server-values.yaml", "metrics-server.schema.json"),
                           ("dcgm-exporter-values.yaml", "dcgm-exporter.schema.json")):
        assert _chart_values_errors(values, schema) == [], values
    ms = yaml.safe_load((MONITORING / "metrics-server-values.yaml").read_text())
    assert "--metric-resolution=15s" in ms["defaultArgs"] and ms["apiService"]["create"]
    dcgm = yaml.safe_load((MONITORING / "dcgm-exporter-values.yaml").read_text())
    assert {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"} in dcgm["extraEnv"]
    assert {t["key"] for t in dcgm["tolerations"]} >= {"nvidia.com/gpu"}


def test_a_misspelt_chart_key_is_refused(tmp_path):
    """The check above can fail: ``replica`` (not the chart's ``replicas``) and a string where a number goes."""
    text = (MONITORING / "metrics-server-values.yaml").read_text()
    shutil.copytree(MONITORING / "charts", tmp_path / "charts")
    for wrong in (text.replace("replicas: 2", "replica: 2"), text.replace("replicas: 2", "replicas: two")):
        assert wrong != text
        (tmp_path / "metrics-server-values.yaml").write_text(wrong)
        assert _chart_values_errors("metrics-server-values.yaml", "metrics-server.schema.json", tmp_path) != []
