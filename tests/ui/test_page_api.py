"""The page's JSON API on a real api-server under ``[api] base_url = http://localhost:<port>/airflow/``.

Every request goes through Airflow's own authentication (bearer tokens from ``POST /auth/token``) and
authorization; the cluster is kubesim with the example platform file's teams seeded as queues.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client

from kubesim.testing import wait_until

SAMPLES = Path(__file__).parents[1] / "sedna" / "samples"

ROUTES = [
    ("GET", "/"), ("GET", "/static/skiff.js"), ("GET", "/api/me"), ("GET", "/api/quota"), ("GET", "/api/usage"),
    ("GET", "/api/training"), ("GET", "/api/sedna"), ("GET", "/api/instances"), ("GET", "/api/instances/options"),
    ("POST", "/api/instances"), ("POST", "/api/instances/recsys/nb/stop"),
    ("GET", "/api/instances/recsys/nb/password"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_anonymous_gets_401_on_every_route(api_server, method, path):
    with api_server.client(None) as anon:
        r = anon.request(method, path, json={} if method == "POST" else None)
    assert (r.status_code, r.json()) == (401, {"detail": "Not authenticated"}), (path, r.text)


def test_a_forged_token_is_refused_and_so_is_a_cookie_path_outside_the_login(api_server):
    with httpx.Client(base_url=f"{api_server.url}/skiff", timeout=30) as c:
        assert c.get("/api/me", headers={"Authorization": "Bearer not.a.jwt"}).status_code == 403
        c.cookies.set("_token", "forged")
        assert c.get("/api/me").status_code == 403


def test_the_page_is_an_external_view_in_the_navigation_with_a_relative_href(api_server):
    with httpx.Client(base_url=api_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {api_server.token('alice')}"}) as c:
        plugins = c.get("/api/v2/plugins").json()["plugins"]
    views = [v for p in plugins if p["name"] == "skiff" for v in p["external_views"]]
    assert views == [{"name": "Skiff", "href": "skiff/", "url_route": "skiff", "destination": "nav",
                      "icon": "skiff/static/skiff.svg", "icon_dark_mode": None, "category": None,
                      "nav_top_level": False}]


def test_the_page_and_its_assets_are_served_under_the_sub_path_with_relative_urls_only(api_server):
    with api_server.client("alice") as alice:
        page = alice.get("/")
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
        assert 'src="static/skiff.js"' in page.text and 'href="static/skiff.css"' in page.text
        assert 'src="/' not in page.text and 'href="/' not in page.text
        js = alice.get("/static/skiff.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert 'fetch("api/" + path' in js.text  # relative: under /airflow/skiff/
        assert alice.get("/static/..%2Fapp.py").status_code == 404
        assert alice.get("/static/app.py").status_code == 404


def test_me_names_the_user_their_teams_and_what_airflow_lets_them_trigger(api_server):
    with api_server.client("alice") as alice, api_server.client("carol") as carol, \
            api_server.client("admin") as admin:
        a, c, ad = alice.get("/api/me").json(), carol.get("/api/me").json(), admin.get("/api/me").json()
    assert (a["user"], a["admin"], sorted(a["teams"]), a["ui_root"]) == ("alice", False, ["nlp", "recsys"],
                                                                         "/airflow/")
    assert (c["user"], c["admin"], c["teams"]) == ("carol", False, ["nlp"])
    assert (ad["admin"], sorted(ad["teams"])) == (True, ["nlp", "recsys"])
    # Airflow's simple auth manager: role "user" may trigger DAG runs, "viewer" (carol) may not
    assert set(a["may_trigger"]) == {"create", "stop", "start", "delete"}
    assert all(a["may_trigger"].values()) and not any(c["may_trigger"].values())


def test_quota_bars_show_the_live_resourcequota_of_each_of_the_users_teams(api_server):
    core = client.CoreV1Api(api_server.k8s)
    pod = {"metadata": {"name": "quota-user"}, "spec": {"containers": [{
        "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3", "memory": "6Gi"},
                                                       "limits": {"cpu": "3", "memory": "6Gi"}}}]}}
    core.create_namespaced_pod("recsys", pod)
    try:
        wait_until(lambda: (core.read_namespaced_resource_quota("skiff-quota", "recsys").status.used or {})
                   .get("requests.cpu") == "3", timeout=15, what="quota status counts the pod")
        with api_server.client("bob") as bob, api_server.client("admin") as admin:
            teams = {t["team"]: {b["resource"]: (b["used"], b["hard"]) for b in t["bars"]}
                     for t in bob.get("/api/quota").json()["teams"]}
            every = [t["team"] for t in admin.get("/api/quota").json()["teams"]]
        assert list(teams) == ["recsys"]  # bob is only in recsys
        assert teams["recsys"]["cpu"] == (3.0, 8.0)
        assert teams["recsys"]["memory"] == (6.0, 32.0)
        assert teams["recsys"]["gpu"] == (0.0, 2.0)
        assert teams["recsys"]["storage"] == (40.0, 100.0)  # alice's and bob's 20Gi home PVCs
        assert sorted(every) == ["nlp", "recsys"]
    finally:
        core.delete_namespaced_pod("quota-user", "recsys")


def test_sedna_rows_compare_desired_and_actual_children_and_show_the_cr_events(api_server):
    from operators.sedna.install import install_crds
    from operators.sedna.kube import JI_SERVICES, MODELS, Kube
    from operators.sedna.reconcile import reconcile_joint_inference

    with api_server.client("alice") as alice:
        assert alice.get("/api/sedna").json() == {"installed": False, "workloads": []}
    install_crds(api_server.k8s)
    kube = Kube(api_server.k8s)
    ji = yaml.safe_load((SAMPLES / "jointinferenceservice_v1alpha1.yaml").read_text())
    ji["metadata"]["namespace"] = "default"
    kube.create(JI_SERVICES, "default", ji)
    name = ji["metadata"]["name"]
    with api_server.client("alice") as alice:
        row = next(w for w in alice.get("/api/sedna").json()["workloads"] if w["name"] == name)
        assert row["error"] and "Model" in row["error"] and not row["in_sync"]  # models missing: no children
        for m in (ji["spec"]["edgeWorker"]["model"]["name"], ji["spec"]["cloudWorker"]["model"]["name"]):
            kube.create(MODELS, "default", {"apiVersion": "sedna.io/v1alpha1", "kind": "Model",
                                            "metadata": {"name": m, "namespace": "default"},
                                            "spec": {"url": f"/data/{m}.pb", "format": "pb"}})
        reconcile_joint_inference(api_server.k8s)
        row = next(w for w in alice.get("/api/sedna").json()["workloads"] if w["name"] == name)
        assert row["in_sync"] and row["desired"] == row["actual"] >= 3, row
        assert {c["kind"] for c in row["children"]} >= {"Deployment", "Service"}
        assert row["events"], row
        client.AppsV1Api(api_server.k8s).delete_namespaced_deployment(f"{name}-deployment-edge", "default")
        row = next(w for w in alice.get("/api/sedna").json()["workloads"] if w["name"] == name)
        assert not row["in_sync"] and row["actual"] == row["desired"] - 1


def test_training_rows_show_a_failed_task_with_its_reason_team_and_log_link(api_server):
    done = api_server.airflow("dags", "test", "training_failure_demo")
    assert "OOMKilled" in done.stdout + done.stderr, done.stderr[-3000:]
    with api_server.client("alice") as alice, api_server.client("carol") as carol:
        rows = [t for t in alice.get("/api/training").json()["tasks"] if t["dag_id"] == "training_failure_demo"]
        assert len(rows) == 1, rows
        row = rows[0]
        assert (row["state"], row["task_id"], row["team"]) == ("failed", "train_too_big", "recsys")
        assert row["reason"].startswith("OOMKilled") and "memory limit of 1Gi" in row["reason"], row
        assert row["log_path"].startswith("dags/training_failure_demo/runs/") and \
            row["log_path"].endswith("/tasks/train_too_big?try_number=1")
        page = httpx.get(f"{api_server.url}/{row['log_path']}", timeout=30)  # the UI route exists (SPA)
        assert page.status_code == 200
        # carol (viewer) may read every DAG under the simple auth manager: the filter is Airflow's, not Skiff's
        assert [t["dag_id"] for t in carol.get("/api/training").json()["tasks"]] == ["training_failure_demo"]


def test_state_changing_routes_take_json_only(api_server):
    with api_server.client("alice") as alice:
        form = alice.post("/api/instances", content="name=x&team=recsys",
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415 and "application/json" in form.json()["detail"]
        assert alice.post("/api/instances", content="{not json",
                          headers={"Content-Type": "application/json"}).status_code == 400
        arr = alice.post("/api/instances", json=[1, 2])
        assert arr.status_code == 400 and "JSON object" in arr.json()["detail"]
        assert alice.get("/api/instances/recsys/nb/stop").status_code == 405  # no state change on GET
