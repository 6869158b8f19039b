"""The pod's network agent: the process that holds a pod's network namespace (the sandbox's, like the pause
container) and relays connections into it. It listens on a unix socket in the pod's state directory; a client
writes `<port>\\n`, the agent connects to 127.0.0.1:<port> inside the pod's namespace and answers `OK\\n` (or
`ERR <reason>\\n`), then copies bytes both ways. Unix sockets cross network namespaces, so port-forward, the
service proxy and Services on the host's loopback reach a pod's ports without root tricks.

Run as a script (`python agent.py SOCKET`), standard library only: it runs inside the sandbox.
"""
import asyncio
import os
import sys


async def relay(reader, writer):
    """Copy bytes until EOF, then half-close (the other direction goes on). Also used by network.py."""
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


async def _handle(reader, writer):
    try:
        port = int((await reader.readline()).decode().strip())
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
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


async def main(path):
    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(_handle, path)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
