"""Airflow DAG: keep every Sedna JointInferenceService in sync with its cloud/edge Deployments, Service and HPAs.

Runs when the Sedna watch trigger sees a CR edited or deleted, a child deleted or unhealthy, or a Model
change, and every 5 minutes as a resync. Recreates a deleted Deployment or Service, updates the Deployments
in place when the spec changes (so Kubernetes rolls them), repairs ownerReferences, removes leftovers of
deleted services, and writes the status (conditions, active/failed; Failed clears when the workers recover).
The task's return value (XCom) and log list every change it made. See operators/sedna/.
"""

from __future__ import annotations

from operators.sedna.dags import reconcile_dag
from operators.sedna.desired import JI_KIND

dag = reconcile_dag("reconcile_joint_inference", JI_KIND, __doc__)
