"""Airflow DAG: hourly usage report for the Skiff UI page: per team, quota vs used (cpu, memory, GPU,
storage), and GPU-hours and CPU-hours per user and per DAG from the Jobs that finished in the last 30 days (those
Kubernetes deleted since an earlier run from its ledger, ``usage-ledger.json`` beside the report).
Written as JSON to ``$AIRFLOW_HOME/skiff/usage.json`` (``[skiff] usage_file``). See operators/platform/usage.py.
"""

from __future__ import annotations

from operators.platform.dags import usage_report_dag

dag = usage_report_dag("usage_report", __doc__)
