"""Airflow DAG: stop development instances nobody has used for longer than ``[skiff] devinstance_idle_hours``
(default 8 h; the schedule is ``[skiff] devinstance_cull_cron``).

Idle means: JupyterLab saw no activity (no kernel or terminal activity, no request from a browser tab) for that
long, read from Jupyter's ``jupyter_server_last_activity_timestamp_seconds`` metric through the Kubernetes API
server's service proxy. An instance whose signal cannot be read is left running. With
``[skiff] devinstance_usage_idle_hours`` set (off by default), an instance whose CPU stayed under
``devinstance_usage_idle_cpu`` at every pass for that long is stopped too (the metrics API's reading; one holding a
GPU, or with no reading, is left running: docs/dev-instances.md "Idle by usage"). Stopped instances keep their
volumes and ports; ``dev_instance_start`` brings them back.
"""

from __future__ import annotations

from operators.devinstances.dags import cull_dag

dag = cull_dag(__doc__)
