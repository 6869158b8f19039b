"""Airflow DAG: start a stopped development instance again, with a new password (your data on the volumes is kept)."""

from __future__ import annotations

from operators.devinstances.dags import action_dag

dag = action_dag("start", __doc__)
