"""The end-of-step usage summary (training/usage.py): peak memory against the limit, CPU against the request, an
advice line under the stated share, and a clear word, never a number, when there is no reading. The pure lines
first, then a real process step on kubesim's process nodes, whose metrics API reads the pod's cgroups."""
from __future__ import annotations

import threading

from kubernetes import client

from kubesim.controllers.framework import Timing
from kubesim.testing import wait_until
from operators.training.usage import PEAK_ANNOTATION, Seen, read_peak, summary
from tests.support.training import process_nodes
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import make_context, operator

# the cluster on real processes (process_nodes.py)
process_server, kubesim, kubeconfig = process_nodes.process_server, process_nodes.kubesim, process_nodes.kubeconfig

GiB, MiB = 1 << 30, 1 << 20


def _pod(memory: str = "32Gi", cpu: str = "4", gpu: str | None = None, terminated: str | None = None) -> dict:
    limits = {"memory": memory, "cpu": cpu, **({"nvidia.com/gpu": gpu} if gpu else {})}
    status = {"containerStatuses": [{"name": "train", "state": {"terminated": {"reason": terminated}}}]} \
        if terminated else {}
    return {"metadata": {"name": "step-abc"}, "status": status,
            "spec": {"containers": [{"name": "train", "resources": {"limits": limits, "requests": limits}}]}}


def test_a_step_that_peaked_far_under_its_limit_gets_its_numbers_and_one_advice_line():
    seen = Seen(memory=[int(1.5 * GiB), int(2.1 * GiB), int(1.9 * GiB)], cpu=[0.5, 0.4, 0.3])
    assert summary(_pod(), "train", seen, None, 15) == [
        "Usage of pod step-abc: peak memory seen 2.1 GiB of its 32 GiB limit (7 %), CPU 0.40 of 4 requested "
        "cores (10 %, mean of 3 reading(s) 15 s apart)",
        "Advice: asked 32 GiB of memory, peaked at 2.1 GiB: memory=5 would do (under 25 % of the limit used)"]


def test_a_busy_step_gets_no_advice_and_a_gpu_step_is_told_where_its_utilisation_is():
    seen = Seen(memory=[20 * GiB], cpu=[3.9])
    (line,) = summary(_pod(gpu="1"), "train", seen, None, 15)
    assert "peak memory seen 20 GiB of its 32 GiB limit (62 %), CPU 3.90 of 4 requested cores (98 %" in line
    assert line.endswith("GPU utilisation: no source in the task (the dashboard's DCGM panels show it)")


def test_no_reading_is_said_in_words_and_an_oom_kill_names_a_peak_at_the_limit():
    (none,) = summary(_pod(), "train", None, "the cluster serves no metrics API (metrics.k8s.io: install "
                      "metrics-server)", 15)
    assert none == ("Usage of pod step-abc: not known: the cluster serves no metrics API (metrics.k8s.io: "
                    "install metrics-server)")
    (short,) = summary(_pod(), "train", Seen(), None, 15)
    assert "not known: the step ended before the metrics API had a reading" in short
    assert not any(ch.isdigit() for ch in short.split("not known:")[1].split("(")[0])
    (oom,) = summary(_pod(memory="1Gi", terminated="OOMKilled"), "train", Seen(memory=[300 * MiB], cpu=[1]), None, 15)
    assert oom == ("Usage of pod step-abc: peak memory at its limit of 1 GiB (OOMKilled: the kernel stops a "
                   "container when it reaches its limit)")


HOLD = """\
import time
block = bytearray(300 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("holding 300 MiB", flush=True)
time.sleep(6)
"""


PROCESS_TIMING = Timing(metric_resolution=1.0)   # usage read every second (process_nodes.py)


def _peaks(k8s, namespace: str) -> dict[str, str]:
    """Job name -> its usage-peak annotation, for the Jobs that have one."""
    jobs = client.BatchV1Api(k8s).list_namespaced_job(namespace).items
    return {j.metadata.name: j.metadata.annotations[PEAK_ANNOTATION] for j in jobs
            if PEAK_ANNOTATION in (j.metadata.annotations or {})}


