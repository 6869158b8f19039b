"""Airflow DAG: keep every Sedna FederatedLearningJob in sync with its pods and aggregation Service.

Runs when the Sedna watch trigger sees a CR edited or deleted, a worker pod deleted or finished, or a
Model/Dataset change, and every 5 minutes as a resync. Creates missing workers (a pod deleted by hand comes
back with the same spec), replaces all pods when the job's spec changes, repairs ownerReferences, removes
leftovers of deleted jobs, and writes the job's status (phase, conditions, active/succeeded/failed).
The task's return value (XCom) and log list every change it made. See operators/sedna/.
"""

from __future__ import annotations

from operators.sedna.dags import reconcile_dag
from operators.sedna.desired import FL_KIND

dag = reconcile_dag("reconcile_federated_learning", FL_KIND, __doc__)
