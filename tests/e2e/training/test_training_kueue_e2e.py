"""Kueue end to end under a real Airflow on the production profile (PostgreSQL, Celery, two schedulers, two
triggerers) and ``kubesim --kueue --authz rbac``, Airflow acting as Skiff's ServiceAccount, the platform file saying
``queueing: kueue``: teams recsys (A) and nlp (B) in one cohort, 4 GPUs and 8 CPUs of nominal quota each
(``kueue_support.PLATFORM``, with alice and bob also in nlp). The DAGs are ``tests/e2e_dags/kueue_e2e.py``.

1. nlp's two scheduled steps take the cohort's 8 GPUs (4 borrowed from idle recsys); recsys' DAG runs an online
   step: Kueue preempts nlp's borrowing step at once, its task log says "preempted", the task stays deferred and
   later succeeds on the same Job (one Job for the try); recsys' step is admitted before any nlp step finishes.
2. bob creates a development instance in nlp through ``dev_instance_create`` (as he would from the page's
   form) larger than nlp-dev's quota (on borrowed CPUs) while nlp's scheduled step runs within nlp's quota;
   recsys' scheduled step wants its 8 CPUs back: Kueue reclaims the instance, never the step within quota.
3. In chromium, alice logs in to Airflow, opens Skiff's page from the navigation and reads each team's nominal,
   used, borrowed and lent quota per queue, and a waiting task's reason in Kueue's words (the Workload's).

One stack for the module (its own key: the session's shared stacks are stopped, not reconfigured). On
``airflow standalone`` the same operator, trigger and page code runs Kueue in ``make demo KUEUE=1``
(tests/e2e/devstack/test_demo_e2e.py: a borrower preempted by an online step, deferred, resumed on the same Job); this
module ran on both profiles until the suite outgrew its time budget (45 min), and the production profile, with its
two triggerers and Celery workers, is the one a deferred, preempted step could go wrong on.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from devstack.testing import _with_demo_team, own_stack
from kubesim.testing import wait_until
from operators.devinstances import naming
from tests.support.training.kueue_support import PLATFORM, G, V, condition, workload_of

pytestmark = [pytest.mark.e2e, pytest.mark.own_stack]

STEP = 45       # seconds an nlp GPU step runs: recsys' step admitted before one ends is a preemption's doing
CARD = "      - {user: carol, email: carol@example.com, role: admin}\n"
assert PLATFORM.count(CARD) == 1
# bob (an Airflow "user") creates the instance in nlp; alice, in both teams, reads both teams' cards on the page
STACK_PLATFORM = PLATFORM.replace(CARD, CARD + "      - {user: alice, email: alice@example.com}\n"
                                              "      - {user: bob, email: bob@example.com}\n")


@pytest.fixture(scope="module", params=[pytest.param("prod", marks=pytest.mark.prod)])
def stack(request, tmp_path_factory):
    """The production profile's stack: Celery + PostgreSQL with two schedulers and two triggerers (marked
    ``prod``, run with the other production-profile tests)."""
    started = time.monotonic()
    with own_stack(request.param, tmp_path_factory, key=f"kueue-{request.param}", kueue=True,
                   platform_text=STACK_PLATFORM) as s:
        _with_demo_team(s)      # the platform file's teams, home PVCs, LocalQueues and pools, as platform_sync
        s.started_in = time.monotonic() - started
        yield s


def jobs(stack, namespace: str, run_id: str) -> dict[str, client.V1Job]:
    """task id -> the Job of ``run_id``'s task (every Job, to count them: a second one would be a second entry)."""
    out: dict[str, list] = {}
    for j in client.BatchV1Api(stack.k8s()).list_namespaced_job(namespace).items:
        if (j.metadata.annotations or {}).get("skiff.io/run-id") == run_id:
            out.setdefault(j.metadata.labels["skiff.io/task-id"], []).append(j)
    for task_id, found in out.items():
        assert len(found) == 1, (task_id, [j.metadata.name for j in found])
    return {task_id: found[0] for task_id, found in out.items()}


def running(job: client.V1Job) -> bool:
    return not job.spec.suspend and (job.status.active or 0) > 0


def ti_state(stack, dag_id: str, run_id: str, task_id: str) -> str:
    return next(ti["state"] for ti in stack.task_instances(dag_id, run_id) if ti["task_id"] == task_id)


