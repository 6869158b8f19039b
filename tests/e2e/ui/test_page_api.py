"""The page's JSON API on a real api-server under ``[api] base_url = http://localhost:<port>/airflow/``.

Every request goes through Airflow's own authentication (bearer tokens from ``POST /auth/token``) and
authorization; the cluster is kubesim with the example platform file's teams seeded as queues.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client

from kubesim.testing import wait_until
from operators.k8s import Kube
from operators.ui.app import MODULES
from tests.support.ui.ui_support import SEED_WAITING

SAMPLES = Path(__file__).parents[2] / "support" / "sedna" / "samples"

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


def test_the_page_is_a_react_app_in_the_navigation_with_a_relative_bundle_url(api_server):
    with httpx.Client(base_url=api_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {api_server.token('alice')}"}) as c:
        plugins = c.get("/api/v2/plugins").json()["plugins"]
        errors = c.get("/api/v2/plugins/importErrors").json()
    assert errors["total_entries"] == 0, errors  # registered once: no "already registered"
    skiff = next(p for p in plugins if p["name"] == "skiff")
    assert skiff["external_views"] == []
    assert skiff["react_apps"] == [{"name": "Skiff", "bundle_url": "skiff/static/skiff.js", "url_route": "skiff",
                                    "destination": "nav", "icon": "skiff/static/skiff.svg", "icon_dark_mode": None,
                                    "category": None, "nav_top_level": False}]


def test_the_page_and_its_assets_are_served_under_the_sub_path_with_relative_urls_only(api_server):
    with api_server.client("alice") as alice:
        page = alice.get("/")
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
        assert '<script type="module" src="static/skiff.js">' in page.text
        assert 'src="/' not in page.text and 'href="/' not in page.text
        for name in MODULES:
            js = alice.get(f"/static/{name}")
            assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript"), name
        entry = alice.get("/static/skiff.js").text
        common = alice.get("/static/skiff-common.js").text
        assert 'new URL("../api/", HERE)' in common and "import.meta.url" in common  # relative to the module: any base
        # every module the entry imports, and every module they import, is served: relative "./" names only
        imported = set(re.findall(r'from "\./([\w.-]+)"', "".join(alice.get(f"/static/{m}").text for m in MODULES)))
        assert "skiff-i18n.js" in imported and "skiff-common.js" in re.findall(r'from "\./([\w.-]+)"', entry)
        assert sorted(imported - set(MODULES)) == [] and sorted(set(MODULES) - imported - {"skiff.js"}) == []
        assert alice.get("/static/..%2Fapp.py").status_code == 404
        assert alice.get("/static/app.py").status_code == 404


def test_the_api_server_froze_its_loaded_heap_at_start_up(api_server):
    """The plugin app's lifespan ran in the api-server's worker (``operators.ui.heap``): Airflow's loaded app, well
    over 100,000 objects, no longer walked by full collections (what made the page API's p95, BENCHMARKS.md ui)."""
    with api_server.client("alice") as alice:
        assert alice.get("/api/me").status_code == 200  # the worker is up and serving the plugin
    frozen = [int(n) for n in re.findall(r"froze (\d+) objects of the loaded api-server", api_server.log.read_text())]
    assert len(frozen) == 1 and frozen[0] > 100_000, frozen  # one worker, one freeze


def test_the_api_server_built_its_execution_api_before_it_listened(api_server):
    """The plugin app's lifespan sent the Execution API its first request (``operators.ui.warmup``): no task's call
    builds Cadwyn's routers on the event loop while every other request waits (issue 29's 40 s request)."""
    with api_server.client("alice") as alice:
        assert alice.get("/api/me").status_code == 200
    built = re.findall(r"Execution API built before serving: \S+ s \(GET /health -> (\d+)\)",
                       api_server.log.read_text())
    assert built == ["200"], built  # one worker, built once, and its health route answered


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
            every_body = admin.get("/api/quota").json()
            every = [t["team"] for t in every_body["teams"]]
        assert every_body["queues"] == {}  # no Kueue on this cluster: no queue figures, and no error
        assert list(teams) == ["recsys"]  # bob is only in recsys
        assert teams["recsys"]["cpu"] == (3.0, 8.0)
        assert teams["recsys"]["memory"] == (6.0, 32.0)
        assert teams["recsys"]["gpu"] == (0.0, 2.0)
        assert teams["recsys"]["storage"] == (60.0, 100.0)  # homes of alice, bob (20Gi) + recsys-datasets (20Gi)
        assert sorted(every) == ["nlp", "recsys"]
    finally:
        core.delete_namespaced_pod("quota-user", "recsys")


def test_sedna_rows_compare_desired_and_actual_children_and_show_the_cr_events(api_server):
    from operators.sedna.install import install_crds
    from operators.sedna.kube import JI_SERVICES, MODELS, Kube
    from operators.sedna.reconcile import reconcile_joint_inference

    with api_server.client("alice") as alice:
        assert alice.get("/api/sedna").json() == {"installed": False, "workloads": []}
    kube = Kube(api_server.k8s)
    install_crds(kube)
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
        reconcile_joint_inference(kube)
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
        assert row["reason_class"] == "OOMKilled"  # what the page translates
        assert row["log_path"].startswith("dags/training_failure_demo/runs/") and \
            row["log_path"].endswith("/tasks/train_too_big?try_number=1")
        page = httpx.get(f"{api_server.url}/{row['log_path']}", timeout=30)  # the UI route exists (SPA)
        assert page.status_code == 200
        # carol (viewer, nlp's admin) may read every DAG under the simple auth manager, but sees her teams'
        # training by default (issue 29: nlp saw recsys's rows): the page says how many more Airflow allows
        mine = carol.get("/api/training").json()
        assert (mine["tasks"], mine["scope"], mine["teams"], mine["other_teams"]) == ([], "teams", ["nlp"], 1)
        wider = carol.get("/api/training", params={"scope": "all"}).json()
        assert [t["dag_id"] for t in wider["tasks"]] == ["training_failure_demo"]  # Airflow's rule, asked for
        assert carol.get("/api/training", params={"scope": "everything"}).status_code == 400




def test_training_rows_show_tasks_waiting_for_the_pool_and_for_quota(api_server):
    """preprocess has no Job (Airflow holds it for a pool slot); train's Job is refused by recsys's ResourceQuota
    (kubesim's Job controller records FailedCreate, as kube's does) so it has no pod: each row says why it waits."""
    import subprocess

    from devstack.stack import BIN
    from operators.k8s.resource import JOBS
    from operators.k8s.rest import Kube
    from operators.training.naming import TaskInstanceKey
    from operators.training.operator import TrainingJobOperator

    done = subprocess.run([str(BIN / "python"), "-c", SEED_WAITING], env=api_server.env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    op = TrainingJobOperator(task_id="train", image="registry.local/recsys/train-gpu:1.4", entry_path="train.py",
                             namespace="recsys", owner="alice", cpu=9, memory=1)  # recsys has 8 cpu in all
    job = Kube(api_server.k8s).create(JOBS, "recsys", op.build_manifest(
        TaskInstanceKey("training_recommendation_daily", "train", "manual__waiting", 1)))
    core = client.CoreV1Api(api_server.k8s)
    try:
        wait_until(lambda: any(e.reason == "FailedCreate" and "exceeded quota" in e.message for e in
                               core.list_namespaced_event("recsys").items
                               if e.involved_object.name == job["metadata"]["name"]),
                   timeout=15, what="the Job's pod refused by the quota")
        with api_server.client("alice") as alice:
            rows = {t["task_id"]: t for t in alice.get("/api/training").json()["tasks"]
                    if t["dag_id"] == "training_recommendation_daily"}
        assert set(rows) == {"preprocess", "train"}, rows  # evaluate has not been scheduled: not shown
        assert (rows["preprocess"]["state"], rows["preprocess"]["waiting_for"], rows["preprocess"]["job"]) == (
            "scheduled", "pool", None)
        assert rows["preprocess"]["age_seconds"] >= 120
        assert (rows["train"]["state"], rows["train"]["waiting_for"], rows["train"]["team"], rows["train"]["job"]) \
            == ("deferred", "quota", "recsys", job["metadata"]["name"])
        assert rows["train"]["node"] is None and rows["train"]["reason"] is None
    finally:
        client.BatchV1Api(api_server.k8s).delete_namespaced_job(job["metadata"]["name"], "recsys",
                                                                propagation_policy="Background")


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


# ---------------------------------------------------------------- development instances

LIFECYCLE = ("dev_instance_create", "dev_instance_stop", "dev_instance_start", "dev_instance_delete")


@pytest.fixture(scope="module")
def instances(api_server):
    """alice's and bob's instances in recsys, made by Skiff's own lifecycle code; the DAGs unpaused."""
    from operators.devinstances import lifecycle
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import example_path, load_platform

    with httpx.Client(base_url=f"{api_server.url}/api/v2", timeout=30,
                      headers={"Authorization": f"Bearer {api_server.token('admin')}"}) as admin:
        for dag_id in LIFECYCLE:
            assert admin.patch(f"/dags/{dag_id}", json={"is_paused": False}).status_code == 200
    platform = load_platform(example_path())
    for owner, name in (("alice", "nb-a"), ("bob", "nb-b")):
        req = request_from_params(platform, owner, {"name": name, "team": "recsys", "cpu": 1, "memory": 1})
        lifecycle.create(Kube(api_server.k8s), req, Settings.from_config())
    return api_server


def _run(api_server, dag_id: str, run_id: str) -> dict:
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {api_server.token('admin')}"}) as admin:
        return admin.get(f"{api_server.url}/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()


def _run_count(api_server, dag_id: str, conf: dict) -> int:
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {api_server.token('admin')}"}) as admin:
        runs = admin.get(f"{api_server.url}/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"]
    return sum(r["conf"] == conf for r in runs)


def _names(c) -> set[tuple[str, str]]:
    return {(i["owner"], i["name"]) for i in c.get("/api/instances").json()["instances"]}


def test_users_see_their_own_instances_team_admins_their_teams_and_nobody_sees_a_password(instances):
    with instances.client("alice") as alice, instances.client("bob") as bob, instances.client("carol") as carol, \
            instances.client("admin") as admin:
        assert _names(bob) == {("bob", "nb-b")}
        assert _names(alice) == {("alice", "nb-a"), ("bob", "nb-b")}  # alice is recsys's admin
        assert _names(carol) == set()  # nlp's admin: not recsys
        assert _names(admin) == {("alice", "nb-a"), ("bob", "nb-b")}
        rows = {i["name"]: i for i in alice.get("/api/instances").json()["instances"]}
        listing = alice.get("/api/instances").text
    assert rows["nb-a"]["mine"] and not rows["nb-b"]["mine"]
    assert rows["nb-a"]["ssh"].startswith("ssh -p ") and set(rows["nb-a"]["urls"]) >= {"jupyter", "code-server"}
    assert "password" not in listing.lower()


def test_the_password_is_given_to_its_owner_only(instances):
    import base64

    from operators.devinstances import naming

    secret = client.CoreV1Api(instances.k8s).read_namespaced_secret(naming.secret_name("alice", "nb-a"), "recsys")
    want = base64.b64decode(secret.data["password"]).decode()
    with instances.client("alice") as alice, instances.client("bob") as bob, instances.client("admin") as admin:
        mine = alice.get("/api/instances/recsys/nb-a/password")
        assert (mine.status_code, mine.json()["password"]) == (200, want)
        assert mine.headers["cache-control"] == "no-store"
        assert bob.get("/api/instances/recsys/nb-a/password").status_code == 404  # not even visible to bob
        assert admin.get("/api/instances/recsys/nb-a/password").status_code == 403  # visible, not admin's
        assert alice.get("/api/instances/recsys/nb-b/password").status_code == 403  # team admin: still bob's
        assert alice.get("/api/instances/recsys/nope/password").status_code == 404


def test_a_stopped_instance_has_no_password_and_a_started_one_the_secrets_with_its_start(instances):
    """Issue 37 item 9: the card showed a password read before Stop after Stop, and the old one after Start. The
    API gives none for a stopped instance (409), and each password with the start it belongs to (the listing's
    ``start_epoch``, bumped by every stop and start), which the page compares before showing it."""
    import base64

    from operators.devinstances import lifecycle, naming
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import example_path, load_platform

    kube = Kube(instances.k8s)
    req = request_from_params(load_platform(example_path()), "alice", {"name": "nb-p", "team": "recsys", "cpu": 1,
                                                                       "memory": 1})
    lifecycle.create(kube, req, Settings.from_config())

    def row(c) -> dict:
        return next(i for i in c.get("/api/instances").json()["instances"] if i["name"] == "nb-p")

    def secret() -> str:
        s = client.CoreV1Api(instances.k8s).read_namespaced_secret(naming.secret_name("alice", "nb-p"), "recsys")
        return base64.b64decode(s.data["password"]).decode()

    with instances.client("alice") as alice:
        first = alice.get("/api/instances/recsys/nb-p/password").json()
        assert (first["password"], first["start_epoch"]) == (secret(), row(alice)["start_epoch"])
        lifecycle.stop(kube, "alice", "recsys", "nb-p")
        stopped = alice.get("/api/instances/recsys/nb-p/password")
        assert stopped.status_code == 409 and "once started" in stopped.json()["detail"], stopped.text
        assert row(alice)["start_epoch"] != first["start_epoch"]
        lifecycle.start(kube, "alice", "recsys", "nb-p")
        again = alice.get("/api/instances/recsys/nb-p/password").json()
    assert again["password"] == secret() != first["password"]
    assert again["start_epoch"] not in (first["start_epoch"], None)
    lifecycle.delete(kube, "alice", "recsys", "nb-p", Settings.from_config())


def test_an_action_is_a_run_of_the_lifecycle_dag_triggered_as_the_user(instances):
    with instances.client("alice") as alice:
        r = alice.post("/api/instances/recsys/nb-a/stop", json={})
    assert r.status_code == 202, r.text
    run = _run(instances, "dev_instance_stop", r.json()["dag_run_id"])
    assert run["triggering_user_name"] == "alice" and run["conf"] == {"name": "nb-a", "team": "recsys"}


def test_actions_on_someone_elses_instance_are_refused_and_admins_act_for_the_owner(instances):
    with instances.client("alice") as alice, instances.client("bob") as bob, instances.client("admin") as admin, \
            instances.client("carol") as carol:
        assert bob.post("/api/instances/recsys/nb-a/delete", json={}).status_code == 404  # a member: own only
        assert carol.post("/api/instances/recsys/nb-b/stop", json={}).status_code == 404  # nlp's admin, not recsys's
        assert alice.post("/api/instances/recsys/nb-a/reboot", json={}).status_code == 404
        team_admin = alice.post("/api/instances/recsys/nb-b/stop", json={})  # alice is recsys's admin
        airflow_admin = admin.post("/api/instances/recsys/nb-b/start", json={})
    for r, user in ((team_admin, "alice"), (airflow_admin, "admin")):
        assert r.status_code == 202, r.text
        run = _run(instances, r.json()["dag_id"], r.json()["dag_run_id"])
        assert run["triggering_user_name"] == user
        assert run["conf"] == {"name": "nb-b", "team": "recsys", "owner": "bob"}


def test_a_user_whose_airflow_role_may_not_trigger_gets_airflows_403(instances):
    from operators.devinstances import lifecycle
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import example_path, load_platform

    settings = Settings.from_config()
    req = request_from_params(load_platform(example_path()), "carol", {"name": "nb-c", "team": "nlp", "cpu": 1, "memory": 1})
    lifecycle.create(Kube(instances.k8s), req, settings)  # carol's own instance: only her Airflow role stands in the way
    try:
        with instances.client("carol") as carol:  # viewer in Airflow, admin of nlp in the platform file
            created = carol.post("/api/instances", json={"name": "nb-c2", "team": "nlp", "cpu": 1, "memory": 1})
            stopped = carol.post("/api/instances/nlp/nb-c/stop", json={})
        for r in (created, stopped):
            assert r.status_code == 403 and "Airflow refused" in r.json()["detail"], r.text
        assert _run_count(instances, "dev_instance_stop", conf={"name": "nb-c", "team": "nlp"}) == 0
    finally:
        lifecycle.delete(Kube(instances.k8s), "carol", "nlp", "nb-c", settings)


def test_create_triggers_the_create_dag_as_the_user_with_the_form_as_conf(instances):
    form = {"name": "nb-new", "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": 2, "gpu": 0,
            "mounts": [{"pvc": "recsys-datasets", "path": "/data", "read_only": True}]}
    with instances.client("bob") as bob:
        r = bob.post("/api/instances", json=form)
    assert r.status_code == 202, r.text
    run = _run(instances, "dev_instance_create", r.json()["dag_run_id"])
    assert run["triggering_user_name"] == "bob" and run["conf"] == form


@pytest.mark.parametrize(("form", "field"), [
    ({"name": "Bad_Name", "team": "recsys", "cpu": 1, "memory": 1}, "name="),
    ({"name": "nb", "team": "recsys", "image": "tf9-quantum", "cpu": 1, "memory": 1}, "image="),
    ({"name": "nb", "team": "nlp", "cpu": 1, "memory": 1}, "team="),  # bob is not in nlp
    ({"name": "nb", "team": "recsys", "cpu": 7, "memory": 1}, "cpu="),  # 8 hard, 2 used by nb-a and nb-b
    ({"name": "nb", "team": "recsys", "cpu": 1, "memory": 1, "gpu": 1}, "image="),  # GPU on a CPU image
    ({"name": "nb", "team": "recsys", "cpu": 1, "memory": 1,
      "mounts": [{"pvc": "alice-home", "path": "/a", "read_only": True}]}, "mounts[0].pvc="),
    ({"name": "nb", "team": "recsys", "cpu": 1, "memory": 1,
      "mounts": [{"pvc": "recsys-datasets", "path": "/d", "read_only": False}]}, "mounts[0].read_only="),
    ({"name": "nb", "team": "recsys", "cpu": 1, "memory": 1, "owner": "alice"}, "owner="),
])
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_triggered(instances, form, field):
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {instances.token('admin')}"}) as admin:
        before = admin.get(f"{instances.url}/api/v2/dags/dev_instance_create/dagRuns").json()["total_entries"]
        with instances.client("bob") as bob:
            r = bob.post("/api/instances", json=form)
        after = admin.get(f"{instances.url}/api/v2/dags/dev_instance_create/dagRuns").json()["total_entries"]
    assert r.status_code == 400 and r.json()["detail"].startswith(field), r.text
    assert after == before


def test_a_paused_lifecycle_dag_is_named_and_refused(instances):
    with httpx.Client(base_url=f"{instances.url}/api/v2", timeout=30,
                      headers={"Authorization": f"Bearer {instances.token('admin')}"}) as admin:
        admin.patch("/dags/dev_instance_start", json={"is_paused": True})
        try:
            with instances.client("alice") as alice:
                assert alice.get("/api/me").json()["paused"] == ["dev_instance_start"]
                r = alice.post("/api/instances/recsys/nb-a/start", json={})
            assert r.status_code == 409 and "dev_instance_start is paused" in r.json()["detail"]
        finally:
            admin.patch("/dags/dev_instance_start", json={"is_paused": False})


def test_the_form_offers_the_catalogue_free_quota_and_the_users_volumes(instances):
    with instances.client("bob") as bob:
        opts = bob.get("/api/instances/options").json()
    assert [i["name"] for i in opts["images"]] == ["tf2-cpu", "tf2-gpu", "tf1-cpu"]
    assert [i["name"] for i in opts["images"] if i["default"]] == ["tf2-cpu"]
    (team,) = opts["teams"]
    assert team["team"] == "recsys" and team["free"]["cpu"] == 6.0  # 8 - nb-a's 1 - nb-b's 1
    assert team["volumes"] == [{"pvc": "recsys-datasets", "mode": "ro"}]  # alice writes, recsys reads
    # one number of extra ports, declared once: the form's (issue 29: it allowed 3), the DAG's, the spec's
    from operators.devinstances.dags import create_params
    from operators.devinstances.spec import MAX_EXTRA_PORTS

    assert opts["max_extra_ports"] == MAX_EXTRA_PORTS == create_params()["extra_ports"].schema["maxItems"] == 5


def test_gpu_hours_come_from_the_usage_report_for_the_users_teams(api_server):
    from operators.platform.usage import write_report

    with api_server.client("bob") as bob:
        assert bob.get("/api/usage").json()["users"] == []  # no report yet
        write_report({"generated_at": "2026-11-30T12:00:00+00:00",
                      "period": {"since": "2026-10-31T12:00:00+00:00", "until": "2026-11-30T12:00:00+00:00"},
                      "by_user": [{"user": "alice", "team": "recsys", "gpu_hours": 3.0, "cpu_hours": 1, "jobs": 1},
                                  {"user": "alice", "team": "nlp", "gpu_hours": 2.0, "cpu_hours": 1, "jobs": 1},
                                  {"user": "carol", "team": "nlp", "gpu_hours": 9.0, "cpu_hours": 1, "jobs": 1}]},
                     api_server.home / "skiff" / "usage.json")
        assert bob.get("/api/usage").json()["users"] == [{"user": "alice", "gpu_hours": 3.0}]
    with api_server.client("alice") as alice:
        assert alice.get("/api/usage").json()["users"] == [{"user": "carol", "gpu_hours": 9.0},
                                                            {"user": "alice", "gpu_hours": 5.0}]
        # a report without Prometheus: GPU-hours held and used not known, the reason, no number
        write_report({"generated_at": "2026-11-30T12:00:00+00:00",
                      "by_user": [{"user": "alice", "team": "recsys", "gpu_hours": 3.0, "cpu_hours": 1, "jobs": 1}],
                      "gpu": {"source": None, "problem": "no Prometheus configured ([skiff] prometheus_url)",
                              "step_seconds": 300, "by_user": [], "by_team": []}},
                     api_server.home / "skiff" / "usage.json")
        assert alice.get("/api/usage").json()["efficiency"] == {
            "source": None, "problem": "no Prometheus configured ([skiff] prometheus_url)", "teams": [], "users": []}
    # with Prometheus: the GPU efficiency rows of the caller's teams only (bob: recsys)
    idle = {"gpu_hours_held": 1.0, "gpu_hours_measured": 1.0, "gpu_hours_used": 0.0, "efficiency_percent": 0.0}
    write_report({"generated_at": "2026-11-30T12:00:00+00:00", "by_user": [],
                  "gpu": {"source": "prometheus", "problem": None, "step_seconds": 300,
                          "by_user": [{"user": "alice", "team": "recsys", "kind": "instance", **idle},
                                      {"user": "carol", "team": "nlp", "kind": "instance", **idle}],
                          "by_team": [{"team": "recsys", "kind": "instance", **idle},
                                      {"team": "nlp", "kind": "instance", **idle}]}},
                 api_server.home / "skiff" / "usage.json")
    with api_server.client("bob") as bob:
        eff = bob.get("/api/usage").json()["efficiency"]
        assert [(r["user"], r["kind"], r["efficiency_percent"]) for r in eff["users"]] == [("alice", "instance", 0.0)]
        assert [r["team"] for r in eff["teams"]] == ["recsys"] and eff["source"] == "prometheus"


def test_a_name_the_user_already_has_in_the_team_is_a_409_saying_so_and_nothing_is_triggered(instances):
    """issue 29: the page said "creating" and the run's log "already existed ... password unchanged"."""
    form = {"name": "nb-b", "team": "recsys", "cpu": 1, "memory": 1}
    before = _run_count(instances, "dev_instance_create", form)
    with instances.client("bob") as bob:
        r = bob.post("/api/instances", json=form)
    assert r.status_code == 409, r.text
    assert r.json()["detail"].startswith("name='nb-b': you already have an instance with this name in team 'recsys'")
    assert _run_count(instances, "dev_instance_create", form) == before
    with instances.client("alice") as alice:  # the same name is alice's to take (instances are per owner)
        assert alice.post("/api/instances", json=form).status_code == 202


def _burn(stop):
    while not stop.is_set():
        pass


def test_five_concurrent_creates_through_the_page_are_each_accepted_under_load(instances):
    """issue 29: five creates at once through the page stalled the api-server for minutes (then a 500). With two
    more busy processes on the machine every one is accepted; how fast is measured, not asserted: BENCHMARKS.md
    "Loaded machine" (benchmarks/loaded.py) times them on the demo's stack under deliberate load."""
    import multiprocessing
    import time
    from concurrent.futures import ThreadPoolExecutor

    def create(i: int) -> tuple[int, float, str]:
        user = ("alice", "bob")[i % 2]
        with instances.client(user) as c:
            t0 = time.monotonic()
            r = c.post("/api/instances", json={"name": f"burst-{i}", "team": "recsys", "cpu": 1, "memory": 1})
            return r.status_code, time.monotonic() - t0, r.text[:200]

    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(2)]
    for b in burners:
        b.start()
    try:
        with ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(create, range(5)))
    finally:
        stop.set()
        for b in burners:
            b.join(5)
    assert [a[0] for a in answers] == [202] * 5, answers


def _api_server_rss(url: str) -> int:
    """Resident bytes of the api-server's process tree (the process listening on the page's port, its parent
    ``airflow api-server`` and their children): what serves Airflow's UI, REST API and the Execution API."""
    import psutil

    port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    pid = next(c.pid for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port)
    listener = psutil.Process(pid)
    root = listener.parent() if "api-server" in " ".join(listener.parent().cmdline()) else listener
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])


