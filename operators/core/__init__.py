"""Skiff's shared core: the facts every feature and the platform file agree on, written once.

* ``checks``: the one error shape for bad input (``field=value: why``, the value cut short) and the text check
  every string field starts with;
* ``quantity``: the one Kubernetes quantity parser, and what a request may ask (cpu, memory in GiB, GPUs);
* ``names``: Kubernetes' name rules (DNS-1123 label and subdomain, label keys and values) and the one slug rule
  that turns a user's or a DAG's name into a DNS fragment;
* ``volumes``: ``Volume`` (a PVC and where it is mounted), mount paths, the user's home PVC;
* ``nodepools``: the GPU resource and taint, the online pool's label and taint, and their defaults.

This is the bottom layer (import-linter: ``[tool.importlinter]`` in pyproject.toml): pure functions and frozen values, no I/O, no
Airflow, no Kubernetes client, and no import of any other part of ``operators`` - the access layer
(``operators.k8s``), the platform policy and the features (training, development instances, Sedna) all build
on it, as the cncf.kubernetes provider keeps ``utils/`` below its hooks and operators.
"""
