"""The Python API of development instances on kubesim, through the real `kubernetes` client: create -> Ready,
the per-owner limit, stop/start/delete and what they keep, idempotence, owner isolation, concurrent ports."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from operators.devinstances import inventory, lifecycle, naming, tcp_services
from operators.devinstances.settings import Settings
from operators.k8s import Kube, KubeError, RetryPolicy
from operators.k8s.resource import STATEFULSETS
from tests.support.devinstances.devinstance_support import NS, make_request, sts_of, wait_no_pod, wait_ready

SETTINGS = Settings(host="dev.example.com")
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def writes(kubesim) -> int:
    return sum(kubesim.stats()["by_verb"].get(v, 0) for v in WRITES)


def ports_of(k8s, owner, name) -> dict[str, str]:
    return {k: v for k, v in tcp_services.current(Kube(k8s), SETTINGS).items()
            if v.startswith(f"{NS}/{naming.service_name(owner, name)}:")}


def password_of(k8s, owner="alice", name="nb") -> str:
    return inventory.password(Kube(k8s), owner, NS, name, caller=owner)


def test_create_makes_a_ready_instance_with_ports_and_a_strong_password(k8s, team):
    outcome = lifecycle.create(Kube(k8s), make_request(extra_ports_=[5000]), SETTINGS)
    assert outcome.changed and "created" in outcome.message
    wait_ready(k8s, "alice", "nb")
    core = client.CoreV1Api(k8s)
    svc = core.read_namespaced_service("alice--nb", NS)
    assert svc.spec.cluster_ip == "None" and [p.port for p in svc.spec.ports] == [8888, 8080, 22, 6006, 5000]
    entries = ports_of(k8s, "alice", "nb")
    assert sorted(entries.values()) == sorted(f"{NS}/alice--nb:{p}" for p in (8888, 8080, 22, 6006, 5000))
    assert all(20000 <= int(p) <= 29999 for p in entries)
    secret = core.read_namespaced_secret("alice--nb-password", NS)
    (ref,) = secret.metadata.owner_references
    assert (ref.kind, ref.name) == ("StatefulSet", "alice--nb")
    pw = base64.b64decode(secret.data["password"]).decode()
    assert pw == password_of(k8s) and len(base64.urlsafe_b64decode(pw + "==")) * 8 >= 128
    (view,) = inventory.list_instances(Kube(k8s), "alice", SETTINGS)
    assert view.state == "Running" and view.image_name == "tf2-cpu" and view.resources["memory"] == "2Gi"
    assert view.ssh == f"ssh -p {view.ports['ssh']} root@dev.example.com"
    assert view.urls["jupyter"] == f"http://dev.example.com:{view.ports['jupyter']}/"
    assert pw not in json.dumps(view.as_dict())


def test_fourth_instance_is_refused_before_any_write(k8s, team, kubesim):
    for name in ("a", "b", "c"):
        lifecycle.create(Kube(k8s), make_request(name=name), SETTINGS)
    lifecycle.stop(Kube(k8s), "alice", NS, "c")  # stopped ones count too
    before = writes(kubesim)
    with pytest.raises(lifecycle.InstanceError, match="already has 3 development instances.*limit is 3"):
        lifecycle.create(Kube(k8s), make_request(name="d"), SETTINGS)
    assert writes(kubesim) == before
    lifecycle.create(Kube(k8s), make_request(owner="bob", name="d"), SETTINGS)  # the limit is per owner


def test_a_missing_volume_is_refused_and_nothing_is_created(k8s, team, kubesim):
    before = writes(kubesim)
    req = make_request(mounts_=[{"pvc": "datasets", "path": "/data"}], home_pvc="nobody-home")
    with pytest.raises(lifecycle.InstanceError, match="home volume='nobody-home': no such PersistentVolumeClaim"):
        lifecycle.create(Kube(k8s), req, SETTINGS)
    assert writes(kubesim) == before
    assert not client.AppsV1Api(k8s).list_namespaced_stateful_set(NS).items


def test_stop_and_start_keep_volumes_service_ports_and_renew_the_password(k8s, team):
    lifecycle.create(Kube(k8s), make_request(mounts_=[{"pvc": "datasets", "path": "/data"}]), SETTINGS)
    wait_ready(k8s, "alice", "nb")
    first_pw, ports = password_of(k8s), ports_of(k8s, "alice", "nb")
    assert lifecycle.stop(Kube(k8s), "alice", NS, "nb").changed
    wait_no_pod(k8s, "alice", "nb")
    assert not lifecycle.stop(Kube(k8s), "alice", NS, "nb").changed  # idempotent
    sts = sts_of(k8s, "alice", "nb")
    assert sts.spec.replicas == 0 and sts.metadata.annotations["skiff.io/last-stopped"]
    core = client.CoreV1Api(k8s)
    assert {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(NS).items} >= {
        "alice-home", "datasets"}
    assert core.read_namespaced_service("alice--nb", NS) and ports_of(k8s, "alice", "nb") == ports
    (view,) = inventory.list_instances(Kube(k8s), "alice", SETTINGS)
    assert view.state == "Stopped" and view.ports == json.loads(sts.metadata.annotations["skiff.io/ports"])
    assert lifecycle.start(Kube(k8s), "alice", NS, "nb").changed
    wait_ready(k8s, "alice", "nb")
    second_pw = password_of(k8s)
    assert second_pw != first_pw
    assert not lifecycle.start(Kube(k8s), "alice", NS, "nb").changed and password_of(k8s) == second_pw
    sts = sts_of(k8s, "alice", "nb")
    assert sts.metadata.annotations["skiff.io/last-started"] >= sts.metadata.annotations["skiff.io/last-stopped"]
    assert sts.metadata.annotations["skiff.io/image"] == "registry.local/nb:tf2.15"


def test_delete_keeps_volumes_frees_ports_and_is_idempotent(k8s, team):
    lifecycle.create(Kube(k8s), make_request(), SETTINGS)
    wait_ready(k8s, "alice", "nb")
    outcome = lifecycle.delete(Kube(k8s), "alice", NS, "nb", SETTINGS)
    assert outcome.changed and "volumes kept" in outcome.message
    core, apps = client.CoreV1Api(k8s), client.AppsV1Api(k8s)
    for read in (lambda: apps.read_namespaced_stateful_set("alice--nb", NS),
                 lambda: core.read_namespaced_service("alice--nb", NS),
                 lambda: core.read_namespaced_secret("alice--nb-password", NS),
                 lambda: core.read_namespaced_config_map("alice--nb-startup", NS)):
        with pytest.raises(ApiException) as info:
            read()
        assert info.value.status == 404
    assert core.read_namespaced_persistent_volume_claim("alice-home", NS)
    assert ports_of(k8s, "alice", "nb") == {}
    again = lifecycle.delete(Kube(k8s), "alice", NS, "nb", SETTINGS)
    assert not again.changed and "nothing to do" in again.message


def test_a_failed_port_map_update_is_sent_again_or_finished_by_the_next_delete(k8s, team, kubesim):
    """The soak's leak: the Service is gone, then the API server fails the port map's update. A short outage is
    ridden out inside the delete (Skiff's access layer sends the update again); one longer than the retry policy's
    window fails the delete, the delete DAG's task is retried, and the next delete frees what the first left."""
    from airflow.dag_processing.dagbag import DagBag

    for name in ("a", "b"):
        lifecycle.create(Kube(k8s), make_request(name=name), SETTINGS)
    port_map = f"configmaps/{SETTINGS.tcp_name}$"
    kubesim.fail(verb="update", path=port_map, status=503, count=1)
    kube = Kube(k8s, policy=RetryPolicy(base=0.01, cap=0.05))
    assert lifecycle.delete(kube, "alice", NS, "a", SETTINGS).changed and ports_of(k8s, "alice", "a") == {}
    assert kube.retried == {"PUT 503": 1}
    kubesim.fail(verb="update", path=port_map, status=503, count=None)  # until cleared
    with pytest.raises(KubeError) as info:
        lifecycle.delete(Kube(k8s, policy=RetryPolicy(base=0.01, cap=0.05, give_up_after=0.3)), "alice", NS, "b",
                         SETTINGS)
    kubesim.clear_faults()
    assert info.value.status == 503
    assert ports_of(k8s, "alice", "b")  # left behind by the failed delete
    outcome = lifecycle.delete(Kube(k8s), "alice", NS, "b", SETTINGS)
    assert outcome.changed and "freed ports" in outcome.message and ports_of(k8s, "alice", "b") == {}
    dags = DagBag(dag_folder=str(Path(__file__).resolve().parents[3] / "dags")).dags
    assert dags["dev_instance_delete"].get_task("delete").retries >= 1


def test_create_is_idempotent(k8s, team):
    lifecycle.create(Kube(k8s), make_request(), SETTINGS)
    wait_ready(k8s, "alice", "nb")
    ports, pw = ports_of(k8s, "alice", "nb"), password_of(k8s)
    client.CoreV1Api(k8s).delete_namespaced_service("alice--nb", NS)  # a lost part is repaired
    outcome = lifecycle.create(Kube(k8s), make_request(), SETTINGS)
    assert "already existed" in outcome.message
    assert client.CoreV1Api(k8s).read_namespaced_service("alice--nb", NS)
    assert ports_of(k8s, "alice", "nb") == ports and password_of(k8s) == pw
    assert len(client.AppsV1Api(k8s).list_namespaced_stateful_set(NS).items) == 1


def test_owner_isolation(k8s, team):
    lifecycle.create(Kube(k8s), make_request(), SETTINGS)
    with pytest.raises(PermissionError, match="'bob' may not read the password"):
        inventory.password(Kube(k8s), "alice", NS, "nb", caller="bob")
    # bob acting as himself only ever addresses bob's objects
    with pytest.raises(lifecycle.InstanceError, match="no development instance 'nb' of 'bob'"):
        lifecycle.stop(Kube(k8s), "bob", NS, "nb")
    assert not lifecycle.delete(Kube(k8s), "bob", NS, "nb", SETTINGS).changed
    assert inventory.list_instances(Kube(k8s), "bob", SETTINGS) == []
    # a user whose name slugs to the same prefix has names of her own (injective names): not alice's
    with pytest.raises(lifecycle.InstanceError, match="no development instance 'nb' of 'Alice'"):
        lifecycle.stop(Kube(k8s), "Alice", NS, "nb")
    assert sts_of(k8s, "alice", "nb").spec.replicas == 1


def test_two_owners_whose_first_rule_names_collide_both_get_their_instances(k8s, team):
    """"alice" + "x-nb" and "alice-x" + "nb" were both ``alice-x-nb``: the second create found the first's
    StatefulSet and failed (or, for the Secret, wrote over it). Now each has its own objects."""
    lifecycle.create(Kube(k8s), make_request(owner="alice", name="x-nb"), SETTINGS)
    lifecycle.create(Kube(k8s), make_request(owner="alice-x", name="nb", home_pvc="alice-home"), SETTINGS)
    for owner, name in (("alice", "x-nb"), ("alice-x", "nb")):
        (view,) = inventory.list_instances(Kube(k8s), owner, SETTINGS)
        assert (view.owner, view.name) == (owner, name)
        assert inventory.password(Kube(k8s), owner, NS, name, caller=owner)
    assert password_of(k8s, "alice", "x-nb") != password_of(k8s, "alice-x", "nb")
    lifecycle.delete(Kube(k8s), "alice-x", NS, "nb", SETTINGS)
    assert [v.name for v in inventory.list_instances(Kube(k8s), "alice", SETTINGS)] == ["x-nb"]


def test_an_instance_named_by_the_first_rule_is_still_its_owners_and_only_hers(k8s, team):
    """Compatibility: an instance created before names were injective (``<owner>-<name>``) is found under
    that name, acted on by its exact owner only, and keeps its names until deleted."""
    from operators.devinstances import desired

    req = make_request(owner="alice", name="x-nb")
    legacy = desired.statefulset(req, {}, replicas=0, started=None)
    legacy["metadata"]["name"] = "alice-x-nb"
    assert Kube(k8s).create(STATEFULSETS, NS, legacy)
    with pytest.raises(lifecycle.InstanceError, match="no development instance 'nb' of 'alice-x'"):
        lifecycle.stop(Kube(k8s), "alice-x", NS, "nb")  # the first rule's name of alice-x/nb: alice's, not hers
    assert not lifecycle.delete(Kube(k8s), "alice-x", NS, "nb", SETTINGS).changed
    assert lifecycle.start(Kube(k8s), "alice", NS, "x-nb").changed
    assert client.CoreV1Api(k8s).read_namespaced_secret("alice-x-nb-password", NS)  # its own names kept
    assert password_of(k8s, "alice", "x-nb")
    assert lifecycle.delete(Kube(k8s), "alice", NS, "x-nb", SETTINGS).changed
    assert not client.AppsV1Api(k8s).list_namespaced_stateful_set(NS).items


def test_twenty_concurrent_creates_get_distinct_ports_and_deletes_free_them(k8s, team):
    users = [f"user{i:02d}" for i in range(20)]
    with ThreadPoolExecutor(20) as pool:
        list(pool.map(lambda u: lifecycle.create(Kube(k8s), make_request(owner=u), SETTINGS), users))
    data = tcp_services.current(Kube(k8s), SETTINGS)
    assert len(data) == 20 * 4 and len(set(data.values())) == 80  # one external port per Service port
    for u in users:
        assert sorted(int(p.rsplit(":", 1)[1]) for p in ports_of(k8s, u, "nb").values()) == [22, 6006, 8080, 8888]
    with ThreadPoolExecutor(20) as pool:
        list(pool.map(lambda u: lifecycle.delete(Kube(k8s), u, NS, "nb", SETTINGS), users))
    assert tcp_services.current(Kube(k8s), SETTINGS) == {}


def test_a_port_map_written_between_read_and_replace_is_a_409_and_recomputed(k8s, team, kubesim, monkeypatch):
    """The resourceVersion precondition, deterministically: another writer takes the next free port between this
    allocation's read and its replace; the replace answers 409 and the allocation is redone on a fresh read."""
    from operators.devinstances import ports

    tcp_services.allocate(Kube(k8s), SETTINGS, NS, "first", [80])  # creates the map: 20000
    seen, pure = [], ports.allocate

    def racing(data, *args):
        if not seen:  # the other writer, after our read
            client.CoreV1Api(k8s).patch_namespaced_config_map(SETTINGS.tcp_name, SETTINGS.tcp_namespace,
                                                              {"data": {"20001": "other/x:1"}})
        seen.append(dict(data))
        return pure(data, *args)

    monkeypatch.setattr(ports, "allocate", racing)
    kubesim.reset_stats()
    got = tcp_services.allocate(Kube(k8s), SETTINGS, NS, "second", [8888])
    assert got == {8888: 20002} and len(seen) == 2 and "20001" in seen[1]
    assert kubesim.stats()["by_path"][f"PUT /api/v1/namespaces/{SETTINGS.tcp_namespace}/configmaps/"
                                      f"{SETTINGS.tcp_name}"] == 2  # the first answered 409
    assert tcp_services.current(Kube(k8s), SETTINGS) == {"20000": f"{NS}/first:80", "20001": "other/x:1",
                                                   "20002": f"{NS}/second:8888"}


def test_concurrent_creates_of_one_owner_never_pass_the_limit(k8s, team, kubesim):
    """Check-then-act: three creates at once for an owner with two instances all passed the count and left
    five. The count is slowed so every create reads it before any creates; after creating, each counts again
    and undoes its own surplus: at most three remain, and a refused create left nothing of itself."""
    for name in ("a", "b"):
        lifecycle.create(Kube(k8s), make_request(name=name), SETTINGS)
    kubesim.add_latency(verb="list", path="statefulsets", seconds=0.5)

    def attempt(name):
        try:
            return lifecycle.create(Kube(k8s), make_request(name=name), SETTINGS)
        except lifecycle.InstanceError as exc:
            return exc

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(attempt, ["c", "d", "e"]))
    kubesim.clear_faults()
    refused = [r for r in results if isinstance(r, lifecycle.InstanceError)]
    assert all("the limit is 3" in str(r) for r in refused) and len(refused) >= 2, results
    left = [v.name for v in inventory.list_instances(Kube(k8s), "alice", SETTINGS)]
    assert len(left) <= 3 and {"a", "b"} <= set(left), left
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)
    assert len(apps.list_namespaced_stateful_set(NS).items) == len(left)
    assert len(core.list_namespaced_service(NS).items) == len(left)  # a refused create removed its Service
    kept = {v.split(":")[0] for v in tcp_services.current(Kube(k8s), SETTINGS).values()}
    assert kept == {f"{NS}/{naming.statefulset_name('alice', n)}" for n in left}  # and its ports
