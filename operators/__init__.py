"""Skiff's operators, triggers and helpers: the package DAG authors import (``from operators import ...``).

Exports resolve lazily (PEP 562) so that ``operators.templating`` and other light modules do not pull in Airflow.
"""

from importlib import import_module

_EXPORTS = {
    "TrainingJobOperator": "operators.training.operator",
    "TrainingJobFailed": "operators.training.operator",
    "TrainingJobTrigger": "operators.training.trigger",
    "Volume": "operators.core.volumes",
    "SkiffAlert": "operators.training.alerts",
    "skiff_default_args": "operators.training.alerts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'operators' has no attribute {name!r}")