def test_a_flooding_and_a_dripping_instance_never_grow_the_api_server_and_every_request_answers(instances):
    """Issue 30, class 1, on the real api-server: alice's instance floods its port 8888 (64 KiB chunks for ever)
    and bob's drips (a byte every 0.2 s for ever), real loopback servers behind kubesim's proxy. Every page
    request answers 200 while the idle reads run; once they are cut at their bound (256 KiB, 10 s) the rows say
    so; the api-server's resident memory grew by less than 50 MB (it grew by 430 MB in 20 s before)."""
    from operators.devinstances import naming
    from tests.support.hostile.hostile_servers import Backend, serve_from

    core = client.CoreV1Api(instances.k8s)
    for owner, name in (("alice", "nb-a"), ("bob", "nb-b")):
        wait_until(lambda o=owner, n=name: any(
            p.metadata.name == naming.pod_name(o, n) and p.status.phase == "Running"
            for p in core.list_namespaced_pod("recsys").items), what=f"{owner}'s {name} running")
    flood, drip = Backend("flood"), Backend("drip")
    try:
        serve_from(instances.k8s, "recsys", "alice", "nb-a", flood)
        serve_from(instances.k8s, "recsys", "bob", "nb-b", drip)
        before, peak, codes = _api_server_rss(instances.url), 0, []
        with instances.client("alice") as alice:  # recsys's admin: sees both
            def both_cut():
                nonlocal peak
                r = alice.get("/api/instances")
                codes.append(r.status_code)
                peak = max(peak, _api_server_rss(instances.url))
                rows = {i["name"]: i["idle_detail"] or "" for i in r.json()["instances"]}
                return "over 262144 bytes" in rows.get("nb-a", "") and "did not end within 10 s" in rows.get("nb-b", "")

            wait_until(both_cut, timeout=120, interval=0.5, what="both idle reads cut at their bound")
    finally:
        flood.close()
        drip.close()
    assert set(codes) == {200}, codes
    assert flood.sent > 256 * 1024
    assert peak - before < 50 * 1024 * 1024, (before, peak)


