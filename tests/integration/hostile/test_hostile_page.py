"""Issue 30, classes 6, 7 and 8: the metrics endpoint's scope, what the page echoes and which language it
takes, and a user named like the placeholder ``dag_test``.

6 and 7 run the real FastAPI apps in process on kubesim; Airflow's login itself is proven in tests/*/ui/ and
tests/*/metrics/ (here the caller it would return is given). 7's language rule runs the page's own module in Node.
8 runs the owner rule with a real user named ``dag_test`` and with ``dag.test()``'s own placeholder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from operators.auth import Caller

STATIC = Path(__file__).parents[3] / "operators" / "ui" / "static"
TOKEN = "scrape-t0ken"
LONG = "n" * 8000


@pytest.fixture
def metrics_app(kube_conn, monkeypatch):
    from operators.exporter import endpoint

    monkeypatch.setenv("AIRFLOW__SKIFF__METRICS_TOKEN", TOKEN)
    caller = {"who": None}

    async def login(_request):  # what Airflow's get_user answers for the logged-in caller
        return caller["who"]
    monkeypatch.setattr("operators.auth.current_user", login)
    return TestClient(endpoint.create_app(), raise_server_exceptions=False), caller


def test_the_metrics_endpoint_takes_the_scrape_token_or_an_airflow_admin_only(metrics_app):
    """A viewer in no team (and any non-admin) read every team's gauges with a plain login; now 403 with no
    figure in the answer, while the scrape token and an Airflow admin still read them."""
    app, caller = metrics_app
    caller["who"] = Caller("viewer", "t", False, None)
    refused = app.get("/metrics")
    assert refused.status_code == 403 and "skiff_" not in refused.text
    assert "metrics_token" in refused.json()["detail"]
    caller["who"] = Caller("admin", "t", True, None)
    assert app.get("/metrics").status_code == 200
    caller["who"] = None
    ok = app.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "skiff_exporter_cluster_requests_total" in ok.text


@pytest.fixture
def page_api(kube_conn, monkeypatch):
    from operators.auth import current_user
    from operators.platform import ENV_PLATFORM_FILE, example_path
    from operators.ui.app import create_app

    monkeypatch.setenv(ENV_PLATFORM_FILE, str(example_path()))
    app = create_app()
    app.dependency_overrides[current_user] = lambda: Caller("alice", "token", False, None)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("path", [f"/api/instances/recsys/{LONG}/password", f"/api/instances/{LONG}/nb/password",
                                  f"/static/{LONG}.js"])
def test_a_long_path_parameter_is_echoed_cut_with_its_size(page_api, path):
    r = page_api.get(path)
    assert r.status_code == 404, r.text[:200]
    detail = r.json()["detail"]
    assert "8000 characters" in detail or "8003 characters" in detail, detail[:300]
    assert len(r.text) < 600, len(r.text)


def test_a_long_action_is_echoed_cut(page_api):
    r = page_api.post(f"/api/instances/recsys/nb/{LONG}", json={})
    assert r.status_code == 404 and "8000 characters" in r.json()["detail"] and len(r.text) < 600


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's module")
def test_the_pages_language_is_one_of_its_own_dictionaries(tmp_path):
    """``language()`` (what the page sets as its ``lang`` attribute) for hostile or unknown choices in
    localStorage: an inherited property name of the dictionaries ("__proto__", "constructor") was taken as a
    language; now only a dictionary's own key is, anything else is English."""
    module = tmp_path / "skiff-i18n.mjs"
    module.write_text((STATIC / "skiff-i18n.js").read_text())
    choices = ["__proto__", "constructor", "toString", "hasOwnProperty", "x" * 5000, "zh-CN", "zh-Hans", "en", "fr"]
    script = (
        f"const choices = {json.dumps(choices)}; const out = [];\n"
        "globalThis.document = {documentElement: {lang: ''}}; globalThis.navigator = {language: 'en'};\n"
        f"const m = await import({json.dumps(module.as_uri())});\n"
        "for (const c of choices) { globalThis.localStorage = {getItem: () => c}; out.push(m.language()); }\n"
        "console.log(JSON.stringify(out));\n")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["en", "en", "en", "en", "en", "zh-CN", "zh-CN", "en", "en"]


def test_a_real_user_named_dag_test_is_that_user_and_dag_tests_placeholder_is_nobody():
    """dag.test() records ``dag_test`` as the triggering user; a run a real user of that name triggered was
    taken for "nobody", who may act for any owner named in the conf. Now only dag.test()'s own run is nobody."""
    from operators.devinstances.owners import resolve_owner, triggering_user

    run = SimpleNamespace(triggering_user_name="dag_test")
    assert triggering_user(run, in_dag_test=True) == ""  # dag.test(): nobody, must name the owner
    assert resolve_owner(triggering_user(run, in_dag_test=True), "alice") == "alice"
    real = triggering_user(run, in_dag_test=False)  # a worker running a run the user dag_test triggered
    assert real == "dag_test"
    with pytest.raises(PermissionError, match="'dag_test' may only act on their own"):
        resolve_owner(real, "alice")
    assert resolve_owner(real, None) == "dag_test"
    assert triggering_user(run) == "dag_test"  # here: no dag.test() supervisor in this process
    assert triggering_user(SimpleNamespace(triggering_user_name=None)) == ""
