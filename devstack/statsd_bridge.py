"""``python -m devstack.statsd_bridge``: the demo's stand-in for the Airflow chart's statsd-exporter.

Debian has no statsd-exporter package, and the demo must not download a binary; this reads the same
``extraMappings`` as the chart (``deploy/monitoring/helm-values.yaml``) and does what statsd_exporter does with
them (github.com/prometheus/statsd_exporter, pkg/mapper: glob matching one dot-free component per ``*``,
``${n}`` in the name; pkg/line: DogStatsD/InfluxDB tags; counters created at their first event, timers as
histograms in seconds): Skiff's events (``airflow.skiff.*``) become Prometheus series on ``/metrics``, with
``statsd_exporter_samples_total`` counting every sample as the exporter does (SkiffStatsdSilent reads it).
Airflow's own metrics are counted and dropped (the chart maps them; the demo's dashboard does not use them).

UDP loses what the receiver has no room for, silently: a CPU-starved bridge behind a burst of Airflow's own
metrics once lost Skiff's failure counts in a full test run. So, as statsd_exporter's ``--statsd.read-buffer``
does, the socket asks for a large receive buffer (``--read-buffer``, capped by ``net.core.rmem_max`` unless
root, which may force it), one thread only drains the socket into a queue, and the kernel's drop count for the
socket is exported as ``statsd_bridge_udp_drops`` (the ``drops`` column of /proc/net/udp): a loss is visible.

Pure parts: ``parse_line``, ``map_name`` and ``udp_drops``; ``main`` is the UDP loop and the HTTP endpoint.
"""

from __future__ import annotations

import argparse
import queue
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
HELM_VALUES = REPO / "deploy" / "monitoring" / "helm-values.yaml"
LINE = re.compile(r"^(?P<name>[^,:]+)(?P<tags>(,[^,:=]+=[^,:]*)*):(?P<value>[-+0-9.eE]+)\|(?P<type>c|ms|g|h)(\|.*)?$")
TYPES = {"c": "counter", "ms": "observer", "h": "observer", "g": "gauge"}
READ_BUFFER = 8 << 20  # bytes asked for the socket's receive buffer (a burst of ~10,000 datagrams)
SO_RCVBUFFORCE = 33  # <asm-generic/socket.h>; root may exceed net.core.rmem_max with it (Python has no name)


def parse_line(line: str) -> tuple[str, dict[str, str], float, str] | None:
    """``name,tag=v:1|c`` -> (name, tags, value, counter | observer | gauge); None for what is not a sample."""
    m = LINE.match(line.strip())
    if not m:
        return None
    tags = dict(t.split("=", 1) for t in m.group("tags").split(",")[1:]) if m.group("tags") else {}
    return m.group("name"), tags, float(m.group("value")), TYPES[m.group("type")]


def map_name(mappings: list[dict], stat: str, metric_type: str) -> dict | None:
    """The first mapping whose glob matches ``stat`` (and type): ``{"name": ..., **the mapping}``."""
    for m in mappings:
        pattern = "^" + re.escape(m["match"]).replace(r"\*", "([^.]+)") + "$"
        if m.get("match_metric_type", metric_type) == metric_type and (hit := re.match(pattern, stat)):
            return {**m, "name": re.sub(r"\$\{(\d+)\}", lambda g: hit.group(int(g.group(1))), m["name"])}
    return None


def load_mappings(path: Path = HELM_VALUES) -> list[dict]:
    return yaml.safe_load(path.read_text())["statsd"]["extraMappings"]


class Bridge:
    def __init__(self, mappings: list[dict]):
        from prometheus_client import CollectorRegistry, Counter

        self.mappings = mappings
        self.registry = CollectorRegistry()
        self.samples = Counter("statsd_exporter_samples", "StatsD samples received", registry=self.registry)
        self._metrics: dict[str, object] = {}
        self._lock = threading.Lock()

    def handle(self, line: str) -> None:
        sample = parse_line(line)
        if sample is None:
            return
        self.samples.inc()
        stat, tags, value, kind = sample
        mapping = map_name(self.mappings, stat, kind)
        if mapping is None:
            return
        with self._lock:
            metric = self._metric(mapping, kind, tuple(sorted(tags)))
        child = metric.labels(**tags) if tags else metric
        if kind == "counter":
            child.inc(value)
        elif kind == "observer":
            child.observe(value / 1000.0)  # StatsD timers are milliseconds; the series are seconds

    def _metric(self, mapping: dict, kind: str, labels: tuple[str, ...]):
        from prometheus_client import Counter, Histogram

        name = mapping["name"]
        key = f"{name}{labels}"
        if key not in self._metrics:
            if kind == "counter":
                self._metrics[key] = Counter(name.removesuffix("_total"), name, labels, registry=self.registry)
            else:
                buckets = (mapping.get("histogram_options") or {}).get("buckets") or Histogram.DEFAULT_BUCKETS
                self._metrics[key] = Histogram(name, name, labels, buckets=buckets, registry=self.registry)
        return self._metrics[key]


def udp_drops(proc_net_udp: str, port: int) -> int | None:
    """The kernel's count of datagrams dropped on the socket bound to 127.0.0.1:``port`` (the last column of
    /proc/net/udp, whose local address is little-endian hex on x86), or None when no such socket is listed."""
    want = f"0100007F:{port:04X}"
    for row in proc_net_udp.splitlines()[1:]:
        cols = row.split()
        if len(cols) >= 13 and cols[1].upper() == want:
            return int(cols[-1])
    return None


def open_socket(port: int, read_buffer: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, read_buffer)
    except OSError:  # not root: the kernel caps SO_RCVBUF at net.core.rmem_max
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, read_buffer)
    sock.bind(("127.0.0.1", port))
    return sock


class _Drops:
    """A collector read at each scrape: the socket's drop count from /proc/net/udp."""

    def __init__(self, port: int):
        self.port = port

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        try:
            drops = udp_drops(Path("/proc/net/udp").read_text(), self.port)
        except OSError:
            drops = None
        if drops is not None:
            yield GaugeMetricFamily("statsd_bridge_udp_drops", "datagrams the kernel dropped on the bridge's socket "
                                    "(receive buffer full)", value=drops)


def main(argv: list[str] | None = None) -> int:
    from prometheus_client import start_http_server

    ap = argparse.ArgumentParser(prog="python -m devstack.statsd_bridge")
    ap.add_argument("--udp-port", type=int, required=True)
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--read-buffer", type=int, default=READ_BUFFER, help="socket receive buffer, bytes")
    args = ap.parse_args(argv)
    bridge = Bridge(load_mappings())
    sock = open_socket(args.udp_port, args.read_buffer)
    bridge.registry.register(_Drops(args.udp_port))
    start_http_server(args.http_port, addr="127.0.0.1", registry=bridge.registry)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    received: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def drain() -> None:  # nothing else in this thread: the socket is emptied as fast as the GIL allows
        while True:
            received.put(sock.recv(65535))

    threading.Thread(target=drain, daemon=True, name="udp-reader").start()
    print(f"statsd bridge ready udp {args.udp_port} http {args.http_port} "
          f"read buffer {sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)} bytes", flush=True)
    while True:
        data = received.get()
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                bridge.handle(line)
            except ValueError as exc:  # a sample whose labels differ from the series' first: dropped, as the
                print(f"statsd bridge: dropped {line[:120]!r}: {exc}", flush=True)  # exporter does


if __name__ == "__main__":
    sys.exit(main())
