"""alice's development instance as she uses it, in headless Debian chromium, on a real ``airflow standalone`` whose
kubesim runs the demo's process nodes (devstack/demo_nodes.yaml: the start-up script really runs JupyterLab,
TensorBoard and sshd, kubesim/kubelet/procrt).

She logs in to Airflow, opens Skiff from the navigation, creates an instance through the form, reveals its
password and clicks its links, each opening a new tab: VS Code says code-server is not in the image (the demo's
has none); JupyterLab's login form takes the password, a notebook's cell runs on a kernel (its websocket through
the address the page links to) and writes a file into her home, found there by ``kubectl exec``. She stops and starts the instance from the page: her JupyterLab tab, reloaded, asks
for a password again, the old one is refused, the new revealed one opens it and the file is still there. bob's
instance, also on 8888 in its pod, answers on its own address at the same time, and ssh takes alice's revealed
password. Screenshots in ``.artifacts/ui/jlab-*``.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import httpx
import pytest
from kubernetes import client
from kubernetes.stream import stream

from kubesim.testing import wait_until
from operators.devinstances import naming
from operators.devinstances.inventory import get_instance
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.ui.ui_support import ARTIFACTS, AirflowPage

pytestmark = [pytest.mark.e2e, pytest.mark.own_stack,
              pytest.mark.skipif(not (shutil.which("bwrap") and shutil.which("sshpass") and os.geteuid() == 0),
                                 reason="needs bubblewrap, sshpass (make test installs them) and root (/etc layer)")]

LIFECYCLE = ("dev_instance_create", "dev_instance_stop", "dev_instance_start")
TEAM, NAME = "recsys", "lab"
WRITTEN = "from-a-cell.txt"
CELL = f"open({WRITTEN!r}, 'w').write('written by a kernel\\n'); print('cell ran')"


@pytest.fixture(scope="module")
def stack(process_stack):
    """devstack.testing's stack on the demo's process nodes (shared with tests/e2e/training/test_training_procrt_e2e.py)."""
    for dag_id in LIFECYCLE:  # what an operator does once when deploying Skiff
        process_stack.unpause(dag_id)
    return process_stack


class Page(AirflowPage):
    def __init__(self, driver, stack):
        super().__init__(driver, stack.airflow_url, stack.password, "jlab")

    def row(self, timeout: float = 30):
        return self.css(f"tr[data-instance='{NAME}'][data-team='{TEAM}']", timeout)

    def wait_state(self, want: str, timeout: float) -> None:
        self.wait(timeout).until(lambda d: self.row().get_attribute("data-state") == want,
                                 f"{NAME} never showed {want!r}")

    def click(self, selector: str, timeout: float = 60) -> None:
        """Click ``selector`` in the instance's row, found again if the page's live refresh redrew the row between
        finding and clicking (a stale element: the click did not happen; ``wait`` ignores that and retries)."""
        from selenium.webdriver.common.by import By

        self.wait(timeout).until(lambda d: self.row().find_element(By.CSS_SELECTOR, selector).click() or True,
                                 f"{selector} in {NAME}'s row")

    def reveal_password(self) -> str:
        self.click("button.show-password")
        return self.css(f"tr[data-instance='{NAME}'] code.password").text


def _exec(core, pod: str, command: str) -> str:
    """``kubectl exec`` through the API server's exec stream: the command runs in the instance's container."""
    return stream(core.connect_get_namespaced_pod_exec, pod, TEAM, command=["sh", "-c", command],
                  stderr=True, stdin=False, stdout=True, tty=False)


def _ssh(port: int, password: str, command: str) -> subprocess.CompletedProcess:
    """Debian's ssh with the password from the environment (sshpass -e: never on a command line)."""
    return subprocess.run(
        ["sshpass", "-e", "ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "PubkeyAuthentication=no", "-o", "LogLevel=ERROR",
         "-o", "PreferredAuthentications=password,keyboard-interactive", "-o", "ConnectTimeout=20",
         "-p", str(port), "root@localhost", command],
        env={**os.environ, "SSHPASS": password}, capture_output=True, text=True, timeout=60, check=False)


