"""Pod-to-Service traffic inside a process pod's network namespace (cluster DNS's and kube-proxy's part
there), without root:

- names: the pod's `/etc/hosts` is the kubelet's managed hosts file (pkg/kubelet/kubelet_pods.go
  `managedHostsFileContent`: localhost lines, the pod's own hostname entry, `hostAliases`), one file per pod
  bind-mounted into each container as the kubelet does (`makeMounts`: unless the container mounts
  /etc/hosts itself), plus what cluster DNS would answer for each Service with a clusterIP
  (`<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`, `<svc>.<ns>`; the bare `<svc>` for the pod's own
  namespace only, as the search path `<ns>.svc.cluster.local` would give it). glibc reads the file on every
  lookup, so it is rewritten when Services come and go. A bind-mounted file keeps its inode, so a rename
  would not reach the container: like Docker's etchosts (moby libnetwork/etchosts) the file is rewritten in
  place, new bytes first and then truncated to length (a reader never sees it empty).
- addresses: a Service's name maps to its clusterIP's loopback twin (`10.96.b.c` -> `127.96.b.c`, as on the
  host); the pod's agent listens there inside the pod's namespace and relays each connection to kubesim,
  which sends it to a ready endpoint like the host-side twin does (network.py `LoopbackServices`).
  Headless and ExternalName Services get no entry and no listener (there is no pod address to give).
- env: `enableServiceLinks` variables (pkg/kubelet/envvars/envvars.go `FromServices`: `<SVC>_SERVICE_HOST`,
  `_SERVICE_PORT`, `_SERVICE_PORT_<NAME>` and the Docker link variables) for the pod's namespace's Services
  that exist when the container starts, with the twin as the address; not the `kubernetes` Service's (the
  API server is not reachable from a pod's namespace).

A listener on a twin's port would take the port from the pod's own server bound to 0.0.0.0 (Linux refuses a
wildcard bind over a listening specific address), so a pod gets none on a port it declares as a
containerPort or that a Service selecting it targets.

Pod to pod (cluster DNS's pod records and a CNI's part), for pods under a headless Service: a pod with
`hostname` and `subdomain` whose namespace has a headless Service of that name selecting it, once it has an
IP and is ready (or the Service publishes not-ready addresses), is `<hostname>.<subdomain>.<ns>.svc.cluster.local`
(and `.svc`, and `<hostname>.<subdomain>` from its own namespace, as the search path gives it) at its pod IP's
loopback twin (10.244.n.m -> 127.244.n.m) in every pod of its namespace, as CoreDNS's kubernetes plugin
answers from the EndpointSlice's `hostname`. The agents of the other pods of the same subdomain (a gang's
ranks) listen on that twin for the peer's ports (its containerPorts and the headless Service's target ports) and relay each connection to the peer's
agent, which connects to the peer's own twin inside its namespace (`peers.py`, kube-proxy side). The pod's
own twin is its own address, local in its namespace (its hostname resolves to it, as in a real pod).

kubesim's limit there: all pod addresses are loopback twins in every namespace, so in such a pod a server
on a port its peers serve too binds the pod's own address (`socket.gethostbyname(socket.gethostname())`),
not 0.0.0.0: a wildcard bind would take the peers' twins on that port (and the agent's listeners on them
make it fail with EADDRINUSE). On a real cluster pod IPs are distinct interfaces and either works. Pods of
another subdomain are named but get no listener, so a pod reaches them only through a Service.
"""
from __future__ import annotations

import asyncio
import json
import os

from kubesim.kubelet.procrt.agent import MAX_CONNECTIONS, MAX_LISTENERS

CLUSTER_DOMAIN = "cluster.local"
HEADER = "# Kubernetes-managed hosts file.\n"
LOCAL = ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
         "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
MASTER = ("default", "kubernetes")


def twin(ip: str | None) -> str | None:
    """An IPv4 address's loopback twin: 10.96.b.c -> 127.96.b.c (None for None, "None", "")."""
    parts = (ip or "").split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    return "127." + ".".join(parts[1:])


def _tcp_ports(svc: dict) -> list[dict]:
    return [p for p in svc["spec"].get("ports") or [] if (p.get("protocol") or "TCP") == "TCP"]


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _resolve_port(target, pod: dict) -> int | None:
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return int(target)
    for c in pod["spec"].get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return int(p["containerPort"])
    return None


