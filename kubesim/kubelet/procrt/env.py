"""A container's environment, command and arguments as the kubelet builds them. Pure.

Upstream, followed line by line:
- pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`: `envFrom` sources first (ConfigMap/Secret keys, with
  `prefix`; a key that is not a valid variable name is skipped), then `env` in order: `value` expanded
  against the variables defined so far (`$(VAR)`), `valueFrom` resolved and never expanded; a missing
  ConfigMap/Secret key that is not optional is the error `couldn't find key K in Secret NS/NAME`, which the
  kubelet reports as the waiting reason CreateContainerConfigError.
- third_party/forked/golang/expansion/expand.go `Expand`: `$(VAR)` replaced when VAR is defined and kept
  as written otherwise, `$$` is a literal `$` (so `$$(VAR)` stays `$(VAR)`), an unclosed `$(` is kept.
- pkg/kubelet/container/helpers.go `ExpandContainerCommandAndArgs`: command and args expanded against the
  final environment; no shell is added (the argv is command + args, as containerd passes it to runc).
- pkg/kubelet/kubelet_pods.go `podFieldSelectorRuntimeValue` (fieldRef) and
  pkg/api/v1/resource/helpers.go `ExtractContainerResourceValue` (resourceFieldRef: ceiling of the value
  over the divisor; a limit left unset is the node's allocatable).
"""
from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable

from kubesim.apimachinery.resources import qty

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ConfigError(Exception):
    """What the kubelet reports as CreateContainerConfigError (the message is the kubelet's)."""


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """expand.go `Expand`: `$(VAR)` -> its value if defined, `$$` -> `$`, anything else kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2:close]
            value = lookup(name)
            out.append(value if value is not None else f"$({name})")
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def field_value(pod: dict, path: str) -> str:
    """fieldRef.fieldPath of the pod (podFieldSelectorRuntimeValue + the metadata paths the API converts)."""
    md, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return (md.get(m[1]) or {}).get(m[2], "")
    simple = {"metadata.name": md.get("name"), "metadata.namespace": md.get("namespace"),
              "metadata.uid": md.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": status.get("hostIP"),
              "status.podIP": status.get("podIP"),
              "status.podIPs": ",".join(p["ip"] for p in status.get("podIPs") or []),
              "status.hostIPs": ",".join(p["ip"] for p in status.get("hostIPs") or [])}
    if path in ("metadata.labels", "metadata.annotations"):
        return "\n".join(f'{k}="{v}"' for k, v in sorted((md.get(path.split(".")[1]) or {}).items()))
    if path not in simple:
        raise ConfigError(f"unsupported fieldPath: {path}")
    return simple[path] or ""


def resource_value(container: dict, ref: dict, allocatable: dict) -> str:
    """resourceFieldRef: ceil(value / divisor); an unset limit is the node's allocatable."""
    res = ref.get("resource", "")
    kind, _, name = res.partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None and kind == "limits":
        value = allocatable.get(name)
    if value is None:
        value = 0
    divisor = qty(str(ref.get("divisor") or ("1" if name != "cpu" else "1")))
    return str(math.ceil(qty(str(value)) / divisor)) if divisor else "0"


Lookup = Callable[[str, str, str], dict | None]     # (kind "configmaps"|"secrets", namespace, name) -> object


def _key_value(obj: dict | None, kind: str, ns: str, ref: dict) -> str | None:
    what = "ConfigMap" if kind == "configmaps" else "Secret"
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{what.lower()} "{ref.get("name")}" not found')
    key = ref.get("key")
    if kind == "secrets":
        data = {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
    else:
        data = {**(obj.get("data") or {}),
                **{k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("binaryData") or {}).items()}}
    if key not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {key} in {what} {ns}/{ref.get('name')}")
    return data[key]


def container_env(pod: dict, container: dict, lookup: Lookup, allocatable: dict,
                  base: dict[str, str], services: dict[str, str] | None = None) -> dict[str, str]:
    """makeEnvironmentVariables: `base` (the runtime's PATH, HOSTNAME...) overridden by the Service link
    variables (`services`, which `$(VAR)` may also name), then envFrom, then env."""
    services = services or {}
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix") or ""
        for field_name, kind in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            ref = src.get(field_name)
            if not ref:
                continue
            obj = lookup(kind, ns, ref.get("name"))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'{"configmap" if kind == "configmaps" else "secret"} "{ref.get("name")}" not found')
            data = dict(obj.get("data") or {})
            if kind == "secrets":
                data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            for k, v in data.items():
                if ENV_NAME.match(prefix + k):
                    env[prefix + k] = v
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" in item:
            src = item["valueFrom"]
            if src.get("fieldRef"):
                value = field_value(pod, src["fieldRef"].get("fieldPath", ""))
            elif src.get("resourceFieldRef"):
                value = resource_value(container, src["resourceFieldRef"], allocatable)
            elif src.get("configMapKeyRef") or src.get("secretKeyRef"):
                kind = "configmaps" if src.get("configMapKeyRef") else "secrets"
                ref = src.get("configMapKeyRef") or src.get("secretKeyRef")
                value = _key_value(lookup(kind, ns, ref.get("name")), kind, ns, ref)
                if value is None:
                    continue
            else:
                value = ""
        else:
            value = expand(item.get("value") or "", lambda v: env.get(v, services.get(v)))
        env[name] = value
    return {**base, **services, **env}


def command_line(container: dict, env: dict[str, str]) -> list[str]:
    """ExpandContainerCommandAndArgs: command + args, each expanded; no image ENTRYPOINT/CMD here (the
    image is not pulled), so a container with neither has nothing to run."""
    look = env.get
    return [expand(a, look) for a in container.get("command") or []] + \
        [expand(a, look) for a in container.get("args") or []]
