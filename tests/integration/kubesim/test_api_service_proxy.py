"""The API server's service proxy (kubesim/apiserver/endpoints/proxy.py), through the `kubernetes` client's
`connect_get_namespaced_service_proxy_with_path`, on the full simulated cluster (Endpoints come from pods)."""
from __future__ import annotations

import json

import pytest
from kubernetes.client import AppsV1Api, CoreV1Api
from kubernetes.client.rest import ApiException

from kubesim.testing import wait_until

LABELS = {"app": "web"}


def setup_web(k8s, answers: dict | None = None) -> CoreV1Api:
    core, apps = CoreV1Api(k8s), AppsV1Api(k8s)
    core.create_namespaced_service("default", {
        "metadata": {"name": "web"},
        "spec": {"clusterIP": "None", "selector": LABELS,
                 "ports": [{"name": "http", "port": 8888, "targetPort": 8888}, {"name": "ssh", "port": 22}]}})
    apps.create_namespaced_stateful_set("default", {
        "metadata": {"name": "web"},
        "spec": {"serviceName": "web", "replicas": 1, "selector": {"matchLabels": LABELS},
                 "template": {"metadata": {"labels": LABELS},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}})
    wait_until(lambda: (core.read_namespaced_endpoints("web", "default").subsets or [None])[0]
               and core.read_namespaced_endpoints("web", "default").subsets[0].addresses, 10, what="ready endpoints")
    if answers is not None:
        core.patch_namespaced_pod("web-0", "default", {"metadata": {"annotations": {
            "kubesim.io/http": json.dumps(answers)}}})
    return core


def proxy_error(call) -> tuple[int, dict]:
    with pytest.raises(ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)


def test_proxy_returns_what_the_pod_serves(k8s):
    """kube-apiserver forwards GET services/<name>:<port>/proxy/<path> to a ready endpoint's target port and
    returns the backend's answer as is (here scripted by the pod's kubesim.io/http annotation)."""
    core = setup_web(k8s, {"8888/metrics": "up 1\n", "8888/api/status": {"status": 200, "body": '{"ok": true}',
                                                                           "contentType": "application/json"}})
    # _preload_content=False: the client would otherwise turn a text/plain body into "b'...'"
    metrics = core.connect_get_namespaced_service_proxy_with_path("web:8888", "default", "metrics",
                                                                   _preload_content=False)
    assert (metrics.status, metrics.data) == (200, b"up 1\n")
    status = core.connect_get_namespaced_service_proxy_with_path("web:http", "default", "api/status",
                                                                  _preload_content=False)
    assert status.data == b'{"ok": true}' and status.headers["Content-Type"].startswith("application/json")


def test_nothing_listening_is_503(k8s):
    """A ready pod whose port has no server: 503 "error trying to reach service ... connection refused"."""
    core = setup_web(k8s, {"8888/metrics": "up 1\n"})
    status, body = proxy_error(lambda: core.connect_get_namespaced_service_proxy_with_path(
        "web:8888", "default", "other"))
    assert status == 503 and "error trying to reach service" in body["message"]
    assert body["reason"] == "ServiceUnavailable"


def test_unknown_service_port_and_no_endpoints(k8s):
    """A missing Service is 404; a port the Service does not have is 503 "no service port"; a Service
    without ready endpoints (scaled to 0) is 503 "no endpoints available for service"."""
    core = setup_web(k8s)
    assert proxy_error(lambda: core.connect_get_namespaced_service_proxy_with_path(
        "nope:8888", "default", "metrics"))[0] == 404
    status, body = proxy_error(lambda: core.connect_get_namespaced_service_proxy_with_path(
        "web:9999", "default", "metrics"))
    assert status == 503 and 'no service port "9999" found for service "web"' in body["message"]
    AppsV1Api(k8s).patch_namespaced_stateful_set("web", "default", {"spec": {"replicas": 0}})
    wait_until(lambda: not core.list_namespaced_pod("default", label_selector="app=web").items, 10,
               what="pod gone")
    wait_until(lambda: not (core.read_namespaced_endpoints("web", "default").subsets or []), 10,
               what="endpoints emptied")
    status, body = proxy_error(lambda: core.connect_get_namespaced_service_proxy_with_path(
        "web:8888", "default", "metrics"))
    assert status == 503 and 'no endpoints available for service "web"' in body["message"]


def test_a_forwarded_answer_is_streamed_as_the_backend_sends_it(k8s):
    """kube-apiserver's proxy (apimachinery pkg/util/proxy/upgradeaware.go, UpgradeAwareHandler.ServeHTTP: an
    httputil.ReverseProxy) copies the backend's body to the client as it is read, so the client sees the first
    part before the backend has sent the rest; the status and content type are the backend's. kubesim's
    ``{"forward": "http://127.0.0.1:<port>"}`` answer does the same with a real local server."""
    import http.server
    import threading

    first_seen = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(201)
            self.send_header("Content-Type", "text/csv")
            self.end_headers()
            self.wfile.write(b"first,")
            self.wfile.flush()
            first_seen.wait(10)  # the rest only once the client has the first part
            self.wfile.write(b"rest\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        core = setup_web(k8s, {"8888/data": {"forward": f"http://127.0.0.1:{server.server_address[1]}"}})
        resp = core.connect_get_namespaced_service_proxy_with_path("web:8888", "default", "data",
                                                                   _preload_content=False)
        assert resp.status == 201 and resp.headers["Content-Type"].startswith("text/csv")
        assert resp.read1(64) == b"first,"  # before the backend sent the rest
        first_seen.set()
        assert resp.read() == b"rest\n"
    finally:
        first_seen.set()
        server.shutdown()
        server.server_close()
    status, body = proxy_error(lambda: setup_web_forward_to(core, "http://example.com:80"))
    assert status == 503 and "not http://127.0.0.1:<port>" in body["message"]


def setup_web_forward_to(core: CoreV1Api, url: str):
    core.patch_namespaced_pod("web-0", "default", {"metadata": {"annotations": {
        "kubesim.io/http": json.dumps({"8888/data": {"forward": url}})}}})
    return core.connect_get_namespaced_service_proxy_with_path("web:8888", "default", "data")
