"""Skiff's metrics: names in ``catalogue``; events (counters, timings) through Airflow's facade in ``emit``
(pure rules in ``events``); cluster-state gauges on Skiff's Prometheus endpoint (``cluster`` computes them,
``endpoint`` serves them from the api-server). docs/operations.md "Metrics and alerts" is the owner's guide.

Layers: ``catalogue``, ``events`` and ``emit`` sit below the features (they import nothing of Skiff but each
other), so a feature reports in one line; ``cluster`` and ``endpoint`` read the features' labels and sit at
the UI's level.
"""
