"""The page's data shaping (``operators.ui.views``): pure functions over objects as the API server returns them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from operators.ui import views

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def quota(hard: dict, used: dict) -> dict:
    return {"metadata": {"name": "skiff-quota", "namespace": "recsys"}, "spec": {"hard": hard},
            "status": {"hard": hard, "used": used}}


def test_quota_bars_use_requests_and_convert_units():
    q = quota({"requests.cpu": "8", "limits.cpu": "16", "requests.memory": "32Gi", "requests.nvidia.com/gpu": "2",
               "requests.storage": "100Gi"},
              {"requests.cpu": "2500m", "requests.memory": "4096Mi", "requests.nvidia.com/gpu": "2",
               "requests.storage": "40Gi"})
    bars = {b["resource"]: b for b in views.quota_bars(q)}
    assert list(bars) == ["cpu", "memory", "gpu", "storage"]
    assert (bars["cpu"]["used"], bars["cpu"]["hard"], bars["cpu"]["key"]) == (2.5, 8.0, "requests.cpu")
    assert (bars["memory"]["used"], bars["memory"]["hard"], bars["memory"]["unit"]) == (4.0, 32.0, "GiB")
    assert bars["gpu"]["percent"] == 100.0
    assert bars["storage"]["percent"] == 40.0
    assert views.free_quota(bars.values()) == {"cpu": 5.5, "memory": 28.0, "gpu": 0.0, "storage": 60.0}


def test_quota_without_status_yet_counts_nothing_used_and_skips_unlimited_resources():
    q = {"metadata": {"name": "skiff-quota"}, "spec": {"hard": {"cpu": "4"}}}
    assert views.quota_bars(q) == [{"resource": "cpu", "key": "cpu", "used": 0.0, "hard": 4.0, "unit": "cores",
                                    "percent": 0.0}]
    assert views.team_quota("ml", None) == {"team": "ml", "bars": [], "missing": True}


def test_gpu_bars_and_rows_count_the_platforms_gpu_resource():
    q = quota({"requests.example.com/tpu": "4", "requests.nvidia.com/gpu": "8"},
              {"requests.example.com/tpu": "1", "requests.nvidia.com/gpu": "8"})
    (gpu,) = views.quota_bars(q, "example.com/tpu")
    assert (gpu["key"], gpu["used"], gpu["hard"]) == ("requests.example.com/tpu", 1.0, 4.0)
    tpu_pod = {"spec": {"containers": [{"resources": {"limits": {"example.com/tpu": "2", "nvidia.com/gpu": "1"}}}]}}
    assert views.training_row(ti("running"), job(), tpu_pod, now=NOW, gpu_resource="example.com/tpu")["gpu"] == 2
    assert views.training_row(ti("running"), job(), tpu_pod, now=NOW)["gpu"] == 1   # default: nvidia.com/gpu


def test_free_quota_is_never_negative():
    assert views.free_quota([{"resource": "cpu", "hard": 2.0, "used": 3.0}]) == {"cpu": 0.0}


def ti(state: str, **kw) -> dict:
    row = {"dag_id": "reco daily", "task_id": "train", "run_id": "manual__2026-11-30T10:00:00+00:00",
           "map_index": -1, "try_number": 2, "state": state, "start_date": NOW - timedelta(minutes=5),
           "end_date": None, "queued_dttm": None, "scheduled_dttm": None}
    row.update(kw)
    return row


def job(name="reco-train-abc-t2", ns="recsys") -> dict:
    return {"metadata": {"name": name, "namespace": ns, "annotations": {
        "skiff.io/dag-id": "reco daily", "skiff.io/task-id": "train",
        "skiff.io/run-id": "manual__2026-11-30T10:00:00+00:00", "skiff.io/map-index": "-1"}}}


def pod(node=None, gpu="1", phase="Running") -> dict:
    return {"spec": {"nodeName": node, "containers": [{"resources": {"limits": {"cpu": "4", "memory": "16Gi",
                                                                                "nvidia.com/gpu": gpu}}}]},
            "status": {"phase": phase}}


def test_running_training_row_has_team_node_gpu_age_and_a_log_link_relative_to_the_ui_root():
    row = views.training_row(ti("running"), job(), pod(node="gpu-1"), now=NOW)
    assert (row["team"], row["node"], row["gpu"], row["age_seconds"]) == ("recsys", "gpu-1", 1, 300)
    assert row["waiting_for"] is None
    assert row["log_path"] == ("dags/reco%20daily/runs/manual__2026-11-30T10%3A00%3A00%2B00%3A00/tasks/train"
                               "?try_number=2")
    assert views.job_key(job()["metadata"]["annotations"]) == ("reco daily", "train",
                                                               "manual__2026-11-30T10:00:00+00:00", -1)


def test_waiting_rows_say_what_they_wait_for():
    assert views.training_row(ti("queued"), None, None, now=NOW)["waiting_for"] == "pool"
    assert views.training_row(ti("deferred"), job(), None, now=NOW)["waiting_for"] == "quota"
    assert views.training_row(ti("deferred"), job(), pod(phase="Pending"), now=NOW)["waiting_for"] == "scheduling"
    assert views.training_row(ti("failed", end_date=NOW), job(), None, now=NOW)["waiting_for"] is None


def test_a_preempted_job_waiting_to_be_admitted_again_says_so():
    """A suspended Job whose template Skiff annotated with a preemption count (operators/training/checkpoint.py):
    Kueue preempted it and it waits for its quota back; a Job never admitted yet waits for Kueue to admit it."""
    def suspended(preemptions: str, gpu: str) -> dict:
        j = job()
        j["spec"] = {"suspend": True, "template": {
            "metadata": {"annotations": {"skiff.io/preemptions": preemptions}},
            "spec": {"containers": [{"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": gpu}}}]}}}
        return j
    row = views.training_row(ti("deferred"), suspended("1", "3"), None, now=NOW, queue_reason="insufficient quota")
    assert (row["waiting_for"], row["queue_reason"]) == ("preempted_gpus", "insufficient quota")
    assert views.training_row(ti("deferred"), suspended("1", "0"), None, now=NOW)["waiting_for"] == "preempted"
    assert views.training_row(ti("deferred"), suspended("0", "3"), None, now=NOW)["waiting_for"] == "kueue"


def test_mapped_task_log_link_names_the_map_index():
    assert views.task_log_path("d", "r", "t", 3, 1) == "dags/d/runs/r/tasks/t/mapped/3?try_number=1"


def test_failure_reason_comes_from_skiffs_exception_in_the_structured_log():
    messages = [
        {"event": "starting"},
        {"event": "Task failed with exception", "error_detail": [
            {"exc_type": "TrainingJobFailed",
             "exc_value": "Training Job recsys/x-t1 failed: OOMKilled: container exceeded its memory limit of 1Gi\n"
                          "--- last 2 log lines ---\nline 1\nline 2"}]},
    ]
    assert views.failure_from_log(messages) == "OOMKilled: container exceeded its memory limit of 1Gi"
    other = [{"event": "x", "error_detail": [{"exc_type": "ValueError", "exc_value": "bad value\nmore"}]}]
    assert views.failure_from_log(other) == "ValueError: bad value"
    assert views.failure_from_log([{"event": "no error"}]) is None


def test_sedna_row_counts_desired_children_that_exist_and_lists_newest_events_first():
    cr = {"kind": "FederatedLearningJob", "metadata": {"namespace": "fl", "name": "surface", "uid": "u1"},
          "status": {"phase": "Running"}}
    desired = [("Pod", "surface-aggregation-abc"), ("Pod", "surface-train-1"), ("Pod", "surface-train-2"),
               ("Service", "surface-aggregation")]
    actual = [{"kind": "Pod", "metadata": {"name": "surface-aggregation-abc"}},
              {"kind": "Pod", "metadata": {"name": "surface-train-1"}},
              {"kind": "Pod", "metadata": {"name": "surface-train-old"}},  # an old spec's pod: not desired
              {"kind": "Service", "metadata": {"name": "surface-aggregation"}}]
    events = [{"type": "Normal", "reason": "Created", "message": "a", "lastTimestamp": "2026-11-30T10:00:00Z"},
              {"type": "Normal", "reason": "Recreated", "message": "b", "lastTimestamp": "2026-11-30T11:00:00Z"}]
    row = views.sedna_row(cr, desired, actual, events)
    assert (row["desired"], row["actual"], row["in_sync"], row["phase"]) == (4, 3, False, "Running")
    assert {c["kind"]: (c["desired"], c["actual"]) for c in row["children"]} == {"Pod": (3, 2), "Service": (1, 1)}
    assert [e["reason"] for e in row["events"]] == ["Recreated", "Created"]


def test_sedna_row_with_a_spec_error_is_not_in_sync_and_takes_its_phase_from_conditions():
    cr = {"kind": "JointInferenceService", "metadata": {"namespace": "ji", "name": "helmet", "uid": "u2"},
          "status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    row = views.sedna_row(cr, [], [], [], error="Model big-model not found")
    assert (row["phase"], row["in_sync"], row["error"]) == ("Failed", False, "Model big-model not found")


def test_gpu_hours_sum_a_users_rows_of_the_callers_teams_only():
    report = {"generated_at": "2026-11-30T12:00:00+00:00",
              "period": {"since": "2026-10-31T12:00:00+00:00", "until": "2026-11-30T12:00:00+00:00"},
              "by_user": [{"user": "alice", "team": "recsys", "gpu_hours": 2.5},
                          {"user": "alice", "team": "nlp", "gpu_hours": 1.0},
                          {"user": "bob", "team": "recsys", "gpu_hours": 4.0},
                          {"user": "carol", "team": "nlp", "gpu_hours": 7.0},
                          {"user": "dave", "team": "recsys", "gpu_hours": 0.0}]}
    recsys = views.gpu_hours_by_user(report, {"recsys"})
    assert recsys["users"] == [{"user": "bob", "gpu_hours": 4.0}, {"user": "alice", "gpu_hours": 2.5}]
    assert recsys["efficiency"] is None  # a report written before it had a gpu section
    every = views.gpu_hours_by_user(report, None)["users"]
    assert [(r["user"], r["gpu_hours"]) for r in every] == [("carol", 7.0), ("bob", 4.0), ("alice", 3.5)]
    assert views.gpu_hours_by_user(None, None) == {"users": [], "generated": None, "since": None, "until": None}


def test_gpu_efficiency_rows_of_the_callers_teams_or_not_known():
    """The report's gpu section (held, used, efficiency per user, team and kind, from Prometheus) reaches the
    page for the caller's teams only; not known: no row, the report's reason, never a number."""
    row = {"gpu_hours_held": 2.0, "gpu_hours_measured": 2.0, "gpu_hours_used": 1.0, "efficiency_percent": 50.0}
    idle = {"gpu_hours_held": 1.0, "gpu_hours_measured": 1.0, "gpu_hours_used": 0.0, "efficiency_percent": 0.0}
    report = {"generated_at": "2026-11-30T12:00:00+00:00",
              "by_user": [{"user": "bob", "team": "recsys", "gpu_hours": 2.0}],
              "gpu": {"source": "prometheus", "problem": None, "step_seconds": 300,
                      "by_user": [{"user": "bob", "team": "recsys", "kind": "training", **row},
                                  {"user": "alice", "team": "recsys", "kind": "instance", **idle},
                                  {"user": "carol", "team": "nlp", "kind": "instance", **idle}],
                      "by_team": [{"team": "recsys", "kind": "training", **row},
                                  {"team": "recsys", "kind": "instance", **idle},
                                  {"team": "nlp", "kind": "instance", **idle}]}}
    eff = views.gpu_hours_by_user(report, {"recsys"})["efficiency"]
    assert [(r["user"], r["kind"], r["efficiency_percent"]) for r in eff["users"]] == [
        ("bob", "training", 50.0), ("alice", "instance", 0.0)]
    assert [(r["team"], r["kind"]) for r in eff["teams"]] == [("recsys", "training"), ("recsys", "instance")]
    assert len(views.gpu_hours_by_user(report, None)["efficiency"]["users"]) == 3  # an Airflow admin: all
    report["gpu"] = {"source": None, "problem": "no Prometheus configured ([skiff] prometheus_url)", "by_user": [],
                     "by_team": []}
    eff = views.gpu_hours_by_user(report, None)["efficiency"]
    assert eff == {"source": None, "problem": "no Prometheus configured ([skiff] prometheus_url)", "teams": [],
                   "users": []}


def test_split_by_team_keeps_the_callers_teams_and_rows_of_no_team_yet():
    from operators.ui.views import split_by_team

    rows = [{"task_id": "a", "team": "recsys"}, {"task_id": "b", "team": "nlp"}, {"task_id": "c", "team": None}]
    mine, others = split_by_team(rows, ["nlp"])
    assert [r["task_id"] for r in mine] == ["b", "c"] and [r["task_id"] for r in others] == ["a"]
    assert split_by_team(rows, None) == (rows, [])  # an Airflow admin: every team
    assert split_by_team(rows, []) == ([rows[2]], rows[:2])  # in no team


def test_a_row_up_for_retry_shows_the_reason_its_failed_try_failed():
    """issue 36: "up for retry" rows showed no reason; it ("exit code 127 ...") was only in the task log and the
    e-mail. The row of a failed task and of one up for retry read it from the failed try's Job and pod."""
    from operators.ui.sources import row_reason

    failed_job = {**job(), "spec": {"backoffLimit": 0}, "status": {"failed": 1, "conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    pod_127 = {"metadata": {"name": "reco-train-abc-t2-x", "creationTimestamp": "2026-11-30T11:55:00Z"},
               "status": {"phase": "Failed", "containerStatuses": [{"name": "train", "state": {"terminated": {
                   "exitCode": 127, "reason": "Error"}}}]}}
    for state in ("up_for_retry", "failed"):
        reason = row_reason(ti(state), failed_job, [pod_127])
        assert reason and "exit code 127" in reason, (state, reason)
        row = views.training_row(ti(state, end_date=NOW), failed_job, pod_127, now=NOW, reason=reason)
        assert row["reason"] == reason and row["reason_class"]
    assert row_reason(ti("running"), failed_job, [pod_127]) is None


def test_the_gpu_hours_chart_draws_no_bar_that_reads_0_h():
    """issue 36: a user with seconds of GPU (0.001 h) was a visible bar labelled "0 h"."""
    report = {"by_user": [{"user": "alice", "team": "recsys", "gpu_hours": 0.25},
                          {"user": "bob", "team": "recsys", "gpu_hours": 0.001},
                          {"user": "carol", "team": "nlp", "gpu_hours": 0.004}, {"user": "carol", "team": "nlp",
                                                                                   "gpu_hours": 0.003}]}
    users = views.gpu_hours_by_user(report, None)["users"]
    assert [(u["user"], u["gpu_hours"]) for u in users] == [("alice", 0.25), ("carol", 0.01)]


def _job_with_peak(value: str | None, memory: str = "1Gi", cpu: str = "500m") -> dict:
    j = job()
    if value is not None:
        j["metadata"]["annotations"]["skiff.io/usage-peak"] = value
    j["spec"] = {"template": {"spec": {"containers": [{"name": "train", "resources": {
        "requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}}]}}}
    return j


def test_a_training_row_shows_its_steps_peak_against_the_jobs_limit_and_request_running_and_finished():
    """issue 37: the peak the step's follower recorded on its Job (operators/training/usage.py), beside use now
    while it runs and after it ended, as long as the Job exists."""
    from operators.training.usage import Peak, encode_peak

    so_far = encode_peak(Peak(300 * 2**20, 0.25, 0.2, 4, 1))
    row = views.training_row(ti("running"), _job_with_peak(so_far), pod(), now=NOW)
    assert row["peak"] == {"memory": 300 * 2**20, "memory_limit": float(2**30), "memory_percent": 29.3, "cpu": 0.25,
                           "cpu_mean": 0.2, "cpu_request": 0.5, "cpu_percent": 50.0, "readings": 4, "pods": 1,
                           "final": False, "oom": False, "missing": None}
    final = encode_peak(Peak(512 * 2**20, 0.5, 0.4, 9, 2, final=True))
    done = views.training_row(ti("success", end_date=NOW), _job_with_peak(final), None, now=NOW)["peak"]
    assert (done["memory_percent"], done["cpu_percent"], done["pods"], done["final"]) == (50.0, 100.0, 2, True)
    oom = encode_peak(Peak(None, None, None, 0, 0, final=True, oom=True))
    got = views.training_row(ti("failed", end_date=NOW), _job_with_peak(oom), None, now=NOW)["peak"]
    assert (got["oom"], got["memory"], got["memory_limit"], got["missing"]) == (True, None, float(2**30), None)


def test_without_a_recorded_peak_a_row_says_so_and_never_shows_a_number():
    from operators.ui.live_usage import NO_PEAK, NO_READING

    running = views.training_row(ti("running"), _job_with_peak(None), pod(), now=NOW)["peak"]
    finished = views.training_row(ti("success", end_date=NOW), _job_with_peak(None), None, now=NOW)["peak"]
    for got, why in ((running, NO_READING), (finished, NO_PEAK)):
        assert got["missing"] == why
        assert [k for k, v in got.items() if isinstance(v, int | float) and not isinstance(v, bool) and v] == []
    # a step not started (its pod pending) or with no Job yet: nothing to say
    assert views.training_row(ti("running"), _job_with_peak(None), pod(phase="Pending"), now=NOW)["peak"] is None
    assert views.training_row(ti("queued"), None, None, now=NOW)["peak"] is None


@pytest.mark.parametrize("value", ['{"v": 1, "memory": "9Ei"}', "x" * 5000, '{"v": 1, "memory": 1e300, "cpu": 1, '
                                   '"cpu_mean": 1, "readings": 1, "pods": 1}', "[]", '{"v": 1, "memory": 5}'])
def test_a_hand_written_peak_annotation_is_not_readable_and_shows_no_number(value):
    """A team member allowed to edit Jobs in their namespace could write the annotation: the page reads it
    bounded, numbers only, and says it is not readable instead of showing what it says."""
    from operators.ui.live_usage import BAD_PEAK

    got = views.training_row(ti("running"), _job_with_peak(value), pod(), now=NOW)["peak"]
    assert got["missing"] == BAD_PEAK and got["memory"] is None and got["cpu"] is None


def test_a_job_whose_template_sizes_do_not_parse_keeps_the_peak_without_a_share():
    from operators.training.usage import Peak, encode_peak

    got = views.training_row(ti("running"), _job_with_peak(encode_peak(Peak(2**30, 1.0, 1.0, 2, 1)), memory="lots"),
                             pod(), now=NOW)["peak"]
    assert (got["memory"], got["memory_limit"], got["memory_percent"]) == (2**30, None, None)
    assert (got["cpu_request"], got["cpu_percent"]) == (0.5, 200.0)
    zero = views.training_row(ti("running"), _job_with_peak(encode_peak(Peak(2**30, 1.0, 1.0, 2, 1)), memory="0"),
                              pod(), now=NOW)["peak"]
    assert (zero["memory_limit"], zero["memory_percent"]) == (None, None)   # a limit of 0: no share, not "0 %"
