"""`ProcessRuntime`: starts and stops a pod's sandbox and its containers as real processes (bubblewrap
under Linux namespaces, limits in cgroups), reads their output line by line and reports each exit with its
code and whether the kernel's OOM killer ended it. No Kubernetes objects here: `pods.py` drives it.

Upstream (the contract it stands in for): containerd's CRI service (pkg/cri/server: `RunPodSandbox`,
`CreateContainer`/`StartContainer`, `StopContainer`: SIGTERM, then SIGKILL after the timeout) and its task
exit events (exit status 128+signal for a killed process, `TaskOOM` from the cgroup).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from kubesim.kubelet.procrt.cgroups import Cgroups, Group
from kubesim.kubelet.procrt.layers import Layer
from kubesim.kubelet.procrt.sandbox import Launch, container_args, sandbox_args

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tool(name: str) -> str:
    """The absolute path of a host tool (bwrap, nsenter), also when kubesim's own PATH lacks /usr/bin."""
    found = shutil.which(name) or shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise StartError(f"{name} not found: kubesim's process nodes need it (make demo / make test install "
                         "bubblewrap and util-linux)")
    return found


class StartError(Exception):
    """The container could not start (containerd's StartError; the message is the runtime's)."""


@dataclass
class Exit:
    code: int
    oom: bool


def _read_info(fd: int) -> dict | None:
    data = b""
    try:
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return json.loads(data)
            except ValueError:
                continue
    finally:
        os.close(fd)
    return None


async def _spawn(argv: list[str], env: dict[str, str], preexec=None) -> tuple[asyncio.subprocess.Process, int | None]:
    """Start `argv` with an --info-fd pipe (its fd is `argv`'s `{info}`); return the process and the host pid
    of the sandboxed command (bwrap's `child-pid`), None when bwrap failed before starting it."""
    r, w = os.pipe()
    argv = [str(w) if a == "{info}" else a for a in argv]
    argv[0] = tool(argv[0])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, pass_fds=(w,), preexec_fn=preexec)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    info = await asyncio.get_running_loop().run_in_executor(None, _read_info, r)
    return proc, (info or {}).get("child-pid")


class Sandbox:
    """A pod's sandbox: the process holding its network namespace, and the pod's state directory."""

    def __init__(self, proc, pid: int, run_dir: str):
        self.proc, self.pid, self.run_dir = proc, pid, run_dir

    @property
    def netns(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    @property
    def agent_socket(self) -> str:
        return os.path.join(self.run_dir, "agent.sock")

    async def connect(self, port: int, timeout: float = 5.0):
        """A stream to 127.0.0.1:`port` inside the pod's network namespace (through its agent);
        ConnectionRefusedError with the agent's reason when nothing listens there."""
        reader, writer, answer = await self._ask(f"{int(port)}", timeout)
        if answer != "OK":
            writer.close()
            raise ConnectionRefusedError(answer.removeprefix("ERR ") or "connection refused")
        return reader, writer

    async def command(self, line: str, timeout: float = 5.0) -> str:
        """One request to the agent (`SERVICES [...]`: agent.py); its answer line."""
        _, writer, answer = await self._ask(line, timeout)
        writer.close()
        return answer

    async def _ask(self, line: str, timeout: float):
        deadline = asyncio.get_running_loop().time() + timeout
        while True:           # the agent is still starting: no socket yet, or bound and not yet listening
            try:
                reader, writer = await asyncio.open_unix_connection(self.agent_socket)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if asyncio.get_running_loop().time() > deadline:
                    raise ConnectionRefusedError("the pod's network agent is not running") from None
                await asyncio.sleep(0.01)
        writer.write(f"{line}\n".encode())
        await writer.drain()
        return reader, writer, (await reader.readline()).decode().strip()

    async def stop(self) -> None:
        """SIGKILL to the agent (PID 1 of the sandbox: its namespaces go with it), then to bwrap."""
        for kill in (lambda: os.kill(self.pid, signal.SIGKILL), self.proc.kill):
            try:
                kill()
            except ProcessLookupError:
                pass
        await self.proc.wait()


class Container:
    """One running container process."""

    def __init__(self, proc, pid: int, group: Group, launch: Launch | None = None, layer: Layer | None = None):
        self.proc, self.pid, self.group, self.launch, self.layer = proc, pid, group, launch, layer
        self.readers: list[asyncio.Task] = []
        self.finished: asyncio.Future | None = None     # the kubelet's watch of its exit

    def signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    async def wait(self) -> Exit:
        rc = await self.proc.wait()
        await asyncio.gather(*self.readers, return_exceptions=True)
        code = rc if rc >= 0 else 128 - rc
        oom = self.group.oom_kills() > 0 and code == 128 + signal.SIGKILL
        self.group.kill_all()       # nothing of the container outlives it
        self.group.remove()
        if self.layer is not None:
            self.layer.unmount()
        return Exit(code, oom)

    async def stop(self, grace: float) -> None:
        """StopContainer: SIGTERM to the command (PID 1 of the container), SIGKILL after `grace` seconds."""
        if self.proc.returncode is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout=max(0.0, grace))
        except TimeoutError:
            self.signal(signal.SIGKILL)
            self.group.kill_all()


