"""Pod to pod between process pods (a CNI's part): a connection a pod's agent accepted on a peer's loopback
twin (podnet.py `peers`) goes to the pod whose IP that twin is, into its network namespace through its agent,
to the same twin there (the peer's own address; a server bound to 0.0.0.0 answers on it too). Nothing leaves
loopback or the namespaces kubesim made: the twin is a 127/8 address and the peer's agent refuses any other.
A twin that is no running process pod's, or a port nothing listens on, ends the connection at once (the
client sees it closed, as a refused connection through a proxy looks).
"""
from __future__ import annotations

import asyncio

from kubesim.kubelet.procrt.agent import relay
from kubesim.kubelet.procrt.podnet import twin


def pod_at(kubelet, address: str):
    """The uid of the running process pod whose IP's twin is `address`, else None."""
    procs = kubelet.procs_if_any
    if procs is None:
        return None
    for run in list(kubelet.runs.values()):
        if run.process and twin(run.pod_ip) == address and run.uid in procs.pods \
                and procs.pods[run.uid].sandbox is not None:
            return run.uid
    return None


async def connect(kubelet, address: str, port: int, timeout: float = 5.0):
    """(reader, writer) to `address`:`port` inside the pod at that twin; ConnectionRefusedError otherwise."""
    uid = pod_at(kubelet, address)
    if uid is None:
        raise ConnectionRefusedError(f"no process pod at {address}")
    sandbox = kubelet.procs_if_any.pods[uid].sandbox
    reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(sandbox.agent_socket), timeout)
    writer.write(f"{int(port)} {address}\n".encode())
    await writer.drain()
    answer = (await asyncio.wait_for(reader.readline(), timeout)).decode().strip()
    if answer != "OK":
        writer.close()
        raise ConnectionRefusedError(answer.removeprefix("ERR ") or "connection refused")
    return reader, writer


async def forward(kubelet, address: str, port: int, reader, writer) -> None:
    """Relay one pod's connection to the peer at `address`:`port` (or close it)."""
    try:
        r2, w2 = await connect(kubelet, address, port)
    except (ConnectionError, OSError, TimeoutError):
        writer.close()
        return
    await asyncio.gather(relay(reader, w2), relay(r2, writer))
    writer.close()
    w2.close()
