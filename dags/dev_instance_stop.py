"""Airflow DAG: stop a development instance: it frees its CPU/memory/GPUs and keeps your volumes, addresses and
ports."""

from __future__ import annotations

from operators.devinstances.dags import action_dag

dag = action_dag("stop", __doc__)
