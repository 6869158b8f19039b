"""The platform file: schema and cross-field errors name file, line and field; the model's answers."""

from __future__ import annotations

import textwrap

import pytest

from operators.platform import PlatformError, example_path, home_pvc, load_platform, parse_platform

GOOD = """\
version: 1
users: {default_pvc_size: 5Gi}
images:
  - {name: tf2-cpu, image: "tf:2", default: true}
  - {name: tf2-gpu, image: "tf:2-gpu", gpu: true}
registries:
  - {secret: regcred, teams: [recsys]}
teams:
  - name: recsys
    allow_online: true
    quota: {cpu: "8", memory: 32Gi, gpu: 2, storage: 20Gi, jobs: 3}
    members:
      - {user: alice, email: alice@example.com, role: admin}
      - {user: bob}
  - name: nlp
    namespace: nlp-team
    quota: {cpu: "4", memory: 8Gi, storage: 10Gi}
    members:
      - {user: carol}
volumes:
  - {name: data, team: recsys, size: 5Gi, writers: [alice], readers: [team:recsys]}
  - {name: scratch, team: recsys, size: 1Gi, access_mode: ReadWriteMany}
"""


def parse(text: str):
    return parse_platform(textwrap.dedent(text), "platform.yaml")


def with_line(line_no: int, new: str) -> str:
    """GOOD with its line ``line_no`` (1-based) replaced by ``new``."""
    lines = GOOD.splitlines()
    lines[line_no - 1] = new
    return "\n".join(lines) + "\n"


BAD = [
    (with_line(11, '    quota: {cpu: "8", memory: 32Gi, gpu: 2x, storage: 20Gi}'),
     "platform.yaml:11: teams[0].quota.gpu: '2x' is not a quantity"),
    (with_line(17, '    quota: {cpu: lots, memory: 8Gi, storage: 10Gi}'),
     "platform.yaml:17: teams[1].quota.cpu: 'lots' is not a quantity"),
    (with_line(9, "  - name: RecSys"), "platform.yaml:9: teams[0].name: 'RecSys' is not a valid name"),
    (with_line(16, "    namespace: nlp_team"), "platform.yaml:16: teams[1].namespace: 'nlp_team' is not a valid name"),
    (with_line(17, '    quota: {cpu: "4", memory: 8Gi}'), "platform.yaml:17: teams[1].quota.storage: is required"),
    (with_line(13, "      - {user: alice, email: alice-at-example, role: admin}"),
     "platform.yaml:13: teams[0].members[0].email: 'alice-at-example' is not an e-mail address"),
    (with_line(14, "      - {user: bob, role: owner}"),
     "platform.yaml:14: teams[0].members[1].role: 'owner' is not one of ['member', 'admin']"),
    (with_line(10, "    allow_online: yes please"), "platform.yaml:10: teams[0].allow_online: 'yes please' is not of type boolean"),
    (with_line(10, "    quot: {}"), "platform.yaml:10: teams[0].quot: unknown field"),
    (with_line(10, "    pool_slots: 0"), "platform.yaml:10: teams[0].pool_slots: 0 is not valid: expected 'from_quota' or an integer >= 1"),
    (with_line(14, "      - {user: alice}"), "platform.yaml:14: teams[0].members[1].user: 'alice' is listed twice in team 'recsys'"),
    (with_line(15, "  - name: recsys"), "platform.yaml:15: teams[1].name: team 'recsys' is already defined at teams[0]"),
    (with_line(16, "    namespace: recsys"), "platform.yaml:16: teams[1].namespace: namespace 'recsys' is already used by teams[0]"),
    (with_line(5, '  - {name: tf2-cpu, image: "tf:2-gpu", gpu: true}'), "platform.yaml:5: images[1].name: image 'tf2-cpu' is listed twice"),
    (with_line(5, '  - {name: tf2-gpu, image: "tf:2-gpu", gpu: true, default: true}'),
     "platform.yaml:5: images[1].default: only one image may be the default (images[0] already is)"),
    (with_line(7, "  - {secret: regcred, teams: [search]}"), "platform.yaml:7: registries[0].teams[0]: no team 'search' in this file"),
    (with_line(21, "  - {name: data, team: search, size: 5Gi}"), "platform.yaml:21: volumes[0].team: no team 'search' in this file"),
    (with_line(21, "  - {name: data, team: recsys, size: 5Gi, readers: [team:search]}"),
     "platform.yaml:21: volumes[0].readers[0]: no team 'search' in this file"),
    (with_line(21, "  - {name: data, team: recsys, size: 5Gi, writers: [mallory]}"),
     "platform.yaml:21: volumes[0].writers[0]: no user 'mallory' in any team"),
    (with_line(21, "  - {name: alice-home, team: recsys, size: 5Gi}"),
     "platform.yaml:21: volumes[0].name: 'alice-home' is a member's home PVC name"),
    (with_line(22, "  - {name: scratch, team: recsys, size: 1Gi, access_mode: ReadWriteSometimes}"),
     "platform.yaml:22: volumes[1].access_mode: 'ReadWriteSometimes' is not one of"),
    # 2 members x 5Gi + 6Gi of shared volumes do not fit 10Gi: rejected naming the team
    (with_line(11, '    quota: {cpu: "8", memory: 32Gi, gpu: 2, storage: 10Gi}'),
     "platform.yaml:11: teams[0].quota.storage: team recsys: 2 members' default PVCs (2 × 5Gi) and shared "
     "volumes (6Gi) need 16Gi, quota 10Gi"),
    (with_line(1, "version: 2"), "platform.yaml:1: version: 1 was expected"),
    (with_line(1, "version: 1\nnode_pools: {gpu: {taint_key: gpu node}}"),
     "platform.yaml:2: node_pools.gpu.taint_key: 'gpu node' is not a valid key"),
    (with_line(1, "version: 1\nnode_pools: {online: {key: pool, value: on line}}"),
     "platform.yaml:2: node_pools.online.value: 'on line' is not a valid label value"),
    (with_line(2, "users: [5Gi]"), "platform.yaml:2: users: ['5Gi'] is not of type object"),
    (with_line(2, "users: {default_pvc_size: 5Gi}\nusers: {}"), "platform.yaml:3: users: appears twice"),
    (with_line(12, "    members: [{user: alice"), "platform.yaml:13: not valid YAML"),
    (with_line(13, "      - {user: al ice}"), "platform.yaml:13: teams[0].members[0].user: 'al ice' is not allowed"),
]


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[e.split(": ")[1] for _, e in BAD])
def test_bad_file_names_line_and_field(text, expected):
    with pytest.raises(PlatformError) as caught:
        parse(text)
    assert expected in str(caught.value), str(caught.value)


