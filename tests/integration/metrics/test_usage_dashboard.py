"""The dashboard's usage row (issue 37): every panel expression, as dashboard.json has it, evaluated by Debian's
promtool over series shaped as production has them: the kubelet's cAdvisor series (with the pod-level
``container=""`` and pause ``container="POD"`` rows a real kubelet also writes, which must not be counted twice),
dcgm-exporter's (a GPU no pod holds has ``pod=""``), and Skiff's ``skiff_pod_info`` and ``skiff_pod_requests``
scraped from two api-server replicas (the joins must not fail on the duplicate). The expected values are worked out
by hand below; a wrong join, a missed filter or a panel added without its expectation fails the test.
"""

from __future__ import annotations

import json

import yaml

from tests.support.metrics.prometheus_support import MONITORING
from tests.support.metrics.prometheus_support import run_tool as _run

GI = 2**30
ROW = "Usage: used against held"
STEP = {"namespace": "recsys", "pod": "step-0"}
NB = {"namespace": "recsys", "pod": "alice--nb-0"}
WAITING = {"namespace": "nlp", "pod": "carol-step-0"}  # pending: holds, uses nothing yet


def _series(name: str, labels: dict, values: str) -> dict:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def _inputs() -> list[dict]:
    """15 s apart. CPU: the step 0.5 cores (7.5 s per 15 s), the instance 0.1; memory: the step 1 GiB now after a
    3 GiB peak under a 4 GiB limit, the instance 512 MiB under 2 GiB; the step's GPU at 2 %, a free GPU at 0."""
    out = []
    for who, container, cpu, mem, limit in ((STEP, "train", "0+7.5x80", f"{GI} {3 * GI} {GI}x78", 4 * GI),
                                           (NB, "notebook", "0+1.5x80", f"{GI // 2}x80", 2 * GI)):
        c = {**who, "container": container}
        out += [_series("container_cpu_usage_seconds_total", {**c, "cpu": "total"}, cpu),
                _series("container_memory_working_set_bytes", c, mem),
                _series("container_spec_memory_limit_bytes", c, f"{limit}x80"),
                # the kubelet's pod-level row (the sum) and the pause container: never counted
                _series("container_cpu_usage_seconds_total", {**who, "container": "", "cpu": "total"}, cpu),
                _series("container_memory_working_set_bytes", {**who, "container": ""}, mem),
                _series("container_memory_working_set_bytes", {**who, "container": "POD"}, f"{GI}x80")]
    out += [_series("DCGM_FI_DEV_GPU_UTIL", {**STEP, "container": "train", "UUID": "GPU-1"}, "2x80"),
            _series("DCGM_FI_DEV_GPU_UTIL", {"namespace": "", "pod": "", "container": "", "UUID": "GPU-2"}, "0x80")]
    info = ((STEP, "bob", "daily", "train", "training"), (NB, "alice", "", "", "instance"),
            (WAITING, "carol", "nlp_daily", "train", "training"))
    held = {STEP["pod"]: (2, 4 * GI, 1), NB["pod"]: (1, 2 * GI, 0), WAITING["pod"]: (1, GI, 0)}
    for replica in ("api-0", "api-1"):
        for who, user, dag, task, kind in info:
            labels = {**who, "team": who["namespace"], "user": user, "dag": dag, "task": task,
                      "run": "r1" if dag else "", "try": "1" if dag else "", "kind": kind, "instance": replica,
                      "job": "skiff"}
            out.append(_series("skiff_pod_info", labels, "1x80"))
            for resource, value in zip(("cpu", "memory", "gpu"), held[who["pod"]], strict=True):
                out.append(_series("skiff_pod_requests", {**who, "resource": resource, "instance": replica,
                                                          "job": "skiff"}, f"{value}x80"))
    return out