@pytest.mark.timeout(900)   # includes starting the module's stack
def test_an_online_step_preempts_a_borrowing_step_which_waits_deferred_and_succeeds_on_the_same_job(stack):
    print(f"stack started in {stack.started_in:.0f} s")
    k8s = stack.k8s()
    b_run = stack.trigger("kueue_e2e_nlp_borrow", {"seconds": STEP})
    both = wait_until(lambda: (js := jobs(stack, "nlp", b_run)) and len(js) == 2
                      and all(running(j) for j in js.values()) and js, 240, 0.5,
                      what="both nlp steps running on the cohort's 8 GPUs")
    uids = {task_id: j.metadata.uid for task_id, j in both.items()}
    gpu_usage = _flavor_usage(k8s, "nlp", "gpu", "nvidia.com/gpu")
    assert gpu_usage.get("total") == "8" and gpu_usage.get("borrowed") == "4", gpu_usage

    a_run = stack.trigger("kueue_e2e_recsys_online", {"seconds": 5})
    a_job = wait_until(lambda: jobs(stack, "recsys", a_run).get("a1"), 180, 0.5, what="recsys' online Job")
    assert a_job.metadata.labels["kueue.x-k8s.io/priority-class"] == "skiff-online"
    seen = time.monotonic()
    wait_until(lambda: not client.BatchV1Api(k8s).read_namespaced_job(a_job.metadata.name, "recsys").spec.suspend,
               60, 0.2, what="recsys' online step admitted")
    print(f"recsys' online Job admitted {time.monotonic() - seen:.1f} s after it was seen created")
    # admitted while both nlp steps are unfinished: Kueue took the GPUs back, it did not wait for a step to end
    at_admission = jobs(stack, "nlp", b_run)
    assert not any(j.status.succeeded for j in at_admission.values()), {
        t: j.status.succeeded for t, j in at_admission.items()}
    victims = [t for t, j in at_admission.items() if j.spec.suspend]
    assert len(victims) == 1, {t: j.spec.suspend for t, j in at_admission.items()}
    (victim,) = victims
    other = next(t for t in at_admission if t != victim)
    assert running(at_admission[other])          # the step within nlp's own quota runs on

    # the victim's task is told, in its log, while it stays deferred on its suspended Job
    def told() -> str | None:
        log = stack.task_log("kueue_e2e_nlp_borrow", b_run, victim)
        return log if "was preempted by Kueue" in log else None

    log = wait_until(told, 90, 1, what="the preempted step's log saying so")
    said = next(line for line in log.splitlines() if "was preempted by Kueue" in line)
    assert "reclamation within the cohort" in said and "not a failed try" in said, said
    assert ti_state(stack, "kueue_e2e_nlp_borrow", b_run, victim) == "deferred"

    assert stack.wait_run("kueue_e2e_recsys_online", a_run, timeout=180) == "success"
    assert ti_state(stack, "kueue_e2e_nlp_borrow", b_run, victim) == "deferred"   # recsys done, nlp's still on
    assert stack.wait_run("kueue_e2e_nlp_borrow", b_run, timeout=4 * STEP + 120) == "success"
    after = jobs(stack, "nlp", b_run)                              # one Job per task: the retry made none
    assert {t: j.metadata.uid for t, j in after.items()} == uids
    job = after[victim]
    assert job.spec.backoff_limit == 0 and not job.status.failed and job.status.succeeded == 1
    assert job.status.completion_time > a_job.metadata.creation_timestamp
    (ti,) = [ti for ti in stack.task_instances("kueue_e2e_nlp_borrow", b_run) if ti["task_id"] == victim]
    assert ti["try_number"] == 1, ti
    print(f"victim {victim}: Job {job.metadata.name} started {job.status.start_time}, done {job.status.completion_time};"
          f" said: {said}")
    assert f"Job nlp/{job.metadata.name} succeeded after 1 preemption(s) by Kueue" in stack.task_log(
        "kueue_e2e_nlp_borrow", b_run, victim)
    assert "was preempted by Kueue" not in stack.task_log("kueue_e2e_nlp_borrow", b_run, other)


def _instance_workload(k8s, sts: str) -> dict | None:
    items = client.CustomObjectsApi(k8s).list_namespaced_custom_object(G, V, "nlp", "workloads")["items"]
    return next((w for w in items if any(r["name"] == sts and r["kind"] == "StatefulSet"
                                         for r in w["metadata"].get("ownerReferences") or [])), None)


