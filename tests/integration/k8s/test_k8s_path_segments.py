"""The access layer refuses, before any request, a namespace or name that is not a valid Kubernetes name:
one check in ``Resource.path``, which builds every URL ``Kube`` and ``AsyncKube`` send, so no caller that forgot
to validate a user's text can address another object with ``/``, ``..``, ``?``, ``#`` or ``%``."""

from __future__ import annotations

import pytest

from operators.k8s.resource import SECRETS, SERVICES, Resource
from operators.k8s.rest import AsyncKube, Kube

HOSTILE_NAMESPACES = ["team/../kube-system", "..", "team?x=1", "team#frag", "team%2Fx", "Team", "", "a" * 64,
                      "team\n", "team/secrets/alice-nb"]
HOSTILE_NAMES = ["../alice-nb", "x/../../secrets/alice", "nb?dryRun=All", "nb#x", "nb%2F..", ".", "..", "NB",
                 "nb\n", "a" * 254, "nb:8888"]


@pytest.mark.parametrize("namespace", [n for n in HOSTILE_NAMESPACES if n])
def test_a_hostile_namespace_never_becomes_a_path(namespace):
    with pytest.raises(ValueError) as info:
        SECRETS.path(namespace, "pw")
    assert str(info.value).startswith("namespace=") and repr(namespace)[:20] in str(info.value)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_never_becomes_a_path(name):
    with pytest.raises(ValueError) as info:
        SECRETS.path("team", name)
    assert str(info.value).startswith("name=") and len(str(info.value)) < 400


def test_legal_paths_are_unchanged():
    assert SECRETS.path("team-a", "alice-nb.v1") == "/api/v1/namespaces/team-a/secrets/alice-nb.v1"
    assert Resource("apps/v1", "statefulsets").path() == "/apis/apps/v1/statefulsets"
    assert SECRETS.path("", None) == "/api/v1/secrets"  # "" means "all namespaces", as before
    # the service proxy's "<name>:<port>" is a name only there
    assert SERVICES.path("t", "nb:8888", "proxy/metrics") == "/api/v1/namespaces/t/services/nb:8888/proxy/metrics"
    with pytest.raises(ValueError):
        SERVICES.path("t", "nb:8888/../x", "proxy/metrics")
    with pytest.raises(ValueError):
        SERVICES.path("t", "nb", "proxy/../../secrets")


def test_sync_kube_sends_nothing_for_a_hostile_segment(kubesim, k8s):
    kube = Kube(k8s)
    kubesim.reset_stats()
    calls = [lambda: kube.get(SECRETS, "t/../default", "pw"), lambda: kube.delete(SECRETS, "default", "../pw"),
             lambda: kube.create(SECRETS, "default?x", {"metadata": {"name": "pw"}}),
             lambda: kube.merge_patch(SECRETS, "default", "pw#", {}), lambda: kube.list(SECRETS, "a/b"),
             lambda: kube.replace(SECRETS, "default", "x/y", {}),
             lambda: kube.get_text(SERVICES, "default", "nb/../x", "proxy/metrics")]
    for call in calls:
        with pytest.raises(ValueError):
            call()
    assert kubesim.stats()["total"] == 0


async def test_async_kube_sends_nothing_for_a_hostile_segment(kubesim, k8s_async):
    kube = AsyncKube(k8s_async)
    kubesim.reset_stats()
    for call in (lambda: kube.get(SECRETS, "t/../default", "pw"), lambda: kube.delete(SECRETS, "default", "../pw"),
                 lambda: kube.list(SECRETS, "a?b")):
        with pytest.raises(ValueError):
            await call()
    assert kubesim.stats()["total"] == 0
