"""When to retry a failed request or watch, how long to wait first, and when to give up: pure, no I/O.

One policy for every caller (``list_and_watch``, and every request of the sync ``Kube``):

* 410 Gone on a watch means "re-list" (the history was compacted), not a failure;
* 429, 5xx and no answer at all (connection refused or dropped, timeout) are transient: wait, then retry;
  anything else (400, 403, 404, 422...) is the caller's to handle, so it is raised at once;
* the wait is exponential with jitter (half fixed, half random, so that many clients failing together
  spread out), capped, and never shorter than the server's ``Retry-After``;
* give up (raise) once requests have failed for ``give_up_after`` seconds with no success in between:
  long enough to ride out an API server restart, short enough that a deferred task does not wait forever
  on a cluster that is gone. ``None`` never gives up (an asset watcher, which Airflow would not restart);
* a request is sent again only if sending it twice is safe (``resendable``): only a POST without a name
  (``generateName``) could make a second object, so it is sent again after 429 alone.
"""

from __future__ import annotations

from dataclasses import dataclass

RELIST, RETRY, RAISE = "relist", "retry", "raise"


@dataclass(frozen=True)
class RetryPolicy:
    base: float = 0.5  # first wait, seconds (before jitter)
    cap: float = 30.0  # longest wait, seconds (before Retry-After)
    give_up_after: float | None = 300.0  # seconds of failures in a row; None = never

    def delay(self, failures: int, rand: float, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt ``failures + 1``; ``rand`` in [0, 1) is the jitter."""
        step = min(self.cap, self.base * 2 ** min(max(failures - 1, 0), 60))  # no float overflow
        return max(step / 2 + step / 2 * rand, retry_after or 0.0)

    def gives_up(self, failing_since: float, now: float) -> bool:
        return self.give_up_after is not None and now - failing_since >= self.give_up_after


NEVER_GIVE_UP = RetryPolicy(give_up_after=None)
# a person waiting for a page: a few quick tries, then the error (the next page load tries again)
INTERACTIVE = RetryPolicy(base=0.2, cap=1.0, give_up_after=5.0)


def classify(status: int | None) -> str:
    """What to do about an error with this HTTP status (None: no answer): RELIST, RETRY or RAISE."""
    if status == 410:
        return RELIST
    if status is None or status == 429 or status >= 500:
        return RETRY
    return RAISE


def next_step(policy: RetryPolicy, status: int | None, failures: int, failing_since: float, now: float,
              rand: float, retry_after: float | None = None) -> tuple[str, float]:
    """The decision after a failure: (RELIST, 0), (RETRY, seconds to wait) or (RAISE, 0).

    ``failures`` counts this one; ``failing_since`` is when the first failure of the run happened."""
    action = classify(status)
    if action == RETRY and policy.gives_up(failing_since, now):
        return RAISE, 0.0
    if action == RETRY:
        return RETRY, policy.delay(failures, rand, retry_after)
    return action, 0.0


def resendable(method: str, status: int | None, named: bool = True) -> bool:
    """Whether a request that failed with ``status`` (None: no answer) may be sent again unchanged.

    A failure without an answer, or a 5xx, may come after the API server did the work (the reply was lost, or
    etcd committed after the server's timeout). Sending it again is still safe for every verb but an unnamed
    POST: a GET reads again; a PUT or PATCH writes the same content again (one carrying a resourceVersion
    answers 409 Conflict if its first send landed, which its caller handles as any conflict); a DELETE answers
    404 (or 409 under a uid precondition); a named POST answers 409 AlreadyExists, i.e. ``Kube.create`` returns
    None and its callers read or adopt the object by name. A POST with ``generateName`` would make a second
    object, so it is sent again only after 429, which the API server answers before doing anything
    (max-requests-inflight, priority and fairness)."""
    return method.upper() != "POST" or named or status == 429
