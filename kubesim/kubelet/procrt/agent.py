"""The pod's network agent: the process that holds a pod's network namespace (the sandbox's, like the pause
container) and relays connections into and out of it, over unix sockets (they cross network namespaces, so
none of this needs root).

- Into the pod: it listens on `agent.sock` in the pod's run directory; a client writes `<port>\\n`, the agent
  connects to 127.0.0.1:<port> inside the pod's namespace and answers `OK\\n` (or `ERR <reason>\\n`), then
  copies bytes both ways (port-forward, the service proxy, Services on the host's loopback). `<port> <ip>\\n`
  connects to <ip> instead, a loopback address only (a peer pod's connection to this pod's own twin).
- Out to Services (kube-proxy's part inside the pod): a client writes `SERVICES <json [[ip, port], ...]>\\n`
  and the agent listens on exactly those addresses (the Services' loopback twins, 127.96.b.c:<port>: all of
  127/8 is local on any namespace's `lo`), closing the ones no longer listed, and answers
  `OK <listening> <failed>\\n`. A connection accepted there goes to kubesim's `services.sock` beside
  `agent.sock` as `<ip> <port>\\n` and is relayed; kubesim picks the Service's ready endpoint (network.py).
  At most MAX_CONNECTIONS such connections at once (more are closed at once) and MAX_LISTENERS addresses.

Run as a script (`python agent.py SOCKET`), standard library only: it runs inside the sandbox.
"""
import asyncio
import json
import os
import sys

MAX_LISTENERS = 512
MAX_CONNECTIONS = 128


async def relay(reader, writer):
    """Copy bytes until EOF, then half-close (the other direction goes on). Also used by network.py.
    Bounded: one read of at most 64 KiB at a time, written and drained before the next."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            writer.close()


class Agent:
    def __init__(self, path: str):
        self.path = path
        self.services_sock = os.path.join(os.path.dirname(path), "services.sock")
        self.listeners: dict[tuple[str, int], asyncio.AbstractServer] = {}
        self.active = 0

    async def handle(self, reader, writer):
        line = (await reader.readline()).decode().strip()
        if line.startswith("SERVICES "):
            answer = await self.set_services(line[len("SERVICES "):])
            writer.write(answer.encode())
            await writer.drain()
            writer.close()
            return
        port, _, host = line.partition(" ")
        try:
            if host and not host.startswith("127."):
                raise ValueError(f"not a loopback address: {host[:40]}")
            r2, w2 = await asyncio.open_connection(host or "127.0.0.1", int(port))
        except (ValueError, OSError) as e:
            writer.write(f"ERR {e}\n".encode())
            await writer.drain()
            writer.close()
            return
        writer.write(b"OK\n")
        await writer.drain()
        await asyncio.gather(relay(reader, w2), relay(r2, writer))
        writer.close()
        w2.close()

    async def set_services(self, text: str) -> str:
        try:
            want = {(str(ip), int(port)) for ip, port in json.loads(text)[:MAX_LISTENERS]}
        except (ValueError, TypeError) as e:
            return f"ERR {e}\n"
        for addr in list(self.listeners):
            if addr not in want:
                self.listeners.pop(addr).close()
        failed = 0
        for addr in sorted(want - set(self.listeners)):
            try:
                self.listeners[addr] = await asyncio.start_server(
                    lambda r, w, a=addr: self.outbound(a, r, w), addr[0], addr[1])
            except OSError:        # the pod's own process holds the port (or < 1024 without root)
                failed += 1
        return f"OK {len(self.listeners)} {failed}\n"

    async def outbound(self, addr, reader, writer):
        """A pod's connection to a Service twin: relayed through kubesim's services.sock."""
        if self.active >= MAX_CONNECTIONS:
            writer.close()
            return
        self.active += 1
        try:
            r2, w2 = await asyncio.open_unix_connection(self.services_sock)
            w2.write(f"{addr[0]} {addr[1]}\n".encode())
            await w2.drain()
        except OSError:
            writer.close()
            self.active -= 1
            return
        try:
            await asyncio.gather(relay(reader, w2), relay(r2, writer))
        finally:
            self.active -= 1
            writer.close()
            w2.close()


async def main(path):
    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(Agent(path).handle, path)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
