"""Skiff's page in headless chromium on an api-server whose ``[api] base_url`` has a sub-path
(``http://localhost:<port>/airflow/``): the navigation entry, the React app's bundle, the page's reads (GET) and an
action (POST) all resolve under it, authenticated by the cookie Airflow's login sets there. The ``api_server`` fixture runs no
scheduler: the action is checked by the DAG run it created. Screenshots: ``.artifacts/ui/subpath-*.png``.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

import httpx
from kubernetes import client

from kubesim.testing import wait_until
from operators.k8s import Kube
from tests.support.ui.ui_support import SUB_PATH, AirflowPage

NAME = "sub-nb"


def _stop_runs(api_server) -> list[dict]:
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {api_server.token('admin')}"}) as admin:
        runs = admin.get(f"{api_server.url}/api/v2/dags/dev_instance_stop/dagRuns").json()["dag_runs"]
    return [r for r in runs if r["conf"] == {"name": NAME, "team": "recsys"}]


def test_the_page_reads_and_acts_under_a_sub_path_base_url(api_server, browser):
    from selenium.webdriver.common.by import By

    from operators.devinstances import lifecycle, naming
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import example_path, load_platform

    with httpx.Client(base_url=f"{api_server.url}/api/v2", timeout=30,
                      headers={"Authorization": f"Bearer {api_server.token('admin')}"}) as admin:
        assert admin.patch("/dags/dev_instance_stop", json={"is_paused": False}).status_code == 200
    req = request_from_params(load_platform(example_path()), "alice", {"name": NAME, "team": "recsys", "cpu": 1, "memory": 1})
    lifecycle.create(Kube(api_server.k8s), req, Settings.from_config())
    page = AirflowPage(browser, api_server.url, api_server.password, "subpath")
    try:
        page.login("alice")
        nav = page.css("a[href$='/plugin/skiff']")
        assert urlsplit(nav.get_attribute("href")).path == f"{SUB_PATH}/plugin/skiff"
        page.open_from_navigation()  # the bundle loaded and GET api/me answered, by the login cookie
        assert browser.execute_script("return location.pathname") == f"{SUB_PATH}/plugin/skiff"
        bundle = browser.execute_script(
            "return performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)"
            ".filter((p) => p.endsWith('/skiff.js'))")
        assert bundle == [f"{SUB_PATH}/skiff/static/skiff.js"], bundle
        assert page.css(".team[data-team='recsys'] .bar[data-resource='cpu'] .hard").text == "8"
        page.wait(60).until(lambda d: page.css(f"tr[data-instance='{NAME}'] .pill").text == "Running")
        page.shot("quota-and-instance")

        secret = client.CoreV1Api(api_server.k8s).read_namespaced_secret(naming.secret_name("alice", NAME),
                                                                         "recsys")
        password = base64.b64decode(secret.data["password"]).decode()
        assert password not in browser.page_source
        page.css(f"tr[data-instance='{NAME}'] button.show-password").click()
        assert page.css(f"tr[data-instance='{NAME}'] code.password").text == password
        page.shot("password-shown")

        assert _stop_runs(api_server) == []
        page.css(f"tr[data-instance='{NAME}'] button[data-action='stop']").click()
        toast = page.wait().until(lambda d: d.find_element(By.ID, "toast").text or None)
        assert toast.startswith(f"stop of {NAME} requested (run "), toast
        (run,) = wait_until(lambda: _stop_runs(api_server), 15, 0.3, what="the stop run the page triggered")
        assert run["triggering_user_name"] == "alice"
        page.shot("stop-requested")
    finally:
        page.shot("last")
        lifecycle.delete(Kube(api_server.k8s), "alice", "recsys", NAME, Settings.from_config())
