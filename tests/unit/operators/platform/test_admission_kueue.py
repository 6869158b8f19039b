"""Admission with `queueing: kueue` (pure): Kueue decides when, so the decision carries the queue's labels and
the priority class instead of waiting on the ResourceQuota; what can never run is still refused."""
from __future__ import annotations

from operators.platform.admission import ADMIT, AdmissionRequest, decide
from tests.integration.platform.test_platform_kueue import KUEUE
from tests.support.platform.platform_support import platform

QUEUE, PRIO = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"
FULL = {"hard": {"requests.cpu": "8"}, "used": {"requests.cpu": "8"}}   # what quota mode would wait for


def ask(**kw) -> AdmissionRequest:
    values = dict(team="recsys", user="alice", cpu="2", memory="4Gi")
    values.update(kw)
    return AdmissionRequest(**values)


def test_a_training_step_is_admitted_to_its_teams_queue_with_its_priority():
    p = platform(KUEUE)
    scheduled = decide(p, ask(), FULL)
    assert scheduled.verdict == ADMIT and scheduled.queued
    assert dict(scheduled.queue_labels) == {QUEUE: "skiff", PRIO: "skiff-scheduled"}
    assert dict(decide(p, ask(online=True), FULL).queue_labels)[PRIO] == "skiff-online"
    assert dict(decide(p, ask(priority_class="skiff-dev"), None).queue_labels)[PRIO] == "skiff-dev"
    # bigger than the team's own quota: Kueue may lend the cohort's idle quota, so it is not refused here
    assert decide(p, ask(cpu="30"), None).verdict == ADMIT


def test_an_instance_goes_to_the_dev_queue_at_the_lowest_priority():
    d = decide(platform(KUEUE), ask(instance=True, online=False), FULL)
    assert dict(d.queue_labels) == {QUEUE: "skiff-dev", PRIO: "skiff-dev"}


def test_refusals_name_the_field():
    p = platform(KUEUE)
    unknown = decide(p, ask(priority_class="gold"), None)
    assert unknown.refused and unknown.reason.startswith("priority_class='gold': not one of")
    online = decide(p, ask(team="nlp", user="carol", priority_class="skiff-online"), None)
    assert online.refused and "team nlp may not use the online priority" in online.reason
    assert decide(p, ask(user="mallory"), None).refused          # the file's other rules still apply


def test_quota_mode_has_no_queue_labels():
    d = decide(platform(), ask(), None)
    assert d.verdict == ADMIT and not d.queued and d.queue_labels == ()
