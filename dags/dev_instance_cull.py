"""Airflow DAG: stop development instances nobody has used for longer than ``[skiff] devinstance_idle_hours``
(default 8 h; the schedule is ``[skiff] devinstance_cull_cron``).

Idle means: JupyterLab saw no activity (no kernel or terminal activity, no request from a browser tab) for that
long, read from Jupyter's ``jupyter_server_last_activity_timestamp_seconds`` metric through the Kubernetes API
server's service proxy. An instance whose signal cannot be read is left running. Stopped instances keep their
volumes and ports; ``dev_instance_start`` brings them back.
"""

from __future__ import annotations

from operators.devinstances.dags import cull_dag

dag = cull_dag(__doc__)
