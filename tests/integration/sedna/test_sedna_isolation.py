"""Per-CR error isolation (as controller-runtime isolates keys), all-or-nothing children, and which template
edits roll children out. Against kubesim through the real client, except the digest test (pure)."""

from __future__ import annotations

import dataclasses
import re
import shutil
from importlib.resources import files
from pathlib import Path

from kubesim.testing import wait_until
from operators.sedna.desired import CHILD_TEMPLATES, templates_digest
from operators.sedna.kinds import FEDERATED_LEARNING
from operators.sedna.kube import FL_JOBS, MODELS, SERVICES, Kube
from operators.sedna.reconcile import _Pass, reconcile_federated_learning
from tests.support.sedna.sedna_helpers import FL_SEL, NS, events_of, fl_sample, model, new_fl, pods_of


def failed_condition(kube, name):
    return next(c for c in kube.get(FL_JOBS, NS, name)["status"]["conditions"] if c["type"] == "Failed")


def test_a_model_url_urlsplit_cannot_parse_fails_that_job_only(k8s, kube):
    kube.create(MODELS, NS, model("bad-url-model", "s3://[bucket/model.ckpt"))
    bad = fl_sample()
    bad["metadata"]["name"] = "bad-url"
    bad["spec"]["aggregationWorker"]["model"]["name"] = "bad-url-model"
    kube.create(FL_JOBS, NS, bad)
    new_fl(kube, "good-a")
    new_fl(kube, "good-b")
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary["created"] == 8 and summary["invalid"] == 1
    assert len(pods_of(kube, "good-a")) == len(pods_of(kube, "good-b")) == 3
    assert pods_of(kube, "bad-url") == {}
    cond = failed_condition(kube, "bad-url")
    assert cond["status"] == "True" and cond["reason"] == "InvalidSpec"
    assert "'s3://[bucket/model.ckpt'" in cond["message"]
    assert any(e["type"] == "Warning" and e["reason"] == "InvalidSpec" for e in events_of(kube, "bad-url"))


def test_any_exception_is_that_crs_condition_and_event_and_the_run_lists_it(k8s, kube):
    """An unexpected failure (a bug, a value the code did not foresee) while computing one CR's children:
    that CR gets a Failed condition and a Warning Event, the others are reconciled, the summary lists it."""
    for name in ("job-a", "job-b", "job-c"):
        new_fl(kube, name)

    def desired(cr, sources, lc):
        if cr["metadata"]["name"] == "job-b":
            raise KeyError("surprise")
        return FEDERATED_LEARNING.desired(cr, sources, lc)

    p = _Pass(Kube(k8s), "FederatedLearningJob", "http://localhost:9100")
    p.spec = dataclasses.replace(FEDERATED_LEARNING, desired=desired)
    summary = p.run(None)
    assert summary["created"] == 8
    assert len(summary["errors"]) == 1 and summary["errors"][0].startswith(f"FederatedLearningJob {NS}/job-b:")
    assert "KeyError: 'surprise'" in summary["errors"][0]
    assert pods_of(kube, "job-b") == {} and len(pods_of(kube, "job-a")) == len(pods_of(kube, "job-c")) == 3
    cond = failed_condition(kube, "job-b")
    assert cond["status"] == "True" and cond["reason"] == "ReconcileError" and "surprise" in cond["message"]
    assert any(e["type"] == "Warning" and e["reason"] == "ReconcileError" for e in events_of(kube, "job-b"))
    # fixed (here: the real table again), the job recovers
    assert reconcile_federated_learning(Kube(k8s))["created"] == 4
    assert failed_condition(kube, "job-b")["status"] == "False"


def test_an_api_error_on_one_cr_does_not_stop_the_others(k8s, kube, kubesim):
    for name in ("job-a", "job-b"):
        new_fl(kube, name)
    # the API server refuses every write about job-a's status (422: not a transient error, which the access
    # layer would send again)
    kubesim.fail(verb="patch", path="federatedlearningjobs/job-a/status", status=422, count=None)
    try:
        summary = reconcile_federated_learning(Kube(k8s))
    finally:
        kubesim.clear_faults()
    assert len(pods_of(kube, "job-a")) == len(pods_of(kube, "job-b")) == 3
    assert [e.split(":")[0] for e in summary["errors"]] == [f"FederatedLearningJob {NS}/job-a"]
    assert "422" in summary["errors"][0]
    assert kube.get(FL_JOBS, NS, "job-b")["status"]["phase"] == "Running"
    assert reconcile_federated_learning(Kube(k8s))["requests"].get("patch/status federatedlearningjobs") == 1


