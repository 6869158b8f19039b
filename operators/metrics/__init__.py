"""Skiff's metrics: every name in ``catalogue``; events (counters, timings) sent through Airflow's facade by
``emit`` (its pure rules in ``events``). docs/operations.md "Metrics and alerts" is the owner's guide.

Layer: the shared core's (it imports nothing of Skiff but itself), so a feature reports in one line. The
cluster-state gauges and Skiff's Prometheus endpoint read the features' labels: ``operators.exporter``, with
the UI.
"""