def test_a_real_step_says_its_peak_against_its_limit_and_the_advice(k8s, team, monkeypatch):
    """... and records it on its Job for the page: the peak so far while it runs, the summary's figures at its end."""
    monkeypatch.setenv("AIRFLOW__SKIFF__USAGE_INTERVAL_SECONDS", "1")
    op = operator("hold", entry_path=None, exec_command=["python", "-u", "-c", HOLD], memory=4, cpu=1)
    lines = logged(op)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(make_context("hold"))
        except BaseException as exc:  # noqa: BLE001 - said by the assertion below
            errors.append(exc)

    step = threading.Thread(target=run)
    step.start()
    try:  # while it runs: the first reading is on the Job, not final
        running = wait_until(lambda: [read_peak(v) for v in _peaks(k8s, team).values()], timeout=30, interval=0.2,
                             what="the step's Job carrying its peak so far")
    finally:
        step.join(timeout=120)
    assert not errors and not step.is_alive(), errors
    assert len(running) == 1 and not running[0].final and running[0].readings >= 1, running
    said = [line for line in lines.lines if line.startswith(("Usage of pod", "Advice:"))]
    assert len(said) == 2, lines.lines
    peak = float(said[0].split("peak memory seen ")[1].split(" MiB")[0])
    assert 300 <= peak <= 330 and " MiB of its 4 GiB limit (" in said[0], said   # its working set, within 10 %
    assert said[1] == f"Advice: asked 4 GiB of memory, peaked at {peak:.0f} MiB: memory=1 would do (under 25 % " \
                      "of the limit used)"
    # at its end, the Job says what the summary line says: the same peak, mean CPU and readings
    (final,) = [read_peak(v) for v in _peaks(k8s, team).values()]
    readings = int(said[0].split("mean of ")[1].split(" reading")[0])
    cpu_mean = float(said[0].split(", CPU ")[1].split(" of ")[0])
    assert final.final and not final.oom and final.pods == 1, final
    assert (f"{final.memory / MiB:.0f}", final.readings, round(final.cpu_mean, 2)) == (f"{peak:.0f}", readings, cpu_mean)
    assert final.cpu >= final.cpu_mean


# rank 1 holds 300 MiB, rank 0 holds 60 MiB: the Job's peak is its highest pod's
GANG_HOLD = """\
import os, time
block = bytearray((300 if os.environ["SKIFF_RANK"] == "1" else 60) * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("holding", len(block) >> 20, "MiB", flush=True)
time.sleep(6)
"""


def test_a_gang_steps_job_records_the_peak_of_its_highest_pod(k8s, team, monkeypatch):
    """workers=2: one peak per Job, the maximum over its pods (each has the same limit), and how many were read."""
    monkeypatch.setenv("AIRFLOW__SKIFF__USAGE_INTERVAL_SECONDS", "1")
    op = operator("gang-hold", entry_path=None, exec_command=["python", "-u", "-c", GANG_HOLD], workers=2,
                  memory=1, cpu=0.5)
    lines = logged(op)
    op.execute(make_context("gang-hold"))
    said = [line for line in lines.lines if line.startswith("Usage of pod")]
    assert len(said) == 2, lines.lines   # the summary: one line per pod
    (peak,) = [read_peak(v) for v in _peaks(k8s, team).values()]
    assert peak.final and peak.pods == 2, peak
    assert 300 * MiB <= peak.memory <= 330 * MiB, peak   # rank 1's working set, not rank 0's nor their sum


def test_the_failure_email_carries_the_usage_lines():
    from types import SimpleNamespace

    from operators.training.alerts import compose
    from operators.training.operator import TrainingJobFailed

    line = summary(_pod(memory="1Gi", terminated="OOMKilled"), "train", None, None, 15)[0]
    exc = TrainingJobFailed("OOMKilled: container train", [], "recsys/j", usage=[line])
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, log_url=None, map_index=-1)
    _, body = compose({"exception": exc, "ti": ti})
    assert ("<tr><th align='left'>Usage</th><td>Usage of pod step-abc: peak memory at its limit of 1 GiB "
            "(OOMKilled: the kernel stops a container when it reaches its limit)</td></tr>") in body