def test_several_errors_are_reported_together_sorted_by_line():
    text = with_line(17, '    quota: {cpu: x, memory: 8Gi, storage: 10Gi}').replace("gpu: 2,", "gpu: y,")
    with pytest.raises(PlatformError) as caught:
        parse(text)
    lines = str(caught.value).splitlines()
    assert [line.split(":")[1] for line in lines] == ["11", "17"]


def test_good_file_model():
    p = parse(GOOD)
    recsys = p.team("recsys")
    assert recsys.quota.gpu == "2" and recsys.pool_slots == 3 and recsys.pull_secrets == ("regcred",)
    assert p.team("nlp").namespace == "nlp-team" and p.team("nlp").quota.gpu == "0"
    assert p.team("nlp").pool_slots == 4  # no jobs cap: cpu quota / default container cpu (1)
    assert p.team("nlp").pull_secrets == ()
    assert [t.name for t in p.teams_of("alice")] == ["recsys"]
    assert p.default_image().name == "tf2-cpu" and p.image("tf2-gpu").gpu is True
    with pytest.raises(PlatformError, match="no image 'tf3'"):
        p.image("tf3")
    with pytest.raises(PlatformError, match="no team 'search'"):
        p.team("search")


def test_volume_access_rules():
    p = parse(GOOD)
    assert p.volume_access("alice", "recsys", "alice-home") == "rw"       # own home PVC
    assert p.volume_access("bob", "recsys", "alice-home") is None         # someone else's home PVC
    assert p.volume_access("carol", "recsys", "carol-home") is None       # not a recsys member
    assert p.volume_access("alice", "recsys", "data") == "rw"             # writer
    assert p.volume_access("bob", "recsys", "data") == "ro"               # reader through team:recsys
    assert p.volume_access("carol", "recsys", "data") is None             # neither
    assert p.volume_access("bob", "recsys", "scratch") == "rw"            # team volume, no lists: members write
    assert p.volume_access("carol", "recsys", "scratch") is None
    assert p.volume_access("alice", "recsys", "unknown-pvc") is None


def test_home_pvc_is_injective_after_normalisation():
    names = ["bob", "Bob", "bob.", "BOB", "b-o-b", "bob_", "bób", "bob-home"[:3], "x" * 70, "x" * 71]
    pvcs = {home_pvc(n) for n in set(names)}
    assert len(pvcs) == len(set(names))
    assert home_pvc("alice") == "alice-home"
    for pvc in pvcs:
        assert len(pvc) <= 63 and pvc.replace("-", "").isalnum() and pvc == pvc.lower()


def test_example_file_is_valid_and_env_selects_the_file(tmp_path, monkeypatch):
    assert load_platform(example_path()).team("recsys").allow_online is True
    custom = tmp_path / "platform.yaml"
    custom.write_text(GOOD)
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(custom))
    assert load_platform().source == str(custom)
    custom.write_text(with_line(11, '    quota: {cpu: "8", memory: 32Gi, gpu: 2x, storage: 20Gi}'))
    with pytest.raises(PlatformError, match=rf"^{custom}:11: teams\[0\].quota.gpu"):
        load_platform()
    with pytest.raises(PlatformError, match="cannot read the platform file"):
        load_platform(tmp_path / "missing.yaml")


def test_online_pool_defaults_come_from_airflow_config(monkeypatch):
    monkeypatch.setenv("AIRFLOW__SKIFF__ONLINE_POOL_KEY", "pool.example.com/tier")
    p = parse(GOOD)
    assert p.node_pools.online_key == "node.netease.com/node-pool"  # parse_platform alone: built-in defaults
    assert load_platform(example_path()).node_pools.online_key == "node.netease.com/node-pool"  # file says so
