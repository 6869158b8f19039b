"""What a user does after a failure e-mail, in a real (headless) Chromium: open the e-mail's link to the task
log in the Airflow UI, log in, and read the failure reason and the pod's log lines there.

Runs on the session's ``airflow_stack`` (shared with the other e2e tests), with the ``browser`` fixture of
tests/support/ui/fixtures.py. Needs Debian's ``chromium`` and
``chromium-driver`` (``make test`` installs them through the Makefile's ``browser`` target) and ``selenium``
(requirements-dev.txt). Selenium is always given /usr/bin/chromedriver, so it never tries to download a driver.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import pytest

from kubesim.testing import wait_until

pytestmark = [pytest.mark.e2e]

DAG_ID, TASK_ID, NAMESPACE = "training_failure_demo", "train_too_big", "recsys"
SUBJECT = f"[Skiff] {DAG_ID}.{TASK_ID} failed: OOMKilled"
LINK = re.compile(r'<a href="([^"]+)">Task log in Airflow</a>')


@pytest.fixture(scope="module")
def stack(team_stack):
    """The shared stack with the demo team's ``recsys`` queue and alice's default PVC."""
    return team_stack


def _alert_for(stack, run_id: str, timeout: float = 60):
    def found():
        for mail in stack.mails():
            if mail["Subject"].startswith(SUBJECT):
                body = mail.get_body(("html",)).get_content()
                if html.escape(run_id) in body:
                    return mail, body
        return None
    try:
        return wait_until(found, timeout, 0.5, what=f"a {SUBJECT!r} e-mail for run {run_id}")
    except TimeoutError:
        raise AssertionError(f"no {SUBJECT!r} e-mail for run {run_id} within {timeout}s: "
                             f"{[m['Subject'] for m in stack.mails()]}") from None


# Is ``needle`` on screen: some occurrence's box lies inside the viewport and is what the browser hit-tests
# there (not clipped by a scroll container, not covered)?
_ON_SCREEN = """
const needle = arguments[0];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const i = node.data.indexOf(needle);
  if (i < 0) continue;
  const range = document.createRange();
  range.setStart(node, i);
  range.setEnd(node, i + needle.length);
  const box = range.getBoundingClientRect();
  const x = box.left + Math.min(box.width / 2, 20), y = box.top + box.height / 2;
  if (box.width === 0 || x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) continue;
  const hit = document.elementFromPoint(x, y);
  if (hit && (hit === node.parentElement || node.parentElement.contains(hit))) return true;
}
return false;
"""


def test_failure_email_link_opens_the_task_log_with_reason_and_pod_lines(stack, browser, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    run_id = stack.trigger(DAG_ID)
    assert stack.wait_run(DAG_ID, run_id, timeout=180) == "failed"
    _, body = _alert_for(stack, run_id)
    links = LINK.findall(body)
    assert len(links) == 1, body
    link = html.unescape(links[0])
    assert link.startswith(f"{stack.airflow_url}/dags/{DAG_ID}/runs/"), link
    assert urlsplit(link).path.endswith(f"/tasks/{TASK_ID}"), link

    def wait(timeout: float = 30) -> WebDriverWait:
        return WebDriverWait(browser, timeout, ignored_exceptions=(StaleElementReferenceException,))

    shot = tmp_path / "alert-link-task-log.png"
    try:
        # what a user does: open the link, meet the login page, sign in, land back on the linked page
        browser.get(link)
        user = wait().until(ec.visibility_of_element_located((By.CSS_SELECTOR, "input[name='username']")))
        user.send_keys("admin")
        browser.find_element(By.CSS_SELECTOR, "input[name='password']").send_keys(stack.admin_password)
        browser.find_element(By.CSS_SELECTOR, "button[type='submit']").click()

        # the task's log, with the exception Skiff raised: the reason first, then the pod's last lines
        error_css = "summary[data-testid='summary-TrainingJobFailed']"
        error = wait(45).until(lambda d: next(
            (e for e in d.find_elements(By.CSS_SELECTOR, error_css) if "OOMKilled" in e.text), None))
        reason = error.text.splitlines()[0]
        assert "failed: OOMKilled: container" in reason and "exceeded its memory limit of 1Gi" in reason, reason
        assert urlsplit(browser.current_url).path == urlsplit(link).path, browser.current_url
        pod = re.search(r" in pod (\S+) exceeded", reason)
        assert pod, reason
        # the lines the pod wrote, streamed into the task log while it ran (not only the exception's tail)
        streamed = f"[{pod.group(1)}] line "
        items = wait().until(lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "[data-testid^='virtualized-item-']")
                                        if streamed in e.text])
        assert items[-1].text.endswith(f"{streamed}60"), items[-1].text  # the pod's last line (log-lines: 60)

        # the page opens scrolled to the end of the traceback; scroll up the way a reader does, to the last
        # pod lines, and both the pod's lines and the reason below them are on screen
        browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", items[max(0, len(items) - 4)])
        try:
            wait(10).until(lambda d: d.execute_script(_ON_SCREEN, streamed)
                           and d.execute_script(_ON_SCREEN, "failed: OOMKilled"))
        except TimeoutException:
            pytest.fail(f"pod line on screen: {browser.execute_script(_ON_SCREEN, streamed)}, reason on screen: "
                        f"{browser.execute_script(_ON_SCREEN, 'failed: OOMKilled')}; see {shot}")
    finally:
        browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