def test_a_name_too_long_for_the_service_creates_nothing(k8s, kube):
    """Today's pods-without-their-Service: the pod names (DNS subdomains) would pass, the Service name
    (a DNS-1035 label, <= 63) would not. Every name is checked before the first write."""
    name = "j" * 55
    new_fl(kube, name)
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary.get("created", 0) == 0
    assert kube.list(SERVICES, NS, FL_SEL) == [] and pods_of(kube, name) == {}
    cond = failed_condition(kube, name)
    assert cond["reason"] == "InvalidName" and f"'{name}-aggregation'" in cond["message"]
    assert reconcile_federated_learning(Kube(k8s))["writes"] == 0  # reported once, not on every pass


def test_templates_digest_hashes_only_the_templates_that_shape_children(tmp_path):
    root = Path(str(files("k8s_templates").joinpath("sedna")))
    copy = tmp_path / "sedna"
    shutil.copytree(root, copy)
    base = templates_digest.__wrapped__(copy)
    assert base == templates_digest.__wrapped__(root)
    for name in ("event.yaml.j2",):  # even a real change there restarts nothing (the RBAC lives in rbac/)
        (copy / name).write_text((copy / name).read_text() + "\n# edited\n")
    assert templates_digest.__wrapped__(copy) == base
    for name in CHILD_TEMPLATES:  # a comment in any child template rolls the children
        original = (copy / name).read_text()
        (copy / name).write_text(original + "\n{# edited #}\n")
        assert templates_digest.__wrapped__(copy) != base, name
        (copy / name).write_text(original)
    # and every template the desired children are rendered from is one of them
    source = (Path(__file__).parents[3] / "operators" / "sedna" / "desired.py").read_text()
    used = set(re.findall(r'render\(\s*"sedna/([^"]+)"', source))
    assert used and used <= set(CHILD_TEMPLATES), used - set(CHILD_TEMPLATES)


def test_a_slow_cr_does_not_hold_up_the_others(k8s, kube, kubesim):
    """Writes run on a bounded pool: while the API server holds job-0's status write, the other jobs get
    their children and status (observed while that pass is still running)."""
    import threading

    for i in range(6):
        new_fl(kube, f"job-{i}")
    kubesim.add_latency(verb="patch", path="federatedlearningjobs/job-0/status", seconds=8, count=1)
    done: list[dict] = []
    run = threading.Thread(target=lambda: done.append(reconcile_federated_learning(Kube(k8s), concurrency=3)))
    run.start()
    try:
        others = [f"job-{i}" for i in range(1, 6)]
        wait_until(lambda: all((kube.get(FL_JOBS, NS, n).get("status") or {}).get("phase") == "Running"
                               for n in others), timeout=7, what="the other jobs reconciled")
        assert run.is_alive() and not done  # job-0's status write is still held
    finally:
        run.join()
        kubesim.clear_faults()
    assert done[0]["created"] == 24 and not done[0]["errors"]
    assert kube.get(FL_JOBS, NS, "job-0")["status"]["phase"] == "Running"
    assert reconcile_federated_learning(Kube(k8s), concurrency=3)["writes"] == 0


def test_concurrency_one_and_many_make_the_same_children_once(k8s, kube):
    for i in range(12):
        new_fl(kube, f"job-{i:02d}")
    first = reconcile_federated_learning(Kube(k8s), concurrency=1, namespaces=[NS])
    names_1 = {n for i in range(12) for n in pods_of(kube, f"job-{i:02d}")}
    for i in range(12):
        kube.delete(FL_JOBS, NS, f"job-{i:02d}")
    wait_until(lambda: not kube.list(SERVICES, NS, FL_SEL), what="children collected")
    for i in range(12):
        new_fl(kube, f"job-{i:02d}")
    many = reconcile_federated_learning(Kube(k8s), concurrency=8)
    assert first["created"] == many["created"] == 48
    assert many["requests"] == first["requests"]  # the same requests, only overlapped
    assert len({n for i in range(12) for n in pods_of(kube, f"job-{i:02d}")}) == 36 == len(names_1)
    assert reconcile_federated_learning(Kube(k8s), concurrency=8)["writes"] == 0
