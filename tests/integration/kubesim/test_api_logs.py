"""pods/log: kube-apiserver proxies the kubelet's log endpoint; kubesim delegates to the kubelet the cluster connected (`store.kubelet.logs`, apiserver/kubeletclient.py)
(the simulated kubelet). Here a small scripted provider stands in for the kubelet."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubesim.apimachinery.errors import ApiError
from tests.support.kubesim.fixtures import pod

LINES = ["line 1", "line 2", "line 3", "line 4"]


class ScriptedLogs:
    """A LogProvider (kubesim.kubelet.kubelet's protocol) over fixed lines; line 1 is an hour old."""

    def __init__(self):
        now = datetime.now(UTC)
        self.stamps = [now - timedelta(hours=1)] + [now] * (len(LINES) - 1)
        self.calls = []
        self.waiting = False

    def snapshot(self, namespace, pod, container=None, *, tail_lines=None, timestamps=False, previous=False):
        if self.waiting:
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: ContainerCreating')
        self.calls.append((namespace, pod, container, tail_lines, timestamps, previous))
        lines = [f"{s.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {text}" if timestamps else text
                 for s, text in zip(self.stamps, LINES, strict=True)]
        if tail_lines is not None:
            lines = lines[-tail_lines:]
        return "".join(line + "\n" for line in lines)

    async def stream(self, namespace, pod, container=None, *, tail_lines=None, timestamps=False):
        for text in LINES:
            yield (text + "\n").encode()


class ScriptedKubelet:
    """A KubeletClient (kubesim/apiserver/kubeletclient.py) with scripted logs and no process pods."""

    def __init__(self, logs):
        self.logs = logs

    def graceful(self, pod):
        return False

    def process_pods(self):
        return None


async def read_log(kube, name, **kw) -> str:
    # _preload_content=False, as Airflow's provider reads logs: kubernetes 36 returns str(bytes) otherwise
    core = kube.api("CoreV1Api")
    resp = await core.read_namespaced_pod_log(name, "default", _preload_content=False, **kw)
    if kube.flavour == "kubernetes":
        data = resp.read()
        resp.release_conn()
    else:
        data = await resp.content.read()
        resp.close()
    return data.decode()


@pytest.fixture
def logs(apisim):
    provider = ScriptedLogs()
    apisim.store.kubelet = ScriptedKubelet(provider)
    return provider


async def test_no_log_provider_is_400(kube):
    """Without a running container the log endpoint answers 400 (container waiting to start)."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    status, err = await kube.error(kube.api("CoreV1Api").read_namespaced_pod_log("p", "default"))
    assert status == 400 and 'container "main" in pod "p" is waiting to start' in err["message"]


async def test_log_of_missing_pod_is_404(kube, logs):
    """Logs of a pod that does not exist → 404 `pods "x" not found`."""
    status, err = await kube.error(kube.api("CoreV1Api").read_namespaced_pod_log("ghost", "default"))
    assert status == 404 and err["message"] == 'pods "ghost" not found'


async def test_log_snapshot_options(kube, logs):
    """container, tailLines, timestamps, previous and limitBytes are honoured; text/plain body."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    assert await read_log(kube, "p") == "line 1\nline 2\nline 3\nline 4\n"
    assert await read_log(kube, "p", container="main", tail_lines=2) == "line 3\nline 4\n"
    assert logs.calls[-1][:4] == ("default", "p", "main", 2)
    stamped = await read_log(kube, "p", timestamps=True, tail_lines=1)
    assert stamped.endswith("Z line 4\n") and stamped[:4].isdigit()
    assert await read_log(kube, "p", limit_bytes=9) == "line 1\nli"
    await read_log(kube, "p", previous=True)
    assert logs.calls[-1][5] is True


async def test_log_since_seconds(kube, logs):
    """sinceSeconds keeps only lines written in that window."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    assert await read_log(kube, "p", since_seconds=60) == "line 2\nline 3\nline 4\n"
    assert await read_log(kube, "p", since_seconds=60, tail_lines=2) == "line 3\nline 4\n"
    assert await read_log(kube, "p", since_seconds=60, tail_lines=9) == "line 2\nline 3\nline 4\n"


async def test_log_follow_streams_until_the_provider_ends(kube, logs):
    """follow=true streams chunks until the container's log stream ends."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    assert await read_log(kube, "p", follow=True) == "line 1\nline 2\nline 3\nline 4\n"


async def test_log_unknown_container_is_400(kube, logs):
    """A container name the pod does not have → 400 BadRequest."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    status, err = await kube.error(kube.api("CoreV1Api").read_namespaced_pod_log("p", "default",
                                                                                 container="nope"))
    assert status == 400 and "container nope is not valid for pod p" in err["message"]


async def test_log_follow_of_a_waiting_container_is_400(kube, logs):
    """follow=true on a container that has not started → HTTP 400 from the kubelet, not a broken stream."""
    await kube.api("CoreV1Api").create_namespaced_pod("default", pod("p"))
    logs.waiting = True
    status, err = await kube.error(kube.api("CoreV1Api").read_namespaced_pod_log("p", "default", follow=True))
    assert status == 400 and "is waiting to start" in err["message"]
