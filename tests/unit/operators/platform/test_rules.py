"""Pure parts: admission decisions, pools from quota, the desired objects, usage hours, the file trigger."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from operators.core.volumes import Volume
from operators.platform.admission import AdmissionRequest, decide
from operators.platform.desired import desired_objects, desired_pools
from operators.platform.pools import plan_pools
from operators.platform.usage import summarise
from tests.support.platform.platform_support import PLATFORM, platform


def req(**kw) -> AdmissionRequest:
    return AdmissionRequest(**{"team": "recsys", "user": "alice", "cpu": "1", "memory": "2Gi", **kw})


FREE = {"hard": {"requests.nvidia.com/gpu": "2", "requests.cpu": "8", "requests.memory": "32Gi"},
        "used": {"requests.nvidia.com/gpu": "1", "requests.cpu": "7500m", "requests.memory": "4Gi"}}


@pytest.mark.parametrize(("kw", "message"), [
    ({"gpu": 4}, "team recsys asks 4 GPU, quota 2"),
    ({"cpu": "9"}, "team recsys asks 9 CPU, quota 8"),
    ({"memory": "64Gi"}, "team recsys asks 64Gi memory, quota 32Gi"),
    ({"user": "carol"}, "user 'carol' is not a member of team recsys"),
    ({"team": "nlp", "user": "carol", "online": True}, "online=True: team nlp may not use the online pool"),
    ({"volumes": (Volume("carol-home", "/c"),)}, "volumes[0].pvc='carol-home': alice may not mount it"),
    ({"user": "bob", "home": "alice-home"}, "pvc='alice-home': bob may not mount it at /root: it is alice's"),
])
def test_never_fits_is_refused_naming_what(kw, message):
    decision = decide(platform(), req(**kw), FREE)
    assert decision.verdict == "refuse" and decision.refused
    assert decision.reason.startswith(message)


def test_fits_the_quota_but_not_the_free_part_waits_saying_for_what():
    decision = decide(platform(), req(gpu=2, cpu="1"), FREE)
    assert decision.verdict == "wait" and decision.waits
    assert decision.reason == "team recsys waits for 2 GPU (1 of 2 in use), 1 CPU (7.5 of 8 in use)"
    assert decide(platform(), req(gpu=1, cpu="0.5"), FREE).verdict == "admit"
    assert decide(platform(), req(gpu=2), None).verdict == "admit"     # no live status: nothing to wait for


def test_the_wait_message_says_what_quota_wait_will_do():
    from operators.training.admission import how_it_waits as _how_it_waits

    assert _how_it_waits(None) == "the Job waits at the quota until it fits (quota_wait=None)"
    assert _how_it_waits(7200.0) == "the Job waits at the quota up to 7200 s (quota_wait) for it to fit"
    assert _how_it_waits(0.0).startswith("quota_wait is 0: the task fails if the quota is still in use")


def test_volume_grants():
    ask = (Volume("datasets", "/data", read_only=False), Volume("scratch", "/s", read_only=False))
    as_bob = decide(platform(), req(user="bob", volumes=ask), None).volumes
    assert [v.read_only for v in as_bob] == [True, False]     # datasets: reader only; scratch: team volume
    as_alice = decide(platform(), req(volumes=ask), None).volumes
    assert [v.read_only for v in as_alice] == [False, False]  # alice writes datasets


def test_pools_sized_from_quota_and_planned():
    pools = desired_pools(platform())
    assert {n: p["slots"] for n, p in pools.items()} == {"skiff-recsys": 4, "skiff-nlp": 3}  # jobs cap; cpu 3 / 1
    assert all(p["include_deferred"] for p in pools.values())
    live = {"skiff-recsys": {**pools["skiff-recsys"], "slots": 9}, "skiff-old": {"slots": 1},
            "default_pool": {"slots": 128}}
    plan = plan_pools(pools, live)
    assert list(plan.create) == ["skiff-nlp"] and list(plan.update) == ["skiff-recsys"]
    assert plan.orphaned == ["skiff-old"]                       # reported, never deleted; default_pool untouched
    assert plan_pools(pools, {n: dict(p) for n, p in pools.items()}).unchanged == ["skiff-nlp", "skiff-recsys"]


def test_desired_objects_change_hash_when_the_file_changes():
    before = {d["metadata"]["name"]: d for t in desired_objects(platform()) for d in t.setup if t.team == "recsys"}
    after = {d["metadata"]["name"]: d for t in desired_objects(platform(PLATFORM.replace("pods: 20", "pods: 21")))
             for d in t.setup if t.team == "recsys"}
    key = "skiff.io/applied-hash"
    assert before["recsys"]["metadata"]["annotations"][key] == after["recsys"]["metadata"]["annotations"][key]
    assert before["skiff-quota"]["metadata"]["annotations"][key] != after["skiff-quota"]["metadata"]["annotations"][key]


def _job(ns: str, pvc: str, dag: str, cpu: str, gpu: int, start: datetime, seconds: float, failed=False,
         workers: int = 1) -> dict:
    end = (start + timedelta(seconds=seconds)).isoformat()
    status = {"startTime": start.isoformat()}
    if failed:
        status["conditions"] = [{"type": "Failed", "status": "True", "lastTransitionTime": end}]
    else:
        status["completionTime"] = end
    requests = {"cpu": cpu, **({"nvidia.com/gpu": str(gpu)} if gpu else {})}
    uid = f"{dag}-{start.isoformat()}-{seconds}-{cpu}-{gpu}"
    return {"metadata": {"namespace": ns, "name": uid, "uid": uid, "annotations": {"skiff.io/dag-id": dag}},
            "status": status,
            "spec": {"parallelism": workers, "template": {"spec": {"containers": [{"resources": {"requests": requests}}],
                                           "volumes": [{"name": "root-dir",
                                                        "persistentVolumeClaim": {"claimName": pvc}}]}}}}


def test_usage_hours_per_user_and_dag():
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    jobs = [_job("recsys", "alice-home", "rec_daily", "2", 2, t0, 3600),            # 2 CPU-h, 2 GPU-h
            _job("recsys", "alice-home", "rec_daily", "500m", 0, t0, 1800, True),   # failed: still counted
            _job("recsys", "bob-home", "rec_weekly", "4", 1, t0, 900),              # 1 CPU-h, 0.25 GPU-h
            _job("recsys", "bob-home", "rec_weekly", "4", 1, t0 - timedelta(days=60), 900),   # before the period
            {"metadata": {"namespace": "recsys"}, "status": {"startTime": t0.isoformat()}, "spec": {}}]  # running
    quotas = [{"metadata": {"name": "skiff-quota", "namespace": "recsys"},
               "status": {"hard": {"requests.nvidia.com/gpu": "2"}, "used": {"requests.nvidia.com/gpu": "1"}}}]
    report = summarise(platform(), quotas, jobs, t0 - timedelta(days=30), t0 + timedelta(days=1))
    assert report["by_user"] == [
        {"user": "alice", "team": "recsys", "cpu_hours": 2.25, "gpu_hours": 2.0, "jobs": 2},
        {"user": "bob", "team": "recsys", "cpu_hours": 1.0, "gpu_hours": 0.25, "jobs": 1}]
    assert [(r["dag_id"], r["gpu_hours"]) for r in report["by_dag"]] == [("rec_daily", 2.0), ("rec_weekly", 0.25)]
    recsys = next(t for t in report["teams"] if t["team"] == "recsys")
    assert recsys["quota"]["gpu"] == {"hard": "2", "used": "1"}
    assert next(t for t in report["teams"] if t["team"] == "nlp")["quota"]["cpu"] == {"hard": None, "used": None}


def test_the_ledger_keeps_jobs_kubernetes_deleted_within_the_period_and_counts_each_once():
    """A finished Job is deleted a day later (ttlSecondsAfterFinished); the report covers 30 days: what an earlier
    run saw stays counted from the ledger, a Job seen again is not counted twice, one older than the period goes."""
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    day1 = _job("recsys", "alice-home", "rec_daily", "2", 1, t0, 3600)                   # 2 CPU-h, 1 GPU-h
    day5 = _job("recsys", "alice-home", "rec_daily", "2", 1, t0 + timedelta(days=4), 3600)
    gang = _job("recsys", "bob-home", "rec_dp", "1", 1, t0 + timedelta(days=5), 1800, workers=4)  # 4 pods: 2 GPU-h
    first = summarise(platform(), [], [day1], t0 - timedelta(days=30), t0 + timedelta(days=1))
    # day 6: day1's Job is long deleted by its TTL, day5's still there; the ledger of the first run is passed on
    later = summarise(platform(), [], [day5, gang], t0 + timedelta(days=6) - timedelta(days=30),
                      t0 + timedelta(days=6), first["ledger"])
    assert later["by_user"] == [
        {"user": "alice", "team": "recsys", "cpu_hours": 4.0, "gpu_hours": 2.0, "jobs": 2},
        {"user": "bob", "team": "recsys", "cpu_hours": 2.0, "gpu_hours": 2.0, "jobs": 1}]
    again = summarise(platform(), [], [day5, gang], t0 + timedelta(days=6) - timedelta(days=30),
                      t0 + timedelta(days=6), later["ledger"])
    assert again["by_user"] == later["by_user"] and len(again["ledger"]) == 3          # seen twice, counted once
    past = summarise(platform(), [], [], t0 + timedelta(days=33) - timedelta(days=30), t0 + timedelta(days=33),
                     again["ledger"])
    assert [r["jobs"] for r in past["by_user"]] == [1, 1] and len(past["ledger"]) == 2  # day1 left the period
    damaged = [{**again["ledger"][0], "finished": "yesterday"}, {**again["ledger"][1], "gpu_hours": "2"},
               {"uid": "x"}, again["ledger"][2]]
    kept = summarise(platform(), [], [], t0 + timedelta(days=6) - timedelta(days=30), t0 + timedelta(days=6), damaged)
    assert kept["ledger"] == again["ledger"][2:]                                        # only the sound line


def test_the_ledger_file_is_beside_the_report_and_a_damaged_one_is_rebuilt(tmp_path):
    from operators.platform.usage import ledger_file, read_ledger, write_report

    report = tmp_path / "usage.json"
    assert ledger_file(report) == tmp_path / "usage-ledger.json"
    assert read_ledger(ledger_file(report)) == []                                      # before the first run
    write_report([{"uid": "u1", "finished": "2026-11-01T00:00:00+00:00"}, "junk"], ledger_file(report))
    assert read_ledger(ledger_file(report)) == [{"uid": "u1", "finished": "2026-11-01T00:00:00+00:00"}]
    ledger_file(report).write_text("{not json")
    assert read_ledger(ledger_file(report)) == []


async def test_file_trigger_fires_on_change_only(tmp_path):
    from operators.platform.trigger import PlatformFileTrigger

    path = tmp_path / "platform.yaml"
    path.write_text(PLATFORM)
    trigger = PlatformFileTrigger(str(path), poll_seconds=0.02)
    events = trigger.run()
    first = asyncio.ensure_future(events.__anext__())
    await asyncio.sleep(0.1)
    assert not first.done()                                   # unchanged file: no event
    path.write_text(PLATFORM + "# reviewed\n")
    event = await asyncio.wait_for(first, 5)
    assert event.payload["path"] == str(path) and len(event.payload["sha256"]) == 64
    classpath, kwargs = trigger.serialize()
    assert classpath == "operators.platform.trigger.PlatformFileTrigger" and kwargs["path"] == str(path)
    await events.aclose()
