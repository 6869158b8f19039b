"""kubesim's process runtime: pods on process nodes run as real, sandboxed processes (bubblewrap's mount,
PID, UTS and network namespaces, a user namespace per pod; memory, CPU and pid limits in cgroups), beside the
scripted kubelet.

| module | holds |
| --- | --- |
| `env.py` | env, `$(VAR)` expansion, command and args as the kubelet builds them (pure) |
| `volumes.py` | the files of configMap/secret/downwardAPI/projected volumes (pure) and the volume directories |
| `sandbox.py` | bwrap command lines (an image = a declared set of paths over the container's writable layer), runc's executable lookup |
| `userns.py` | a user namespace per pod (65,536 host ids), its /etc copy, volume ownership, idmapped PersistentVolumes |
| `security.py` | the container's user, capabilities, no_new_privs, masked /proc paths, runAsNonRoot (pure) |
| `seccomp.py`, `seccomp_default.py` | the seccomp profile a container runs with (RuntimeDefault: containerd's default profile; Localhost), compiled to BPF with libseccomp for bwrap's `--seccomp` |
| `storage.py` | ephemeral-storage usage and the eviction manager's limit check |
| `layers.py` | a container's private writable `/etc` (overlayfs over the host's), its mounts and their clean-up |
| `cgroups.py` | per-container memory/CPU cgroups (v1 or v2), the pod's pid limit, OOM kill counts |
| `runtime.py` | `ProcessRuntime`: sandboxes and container processes, their output and exits |
| `probes.py` | exec/httpGet/tcpSocket probes and hooks, the prober's thresholds |
| `agent.py` | the pod's network agent (stdlib script in the sandbox: a unix socket into the pod's namespace, and listeners on Service twins out of it) |
| `podnet.py` | pod-to-Service traffic: the pod's `/etc/hosts` with Service names, service-link env, its listener list |
| `network.py` | `LoopbackServices`: Services and tcp-services entries on the host's loopback, and pods' Service connections |
| `pods.py` | `ProcessPods`: what the kubelet does for a process pod over the runtime |
"""