def test_a_running_instance_shows_what_it_uses_now_beside_what_it_holds_to_whom_may_see_it(instances):
    """The row's live usage is the metrics API's reading of its pod (kubesim's scripted pod uses what its
    kubesim.io/cpu-usage and memory-usage annotations say: 250m and 300 MiB here), beside its request and limit;
    bob sees his own row only, so alice's reading never reaches him."""
    core = client.CoreV1Api(instances.k8s)
    pod = next(p for p in core.list_namespaced_pod("recsys", label_selector="skiff.io/instance=nb-a").items)
    core.patch_namespaced_pod(pod.metadata.name, "recsys", {"metadata": {"annotations": {
        "kubesim.io/cpu-usage": "250m", "kubesim.io/memory-usage": "300Mi"}}})

    def usage() -> dict | None:
        with instances.client("alice") as alice:
            rows = {i["name"]: i for i in alice.get("/api/instances").json()["instances"]}
        u = rows["nb-a"].get("usage")
        return u if u and u["missing"] is None and u["cpu"] == pytest.approx(0.25) else None

    # two readings with the annotations (the kubelet reads every 15 s) make the rate exact
    u = wait_until(usage, timeout=90, interval=2, what="alice's instance showing 250m and 300 MiB")
    assert u["memory"] == 300 * 2**20
    assert (u["cpu_request"], u["memory_limit"], u["gpu"]) == (1.0, float(2**30), 0)
    assert u["at"] and u["window"]
    with instances.client("bob") as bob:
        assert [i["name"] for i in bob.get("/api/instances").json()["instances"]] == ["nb-b"]
