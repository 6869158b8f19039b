"""Skiff's Prometheus endpoint (``endpoint``, a FastAPI app the plugin mounts in the api-server) and the
cluster-state gauges it serves (``cluster``, pure). It reads the features' labels and the UI's login check, so
it sits with the UI, above the features; the metric names are ``operators.metrics.catalogue``'s."""
