"""The access layer's pure parts: the retry policy and the error format (no cluster)."""

from __future__ import annotations

import pytest

from operators.k8s.errors import KubeError, api_error_message
from operators.k8s.retry import (
    NEVER_GIVE_UP,
    RAISE,
    RELIST,
    RETRY,
    RetryPolicy,
    classify,
    next_step,
    resendable,
)


@pytest.mark.parametrize(("status", "action"), [
    (410, RELIST), (429, RETRY), (500, RETRY), (503, RETRY), (504, RETRY), (None, RETRY),
    (400, RAISE), (401, RAISE), (403, RAISE), (404, RAISE), (409, RAISE), (422, RAISE),
])
def test_classify(status, action):
    assert classify(status) == action


def test_delay_grows_exponentially_with_jitter_up_to_the_cap():
    p = RetryPolicy(base=1.0, cap=8.0)
    assert [p.delay(n, rand=0.0) for n in (1, 2, 3, 4, 5, 9)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [p.delay(n, rand=0.999999) for n in (1, 2, 3, 4)] == pytest.approx([1.0, 2.0, 4.0, 8.0])
    # jitter spreads clients failing together over [step/2, step)
    assert len({p.delay(3, rand=r / 10) for r in range(10)}) == 10


def test_retry_after_is_a_floor_never_a_cap():
    p = RetryPolicy(base=1.0, cap=8.0)
    assert p.delay(1, rand=0.0, retry_after=3.0) == 3.0
    assert p.delay(5, rand=0.999999, retry_after=3.0) == pytest.approx(8.0)


def test_give_up_only_after_failing_for_the_whole_window():
    p = RetryPolicy(give_up_after=300.0)
    assert next_step(p, 503, failures=40, failing_since=1000.0, now=1299.0, rand=0.5)[0] == RETRY
    assert next_step(p, 503, failures=2, failing_since=1000.0, now=1300.0, rand=0.5) == (RAISE, 0.0)
    assert next_step(NEVER_GIVE_UP, None, failures=10_000, failing_since=0.0, now=1e9, rand=0.5)[0] == RETRY


def test_next_step_relists_on_gone_and_raises_client_errors_at_once():
    p = RetryPolicy()
    assert next_step(p, 410, failures=1, failing_since=0.0, now=0.0, rand=0.5) == (RELIST, 0.0)
    assert next_step(p, 403, failures=1, failing_since=0.0, now=0.0, rand=0.5) == (RAISE, 0.0)
    action, wait = next_step(p, 429, failures=1, failing_since=0.0, now=0.0, rand=0.0, retry_after=2.0)
    assert (action, wait) == (RETRY, 2.0)


def test_error_from_a_status_answer_has_one_format():
    body = b'{"kind":"Status","code":409,"reason":"AlreadyExists","message":"jobs.batch \\"x\\" already exists"}'
    err = KubeError.from_response(409, body, {})
    assert (err.status, err.reason) == (409, "AlreadyExists")
    assert str(err) == api_error_message(err) == '409 AlreadyExists: jobs.batch "x" already exists'


def test_retry_after_from_header_or_status_details():
    assert KubeError.from_response(429, b"{}", {"Retry-After": "3"}).retry_after == 3.0
    details = b'{"code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":2}}'
    assert KubeError.from_response(429, details, {}).retry_after == 2.0
    assert KubeError.from_response(429, b"not json", {}).message == "not json"
    assert KubeError.from_status({"code": 410, "reason": "Expired", "message": "too old"}).status == 410


def test_the_clients_exceptions_read_the_same():
    from kubernetes.client.exceptions import ApiException
    from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

    for cls in (ApiException, AsyncApiException):
        exc = cls(status=404, reason="Not Found")
        exc.body = '{"reason":"NotFound","message":"pods \\"p\\" not found"}'
        assert api_error_message(exc) == '404 NotFound: pods "p" not found'
    assert str(KubeError.transport(ConnectionRefusedError("refused"))) == "ConnectionRefusedError: refused"
    assert isinstance(KubeError(500), ApiException)  # code written against the typed client keeps working


@pytest.mark.parametrize(("method", "status", "named", "resend"), [
    ("GET", None, True, True), ("PUT", 503, True, True), ("PATCH", None, True, True), ("DELETE", 500, True, True),
    ("POST", None, True, True), ("POST", 503, True, True),      # named: a second send meets 409 AlreadyExists
    ("POST", None, False, False), ("POST", 500, False, False),  # generateName: a second send makes a second object
    ("POST", 429, False, True),                                 # 429 is answered before anything is done
])
def test_resendable_only_where_a_second_send_is_harmless(method, status, named, resend):
    assert resendable(method, status, named) is resend
