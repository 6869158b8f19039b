"""The alert's subject/body (pure) and the one-line defaults."""

from types import SimpleNamespace

import pytest

from operators import SkiffAlert, TrainingJobFailed, skiff_default_args
from operators.training.alerts import compose


def _ctx(exc):
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="manual__x", try_number=3, map_index=-1,
                         log_url="http://ui/dags/d/runs/manual__x/tasks/t?try_number=3")
    return {"ti": ti, "exception": exc}


def test_subject_names_reason_and_body_escapes_log_lines():
    exc = TrainingJobFailed("exit code 2: container train in pod p", ["<script>{{ 7*7 }}</script>"], "ns/j")
    subject, body = compose(_ctx(exc))
    assert subject == "[Skiff] d.t failed: exit code 2: container train in pod p"
    assert "&lt;script&gt;{{ 7*7 }}&lt;/script&gt;" in body  # shown verbatim: never HTML, never a template
    assert "Try</th><td>3" in body and "http://ui/dags/d/runs/manual__x/tasks/t?try_number=3" in body


def test_other_exceptions_contribute_their_first_line():
    subject, _ = compose(_ctx(ValueError("cpu='-1': must be positive\nmore")), "is up for retry")
    assert subject == "[Skiff] d.t is up for retry: cpu='-1': must be positive"


def test_default_args_one_liner():
    args = skiff_default_args(team="recsys", owner_email="alice@example.com", alert_on_retry=True)
    assert args["namespace"] == "recsys" and args["owner"] == "alice"
    assert args["retries"] == 2 and args["retry_exponential_backoff"] and args["max_retry_delay"]
    assert isinstance(args["on_failure_callback"], SkiffAlert)
    assert args["on_retry_callback"].event == "is up for retry"
    with pytest.raises(ValueError, match="owner_email='alice'"):
        skiff_default_args(team="recsys", owner_email="alice")
