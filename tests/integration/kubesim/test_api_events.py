"""core/v1 and events.k8s.io/v1 Events are one resource in two shapes, as on kube-apiserver: an Event
written through either API is read, selected, watched, patched and deleted through the other."""
from __future__ import annotations

# eventTime is set: a legacy core/v1 Event without it is served by events.k8s.io/v1 with eventTime null (as
# by a real server), which the `kubernetes` client's EventsV1Event model refuses.
CORE_EVENT = {"metadata": {"name": "pod-a.1"}, "reason": "Scheduled", "type": "Normal",
              "eventTime": "2026-01-01T00:00:00.000000Z", "reportingInstance": "scheduler-1",
              "message": "Successfully assigned default/pod-a to node-1",
              "involvedObject": {"kind": "Pod", "name": "pod-a", "namespace": "default"},
              "source": {"component": "default-scheduler"}, "count": 1,
              "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}
V1_EVENT = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "pod-b.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Pulled", "type": "Normal",
            "note": "image pulled", "action": "Pull", "reportingController": "kubelet",
            "reportingInstance": "node-1", "regarding": {"kind": "Pod", "name": "pod-b", "namespace": "default"}}


async def test_core_event_read_through_events_k8s_io(kube):
    """involvedObject→regarding, message→note, source.component→reportingController, count and timestamps
    → deprecated*."""
    await kube.api("CoreV1Api").create_namespaced_event("default", CORE_EVENT)
    ev = await kube.api("EventsV1Api").read_namespaced_event("pod-a.1", "default")
    assert ev.regarding.name == "pod-a" and ev.note.startswith("Successfully assigned")
    assert ev.reporting_controller == "default-scheduler" and ev.deprecated_count == 1
    assert ev.deprecated_source.component == "default-scheduler"


async def test_events_k8s_io_event_read_through_core(kube):
    """An events.k8s.io/v1 Event is a core/v1 Event with involvedObject, message and reportingComponent."""
    created = await kube.api("EventsV1Api").create_namespaced_event("default", V1_EVENT)
    assert created.regarding.name == "pod-b"
    ev = await kube.api("CoreV1Api").read_namespaced_event("pod-b.1", "default")
    assert (ev.involved_object.name, ev.message, ev.reporting_component, ev.action) == (
        "pod-b", "image pulled", "kubelet", "Pull")
    assert ev.metadata.uid == created.metadata.uid


async def test_event_field_selectors_per_api(kube):
    """core/v1 selects on involvedObject.*, events.k8s.io/v1 on regarding.* — over the same objects."""
    await kube.api("CoreV1Api").create_namespaced_event("default", CORE_EVENT)
    await kube.api("EventsV1Api").create_namespaced_event("default", V1_EVENT)
    core = await kube.api("CoreV1Api").list_namespaced_event("default", field_selector="involvedObject.name=pod-b")
    v1 = await kube.api("EventsV1Api").list_namespaced_event("default", field_selector="regarding.name=pod-a")
    assert [e.metadata.name for e in core.items] == ["pod-b.1"]
    assert [e.metadata.name for e in v1.items] == ["pod-a.1"]
    status, err = await kube.error(kube.api("EventsV1Api").list_namespaced_event(
        "default", field_selector="involvedObject.name=pod-a"))
    assert status == 400 and err["message"] == "field label not supported: involvedObject.name"


async def test_watch_events_k8s_io_sees_core_events(kube):
    """A watch on events.k8s.io/v1 gets Events written through core/v1, in the v1 shape."""
    async with kube.watching("EventsV1Api", "list_namespaced_event", "default") as events:
        await kube.api("CoreV1Api").create_namespaced_event("default", CORE_EVENT)
        await events.wait_for(lambda e: len(e) == 1)
    etype, ev = events[0]
    assert etype == "ADDED" and ev.regarding.name == "pod-a" and ev.note.startswith("Successfully")


async def test_patch_and_delete_through_events_k8s_io(kube):
    """A merge patch of `note` through events.k8s.io/v1 changes core's `message`; delete removes it for both."""
    await kube.api("CoreV1Api").create_namespaced_event("default", CORE_EVENT)
    v1 = kube.api("EventsV1Api")
    patched = await v1.patch_namespaced_event("pod-a.1", "default", {"note": "rescheduled"})
    assert patched.note == "rescheduled"
    assert (await kube.api("CoreV1Api").read_namespaced_event("pod-a.1", "default")).message == "rescheduled"
    await v1.delete_namespaced_event("pod-a.1", "default")
    status, _ = await kube.error(kube.api("CoreV1Api").read_namespaced_event("pod-a.1", "default"))
    assert status == 404


def test_legacy_core_event_has_no_event_time_in_v1(apisim):
    """A core/v1 Event without eventTime is served by events.k8s.io/v1 without one (clients beware)."""
    import json
    import urllib.request
    legacy = {k: v for k, v in CORE_EVENT.items() if k not in ("eventTime", "reportingInstance")}
    apisim.store.create(apisim.store.registry.lookup("", "v1", "events"), "default", legacy)
    url = f"{apisim.url}/apis/events.k8s.io/v1/namespaces/default/events/pod-a.1"
    with urllib.request.urlopen(url, timeout=10) as resp:
        ev = json.loads(resp.read())
    assert ev["apiVersion"] == "events.k8s.io/v1" and "eventTime" not in ev
    assert ev["deprecatedFirstTimestamp"] == "2026-01-01T00:00:00Z"
