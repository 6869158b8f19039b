"""deploy/helm/values.yaml is valid for the official Apache Airflow chart and deploys Skiff's production shape.

The schema is the chart's own ``values.schema.json`` (copied unchanged into deploy/helm/): ``helm install``
validates values against it the same way and refuses the release when they do not match.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from operators.rbac import DEFAULT_SERVICE_ACCOUNT

HELM = Path(__file__).resolve().parents[3] / "deploy" / "helm"
SERVICE_ACCOUNT = DEFAULT_SERVICE_ACCOUNT  # k8s_templates/rbac/ rendered with its default (docs/platform-owner-guide.md "Installing Skiff's RBAC")


@pytest.fixture(scope="module")
def schema() -> dict:
    return json.loads((HELM / "values.schema.json").read_text())


@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load((HELM / "values.yaml").read_text())


def test_values_validate_against_the_charts_schema(schema, values):
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]
    assert errors == []


@pytest.mark.parametrize("path, bad", [
    (("executor",), "CeleryExcutor"),
    (("triggerer", "replicas"), "two"),
    (("pgbouncer", "enabled"), "yes"),
    (("workers", "serviceAccount", "create"), "false"),
])
def test_the_schema_refuses_a_mistyped_value(schema, values, path, bad):
    """The check above can fail: the chart's schema catches typos in names and types."""
    broken = json.loads(json.dumps(values))
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def test_values_deploy_skiffs_production_shape(values):
    assert values["executor"] == "CeleryExecutor"
    assert values["images"]["airflow"]["repository"] != "apache/airflow"  # the Skiff image
    assert values["airflowVersion"] == "3.3.2"
    assert values["scheduler"]["replicas"] >= 2 and values["triggerer"]["replicas"] == 2
    assert values["dagProcessor"]["enabled"] and values["pgbouncer"]["enabled"]
    assert not values["postgresql"]["enabled"]  # an external, backed-up PostgreSQL
    # DAGs baked into the image: neither git-sync nor a DAGs volume
    assert not values["dags"]["gitSync"]["enabled"] and not values["dags"]["persistence"]["enabled"]
    for component in ("workers", "triggerer", "apiServer"):  # the parts that reach Kubernetes: Skiff's account
        sa = values[component]["serviceAccount"]
        assert sa == {"create": False, "name": SERVICE_ACCOUNT}, component
    for component in ("scheduler", "workers", "triggerer", "dagProcessor", "apiServer", "pgbouncer"):
        res = values[component]["resources"]
        assert res["requests"]["memory"] and res["limits"]["memory"], component
    conns = {s["envName"]: (s["secretName"], s["secretKey"]) for s in values["secret"]}
    assert conns["AIRFLOW_CONN_KUBERNETES_DEFAULT"][1] == "kubernetes_default"
    assert conns["AIRFLOW_CONN_SMTP_DEFAULT"][1] == "smtp_default"
    assert values["config"]["skiff"]["platform_file"].startswith(values["volumeMounts"][0]["mountPath"])
    # a fresh deployment keeps Airflow's default (new DAGs paused); platform DAGs unpause themselves
    assert "dags_are_paused_at_creation" not in values["config"]["core"]
    assert not any("PASSWORD" in e["name"] or "SECRET" in e["name"] for e in values["env"])


def test_values_set_only_declared_skiff_options(values):
    """A misspelt option would be silently ignored by Airflow: every ``config.skiff`` key is declared in
    ``operators/settings.py``, and Skiff is configured there, not by other environment variables."""
    from operators.settings import OPTIONS

    assert set(values["config"]["skiff"]) <= set(OPTIONS), set(values["config"]["skiff"]) - set(OPTIONS)
    assert not any(e["name"].startswith(("SKIFF_", "AIRFLOW__SKIFF__")) for e in values["env"])
