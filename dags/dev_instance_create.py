"""Airflow DAG: create a development instance: JupyterLab, code-server (VS Code), SSH and TensorBoard in your
team's queue.

Fill in the form: a name, your team, an image from the platform catalogue, CPU/memory/GPUs and optional extra
volumes and ports. Your home volume (``<you>-home``) is mounted at ``/root``. The run's log and the task's
"JupyterLab" / "code-server" links give the addresses and the ``ssh -p PORT root@HOST`` line; the password is
shown on Skiff's page, to you only. At most 3 instances per user, stopped ones included.
"""

from __future__ import annotations

from operators.devinstances.dags import action_dag

dag = action_dag("create", __doc__)
