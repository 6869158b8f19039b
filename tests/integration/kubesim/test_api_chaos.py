"""kubesim's rate-based faults (controls.Chaos): the weather a soak runs in. A real kube-apiserver behind a
load balancer answers a share of requests 500/503, sheds load with 429 + Retry-After, drops connections,
answers slowly, closes watches when it restarts and answers 410 Gone to a watch resumed from a compacted
resourceVersion; clients must survive all of it. These tests pin what kubesim injects."""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from kubesim.testing import wait_until


def get(url: str):
    """(status, headers, body) of a GET; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def statuses(url: str, n: int) -> list:
    out = []
    for _ in range(n):
        try:
            out.append(get(url)[0])
        except (ConnectionError, http.client.HTTPException, urllib.error.URLError):
            out.append("reset")
    return out


def test_rate_one_fails_every_matching_request_only(apisim):
    """rate 1 with kind 503: every matching request is answered 503 ServiceUnavailable with a Status body;
    a request the rule's path does not match is served."""
    apisim.set_faults(1.0, seed=1, kinds=["503"], path=r"/configmaps$")
    status, _, body = get(f"{apisim.url}/api/v1/namespaces/default/configmaps")
    assert status == 503 and json.loads(body)["reason"] == "ServiceUnavailable"
    assert get(f"{apisim.url}/api/v1/namespaces/default/secrets")[0] == 200
    assert apisim.stats()["chaos"]["injected"] == {"503": 1}


def test_rate_is_a_fraction_and_seeded(apisim):
    """rate 0.3 over 300 requests fails roughly 30 % of them, with each of 500, 503 and 429 (the 429 with
    Retry-After, as max-in-flight shedding answers); the same seed gives the same sequence."""
    url = f"{apisim.url}/api/v1/namespaces/default/configmaps"
    runs = []
    for _ in range(2):
        apisim.set_faults(0.3, seed=42, kinds=["500", "503", "429"])
        runs.append(statuses(url, 300))
    assert runs[0] == runs[1]
    failed = [s for s in runs[0] if s != 200]
    assert 45 <= len(failed) <= 135
    assert set(failed) == {500, 503, 429}
    apisim.set_faults(1.0, kinds=["429"])
    status, headers, _ = get(url)
    assert status == 429 and headers["Retry-After"] == "1"
    apisim.set_faults(0.3, seed=43, kinds=["500", "503", "429"])
    assert statuses(url, 300) != runs[0]


def test_reset_closes_the_connection_without_an_answer(apisim):
    """kind reset: the client gets no HTTP answer at all (the connection is closed), as when an apiserver
    or a load balancer dies mid-request."""
    apisim.set_faults(1.0, kinds=["reset"])
    conn = http.client.HTTPConnection(urlsplit(apisim.url).netloc, timeout=10)
    conn.request("GET", "/api/v1/namespaces")
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        conn.getresponse()
    assert apisim.stats()["chaos"]["injected"] == {"reset": 1}


def test_slow_delays_then_serves(apisim):
    """kind slow: the answer is the right one, only late (a lower bound: load cannot break it)."""
    apisim.set_faults(1.0, kinds=["slow"], slow_seconds=0.5)
    start = time.monotonic()
    assert get(f"{apisim.url}/api/v1/namespaces")[0] == 200
    assert time.monotonic() - start >= 0.5


def test_resumed_watch_gets_410_gone(apisim):
    """A watch resumed from a resourceVersion is answered, at the fault rate, like one resumed from a
    compacted version: 200 and one ERROR event with a 410 Expired Status; a watch without a version is not."""
    rv = json.loads(get(f"{apisim.url}/api/v1/namespaces/default/configmaps")[2])["metadata"]["resourceVersion"]
    apisim.set_faults(1.0, kinds=["500"], verb="watch")
    status, _, body = get(f"{apisim.url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
                          "&timeoutSeconds=1")
    event = json.loads(body.splitlines()[0])
    assert status == 200 and event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    status, _, _ = get(f"{apisim.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
    assert status == 500                               # no version to resume from: an ordinary fault kind


def test_watches_are_cut_periodically_and_http_api(apisim):
    """POST /kubesim/chaos installs the same faults over HTTP; with cut_every the open watches are closed
    every so often (the client sees the stream end, as when an apiserver restarts); DELETE removes them;
    a bad body is a 400 naming the value."""
    req = urllib.request.Request(f"{apisim.url}/kubesim/chaos", method="POST",
                                 data=json.dumps({"rate": 0.0, "cut_every": 0.3}).encode())
    assert json.loads(urllib.request.urlopen(req, timeout=10).read())["cut_every"] == 0.3
    start = time.monotonic()
    status, _, _ = get(f"{apisim.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=30")
    assert status == 200 and time.monotonic() - start < 20
    wait_until(lambda: apisim.stats()["chaos"]["injected"].get("watch-cut", 0) >= 1, 10, what="a watch cut")
    urllib.request.urlopen(urllib.request.Request(f"{apisim.url}/kubesim/faults", method="DELETE"), timeout=10)
    assert apisim.stats()["chaos"] == {}
    bad = urllib.request.Request(f"{apisim.url}/kubesim/chaos", method="POST", data=b'{"rate": 5}')
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, timeout=10)
    assert err.value.code == 400 and "5" in json.loads(err.value.read())["message"]


def test_process_flag_faults_and_seed(tmp_path):
    """`python -m kubesim --faults RATE --seed N` starts with the rate-based faults on (GET /kubesim/chaos
    reports them); a bad rate is one clear error line and exit 2, before the ready line."""
    import signal
    import subprocess
    import sys

    from tests.integration.kubesim.test_api_process import start_process

    proc, url, _ = start_process(tmp_path, "--faults", "1", "--seed", "5", "--cut-every", "60")
    try:
        chaos = json.loads(urllib.request.urlopen(f"{url}/kubesim/chaos", timeout=10).read())
        assert (chaos["rate"], chaos["seed"], chaos["cut_every"]) == (1.0, 5, 60.0)
        assert statuses(f"{url}/api/v1/namespaces", 5).count(200) == 5 - sum(
            json.loads(urllib.request.urlopen(f"{url}/kubesim/chaos", timeout=10).read())["injected"].get(k, 0)
            for k in ("500", "503", "429", "reset"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    bad = subprocess.run([sys.executable, "-m", "kubesim", "--kubeconfig", str(tmp_path / "k2"), "--faults", "2"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "faults rate must be within [0, 1], got 2.0" in bad.stderr
