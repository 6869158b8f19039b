"""Has a live child drifted from its desired manifest? A pure comparison, the way ``kubectl diff`` sees it.

Only what Skiff sets counts: every field of the desired ``spec`` must be in the live object with the same
value; fields the live object has and the desired one does not are the API server's defaults (a pod's
``dnsPolicy``, a container's ``terminationMessagePath``, a Service's ``clusterIP``) or another manager's, and
are ignored. Lists of named items merge by key as a strategic-merge patch does (containers and env by
``name``, volume mounts by ``mountPath``, ports by port number), so the service-account token volume the
API server adds to every pod is not drift, while a changed env value or image is. Empty desired values
(``annotations: {}``) match a missing field (the API server drops them). Quantities (container resources,
HPA metric targets) compare by value (``1000m`` == ``1``), as the API server canonicalises them.
"""

from __future__ import annotations

from typing import Any

from operators.core.quantity import parse_quantity

# strategic-merge keys of the list fields Skiff sets (k8s.io/api patchMergeKey)
_MERGE_KEYS = ("name", "mountPath", "containerPort", "port", "devicePath")


def drifted(want: dict, live: dict) -> list[str]:
    """Paths (``spec.template.spec.containers[main].image``) where ``live`` differs from ``want``'s spec."""
    out: list[str] = []
    _compare(want.get("spec"), live.get("spec"), "spec", out)
    return out


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == [] or value == ""


def _compare(want: Any, live: Any, path: str, out: list[str]) -> None:
    if want == live:  # the usual case, decided in C: an equal value has no drifted path below it
        return
    if _empty(want) and _empty(live):
        return
    if isinstance(want, dict):
        if not isinstance(live, dict):
            out.append(path)
            return
        for key, value in want.items():
            _compare(value, live.get(key), f"{path}.{key}", out)
    elif isinstance(want, list):
        _compare_list(want, live, path, out)
    elif want != live and not _same_quantity(want, live, path):
        out.append(path)


def _merge_key(items: list) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    return next((k for k in _MERGE_KEYS if all(k in i for i in items)), None)


def _compare_list(want: list, live: Any, path: str, out: list[str]) -> None:
    if not isinstance(live, list):
        out.append(path)
        return
    key = _merge_key(want)
    if key is not None:  # merge by key: extra live items (the token volume) are someone else's
        by_key = {i.get(key): i for i in live if isinstance(i, dict)}
        for item in want:
            _compare(item, by_key.get(item[key]), f"{path}[{item[key]}]", out)
    elif all(isinstance(i, dict) for i in want):  # positional; the API server may append (tolerations)
        if len(live) < len(want):
            out.append(path)
            return
        for i, item in enumerate(want):
            _compare(item, live[i], f"{path}[{i}]", out)
    elif want != live:  # scalars (args, command) are atomic
        out.append(path)


def _same_quantity(want: Any, live: Any, path: str) -> bool:
    if not (".resources." in path or ".metrics[" in path) or not isinstance(want, str | int | float) or not isinstance(live, str | int | float):
        return False
    try:
        return parse_quantity(want) == parse_quantity(live)
    except ValueError:
        return False
