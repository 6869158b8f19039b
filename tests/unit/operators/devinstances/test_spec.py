"""Pure parts of development instances: validation names the field, names fit Kubernetes' limits, the
manifests are schema-valid and follow the rules of the issue, ports are allocated once and freed."""

from __future__ import annotations

import base64

import kubernetes_validate
import pytest
import yaml

from operators.devinstances import desired, naming, ports
from operators.devinstances.owners import admins_from_config, resolve_owner
from operators.devinstances.spec import Image, build_request
from operators.templating import render_text

CATALOGUE = (Image("tf2-cpu", "registry.local/nb:tf2.15", default=True),
             Image("tf2-gpu", "registry.local/nb:tf2.15-gpu", gpu=True))
ACCESS = {"alice-home": "rw", "datasets": "ro", "scratch": "rw"}


def request(**over):
    values = dict(owner="alice", name="nb", team="recsys", image="tf2-cpu", cpu=2, memory=4, gpu=0,
                  mounts_=[], extra_ports_=[], catalogue=CATALOGUE, default_image="tf2-cpu",
                  home_pvc="alice-home", access=ACCESS.get)
    values.update(over)
    return build_request(**values)


@pytest.mark.parametrize("field, value, text", [
    ("name", "Bad_Name", "name='Bad_Name'"),
    ("name", "x" * 60, "at most"),
    ("team", "Team A", "team='Team A'"),
    ("image", "tf9", "image='tf9': is not in the platform's image catalogue: tf2-cpu, tf2-gpu"),
    ("cpu", 0, "cpu=0"),
    ("cpu", 65, "cpu='65': must be at most 64"),
    ("memory", -1, "memory=-1"),
    ("gpu", 9, "gpu=9"),
    ("gpu", 1, "image='tf2-cpu': is a CPU image"),
    ("extra_ports_", [22], "extra_ports[0]=22"),
    ("extra_ports_", [1, 2, 3, 4, 5, 6], "at most 5"),
    ("extra_ports_", [5000, 5000], "extra_ports[1]=5000: is listed twice"),
    ("mounts_", [{"pvc": "other", "path": "/o"}], "mounts[0].pvc='other': is not yours"),
    ("mounts_", [{"pvc": "datasets", "path": "/d", "read_only": False}], "mounts[0].read_only=False"),
    ("mounts_", [{"pvc": "scratch", "path": "/root"}], "mounts[0].path='/root'"),
    ("mounts_", [{"pvc": "scratch", "path": "rel"}], "mounts[0].path='rel'"),
    ("owner", "!!!", "owner='!!!'"),
])
def test_bad_input_names_the_field_and_value(field, value, text):
    with pytest.raises(ValueError) as info:
        request(**{field: value})
    assert text in str(info.value)


def test_default_image_and_normalised_request():
    req = request(image=None, mounts_=[{"pvc": "datasets", "path": "/data/"}], extra_ports_=[5000])
    assert req.image.name == "tf2-cpu"
    assert req.mounts[0].mount_path == "/data" and req.mounts[0].read_only is True
    assert req.ports == {"jupyter": 8888, "code-server": 8080, "ssh": 22, "tensorboard": 6006, "port-5000": 5000}


def test_names_fit_kubernetes_limits():
    owner = "a" * 40  # longer than a plain key: slug and hash, 30 characters
    assert naming.owner_slug("Bob.Smith") == "bob-smith"
    assert len(naming.owner_key(owner)) == 30
    name = "n" * (naming.MAX_STS_NAME - 32)
    assert len(naming.statefulset_name(owner, name)) == naming.MAX_STS_NAME
    assert len(naming.statefulset_name(owner, name) + "-0123456789") <= 63  # controller-revision-hash label
    with pytest.raises(ValueError, match="name="):
        naming.statefulset_name(owner, name + "n")


def test_instance_names_are_injective_across_owners():
    """The first rule's ``<owner>-<name>`` collided ("alice" + "x-nb" = "alice-x" + "nb"; "Alice" = "alice"):
    one user could block or take another's instance. ``<key>--<name>`` with no ``--`` in either part is
    injective, and the key is the home PVC's injective rule."""
    owners = ["alice", "Alice", "ALICE", "alice-x", "alice.x", "a--b", "a-b", "alice-3bc51062", "x" * 30, "x" * 31]
    owners += [naming.owner_key(o) for o in list(owners)]
    names = ["nb", "x-nb", "b-nb", "3bc51062--nb"[:8], "nb-2"]
    made: dict[str, tuple[str, str]] = {}
    for owner in set(owners):
        for name in names:
            sts = naming.statefulset_name(owner, name)
            assert made.setdefault(sts, (owner, name)) == (owner, name), (sts, made[sts], (owner, name))
    assert naming.statefulset_name("alice", "x-nb") == "alice--x-nb"  # readable
    with pytest.raises(ValueError, match="^name='x--nb'"):
        naming.statefulset_name("alice", "x--nb")