def _flavor_usage(k8s, cq: str, flavor: str, resource: str) -> dict:
    status = client.CustomObjectsApi(k8s).get_cluster_custom_object(G, V, "clusterqueues", cq).get("status") or {}
    f = next((f for f in status.get("flavorsUsage") or [] if f["name"] == flavor), {"resources": []})
    return next((r for r in f["resources"] if r["name"] == resource), {})


@pytest.mark.timeout(600)
def test_an_instance_on_borrowed_quota_is_reclaimed_before_a_scheduled_step_within_quota(stack):
    """The instance is created as bob would from the page: the page's create button triggers
    ``dev_instance_create`` with the form as the run's conf, which is what this test does through the REST API
    as bob (the form itself is driven in chromium by tests/e2e/ui/test_platform_page_in_browser.py)."""
    k8s = stack.k8s()
    q_run = stack.trigger("kueue_e2e_nlp_within_quota", {"seconds": 300})   # outlives the scenario
    wait_until(lambda: (j := jobs(stack, "nlp", q_run).get("scheduled")) and running(j), 180, 0.5,
               what="nlp's step running on its own 8 CPUs")
    assert _flavor_usage(k8s, "nlp", "default", "cpu").get("borrowed", "0") == "0"

    i_run = stack.trigger("dev_instance_create", {"name": "nb", "team": "nlp", "cpu": 4, "memory": 2}, user="bob")
    assert stack.wait_run("dev_instance_create", i_run, timeout=240) == "success", stack.task_log(
        "dev_instance_create", i_run, "create")[-3000:]
    sts = naming.statefulset_name("bob", "nb")
    labels = client.AppsV1Api(k8s).read_namespaced_stateful_set(sts, "nlp").metadata.labels
    assert labels["kueue.x-k8s.io/queue-name"] == "skiff-dev" and labels["kueue.x-k8s.io/priority-class"] == "skiff-dev"
    # nlp-dev's own 1 CPU and 3 borrowed from the cohort's idle ones
    wait_until(lambda: _flavor_usage(k8s, "nlp-dev", "default", "cpu").get("borrowed") == "3", 60, 0.5,
               what="the instance admitted on borrowed CPUs")

    r_run = stack.trigger("kueue_e2e_recsys_cpu", {"seconds": 10})          # recsys wants its own 8 CPUs
    wl = wait_until(lambda: (w := _instance_workload(k8s, sts)) and condition(w, "Preempted").get("status") == "True"
                    and w, 180, 0.5, what="the instance reclaimed")
    assert "reclamation within the cohort" in condition(wl, "Preempted")["message"]
    r_job = wait_until(lambda: (j := jobs(stack, "recsys", r_run).get("reclaim")) and not j.spec.suspend and j,
                       60, 0.5, what="recsys' step admitted")
    assert r_job.metadata.labels["kueue.x-k8s.io/priority-class"] == "skiff-scheduled"
    wait_until(lambda: not [p for p in client.CoreV1Api(k8s).list_namespaced_pod(
        "nlp", label_selector=f"{naming.LABEL_INSTANCE}=nb").items if p.status.phase == "Running"], 60, 0.5,
        what="the instance's pod gone")
    assert stack.wait_run("kueue_e2e_recsys_cpu", r_run, timeout=180) == "success"
    # the step within nlp's quota was never touched: running on its first admission, its Workload never preempted
    q_job = jobs(stack, "nlp", q_run)["scheduled"]
    assert running(q_job) and condition(workload_of(k8s, "nlp", q_job.metadata.name), "Preempted").get(
        "status") != "True"
    assert ti_state(stack, "kueue_e2e_nlp_within_quota", q_run, "scheduled") == "deferred"
    assert "preempted" not in stack.task_log("kueue_e2e_nlp_within_quota", q_run, "scheduled")


