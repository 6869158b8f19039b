"""Admission as a pure decision (no cluster, no Airflow run): a request value and the observed quota in, a
Decision out; the features apply it without the decision reaching into them."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest

from operators.core.volumes import Volume
from operators.platform.admission import AdmissionError, AdmissionRequest, Decision, decide
from tests.support.platform.platform_support import PLATFORM, platform

ASK = AdmissionRequest(team="recsys", user="bob", cpu="1", memory="2Gi", gpu=1,
                       volumes=(Volume("datasets", "/data", read_only=False),))
BUSY = {"hard": {"requests.nvidia.com/gpu": "2", "requests.cpu": "8", "requests.memory": "32Gi"},
        "used": {"requests.nvidia.com/gpu": "2", "requests.cpu": "1", "requests.memory": "1Gi"}}


def test_the_request_and_the_decision_are_values():
    with pytest.raises(FrozenInstanceError):
        ASK.cpu = "2"  # type: ignore[misc]
    first, again = decide(platform(), ASK, BUSY), decide(platform(), ASK, BUSY)
    assert first == again and hash(first) == hash(again)   # same inputs, same decision: nothing else is read
    assert ASK.volumes[0].read_only is False                # the request is not rewritten by the grant


def test_an_admitted_request_carries_the_volumes_granted_and_the_placement():
    the_platform = platform()
    decision = decide(the_platform, replace(ASK, gpu=0), BUSY)
    assert decision == Decision("admit", None, (Volume("datasets", "/data", read_only=True),),
                                the_platform.node_pools)


def test_waiting_and_refusing_say_why():
    waits = decide(platform(), ASK, BUSY)
    assert (waits.verdict, waits.reason) == ("wait", "team recsys waits for 1 GPU (2 of 2 in use)")
    assert waits.volumes == (Volume("datasets", "/data", read_only=True),)  # what to apply once it fits
    refused = decide(platform(), replace(ASK, team="search"), BUSY)
    assert refused.refused and refused.reason.startswith("platform.yaml: no team 'search'")
    assert refused.volumes == ()


def test_the_gpu_figures_follow_the_files_gpu_resource():
    custom = platform(PLATFORM + "node_pools:\n  gpu: {resource: example.com/tpu}\n")
    used = {"hard": {"requests.example.com/tpu": "2"}, "used": {"requests.example.com/tpu": "2"}}
    assert decide(custom, ASK, used).reason == "team recsys waits for 1 GPU (2 of 2 in use)"
    assert decide(custom, ASK, {"hard": {"requests.nvidia.com/gpu": "2"},
                                "used": {"requests.nvidia.com/gpu": "2"}}).verdict == "admit"
    assert decide(custom, ASK, used).node_pools.gpu_resource == "example.com/tpu"


class Log:
    """What the operator's ``self.log`` receives (``info(format, *args)``), kept as lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt: str, *args) -> None:
        self.lines.append(fmt % args)


def _operator(**kw):
    from operators import TrainingJobOperator

    return TrainingJobOperator(**{"task_id": "t", "image": "registry.example.com/train:1", "owner": "bob",
                                  "namespace": "recsys", "entry_path": "train.py",
                                  "volumes": [Volume("datasets", "/data", read_only=False)], **kw})


def test_training_applies_the_decision_without_being_rewritten_by_it():
    """The decision goes into the Job as an argument: the operator's inputs and its ``build_spec()`` are the same
    before and after (they used to change in execute)."""
    from operators.training.admission import admission_request, apply

    op = _operator()
    before = op.build_spec()
    decision = decide(platform(), admission_request(before, op.owner), BUSY)
    log = Log()
    assert apply(decision, before, op.owner, None, log) is decision
    assert log.lines == ["volume datasets is shared read-only with bob: mounted read-only"]  # 0 GPU: no wait
    assert [v.read_only for v in op.build_spec(decision).volumes] == [True]
    assert op.build_spec() == before and op.volumes == [Volume("datasets", "/data", read_only=False)]


def test_training_raises_a_refusal_and_logs_a_wait():
    from operators.training.admission import admission_request, apply

    spec = _operator(gpu=4).build_spec()
    with pytest.raises(AdmissionError, match="^team recsys asks 4 GPU, quota 2$"):
        apply(decide(platform(), admission_request(spec, "bob"), BUSY), spec, "bob", 0.0, Log())
    spec, log = _operator(gpu=1).build_spec(), Log()
    apply(decide(platform(), admission_request(spec, "bob"), BUSY), spec, "bob", 60.0, log)
    assert log.lines[0] == ("team recsys waits for 1 GPU (2 of 2 in use); the Job waits at the quota up to 60 s "
                            "(quota_wait) for it to fit")


def test_an_instance_asks_what_its_request_says():
    from operators.devinstances.admission import admission_request
    from operators.devinstances.operator import request_from_params

    req = request_from_params(platform(), "bob", {"team": "recsys", "name": "nb", "image": "tf2-gpu", "cpu": 2,
                                                  "memory": 4, "gpu": 1,
                                                  "mounts": [{"pvc": "datasets", "path": "/data"}]})
    assert admission_request(req) == AdmissionRequest(team="recsys", user="bob", cpu="2", memory="4Gi", gpu=1,
                                                      home="bob-home", volumes=(Volume("datasets", "/data"),),
                                                      instance=True)