def peers(pod: dict, pods: list[dict], services: list[dict]) -> list[tuple[dict, str, str, list[int]]]:
    """The pods of the pod's namespace that cluster DNS names under a headless Service: (peer, twin, headless
    Service name, TCP ports), the pod itself included (its ports empty). Pure."""
    ns = pod["metadata"]["namespace"]
    headless = {s["metadata"]["name"]: s for s in services
                if s["metadata"]["namespace"] == ns and s["spec"].get("clusterIP") == "None"}
    out = []
    for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
        spec, md = p["spec"], p["metadata"]
        svc = headless.get(spec.get("subdomain") or "")
        address = twin((p.get("status") or {}).get("podIP"))
        if md["namespace"] != ns or svc is None or not spec.get("hostname") or not address \
                or md.get("deletionTimestamp") or not _selects(svc, p) \
                or not (_ready(p) or svc["spec"].get("publishNotReadyAddresses")):
            continue
        ports: set[int] = set()
        if md["uid"] != pod["metadata"]["uid"]:
            ports = {int(cp["containerPort"]) for c in spec.get("containers") or [] for cp in c.get("ports") or []
                     if cp.get("containerPort") and (cp.get("protocol") or "TCP") == "TCP"}
            ports |= {port for sp in _tcp_ports(svc)
                      if (port := _resolve_port(sp.get("targetPort", sp["port"]), p))}
        out.append((p, address, svc["metadata"]["name"], sorted(ports)))
    return out


def hosts_file(pod: dict, pod_ip: str | None, services: list[dict], pods: list[dict] = ()) -> str:
    """The pod's /etc/hosts. Pure."""
    md, spec = pod["metadata"], pod["spec"]
    ns, name = md["namespace"], spec.get("hostname") or md["name"]
    out = [HEADER, LOCAL]
    addr = twin(pod_ip) or "127.0.1.1"
    if spec.get("subdomain"):
        out.append(f"{addr}\t{name}.{spec['subdomain']}.{ns}.svc.{CLUSTER_DOMAIN}\t{name}\n")
    else:
        out.append(f"{addr}\t{name}\n")
    if spec.get("hostAliases"):
        out.append("\n# Entries added by HostAliases.\n")
        out += [f"{a.get('ip')}\t{h}\n" for a in spec["hostAliases"] for h in a.get("hostnames") or []]
    entries = []
    for svc in sorted(services, key=lambda s: (s["metadata"]["namespace"] != ns, s["metadata"]["namespace"],
                                               s["metadata"]["name"])):
        address = twin(svc["spec"].get("clusterIP"))
        if not address:
            continue
        s, sns = svc["metadata"]["name"], svc["metadata"]["namespace"]
        names = [f"{s}.{sns}.svc.{CLUSTER_DOMAIN}", f"{s}.{sns}.svc", f"{s}.{sns}"] + ([s] if sns == ns else [])
        entries.append(f"{address}\t{' '.join(names)}\n")
    if entries:
        out += ["\n# Services (kubesim: what cluster DNS would answer; loopback twins of their clusterIPs).\n",
                *entries]
    named = [(p, a, s) for p, a, s, _ in peers(pod, list(pods), services)]   # itself too, as DNS answers
    if named:
        out.append("\n# Pods of headless Services (kubesim: cluster DNS's pod records; loopback twins of pod IPs).\n")
        for p, address, sub in named:
            h = p["spec"]["hostname"]
            out.append(f"{address}\t{h}.{sub}.{ns}.svc.{CLUSTER_DOMAIN} {h}.{sub}.{ns}.svc {h}.{sub}\n")
    return "".join(out)


def _selects(svc: dict, pod: dict) -> bool:
    sel = svc["spec"].get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(sel) and svc["metadata"]["namespace"] == pod["metadata"]["namespace"] and \
        all(labels.get(k) == v for k, v in sel.items())


def own_ports(pod: dict, services: list[dict]) -> set[int]:
    """Ports the pod's own servers may bind: its containerPorts and the targetPorts of Services selecting it."""
    cports = [p for c in pod["spec"].get("containers") or [] for p in c.get("ports") or []]
    out = {int(p["containerPort"]) for p in cports if p.get("containerPort")}
    named = {p.get("name"): int(p["containerPort"]) for p in cports if p.get("name")}
    for svc in services:
        if _selects(svc, pod):
            for p in _tcp_ports(svc):
                target = p.get("targetPort", p["port"])
                port = named.get(target) if isinstance(target, str) and not target.isdigit() else int(target)
                if port:
                    out.add(port)
    return out


def listeners(pod: dict, services: list[dict], pods: list[dict] = ()) -> list[tuple[str, int]]:
    """The (twin, port) pairs the pod's agent listens on: its peers' (pods named under the headless Service
    that is its own subdomain: a gang's ranks) first, then its own namespace's Services, at most MAX_LISTENERS;
    not the `kubernetes` Service's (its endpoint is the API server, not a pod). Pods under another headless
    Service get no listener (their names still resolve): a listener on a peer's port takes that port from a
    wildcard bind in this pod, and two development instances in one namespace both serve 22 and 8888. Pure."""
    ns, skip = pod["metadata"]["namespace"], own_ports(pod, services)
    sub = pod["spec"].get("subdomain")
    out = [(address, port) for _, address, service, ports in peers(pod, list(pods), services)
           if sub and service == sub for port in ports]
    for svc in sorted(services, key=lambda s: (s["metadata"]["namespace"] != ns, s["metadata"]["namespace"],
                                               s["metadata"]["name"])):
        address = twin(svc["spec"].get("clusterIP"))
        if address and (svc["metadata"]["namespace"], svc["metadata"]["name"]) != MASTER:
            out += [(address, int(p["port"])) for p in _tcp_ports(svc) if int(p["port"]) not in skip]
    return sorted(set(out[:MAX_LISTENERS]))


