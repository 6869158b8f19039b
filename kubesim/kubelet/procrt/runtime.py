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

from kubesim.kubelet.procrt import userns
from kubesim.kubelet.procrt.cgroups import Cgroups, Group
from kubesim.kubelet.procrt.layers import Layer
from kubesim.kubelet.procrt.sandbox import (
    Launch,
    Mount,
    container_args,
    image_paths,
    make_rootfs,
    sandbox_args,
)
from kubesim.kubelet.procrt.security import proc_args

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


async def _spawn(argv: list[str], env: dict[str, str], group: Group | None = None
                 ) -> tuple[asyncio.subprocess.Process, int | None]:
    """Start `argv` with an --info-fd pipe (its fd is `argv`'s `{info}`); return the process and the host pid
    of the sandboxed command (bwrap's `child-pid`), None when bwrap failed before starting it. With `group`,
    bwrap waits on `{block}` (--block-fd) until the command's pid is in the group's cgroups: the cgroup is
    joined before the command runs, without code between fork and exec in this threaded process."""
    r, w = os.pipe()
    br, bw = os.pipe() if group is not None else (None, None)
    fds = [w] if br is None else [w, br]
    out = []
    try:
        for a in argv:
            if a[:4] in ("{ns:", "{fd:") and a.endswith("}"):   # a namespace or file, as a descriptor
                fds.append(os.open(a[4:-1], os.O_RDONLY | os.O_CLOEXEC))
                a = str(fds[-1])
            out.append(str(w) if a == "{info}" else str(br) if a == "{block}" else a)
    except OSError:
        for fd in (*fds, r, bw):
            if fd is not None:
                os.close(fd)
        raise
    argv = out
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, pass_fds=fds)
    except BaseException:
        for fd in (r, bw):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    info = await asyncio.get_running_loop().run_in_executor(None, _read_info, r)
    pid = (info or {}).get("child-pid")
    if bw is not None:
        try:
            if pid is not None:
                group.add(pid)
            os.write(bw, b"1")
        except OSError:
            pass
        finally:
            os.close(bw)
    return proc, pid


