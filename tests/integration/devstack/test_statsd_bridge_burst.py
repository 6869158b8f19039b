"""The statsd bridge under a burst (issue 29 item 3, "metrics that count every event"): StatsD is UDP, and a
receiver that is not reading when a burst arrives loses what its socket buffer has no room for, silently. A full
test run once lost failure counts that way. The bridge asks for a large buffer (statsd_exporter's
``--statsd.read-buffer``) and exports the kernel's drop count for its socket, so a loss shows.

The bridge is the real process; it is stopped with SIGSTOP while the burst is sent, as a CPU-starved process is."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from devstack.monitoring import free_udp_port
from devstack.stack import free_port
from devstack.statsd_bridge import udp_drops
from kubesim.testing import wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BURST = 3000
SAMPLE = b"airflow.skiff.training.failed,team=recsys,reason=ExitCode:1|c"


def test_udp_drops_reads_the_sockets_row_of_proc_net_udp():
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
        "  12: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17\n"
        "  13: 00000000:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4243 2 0000000000000000 5\n")
    assert udp_drops(table, 8080) == 17  # 127.0.0.1:8080, not 0.0.0.0:8080
    assert udp_drops(table, 8081) is None


def _metrics(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {f"{s.name}{sorted(s.labels.items()) if s.labels else ''}": s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _burst_while_stopped(read_buffer: int | None) -> dict[str, float]:
    udp, http = free_udp_port(), free_port()
    cmd = [sys.executable, "-m", "devstack.statsd_bridge", "--udp-port", str(udp), "--http-port", str(http)]
    if read_buffer is not None:
        cmd += ["--read-buffer", str(read_buffer)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert "statsd bridge ready" in proc.stdout.readline()
        proc.send_signal(signal.SIGSTOP)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(BURST):
                s.sendto(SAMPLE, ("127.0.0.1", udp))
        proc.send_signal(signal.SIGCONT)
        key = "skiff_training_failed_total[('reason', 'ExitCode'), ('team', 'recsys')]"
        # everything that was queued is read: the sample count stops growing at what arrived
        wait_until(lambda: (m := _metrics(http)).get(key, 0) + m.get("statsd_bridge_udp_drops", 0) >= BURST,
                   30, 0.2, what="the burst read or counted as dropped")
        return _metrics(http)
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


def test_a_burst_while_the_bridge_is_starved_is_counted_whole():
    got = _burst_while_stopped(None)
    assert got["skiff_training_failed_total[('reason', 'ExitCode'), ('team', 'recsys')]"] == BURST
    assert got["statsd_bridge_udp_drops"] == 0


def test_a_buffer_too_small_for_the_burst_shows_its_loss():
    # the kernel's own default (net.core.rmem_default, 208 KiB here) is what the bridge had before
    got = _burst_while_stopped(64 << 10)
    lost = BURST - got["skiff_training_failed_total[('reason', 'ExitCode'), ('team', 'recsys')]"]
    assert lost > 0
    assert got["statsd_bridge_udp_drops"] == lost
