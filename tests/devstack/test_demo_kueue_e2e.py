"""`make demo KUEUE=1` (``python -m devstack demo --kueue --exit``) as a user runs it: on kubesim with Kueue and
process nodes, nlp's step borrows recsys' idle GPUs, recsys' online step makes Kueue preempt it, and it saves its
checkpoint on SIGTERM, is admitted again and resumes from it on the same Job and try; the demo says each step in
the words the page and the task log use, and exits 0 once everything ran."""

import os
import re
import subprocess
import sys

import pytest

from devstack.__main__ import DEMO_LIMIT_S, RUN_TIMEOUT_S
from devstack.airflow_env import REPO

LIMIT_S = DEMO_LIMIT_S + 2 * RUN_TIMEOUT_S   # the default demo's limit and the two Kueue runs
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LIMIT_S + 120)]


def test_demo_with_kueue_shows_a_borrower_preempted_by_an_online_step_resume_from_its_checkpoint(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["SKIFF_DEMO_DIR"] = str(tmp_path / "demo")
    done = subprocess.run([sys.executable, "-m", "devstack", "demo", "--kueue", "--exit"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=LIMIT_S)
    text = done.stdout
    assert done.returncode == 0, text[-4000:] + done.stderr[-2000:]
    assert "switched to queueing: kueue (one cohort; GPUs: recsys 2, nlp 1)" in text, text
    assert re.search(r"admitted and running; GPUs per team queue: recsys: 0 of 2 used, 0 borrowed, 2 lent; "
                     r"nlp: 3 of 1 used, 2 borrowed", text), text
    assert "nlp's Job is suspended (preempted)" in text, text
    assert "kueue_demo_recsys_online: SUCCESS" in text and "kueue_demo_nlp_borrow: SUCCESS" in text, text
    job = re.search(r"Job (nlp/kueue-demo-nlp-borrow-train-\S+-t1) was preempted by Kueue at \S+: Preempted to "
                    r"accommodate a workload", text)
    assert job, text
    assert f"Job {job.group(1)} resumed: Kueue admitted it again after 1 preemption(s)" in text, text
    saved = re.search(r"SIGTERM: saved a checkpoint at epoch (\d+) batch (\d+) to (\S+); exiting", text)
    assert saved, text
    # the new pod resumes where the preempted one saved, from the same directory
    assert (f"resuming from the checkpoint at epoch {saved.group(1)} batch {saved.group(2)} "
            f"({saved.group(3)}/checkpoint.npz)") in text, text
    assert re.search(r"wrote /root/models/\S+/model\.npz", text), text
