"""Preemption is not failure, end to end on kubesim with Kueue through the operator's execute() and the real
clients: team nlp's scheduled steps use all 8 GPUs of the cohort (4 of them recsys' idle ones); recsys submits
an online step, Kueue reclaims its GPUs by preempting nlp's borrowing step, which is told "preempted" in its log,
waits in the queue and later succeeds on the same Job (backoffLimit 0: the pods the suspension removed are not
a failed try); recsys' step runs at once."""
from __future__ import annotations

import threading
import time

from kubernetes import client

from kubesim.testing import wait_until
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import make_context, operator, sim

STEP = 40   # seconds an nlp step runs: long enough that only a preemption explains recsys' step running first


def start(op, task_id: str) -> dict:
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = op.execute(make_context(task_id))
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def jobs(api, namespace: str) -> list:
    return client.BatchV1Api(api).list_namespaced_job(namespace, label_selector="skiff.io/job-name").items


def test_an_online_step_reclaims_borrowed_gpus_and_the_preempted_step_finishes_later_on_the_same_job(kueue_teams):
    api = kueue_teams
    batch = client.BatchV1Api(api)
    steps = {}
    for task_id in ("b1", "b2"):        # 4 GPUs each: nlp's own 4, then recsys' idle 4 (borrowed)
        op = operator(task_id, owner="carol", namespace="nlp", gpu=4, pod_annotations=sim(STEP))
        steps[task_id] = (op, logged(op), start(op, task_id))
    wait_until(lambda: len(jobs(api, "nlp")) == 2 and all(not j.spec.suspend and (j.status.active or 0)
                                                           for j in jobs(api, "nlp")),
               timeout=60, what="both nlp steps running on the cohort's 8 GPUs")
    uids = {j.metadata.name: j.metadata.uid for j in jobs(api, "nlp")}

    online = operator("a1", owner="alice", namespace="recsys", gpu=4, online=True, pod_annotations=sim(2))
    online_lines = logged(online)
    a = start(online, "a1")
    created = wait_until(lambda: jobs(api, "recsys"), timeout=30, what="recsys' Job")[0]
    assert created.metadata.labels["kueue.x-k8s.io/priority-class"] == "skiff-online"
    started = time.monotonic()
    wait_until(lambda: not batch.read_namespaced_job(created.metadata.name, "recsys").spec.suspend, timeout=30,
               what="recsys' online step admitted")
    admitted_after = time.monotonic() - started
    preempted = wait_until(lambda: [t for t, (_, lines, _) in steps.items() if lines.has("was preempted by Kueue")],
                           timeout=30, what="an nlp step told it was preempted")
    assert len(preempted) == 1, preempted
    victim_op, victim_lines, victim = steps[preempted[0]]
    said = next(line for line in victim_lines.lines if "was preempted by Kueue" in line)
    assert "Preempted to accommodate a workload" in said and "reclamation within the cohort" in said
    assert "not a failed try" in said

    a["thread"].join(60)
    assert "error" not in a, a.get("error")
    assert online_lines.has(f"Job recsys/{created.metadata.name} succeeded")
    assert admitted_after < STEP / 2, admitted_after     # at once: not when nlp's steps end
    assert victim["thread"].is_alive()                   # still waiting or running again, not failed
    for _, _, run in steps.values():
        run["thread"].join(4 * STEP)
        assert "error" not in run, run.get("error")
    name = victim["result"]["name"]
    assert victim["result"]["uid"] == uids[name]          # the same Job, readmitted: no second Job for the try
    assert len(jobs(api, "nlp")) == 2
    job = batch.read_namespaced_job(name, "nlp")
    assert job.spec.backoff_limit == 0 and not job.status.failed and job.status.succeeded == 1
    assert victim_lines.has(f"Job nlp/{name} succeeded after 1 preemption(s) by Kueue")
    # issue 28: the readmitted Job's pod learns it resumes (downward API from the template the follower wrote
    # while the Job was suspended), and the log says when it resumed
    assert victim_lines.has(f"Job nlp/{name} resumed: Kueue admitted it again after 1 preemption(s); its new pod "
                            "starts with SKIFF_RESUME=1, SKIFF_PREEMPTIONS=1")
    (pod,) = client.CoreV1Api(api).list_namespaced_pod("nlp", label_selector=f"skiff.io/job-name={name}").items
    assert (pod.metadata.annotations["skiff.io/resume"], pod.metadata.annotations["skiff.io/preemptions"]) == ("1", "1")
    other = next(r["result"]["name"] for t, (_, _, r) in steps.items() if t != preempted[0])
    assert batch.read_namespaced_job(other, "nlp").spec.template.metadata.annotations["skiff.io/preemptions"] == "0"
