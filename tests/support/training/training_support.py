"""Test support for the training tests (importable by subprocesses too: no pytest imports)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))

NAMESPACE = "recsys"


class JsonFileTaskStateStore:
    """Same get/set interface as Airflow's ``task_state_store`` accessor, kept in a JSON file so that a
    killed worker process and the retry that follows share it (the real one lives behind the API server)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def _load(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key, default=None):
        return self._load().get(key, default)

    def set(self, key, value, *, retention=None):
        data = self._load()
        data[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def clear(self) -> None:
        """What Airflow's API server does in the transaction that stores SUCCESS when ``[state_store]
        clear_on_success`` is on (execution_api/routes/task_instances.py)."""
        self.path.unlink(missing_ok=True)


def make_context(task_id: str = "train", try_number: int = 1, store=None, dag_id: str = "training_tests",
                 run_id: str = "manual__2026-11-29T11:00:00+00:00") -> dict:
    ti = SimpleNamespace(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number=try_number, map_index=-1,
                         start_date=None, log_url=None, stats_tags={})
    return {"ti": ti, "task_instance": ti, "task_state_store": store}


def operator(task_id: str = "train", **kwargs):
    from operators import TrainingJobOperator

    values = dict(task_id=task_id, image="registry.local/recsys/train:1", owner="alice", namespace=NAMESPACE,
                  entry_path="train.py", run_args=["--epochs", "1"], cpu=1, memory=1, deferrable=False,
                  pod_discovery_timeout=20)
    values.update(kwargs)
    return TrainingJobOperator(**values)


def sim(seconds: float = 0.5, *, lines: int | None = None, logs: str | None = None, exit_code: int | None = None,
        reason: str | None = None) -> dict[str, str]:
    ann = {"kubesim.io/duration": str(seconds)}
    if lines is not None:
        ann["kubesim.io/log-lines"] = str(lines)
    if logs is not None:
        ann["kubesim.io/logs"] = logs
    if exit_code is not None:
        ann["kubesim.io/exit-code"] = str(exit_code)
    if reason is not None:
        ann["kubesim.io/reason"] = reason
    return ann


if __name__ == "__main__":  # crash test: run try N of a sync training task until killed
    spec = json.loads(sys.argv[1])
    store = JsonFileTaskStateStore(spec["store"]) if spec.get("store") else None
    op = operator(spec.get("task_id", "train"), pod_annotations=sim(spec["seconds"]))
    op.execute(make_context(spec.get("task_id", "train"), spec["try"], store))