def _var(name: str) -> str:
    return name.upper().replace("-", "_")


def service_env(pod: dict, services: list[dict]) -> dict[str, str]:
    """envvars.go `FromServices` over the pod's namespace's Services (enableServiceLinks, default true),
    with the loopback twin for the clusterIP. Pure."""
    if pod["spec"].get("enableServiceLinks") is False:
        return {}
    env: dict[str, str] = {}
    ns = pod["metadata"]["namespace"]
    for svc in sorted(services, key=lambda s: s["metadata"]["name"]):
        address = twin(svc["spec"].get("clusterIP"))
        ports = svc["spec"].get("ports") or []
        if svc["metadata"]["namespace"] != ns or (ns, svc["metadata"]["name"]) == MASTER or not address \
                or not ports:
            continue
        prefix = _var(svc["metadata"]["name"])
        env[f"{prefix}_SERVICE_HOST"] = address
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        for p in ports:
            if p.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_var(p['name'])}"] = str(p["port"])
        for i, p in enumerate(ports):
            proto = (p.get("protocol") or "TCP")
            url = f"{proto.lower()}://{address}:{p['port']}"
            if i == 0:
                env[f"{prefix}_PORT"] = url
            pp = f"{prefix}_PORT_{p['port']}_{proto.upper()}"
            env.update({pp: url, f"{pp}_PROTO": proto.lower(), f"{pp}_PORT": str(p["port"]), f"{pp}_ADDR": address})
    return env


def write_in_place(path: str, text: str) -> None:
    """Rewrite a bind-mounted file keeping its inode: the new bytes over the old, then truncate."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class PodNet:
    """kubesim's side of one pod's Service traffic: its hosts file, the agent's listener list and the unix
    socket (`services.sock`) on which the agent hands over connections. `forward(ip, port, reader, writer)`
    relays one to a ready endpoint of the Service at twin `ip`:`port` (or closes it)."""

    def __init__(self, run_dir: str, forward):
        self.hosts_path = os.path.join(run_dir, "etc-hosts")
        self.socket = os.path.join(run_dir, "services.sock")
        self.forward = forward
        self.server: asyncio.AbstractServer | None = None
        self.lock = asyncio.Lock()
        self.hosts: str | None = None
        self.pushed: list = []          # the agent starts with no listeners: nothing to wait for then
        self.allowed: set[tuple[str, int]] = set()
        self.active = 0
        self.problem: str | None = None

    async def start(self) -> None:
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.server = await asyncio.start_unix_server(self._serve, self.socket)

    async def _serve(self, reader, writer) -> None:
        """One connection from the agent: `<ip> <port>\\n`, then the stream. Only a listed Service address
        is forwarded (a pod reaches Services this way, never another host port)."""
        if self.active >= MAX_CONNECTIONS:
            writer.close()
            return
        self.active += 1
        try:
            ip, _, port = (await asyncio.wait_for(reader.readline(), 5)).decode().strip().partition(" ")
            addr = (ip, int(port))
            if addr not in self.allowed:
                writer.close()
                return
            await self.forward(ip, addr[1], reader, writer)
        except (ValueError, OSError, TimeoutError):
            writer.close()
        finally:
            self.active -= 1

    async def refresh(self, sandbox, want) -> None:
        """Bring the hosts file and the agent's listeners to `want()` = (hosts text, addresses), read under
        the lock (a refresh never writes an older view over a newer one); only what changed."""
        async with self.lock:       # the listeners first: a name appears once its address answers
            hosts, addrs = want()
            if self.hosts is None:      # the pod's first: no container runs yet, and each mounts the file
                write_in_place(self.hosts_path, hosts)
                self.hosts = hosts
            if addrs != self.pushed and sandbox is not None:
                self.allowed = set(addrs) | self.allowed
                answer = await sandbox.command("SERVICES " + json.dumps(addrs))
                self.allowed, self.pushed = set(addrs), addrs
                failed = answer.split()[2] if answer.startswith("OK ") else None
                self.problem = None if failed == "0" else (
                    f"the pod's agent refused the Service list: {answer[:200]}" if failed is None else
                    f"the pod's agent could not listen on {failed} Service address(es) (the pod's own "
                    "process holds the port, or a port below 1024 without root)")
            if hosts != self.hosts:
                write_in_place(self.hosts_path, hosts)
                self.hosts = hosts

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
