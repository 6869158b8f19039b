"""What the UI browser tests share: Airflow's UI driven through selenium, with a screenshot of each step."""

from __future__ import annotations

from devstack.airflow_env import REPO

SUB_PATH = "/airflow"  # the api-server fixture's [api] base_url path (conftest.api_server)
ARTIFACTS = REPO / ".artifacts" / "ui"  # screenshots and logs of the UI tests (git-ignored)
TPU = "example.com/tpu"  # a GPU resource other than nvidia.com/gpu (conftest.tpu_server's platform file)

# a run of the daily pipeline as the scheduler leaves it: preprocess waits for a slot of the team's pool (scheduled,
# no Job yet), train is deferred on its Job
SEED_WAITING = """
from datetime import UTC, datetime, timedelta
from airflow.models.serialized_dag import SerializedDagModel
from airflow.models.taskinstance import TaskInstance as TI
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState
from airflow.utils.types import DagRunTriggeredByType, DagRunType
from sqlalchemy import select
now = datetime.now(UTC)
with create_session() as s:
    dag = SerializedDagModel.get_dag("training_recommendation_daily", session=s)
    dag.create_dagrun(run_id="manual__waiting", run_after=now, run_type=DagRunType.MANUAL,
                      triggered_by=DagRunTriggeredByType.TEST, state=DagRunState.RUNNING, session=s)
    s.flush()
    tis = {ti.task_id: ti for ti in s.scalars(select(TI).where(TI.run_id == "manual__waiting"))}
    tis["preprocess"].state, tis["preprocess"].scheduled_dttm = "scheduled", now - timedelta(minutes=2)
    tis["train"].state, tis["train"].try_number, tis["train"].start_date = "deferred", 1, now - timedelta(minutes=1)
"""


class AirflowPage:
    """The browser on Airflow's UI (at ``airflow_url``), with Skiff's page rendered in it; screenshots of each step
    go to ``.artifacts/ui/<prefix>-NN-<what>.png``."""

    def __init__(self, driver, airflow_url: str, password, prefix: str):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.d, self.url, self.password, self.prefix, self.step = driver, airflow_url, password, prefix, 0
        self.wait = lambda timeout=30: WebDriverWait(driver, timeout,
                                                     ignored_exceptions=(StaleElementReferenceException,))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def shot(self, what: str) -> None:
        self.step += 1
        self.d.save_screenshot(str(ARTIFACTS / f"{self.prefix}-{self.step:02d}-{what}.png"))

    def css(self, selector: str, timeout: float = 30):
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        visible = ec.visibility_of_element_located((By.CSS_SELECTOR, selector))

        def found(driver):
            # a page that navigates between finding the element and asking if it shows: chromium answers "Node
            # with given id does not belong to the document" (a WebDriverException, not a stale element): look again
            try:
                return visible(driver)
            except WebDriverException as exc:
                if "does not belong to the document" in str(exc):
                    return False
                raise

        return self.wait(timeout).until(found)

    def text(self, selector: str, timeout: float = 30) -> str:
        """The text of the element ``selector`` once it shows. The page re-renders its tables at each poll (every
        4 s), so an element found may be replaced before its text is read (a stale element): read it again."""
        from selenium.common.exceptions import StaleElementReferenceException

        def read(_driver):
            try:
                return self.css(selector, timeout).text or False
            except StaleElementReferenceException:
                return False

        return self.wait(timeout).until(read, f"no text in {selector}")

    def login(self, user: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.delete_all_cookies()
        self.d.get(f"{self.url}/")
        self.css("input[name='username']").send_keys(user)
        self.d.find_element(By.CSS_SELECTOR, "input[name='password']").send_keys(self.password(user))
        self.d.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
        self.wait_navigated_from("input[name='username']")

    def wait_navigated_from(self, selector: str, timeout: float = 60) -> None:
        """Wait until the page that had ``selector`` is gone: a command sent while the browser navigates fails with
        "aborted by navigation" (seen in a full run, opening Skiff right after the login), so those are retried
        here, where a navigation is what is waited for."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.d, timeout, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
            and not d.find_elements(By.CSS_SELECTOR, selector), f"still on the page with {selector}")

    def open_from_navigation(self) -> None:
        """Click "Skiff" in Airflow's navigation: the React app renders inside the UI's page (no frame)."""
        from selenium.webdriver.common.by import By

        self.css("a[href$='/plugin/skiff']").click()
        self.wait().until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-skiff='page'] #who b"))

    def visible_words(self) -> list[str]:
        """The page's visible text that is words rather than data: every text node under the page's root except
        those in an element marked ``translate="no"`` (names, URLs, reasons: values, not words)."""
        return self.d.execute_script("""
            const root = document.querySelector("[data-skiff='page']"), out = [];
            const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            for (let n = walk.nextNode(); n; n = walk.nextNode()) {
              const el = n.parentElement;
              if (!n.textContent.trim() || el.closest("[translate='no']")) continue;
              if (el.closest(".hidden") || getComputedStyle(el).display === "none") continue;
              // an SVG tooltip cannot hold a translate="no" element: its value is its bar's data-user
              const value = el.tagName === "title" && el.parentElement.dataset.user;
              out.push(value ? n.textContent.split(value).join(" ").trim() : n.textContent.trim());
            }
            for (const el of root.querySelectorAll("input[placeholder]")) out.push(el.placeholder);
            return out;""")

    def fetch(self, method: str, path: str) -> tuple[int, str]:
        """``method`` on the page's API (``<ui root>skiff/api/<path>``) from the browser, with the logged-in
        user's session as the page sends it (POSTs with an empty JSON body): (status, body text)."""
        return tuple(self.d.execute_async_script("""
            const [method, path, done] = arguments;
            const init = {method, credentials: "same-origin", headers: {Accept: "application/json"}};
            if (method === "POST") Object.assign(init, {headers: {"Content-Type": "application/json"}, body: "{}"});
            fetch(new URL("skiff/api/" + path, document.baseURI), init)
              .then(async (r) => done([r.status, await r.text()]), (e) => done([0, String(e)]));""", method, path))


    def draws_glyphs(self, text: str) -> bool:
        """Whether the browser draws each character of ``text`` as a glyph of its own in the page's font: a
        character no installed font has is drawn as the same empty box (tofu) as any other such character, so
        two different characters that paint the same pixels mean tofu (tried: CJK with fonts-noto-cjk -> True,
        private-use characters -> False)."""
        return self.d.execute_script("""
            const [text, root] = [arguments[0], document.querySelector("[data-skiff='page']")];
            const font = "48px " + getComputedStyle(root).fontFamily;
            const paint = (ch) => {
              const c = document.createElement("canvas");
              c.width = c.height = 64;
              const g = c.getContext("2d");
              g.font = font;
              g.fillText(ch, 4, 52);
              return Array.from(g.getImageData(0, 0, 64, 64).data).join(",");
            };
            return new Set(Array.from(text).map(paint)).size === new Set(text).size;""", text)
