"""Skiff's page as people use it, in headless Debian chromium against ``airflow standalone`` + kubesim.

alice logs in, opens "Skiff" from Airflow's navigation, reads her teams' quota bars (numbers checked against
the live ResourceQuota), creates a development instance through the form, watches it become Running, reveals
its password (absent from the page until then), stops it and sees the state change, then deletes it. bob, in
the same team, does not see it; an anonymous API call gets 401. Every step leaves a screenshot in
``.artifacts/ui/``.
"""

from __future__ import annotations

import base64
import math

import httpx
import pytest
from kubernetes import client
from ui_support import AirflowPage

from kubesim.testing import wait_until

pytestmark = pytest.mark.e2e

LIFECYCLE = ("dev_instance_create", "dev_instance_stop", "dev_instance_start", "dev_instance_delete")
NAME = "ui-notebook"


@pytest.fixture(scope="module")
def stack(team_stack):
    for dag_id in LIFECYCLE:  # what an operator does once when deploying Skiff
        team_stack.unpause(dag_id)
    return team_stack


class Page(AirflowPage):
    """The browser on Airflow's UI, with Skiff's page framed in it, and alice's instance ``NAME`` on it."""

    def __init__(self, driver, stack):
        super().__init__(driver, stack.airflow_url, stack.password, "page")

    def instance_row(self, timeout: float = 30):
        return self.css(f"tr[data-instance='{NAME}'][data-team='recsys']", timeout)

    def state(self) -> str:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.common.by import By

        try:
            return self.d.find_element(By.CSS_SELECTOR, f"tr[data-instance='{NAME}'] .pill").text
        except (NoSuchElementException, StaleElementReferenceException):
            return ""

    def wait_state(self, want: str, timeout: float = 120) -> None:
        self.wait(timeout).until(lambda d: self.state() == want, f"{NAME} never showed {want!r}")


def _used(k8s, resource: str) -> float:
    """recsys's quota used, as a number (cpu cores, memory bytes)."""
    from operators.core.quantity import parse_quantity

    used = client.CoreV1Api(k8s).read_namespaced_resource_quota("skiff-quota", "recsys").status.used or {}
    return float(parse_quantity(used.get(resource, "0")))


def _num(x: float) -> str:
    """A number as the page prints it (static/app.js ``num``: integers plain, else one decimal)."""
    return str(int(x)) if float(x).is_integer() else f"{math.floor(x * 10 + 0.5) / 10:g}"  # JS Math.round


def _bar(page, resource: str, part: str) -> str:
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )

    try:
        return page.css(f".team[data-team='recsys'] .bar[data-resource='{resource}'] .{part}", 1).text
    except (NoSuchElementException, StaleElementReferenceException, TimeoutException):
        return ""


def test_alice_creates_sees_reveals_stops_and_deletes_an_instance_bob_sees_nothing(stack, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from operators.devinstances import naming

    k8s = stack.k8s()
    core = client.CoreV1Api(k8s)
    page = Page(browser, stack)
    # a pod that keeps running (kubesim's default container exits after 0.2 s, and a finished pod uses no quota)
    seed = {"metadata": {"name": "ui-quota-seed", "annotations": {"kubesim.io/duration": "3600"}},
            "spec": {"containers": [{
        "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "3Gi"},
                                                       "limits": {"cpu": "2", "memory": "3Gi"}}}]}}
    core.create_namespaced_pod("recsys", seed)
    try:
        # other tests of a full run may still have pods in recsys: the page must show what the quota says now
        # (the seed makes it at least 2 cpu / 3 GiB), and the form's bound follows from it
        def shows_the_quota() -> tuple[float, float] | None:
            cpu_used, mem_used = _used(k8s, "requests.cpu"), _used(k8s, "requests.memory") / 2**30
            if cpu_used < 2 or mem_used < 3:
                return None  # the seed is not counted yet
            if (_bar(page, "cpu", "used"), _bar(page, "memory", "used")) != (_num(cpu_used), _num(mem_used)):
                return None
            return cpu_used, mem_used

        # log in, open the page from Airflow's navigation
        page.login("alice")
        page.open_from_navigation()
        cpu_used, _ = wait_until(shows_the_quota, 60, 0.5, what="the page showing recsys's quota used")
        assert _bar(page, "cpu", "hard") == "8" and _bar(page, "memory", "hard") == "32"
        page.shot("quota")

        # the New-instance form: sizes bounded by the team's free quota
        page.css("#new-instance").click()
        form = page.css("#create-form")
        form.find_element(By.NAME, "name").send_keys(NAME)
        Select(form.find_element(By.NAME, "team")).select_by_value("recsys")
        cpu_max = form.find_element(By.NAME, "cpu").get_attribute("max")
        assert cpu_max == str(int(8 - _used(k8s, "requests.cpu"))) and int(cpu_max) <= 6  # hard - used (>= the seed)
        for field, value in (("cpu", "1"), ("memory", "2"), ("gpu", "0")):
            box = form.find_element(By.NAME, field)
            box.clear()
            box.send_keys(value)
        page.shot("new-instance-form")
        form.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
        page.instance_row(timeout=60)
        page.wait_state("Running", timeout=180)
        row = page.instance_row()
        assert row.find_element(By.CSS_SELECTOR, ".ssh").text.startswith("ssh -p ")
        assert row.find_element(By.CSS_SELECTOR, "a[data-link='jupyter']").get_attribute("href").startswith("http")
        page.shot("instance-running")

        # the password: not in the page until "show", then exactly the Secret's
        secret = core.read_namespaced_secret(naming.secret_name("alice", NAME), "recsys")
        password = base64.b64decode(secret.data["password"]).decode()
        assert password not in browser.page_source
        row.find_element(By.CSS_SELECTOR, "button.show-password").click()
        shown = page.css(f"tr[data-instance='{NAME}'] code.password")
        assert shown.text == password
        page.shot("password-shown")

        # stop: the state changes on the page without a reload
        page.instance_row().find_element(By.CSS_SELECTOR, "button[data-action='stop']").click()
        page.wait_state("Stopped", timeout=120)
        assert password not in browser.page_source  # a stopped instance's password is forgotten by the page
        page.shot("instance-stopped")

        # bob is in recsys too, but sees only his own instances
        page.login("bob")
        page.open_from_navigation()
        page.wait().until(lambda d: d.find_element(By.ID, "instances").text.strip() != "")
        assert NAME not in browser.find_element(By.ID, "instances").text
        page.shot("bob-sees-no-instance")

        with httpx.Client(base_url=f"{stack.airflow_url}/skiff", timeout=30) as anon:
            assert anon.get("/api/instances").status_code == 401
            assert anon.get(f"/api/instances/recsys/{NAME}/password").status_code == 401

        # alice deletes it through the in-page confirmation
        page.login("alice")
        page.open_from_navigation()
        page.instance_row().find_element(By.CSS_SELECTOR, "button[data-action='delete']").click()
        page.css("#confirm-yes").click()
        page.wait().until(lambda d: NAME not in d.find_element(By.ID, "instances").text or None, 120)
        page.shot("instance-deleted")
    finally:
        browser.switch_to.default_content()
        page.shot("last")
        core.delete_namespaced_pod("ui-quota-seed", "recsys")