def manifests(gpu=0, image="tf2-cpu", mounts=()):
    req = request(gpu=gpu, image=image, mounts_=list(mounts), extra_ports_=[5000])
    external = {8888: 20000, 8080: 20001, 22: 20002, 6006: 20003, 5000: 20004}
    sts = desired.statefulset(req, external, replicas=1, started="2026-11-30T10:00:00Z")
    return req, sts, [sts, desired.service(req, "uid-1"), desired.secret("alice", "nb", "recsys", "uid-1", "pw"),
                      desired.startup_configmap("alice", "nb", "recsys", "uid-1"),
                      desired.tcp_services_configmap("kube-system", "tcp-services")]


def test_manifests_are_schema_valid():
    for gpu, image in ((0, "tf2-cpu"), (1, "tf2-gpu")):
        _, _, docs = manifests(gpu, image, [{"pvc": "datasets", "path": "/data"}])
        for doc in docs:
            kubernetes_validate.validate(doc, "1.33", strict=True)


def test_statefulset_follows_the_rules():
    req, sts, docs = manifests(mounts=[{"pvc": "datasets", "path": "/data"}, {"pvc": "scratch", "path": "/s",
                                                                              "read_only": False}])
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert sts["metadata"]["name"] == "alice--nb" and sts["spec"]["replicas"] == 1
    assert c["name"] == "notebook" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    assert "tolerations" not in pod  # no GPU toleration without GPUs, never the online pool's
    env = {e["name"]: e for e in c["env"]}
    assert env["PASSWORD"] == {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "alice--nb-password", "key": "password"}}}
    assert env["HADOOP_USER"]["value"] == "alice" and env["NOTEBOOK_TAG"]["value"] == "tf2-cpu"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/root"]["name"]]["persistentVolumeClaim"]["claimName"] == "alice-home"
    assert env["TZ"]["value"] == "UTC" and not any("hostPath" in v for v in pod["volumes"])  # Pod Security baseline
    ro, rw = mounts["/data"], mounts["/s"]
    assert ro["readOnly"] is True and volumes[ro["name"]]["persistentVolumeClaim"]["readOnly"] is True
    assert rw["readOnly"] is False and volumes[rw["name"]]["persistentVolumeClaim"]["readOnly"] is False
    assert c["readinessProbe"]["tcpSocket"]["port"] == 8888
    labels = {"app.kubernetes.io/managed-by": "skiff", "skiff.io/instance": "nb", "skiff.io/owner": "alice",
              "skiff.io/kind": "dev-instance"}
    for doc in docs[:4]:
        assert doc["metadata"]["labels"] == labels, doc["kind"]
    ann = sts["metadata"]["annotations"]
    assert ann["skiff.io/image"] == "registry.local/nb:tf2.15" and ann["skiff.io/last-started"]
    assert '"jupyter":20000' in ann["skiff.io/ports"]


