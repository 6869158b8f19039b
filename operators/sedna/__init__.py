"""Sedna FederatedLearningJob / JointInferenceService kept in sync by reconcile DAGs (SPEC §4).

Functional core: ``desired`` (children of a CR, pure) and ``plan`` (diff and status, pure).
Thin shell: ``kube`` (raw JSON API access), ``reconcile`` (observe, act, status, events),
``trigger`` (the watch that starts the DAGs), ``dags`` (the DAG factory), ``install`` (CRDs and RBAC).
"""