def _open_link(page: Page, kind: str) -> str:
    """Click the instance row's ``kind`` link: the new tab's window handle."""

    before = set(page.d.window_handles)
    page.click(f"a[data-link='{kind}']")
    page.wait().until(lambda d: set(d.window_handles) - before, f"the {kind} link opened no tab")
    (tab,) = set(page.d.window_handles) - before
    return tab


def _jupyter_login(page: Page, password: str) -> None:
    """JupyterLab's own login form (the tab is on ``/login``): the password, then the Lab's shell."""
    from selenium.webdriver.common.by import By

    box = page.css("input#password_input", 60)
    box.clear()
    box.send_keys(password)
    page.d.find_element(By.CSS_SELECTOR, "#login_submit").click()


def _lab_loaded(page: Page, timeout: float = 120) -> None:
    page.css("#jp-main-dock-panel", timeout)


def _run_cell(page: Page) -> None:
    """A new notebook from the launcher, ``CELL`` typed into its first cell and run (Shift+Enter): its output
    comes back from the kernel over the websocket."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page.css(".jp-LauncherCard[data-category='Notebook']", 60).click()
    editor = page.css(".jp-NotebookPanel .jp-Cell .cm-content", 60)
    # what a person waits for: the status bar's "Python 3 (ipykernel) | Idle" (the kernel started and connected)
    page.wait(120).until(lambda d: any("| Idle" in w.text for w in d.find_elements(By.CSS_SELECTOR, ".jp-StatusBar-Widget"))
                         and d.find_elements(By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator[data-status='idle']"),
                         "the notebook's kernel never became idle")
    editor.click()
    editor.send_keys(CELL)
    editor.send_keys(Keys.SHIFT, Keys.ENTER)
    page.wait(60).until(lambda d: "cell ran" in " ".join(
        o.text for o in d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-OutputArea-output")),
        "the cell's output never arrived")


def _contents_in_browser(page: Page, path: str) -> int:
    """GET the Jupyter contents API from the JupyterLab tab, with its session cookie: the status."""
    return page.d.execute_async_script("""
        const [path, done] = arguments;
        fetch("/api/contents/" + path, {credentials: "same-origin"}).then((r) => done(r.status), () => done(0));
        """, path)


@pytest.mark.timeout(1500)  # three DAG runs (create, stop, start) and two instances starting on a loaded machine
def test_alice_runs_a_cell_in_jupyterlab_from_the_page_and_her_file_outlives_stop_start(stack, browser):
    from selenium.webdriver.common.by import By

    core = client.CoreV1Api(stack.k8s())
    page = Page(browser, stack)
    # bob's instance, from his own run of dev_instance_create: in its pod JupyterLab listens on 8888 as alice's does
    bob_run = stack.trigger("dev_instance_create", {"name": NAME, "team": TEAM, "cpu": 1, "memory": 2}, user="bob")
    try:
        page.login("alice")
        page.open_from_navigation()
        page.wait(120).until(lambda d: d.find_element(By.ID, "new-instance").is_enabled(), "New instance disabled")
        page.css("#new-instance").click()
        form = page.css("#create-form")
        form.find_element(By.NAME, "name").send_keys(NAME)
        for field, value in (("cpu", "1"), ("memory", "2")):
            box = form.find_element(By.NAME, field)
            box.clear()
            box.send_keys(value)
        form.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
        page.wait_state("Running", timeout=400)     # the create run, then JupyterLab answering its readiness probe
        page.shot("running")
        password = page.reveal_password()
        page.shot("password")

        first = browser.current_window_handle
        if shutil.which("code-server") is None:  # the demo's image has none: its VS Code link says so
            browser.switch_to.window(_open_link(page, "code-server"))
            page.wait(60).until(lambda d: "VS Code in the browser is not available" in d.page_source)
            page.shot("no-code-server")
            browser.close()
            browser.switch_to.window(first)

        # the JupyterLab link opens a new tab on JupyterLab's login form
        jupyter = page.wait().until(lambda d: page.row().find_element(By.CSS_SELECTOR, "a[data-link='jupyter']")
                                    .get_attribute("href"))
        lab = _open_link(page, "jupyter")
        browser.switch_to.window(lab)
        _jupyter_login(page, "not-the-password")
        page.css("input#password_input")             # refused: the form again
        _jupyter_login(page, password)
        _lab_loaded(page)
        assert browser.current_url.startswith(jupyter), (browser.current_url, jupyter)
        page.shot("lab")
        _run_cell(page)
        page.shot("cell-ran")

        # the cell's file is in alice's home volume: /root in her container
        assert _exec(core, naming.pod_name("alice", NAME), f"cat /root/{WRITTEN}") == "written by a kernel\n"

        # bob's instance is Running meanwhile on an address of its own, its JupyterLab on 8888 in its pod too
        assert stack.wait_run("dev_instance_create", bob_run, timeout=300) == "success"
        # (the view as the page builds it: [skiff] devinstance_host is the default, localhost)
        bob_url = get_instance(Kube(stack.k8s()), "bob", TEAM, NAME, Settings(), with_idle=False).urls["jupyter"]
        assert bob_url != jupyter
        wait_until(lambda: httpx.get(bob_url + "login", timeout=5).status_code == 200, 300, 1,
                   what="bob's JupyterLab answering")
        assert httpx.get(bob_url + "api/contents/" + WRITTEN, timeout=10).status_code == 403  # not alice's

        # ssh with the revealed password (the page's ssh line)
        browser.switch_to.window(first)
        ssh_line = page.wait().until(lambda d: page.row().find_element(By.CSS_SELECTOR, ".ssh").text)
        port = int(ssh_line.split("-p ")[1].split()[0])
        done = _ssh(port, password, f"cat /root/{WRITTEN}")
        assert done.returncode == 0 and done.stdout == "written by a kernel\n", done.stderr[-500:]

        # stop and start from the page
        page.click("button[data-action='stop']")
        page.wait_state("Stopped", timeout=300)
        page.click("button[data-action='start']")
        page.wait_state("Running", timeout=400)
        new_password = page.reveal_password()
        assert new_password != password
        page.shot("started-again")

        # the JupyterLab tab, reloaded: the old session is gone, the old password refused, the new one opens it
        browser.switch_to.window(lab)
        browser.get(jupyter)
        page.css("input#password_input", 60)
        assert _contents_in_browser(page, WRITTEN) == 403
        _jupyter_login(page, password)
        page.css("input#password_input")
        assert _contents_in_browser(page, WRITTEN) == 403
        _jupyter_login(page, new_password)
        _lab_loaded(page)
        assert _contents_in_browser(page, WRITTEN) == 200
        page.css(f".jp-DirListing-item[title*='{WRITTEN}'], .jp-DirListing-itemText[title*='{WRITTEN}']", 60)
        page.shot("file-after-start")
        assert _ssh(port, password, "true").returncode != 0
        assert _ssh(port, new_password, "true").returncode == 0
    finally:
        page.shot("last")
        for owner in ("alice", "bob"):  # the instances' start-up script, JupyterLab and kernel lines, for a failure
            try:
                log = core.read_namespaced_pod_log(naming.pod_name(owner, NAME), TEAM, container="notebook",
                                                   tail_lines=300, _preload_content=False).data.decode()
            except client.ApiException as e:
                log = f"no log: {e.status} {e.reason}"
            (ARTIFACTS / f"jlab-{owner}-notebook.log").write_text(log)