@pytest.mark.timeout(600)
def test_the_page_shows_each_teams_queue_figures_and_why_a_step_waits_in_kueues_words(stack, tmp_path):
    """In headless chromium, as alice (in both teams): Airflow's login, "Skiff" in its navigation, then each team's
    card: its training and instance queues' nominal, used, borrowed and lent quota; and the training list's row
    of nlp's third GPU step, which waits in the queue, with the Workload's own message."""
    from selenium.webdriver.common.by import By

    from devstack.browser import chromium
    from devstack.browser import missing as missing_browser
    from tests.support.ui.ui_support import AirflowPage

    if missing_browser():
        pytest.fail(f"{', '.join(missing_browser())} missing: run `make browser`")
    k8s = stack.k8s()
    p_run = stack.trigger("kueue_e2e_nlp_page", {"seconds": 600})       # outlive the test: the stack then stops

    def one_waits():
        js = jobs(stack, "nlp", p_run)
        if len(js) != 3 or sum(running(j) for j in js.values()) != 2:
            return None
        (task_id,) = [t for t, j in js.items() if j.spec.suspend]
        message = condition(workload_of(k8s, "nlp", js[task_id].metadata.name), "QuotaReserved").get("message")
        return (task_id, message) if message else None

    waiting, message = wait_until(one_waits, 240, 0.5, what="two nlp steps running on 8 GPUs, the third queued")
    assert "couldn't assign flavors" in message and "nvidia.com/gpu" in message, message

    driver = chromium(tmp_path)
    try:
        page = AirflowPage(driver, stack.airflow_url, stack.password, "kueue")
        page.login("alice")
        page.open_from_navigation()
        assert driver.find_elements(By.TAG_NAME, "iframe") == []

        def cell(team: str, queue: str, resource: str, what: str, flavor: str | None) -> str:
            found = driver.find_elements(By.CSS_SELECTOR, f".team[data-team='{team}'] tr[data-queue='{queue}']"
                                                          + (f"[data-flavor='{flavor}']" if flavor else "")
                                                          + f"[data-resource='{resource}'] td.{what}")
            return found[0].text if found else ""

        def figures(team: str, queue: str, resource: str, flavor: str | None = None) -> tuple[str, ...]:
            return tuple(cell(team, queue, resource, k, flavor) for k in ("nominal", "used", "borrowed", "lent"))

        # the platform file's nominal quota; nlp uses 8 GPUs, 4 of them lent by idle recsys
        wait_until(lambda: figures("nlp", "training", "gpu", "gpu") == ("4", "8", "4", "0")
                   and figures("recsys", "training", "gpu", "gpu") == ("4", "0", "0", "4"), 90, 0.5,
                   what=f"the GPU rows: nlp {figures('nlp', 'training', 'gpu', 'gpu')}, "
                        f"recsys {figures('recsys', 'training', 'gpu', 'gpu')}")
        # CPUs per pool (flavor), as the platform file gives them, never summed (issue 36: "nominal 24 cores")
        assert [figures("recsys", "training", "cpu", f)[0] for f in ("online", "gpu", "default")] == ["8"] * 3
        assert [figures("nlp", "training", "cpu", f)[0] for f in ("gpu", "default")] == ["8"] * 2
        assert figures("nlp", "dev", "cpu")[0] == "1" and figures("recsys", "dev", "cpu")[0] == "1"
        headers = [th.text for th in driver.find_elements(By.CSS_SELECTOR, ".team[data-team='nlp'] table.queues th")]
        assert headers[1:5] == ["nominal", "used", "borrowed", "lent"], headers

        # each queue table inside its own card (at the grid's old 260 px columns it drew over the next card)
        for team in ("recsys", "nlp"):
            card, table = (page.css(f".team[data-team='{team}']"), page.css(f".team[data-team='{team}'] table.queues"))
            assert table.rect["x"] + table.rect["width"] <= card.rect["x"] + card.rect["width"] + 0.5, (
                team, table.rect, card.rect)
            assert driver.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", card), team
        page.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", page.css("#quota-card"))
        page.shot("queues")

        row = f"tr[data-task='kueue_e2e_nlp_page.{waiting}'][data-run='{p_run}']"
        reason = page.css(f"{row} .queue-reason", 90).text
        now = condition(workload_of(k8s, "nlp", jobs(stack, "nlp", p_run)[waiting].metadata.name), "QuotaReserved")
        assert reason in (message, now.get("message")), (reason, message, now)     # Kueue's own words
        state = page.css(row).find_element(By.CSS_SELECTOR, "td:nth-child(2)").text
        assert "waiting for Kueue to admit it" in state, state
        page.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", page.css(row))
        page.shot("queued-reason")
    finally:
        driver.quit()
