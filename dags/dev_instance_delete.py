"""Airflow DAG: delete a development instance and its external ports. Your volumes (PVCs) and their data are
never deleted."""

from __future__ import annotations

from operators.devinstances.dags import action_dag

dag = action_dag("delete", __doc__)