# (panel title, legend) -> expected samples at 20 minutes: {labels as "k=v,...": value}
EXPECTED = {
    ("CPU cores used vs requested, by team", "{{team}} used"): {"team=recsys": 0.6},
    ("CPU cores used vs requested, by team", "{{team}} requested"): {"team=recsys": 3, "team=nlp": 1},
    ("Memory used (working set) vs requested, by team", "{{team}} used"): {"team=recsys": 1.5 * GI},
    ("Memory used (working set) vs requested, by team", "{{team}} requested"): {"team=recsys": 6 * GI,
                                                                                "team=nlp": GI},
    ("Efficiency: share of requested used, by team", "{{team}} CPU"): {"team=recsys": 20},
    ("Efficiency: share of requested used, by team", "{{team}} memory"): {"team=recsys": 25},
    ("CPU cores used vs requested, by user", "{{user}} ({{team}}) used"): {
        "team=recsys,user=bob": 0.5, "team=recsys,user=alice": 0.1},
    ("CPU cores used vs requested, by user", "{{user}} ({{team}}) requested"): {
        "team=recsys,user=bob": 2, "team=recsys,user=alice": 1, "team=nlp,user=carol": 1},
    ("Efficiency: share of requested used, by user", "{{user}} ({{team}}) CPU"): {
        "team=recsys,user=bob": 25, "team=recsys,user=alice": 10},
    ("Efficiency: share of requested used, by user", "{{user}} ({{team}}) memory"): {
        "team=recsys,user=bob": 25, "team=recsys,user=alice": 25},
    ("GPUs held idle now (under 5 %), by whom", "{{user}} {{kind}} {{pod}}"): {
        "team=recsys,user=bob,kind=training,pod=step-0": 1},
    ("GPU utilisation of the GPUs held, by user", "{{user}} ({{team}})"): {"team=recsys,user=bob": 2},
    ("Training steps: peak memory / limit (last hour)", "{{dag}}.{{task}}"): {
        "team=recsys,dag=daily,task=train": 0.75},
    ("Training steps: peak CPU used vs requested (last hour)", "{{dag}}.{{task}} peak used"): {
        "team=recsys,dag=daily,task=train": 0.5},
    ("Training steps: peak CPU used vs requested (last hour)", "{{dag}}.{{task}} requested"): {
        "team=recsys,dag=daily,task=train": 2, "team=nlp,dag=nlp_daily,task=train": 1},
    ("Each instance: CPU cores used vs requested", "{{user}} {{pod}} used"): {
        "team=recsys,user=alice,pod=alice--nb-0": 0.1},
    ("Each instance: CPU cores used vs requested", "{{user}} {{pod}} requested"): {
        "team=recsys,user=alice,pod=alice--nb-0": 1},
    ("Each instance: memory used (working set) vs limit", "{{user}} {{pod}} used"): {
        "team=recsys,user=alice,pod=alice--nb-0": GI // 2},
    ("Each instance: memory used (working set) vs limit", "{{user}} {{pod}} limit"): {
        "team=recsys,user=alice,pod=alice--nb-0": 2 * GI},
    ("Each instance: GPU utilisation", "{{user}} {{pod}}"): {},  # alice's instance holds no GPU
}


def usage_panels() -> dict[tuple[str, str], str]:
    """The usage row's targets, ``$team`` as its "All" (.*)."""
    panels = json.loads((MONITORING / "dashboard.json").read_text())["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == ROW)
    end = next((i for i, p in enumerate(panels) if i > start and p["type"] == "row"), len(panels))
    return {(p["title"], t["legendFormat"]): t["expr"].replace("$team", ".*")
            for p in panels[start + 1:end] for t in p.get("targets", [])}


def _promtool_test(exprs: dict[tuple[str, str], str], expected: dict) -> dict:
    tests = []
    for key, expr in exprs.items():
        samples = [{"labels": "{" + ",".join(f'{k}="{v}"' for k, v in (p.split("=") for p in labels.split(","))) + "}",
                    "value": value} for labels, value in expected[key].items()]
        tests.append({"expr": expr, "eval_time": "20m", "exp_samples": samples})
    return {"rule_files": [], "evaluation_interval": "15s",
            "tests": [{"interval": "15s", "input_series": _inputs(), "promql_expr_test": tests}]}


def test_every_usage_panel_expression_answers_what_the_series_say(promtool, tmp_path):
    exprs = usage_panels()
    assert set(exprs) == set(EXPECTED), set(exprs) ^ set(EXPECTED)  # a new panel comes with its expectation
    (tmp_path / "usage-dashboard.test.yaml").write_text(yaml.safe_dump(_promtool_test(exprs, EXPECTED)))
    done = _run(promtool, "test", "rules", "usage-dashboard.test.yaml", cwd=tmp_path)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_the_promtool_check_can_fail(promtool, tmp_path):
    """A join that forgets the replicas (``* on (namespace, pod) group_left (team) skiff_pod_info``) fails:
    two api-server replicas give two info series per pod (many-to-many), and one wrong expected value fails."""
    exprs = usage_panels()
    key = ("CPU cores used vs requested, by team", "{{team}} used")
    broken = {key: exprs[key].replace('max by (namespace, pod, team) (skiff_pod_info{team=~".*"})',
                                      'skiff_pod_info{team=~".*"}')}
    assert broken[key] != exprs[key]
    wrong = {key: {"team=recsys": 0.7}}
    for test, expected in ((broken, EXPECTED), ({key: exprs[key]}, wrong)):
        (tmp_path / "t.test.yaml").write_text(yaml.safe_dump(_promtool_test(test, expected)))
        assert _run(promtool, "test", "rules", "t.test.yaml", cwd=tmp_path).returncode != 0
