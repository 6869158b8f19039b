"""A newcomer's walk through a running demo (issue 36, "Done when"), from what the demo printed: every address it
printed opens, Skiff's page in chromium shows alice, bob and carol each what they may see, and Prometheus has
fired no alert and holds none pending that would fire. Used by the demo's e2e test while its UI is up."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import httpx

from devstack.alert_replay import DEMO_RULES, firing, replay, rules_of
from devstack.alert_replay import record as record_series
from kubesim.testing import wait_until

# a pending alert the healthy demo may hold, with why it is right to: its `for:` is hours, and what it says is true
# of the demo (the replay of 15 recorded minutes shows none fires then: tests/integration/devstack/test_demo_alerts.py)
PENDING_OK = {"SkiffInstanceIdleByUsage": "alice's demo instance is idle: nobody works in it until the reader does",
              "SkiffGpuHeldIdle": "alice's demo instance holds a GPU it leaves idle (devstack/demo_setup.py "
                                  "DEMO_INSTANCE): the waste the usage row shows; it fires after its hour"}


def printed_addresses(text: str) -> dict[str, str]:
    """Every http(s) address the demo printed, by what it is (the instance's by its name on the line)."""
    out = {"ui": re.search(r"Airflow UI: +(http://\S+)", text).group(1),
           "kubesim": re.search(r"kubesim API: +(https://\S+)", text).group(1),
           "prometheus": re.search(r"Prometheus: +(http://\S+)", text).group(1),
           "next step": re.search(r"1\. open (http://\S+)", text).group(1)}
    out |= {f"prometheus {page}": a for page, a in
            re.findall(r"(alerts|rules|targets) (http://127\.0\.0\.1:\d+/\S+?)[,)]", text)}
    out |= dict(re.findall(r"^\[demo\]   (jupyter|code-server|tensorboard) +(http://\S+)$", text, re.M))
    said = "\n".join(line for line in text.splitlines() if line.startswith("[demo]"))  # not make's or pip's
    found = set(re.findall(r"https?://[^\s,)'\"]+", said))
    assert found == set(out.values()), f"printed but not checked: {found - set(out.values())}"
    return out


def assert_every_address_opens(addresses: dict[str, str], kubeconfig: Path) -> None:
    """Each answers as what it is: a page (200), kubesim's API verified with the CA of the printed ``kubeconfig``
    (its version), and code-server's address the page saying it is not in the demo's image (503, as the demo says)."""
    import base64

    import yaml

    (cluster,) = yaml.safe_load(kubeconfig.read_text())["clusters"]
    ca = base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode()
    for what, address in addresses.items():
        if what == "kubesim":
            r = httpx.get(f"{address}/version", verify=ssl.create_default_context(cadata=ca), timeout=10)
            assert r.status_code == 200 and "gitVersion" in r.json(), (what, r.status_code, r.text[:200])
            continue
        r = httpx.get(address, timeout=30, follow_redirects=True)
        if what == "code-server":
            assert r.status_code == 503 and "code-server is not installed" in r.text, (what, r.status_code)
        else:
            assert r.status_code == 200, (what, address, r.status_code, r.text[:200])


def assert_the_page_shows_each_their_own(driver, ui: str, passwords: dict[str, str], instance: dict[str, str]) -> None:
    """alice (recsys admin, in nlp) sees her instance with the printed addresses and both teams' training; bob
    (recsys member) sees recsys only and no instance (not his); carol (nlp admin, Airflow viewer) sees nlp only."""
    from selenium.webdriver.common.by import By

    from tests.support.ui.ui_support import AirflowPage

    page = AirflowPage(driver, ui, passwords.get, "demo")
    teams = {"alice": ["nlp", "recsys"], "bob": ["recsys"], "carol": ["nlp"]}
    for user, mine in teams.items():
        page.login(user)
        page.open_from_navigation()
        page.wait(60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#training-table tr[data-task]"))
        page.wait(60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".team[data-team]"))
        page.shot(user)
        who = page.css("[data-skiff='page'] #who").text
        said = re.fullmatch(rf"Signed in as {user} · teams (.+)", who)
        assert said and sorted(said.group(1).split(", ")) == mine, (user, who)
        cards = sorted(e.get_attribute("data-team") for e in driver.find_elements(By.CSS_SELECTOR, ".team[data-team]"))
        assert cards == mine, (user, cards)
        rows = [e.get_attribute("data-task") for e in driver.find_elements(By.CSS_SELECTOR,
                                                                            "#training-table tr[data-task]")]
        nlp_rows = [r for r in rows if r.startswith("kueue_demo_nlp_borrow.")]
        recsys_rows = [r for r in rows if r.startswith(("training_recommendation_daily.", "training_failure_demo."))]
        assert bool(nlp_rows) == ("nlp" in mine) and bool(recsys_rows) == ("recsys" in mine), (user, rows)
        instances = driver.find_elements(By.CSS_SELECTOR, "tr[data-instance]")
        if user == "alice":
            (row,) = instances
            assert (row.get_attribute("data-instance"), row.get_attribute("data-state")) == ("notebook", "Running")
            links = {a.get_attribute("data-link"): a.get_attribute("href")
                     for a in row.find_elements(By.CSS_SELECTOR, "a[data-link]")}
            assert links == instance, (links, instance)
        else:
            assert instances == [], (user, [e.text for e in instances])


def assert_no_alert_fired_or_would(prometheus: str, workdir: Path) -> None:
    """Prometheus' ALERTS: none fired at any evaluation since it started (a range over its whole life), none pending
    but PENDING_OK's; and the series it scraped, replayed through every rule of the demo with its ``for:``
    (devstack/alert_replay.py), fire none."""
    def query(q: str) -> list[dict]:
        body = httpx.get(f"{prometheus}/api/v1/query", params={"query": q}, timeout=30).json()
        assert body["status"] == "success", (q, body)
        return body["data"]["result"]

    fired = query('ALERTS{alertstate="firing"}[1h]')
    assert fired == [], [s["metric"] for s in fired]
    # pending now: only PENDING_OK's. One whose condition held while the demo's steps ran (a team's GPUs all
    # requested: SkiffTeamGpuAtQuota, for: 30m) clears once Skiff's endpoint reports them ended (5 s cache, 10 s
    # scrape and evaluation): waited for, a minute at most
    def others_pending() -> list[str]:
        return sorted({s["metric"]["alertname"] for s in query('ALERTS{alertstate="pending"}')} - set(PENDING_OK))

    try:
        wait_until(lambda: not others_pending(), 60, 2, what="no pending alert but PENDING_OK's")
    except TimeoutError:
        raise AssertionError(f"pending on a healthy demo: {others_pending()}") from None
    assert {r["alert"] for r in rules_of(DEMO_RULES) if r.get("alert") in PENDING_OK} == set(PENDING_OK)
    recording = record_series(prometheus, minutes=60)
    assert recording["series"], "no series recorded: the replay would prove nothing"
    result = replay(recording, DEMO_RULES, workdir)
    assert result.returncode == 0, (firing(result), result.stdout[-2000:], result.stderr[-2000:])
