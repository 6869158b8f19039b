"""Airflow DAG: apply the platform file (``[skiff] platform_file``) to the cluster and to Airflow's pools.

Runs when the file changes (an AssetWatcher in the triggerer notices within seconds) and hourly. Creates or
updates, with server-side apply (field manager ``skiff``): each team's Namespace, ResourceQuota
``skiff-quota``, LimitRange defaults, ServiceAccount with the registries' pull secrets, RoleBindings for its
members, every member's home PVC and the shared PVCs; and the Airflow pool ``skiff-<team>`` sized from the
quota. Never deletes: a team or user removed from the file is reported as orphaned. See operators/platform/.
"""

from __future__ import annotations

from operators.platform.dags import platform_sync_dag

dag = platform_sync_dag("platform_sync", __doc__)