class ProcessRuntime:
    """The process runtime of kubesim's process nodes (one per kubelet, state under `state_dir`)."""

    def __init__(self, state_dir: str):
        self.state_dir = state_dir
        self.cgroups = Cgroups()

    async def run_sandbox(self, hostname: str, run_dir: str) -> Sandbox:
        os.makedirs(run_dir, exist_ok=True)
        agent = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent.py")
        argv = sandbox_args(hostname, 0, [sys.executable, "-I", agent, os.path.join(run_dir, "agent.sock")],
                            run_dir)
        argv[argv.index("--info-fd") + 1] = "{info}"
        proc, pid = await _spawn(argv, {"PATH": SYSTEM_PATH})
        if pid is None:
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            raise StartError(f"failed to create pod sandbox: {err[:500]}")
        return Sandbox(proc, pid, run_dir)

    async def start(self, sandbox: Sandbox, launch: Launch, tmp_dir: str, group_name: str,
                    memory_bytes: int | None, milli_cpu: int | None,
                    on_line: Callable[[str, str], None], layer_dir: str | None = None) -> Container:
        """Start a container's command in the pod's network namespace; `on_line(stream, text)` gets each
        line of its stdout/stderr as it is written. With `layer_dir`, the container's writable layers
        (layers.py) live there; the returned container's `layer.problem` says when they could not be made."""
        os.makedirs(tmp_dir, exist_ok=True)
        os.chmod(tmp_dir, 0o1777)
        layer = Layer(layer_dir) if layer_dir else None
        if layer is not None:
            launch = replace(launch, mounts=[*layer.mount(), *launch.mounts])
        group = self.cgroups.group(group_name, memory_bytes, milli_cpu)
        argv = ["nsenter", f"--net={sandbox.netns}", "--", *container_args(launch, tmp_dir, 0, group.views)]
        argv[3] = tool("bwrap")
        argv[argv.index("--info-fd") + 1] = "{info}"
        proc, pid = await _spawn(argv, launch.env, preexec=group.join)
        if pid is None:
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            await proc.wait()
            group.kill_all()
            group.remove()
            if layer is not None:
                layer.unmount()
            raise StartError(f"failed to create containerd task: failed to create shim task: OCI runtime create "
                             f"failed: {err[:500]}: unknown")
        c = Container(proc, pid, group, launch, layer)
        c.readers = [asyncio.ensure_future(_lines(proc.stdout, "stdout", on_line)),
                     asyncio.ensure_future(_lines(proc.stderr, "stderr", on_line))]
        return c

    def close(self) -> None:
        self.cgroups.remove_base()


async def _lines(stream: asyncio.StreamReader, name: str, on_line: Callable[[str, str], None]) -> None:
    while True:
        try:
            line = await stream.readline()
        except ValueError:                       # a line over the reader's limit: take what is there
            line = await stream.read(65536)
        if not line:
            return
        on_line(name, line.decode(errors="replace").rstrip("\n"))