def test_gpu_instance_gets_gpu_and_its_toleration_only():
    _, sts, _ = manifests(gpu=2, image="tf2-gpu")
    pod = sts["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                                   "effect": "NoSchedule"}]


def test_service_is_headless_and_secret_is_owned_by_the_statefulset():
    _, _, (sts, svc, secret, cm, _) = manifests()
    assert svc["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in svc["spec"]["ports"]] == [8888, 8080, 22, 6006, 5000]
    for child in (svc, secret, cm):
        (ref,) = child["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"]) == ("StatefulSet", "alice--nb", "uid-1")
    assert secret["type"] == "Opaque" and base64.b64decode(secret["data"]["password"]) == b"pw"
    assert cm["data"]["start-notebook.sh"] == desired.startup_script()


def test_user_text_cannot_break_out_of_a_field():
    evil = 'x"\n        evil: [1]'
    sts = yaml.safe_load(render_text("devinstance/statefulset.yaml.j2", **{**_values(), "owner": evil}))
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert {"name": "HADOOP_USER", "value": evil} in c["env"] and "evil" not in c


def _values():
    req, _, _ = manifests()
    return dict(name="alice-nb", namespace="recsys", labels={}, set_labels={}, annotations={}, replicas=1, image="i",
                image_name="n", owner="o", cpu="1", memory_gi="1", gpu=0, home_pvc="h", mounts=[],
                ports=req.ports, secret="s", startup="c", service_account=None, pull_secrets=[], timezone="UTC")


def test_ports_are_allocated_lowest_first_reused_and_freed():
    rng = ports.PortRange(20000, 20005)
    data = {"20001": "kube-system/other:53"}  # not Skiff's: never touched, never reused
    data, got = ports.allocate(data, "recsys", "alice-nb", [8888, 22], rng)
    assert got == {8888: 20000, 22: 20002}
    again, same = ports.allocate(data, "recsys", "alice-nb", [8888, 22], rng)
    assert again == data and same == got
    data, got_b = ports.allocate(data, "recsys", "bob-nb", [8888, 22, 6006], rng)
    assert got_b == {8888: 20003, 22: 20004, 6006: 20005}
    with pytest.raises(ports.PortsExhausted, match="20000-20005"):
        ports.allocate(data, "recsys", "carol-nb", [8888], rng)
    data = ports.release(data, "recsys", "alice-nb")
    assert data == {"20001": "kube-system/other:53", "20003": "recsys/bob-nb:8888", "20004": "recsys/bob-nb:22",
                    "20005": "recsys/bob-nb:6006"}
    assert ports.PortRange.parse("100-200") == ports.PortRange(100, 200)
    with pytest.raises(ValueError, match="port range"):
        ports.PortRange.parse("200-100")


@pytest.mark.parametrize("user, conf_owner, admins, expected", [
    ("alice", None, (), "alice"),
    ("alice", "alice", (), "alice"),
    ("admin", "bob", ("admin",), "bob"),
    ("", "bob", (), "bob"),
    (None, "bob", (), "bob"),
])
def test_owner_rules_allow(user, conf_owner, admins, expected):
    assert resolve_owner(user, conf_owner, admins) == expected


def test_owner_rules_refuse():
    with pytest.raises(PermissionError, match="owner='bob': 'alice' may only act on their own"):
        resolve_owner("alice", "bob", ("admin",))
    with pytest.raises(ValueError, match="pass owner in the run's conf"):
        resolve_owner("", None)
    with pytest.raises(PermissionError, match="'dag_test' may only act on their own"):  # a real user (issue 30)
        resolve_owner("dag_test", "bob")
    assert admins_from_config("ops, root", "admin:admin,alice:user,boss:Admin") == {"ops", "root", "admin", "boss"}


def test_a_team_admin_acts_for_the_teams_owners_and_nobody_elses(monkeypatch):
    """stop/start/delete pass the instance's team admins (platform file role ``admin``) to the owner rule."""
    from operators.devinstances.operator import team_namespace_and_admins
    from operators.platform import ENV_PLATFORM_FILE, example_path

    monkeypatch.setenv(ENV_PLATFORM_FILE, str(example_path()))
    ns, recsys_admins = team_namespace_and_admins("recsys")
    assert (ns, recsys_admins) == ("recsys", ("alice",))  # alice: admin of recsys, plain member of nlp
    assert team_namespace_and_admins("nlp") == ("nlp", ("carol",))
    # not in the file: Airflow admins (and CLI runs) only, never a system namespace, never a path
    assert team_namespace_and_admins("gone", "root", frozenset({"root"})) == ("gone", ())
    assert team_namespace_and_admins("gone", "") == ("gone", ())  # nobody: a CLI run (owners.triggering_user)
    for team, user in (("gone", "bob"), ("gone", "dag_test"), ("kube-system", "root"), ("default", ""),
                       ("recsys/secrets/alice-nb", "bob"), ("../kube-system", "root"), ("recsys?x", "bob")):
        with pytest.raises(ValueError, match="^team="):
            team_namespace_and_admins(team, user, frozenset({"root"}))
    assert resolve_owner("alice", "bob", recsys_admins) == "bob"
    with pytest.raises(PermissionError, match="'alice' may only act on their own"):
        resolve_owner("alice", "carol", team_namespace_and_admins("nlp")[1])
    with pytest.raises(PermissionError, match="'bob' may only act on their own"):
        resolve_owner("bob", "alice", recsys_admins)