class Sandbox:
    """A pod's sandbox: the process holding its network namespace, and the pod's state directory."""

    def __init__(self, proc, pid: int, run_dir: str, base: int | None = None, holder=None):
        self.proc, self.pid, self.run_dir, self.base, self.holder = proc, pid, run_dir, base, holder

    @property
    def netns(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    @property
    def userns(self) -> str | None:
        """The pod's user namespace, held by `holder` (None: pods run without one here)."""
        return f"/proc/{self.holder.pid}/ns/user" if self.holder is not None else None

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
        """SIGKILL to the agent (PID 1 of the sandbox: its namespaces go with it), then to bwrap; the user
        namespace's holder ends when its stdin closes."""
        for kill in (lambda: os.kill(self.pid, signal.SIGKILL), self.proc.kill):
            try:
                kill()
            except ProcessLookupError:
                pass
        await self.proc.wait()
        if self.holder is not None:
            self.holder.stdin.close()
            await self.holder.wait()


class Container:
    """One running container process."""

    def __init__(self, proc, pid: int, group: Group, launch: Launch | None = None, layer: Layer | None = None):
        self.proc, self.pid, self.group, self.launch, self.layer = proc, pid, group, launch, layer
        self.readers: list[asyncio.Task] = []
        self.finished: asyncio.Future | None = None     # the kubelet's watch of its exit

    @property
    def rootfs(self) -> str | None:
        """The host directory of its root filesystem (its writable layer's, bound at /), None without a layer."""
        return os.path.join(self.layer.directory, "root") if self.layer is not None else None

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
        self.userns_problem = userns.problem()

    async def run_sandbox(self, hostname: str, run_dir: str, base: int | None = None) -> Sandbox:
        """The pod's sandbox; with `base`, in a new user namespace mapping the pod's ids to `base`...."""
        os.makedirs(run_dir, exist_ok=True)
        agent = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent.py")
        python = image_paths(sys.prefix) + image_paths(sys.base_prefix)
        argv = sandbox_args(hostname, "{info}", python, sys.executable, agent,
                            os.path.join(run_dir, "agent.sock"), run_dir)
        argv[0] = tool("bwrap")
        holder = await userns.holder(base, tool("unshare")) if base is not None else None
        try:
            proc, pid = await _spawn(argv, {"PATH": SYSTEM_PATH})
            if pid is None:
                err = (await proc.stderr.read()).decode(errors="replace").strip()
                raise StartError(f"failed to create pod sandbox: {err[:500]}")
            if holder is not None:
                await _unprivileged_ports(pid)
        except BaseException:
            if holder is not None:
                holder.stdin.close()
                await holder.wait()
            raise
        return Sandbox(proc, pid, run_dir, base, holder)

    async def start(self, sandbox: Sandbox, launch: Launch, layer_dir: str, group_name: str,
                    memory_bytes: int | None, milli_cpu: int | None,
                    on_line: Callable[[str, str], None], pod_group: str | None = None) -> Container:
        """Start a container's command in the pod's user and network namespaces; `on_line(stream, text)` gets
        each line of its stdout/stderr as it is written. Its writable layer (`<layer_dir>/root` at `/`, and
        the /etc overlay: layers.py) lives in `layer_dir`; the returned container's `layer.problem` says when
        /etc could not be layered."""
        base = sandbox.base
        rootfs = os.path.join(layer_dir, "root")
        make_rootfs(rootfs, (base, base) if base is not None else None)
        etc = await asyncio.get_running_loop().run_in_executor(None, userns.image_etc, userns.IMAGE_CACHE, base)
        layer = Layer(layer_dir, {"/etc": etc}, base)
        mounts = layer.mount()
        if not mounts:             # no overlay: the image's /etc read-only
            mounts = [Mount(etc, "/etc", read_only=True)]
        launch = replace(launch, mounts=[*mounts, *launch.mounts])
        group = self.cgroups.group(group_name, memory_bytes, milli_cpu, pod_group)
        ns = "{ns:" + sandbox.userns + "}" if sandbox.userns else None
        argv = [tool("nsenter"), f"--net={sandbox.netns}", "--",
                *container_args(launch, rootfs, "{info}", group.views, proc_args(), "{block}", ns)]
        argv[argv.index("--") + 1] = tool("bwrap")
        proc, pid = await _spawn(argv, launch.env, group)
        if pid is None:
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            await proc.wait()
            group.kill_all()
            group.remove()
            layer.unmount()
            raise StartError(f"failed to create containerd task: failed to create shim task: OCI runtime create "
                             f"failed: {err[:500]}: unknown")
        await _executed(pid, argv[argv.index("--") + 1], proc)
        c = Container(proc, pid, group, launch, layer)
        c.readers = [asyncio.ensure_future(_lines(proc.stdout, "stdout", on_line)),
                     asyncio.ensure_future(_lines(proc.stderr, "stderr", on_line))]
        return c

    def close(self) -> None:
        self.cgroups.remove_base()


async def _executed(pid: int, bwrap: str, proc, timeout: float = 10.0) -> None:
    """Until bwrap's child has made the container's mounts and exec'd the command (its /proc/<pid>/exe is no
    longer bwrap): runc's `start` returns once the user process runs (the exec fifo), so the kubelet's Running,
    an exec or a preStop hook never meet a half-made container."""
    loop = asyncio.get_running_loop()
    deadline, real = loop.time() + timeout, os.path.realpath(bwrap)
    while proc.returncode is None and loop.time() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/exe") != real:
                return
        except OSError:
            return
        await asyncio.sleep(0.005)


async def _unprivileged_ports(sandbox_pid: int) -> None:
    """containerd 2's CRI defaults (enable_unprivileged_ports, enable_unprivileged_icmp) in the pod's network
    namespace: `net.ipv4.ip_unprivileged_port_start=0`, `net.ipv4.ping_group_range=0 2147483647`, so container
    root of a user namespace binds port 22 and pings (internal/cri/server/sandbox_run.go)."""
    script = ("echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start && "
              "echo '0 2147483647' > /proc/sys/net/ipv4/ping_group_range")
    proc = await asyncio.create_subprocess_exec(tool("nsenter"), f"--net=/proc/{sandbox_pid}/ns/net", "--",
                                                "/bin/sh", "-c", script, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise StartError(f"failed to set the pod's sysctls: {err.decode(errors='replace')[:300]}")


async def _lines(stream: asyncio.StreamReader, name: str, on_line: Callable[[str, str], None]) -> None:
    while True:
        try:
            line = await stream.readline()
        except ValueError:                       # a line over the reader's limit: take what is there
            line = await stream.read(65536)
        if not line:
            return
        on_line(name, line.decode(errors="replace").rstrip("\n"))
