"""devstack.ports: the one free-port helper (it was written four times: the stack, the services, the SMTP sink and
a test each had a copy)."""
from __future__ import annotations

import ast
import socket
from pathlib import Path

from devstack.ports import free_port, free_udp_port

REPO = Path(__file__).resolve().parents[3]


def test_a_free_port_can_be_bound_tcp_and_udp():
    for port, kind in ((free_port(), socket.SOCK_STREAM), (free_udp_port(), socket.SOCK_DGRAM)):
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", port))


def test_no_other_module_writes_its_own():
    """No function named like it, outside devstack/ports.py, in the stack, kubesim, benchmarks or the tests."""
    copies = sorted(f"{path.relative_to(REPO)}:{node.lineno} {node.name}"
                    for top in ("devstack", "kubesim", "benchmarks", "tests", "tools")
                    for path in (REPO / top).rglob("*.py") if path != REPO / "devstack" / "ports.py"
                    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in ("free_port", "free_udp_port"))
    assert copies == []
