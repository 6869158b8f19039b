"""GET pods/<name>/log: container choice, tailLines, sinceSeconds/sinceTime, timestamps, limitBytes,
previous and follow, answered from the kubelet's `LogProvider` (apiserver/kubeletclient.py `PodLogs`).

Upstream: pkg/registry/core/pod/rest/log.go (`LogREST`) and pkg/apis/core/validation `ValidatePodLogOptions`."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from aiohttp import web

from kubesim.apimachinery.clock import parse_time
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.endpoints.wire import TRUE
from kubesim.apiserver.registry.store import Store


async def pod_log(store: Store, request: web.Request, ns: str, name: str) -> web.StreamResponse:
    """GET pods/<name>/log: a snapshot, or a chunked stream with `follow=true`, from the store's LogProvider."""
    pod_rt = store.registry.lookup("", "v1", "pods")
    pod = store.get(pod_rt, ns, name)
    q = request.query
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    container = q.get("container")
    if container is None:
        if len(containers) > 1:
            raise ApiError(400, f"a container name must be specified for pod {name}, choose one of: "
                                f"[{' '.join(containers)}]", "BadRequest")
        container = containers[0] if containers else None
    elif container not in containers and container not in [
            c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]:
        raise ApiError(400, f"container {container} is not valid for pod {name}", "BadRequest")
    provider = store.kubelet.logs if store.kubelet is not None else None
    if provider is None:
        raise ApiError(400, f'container "{container}" in pod "{name}" is waiting to start: '
                            "ContainerCreating", "BadRequest")
    tail = int(q["tailLines"]) if q.get("tailLines") else None
    stamps = q.get("timestamps") in TRUE
    since = int(q["sinceSeconds"]) if q.get("sinceSeconds") else None
    if q.get("sinceTime"):
        since_dt = _parse_time(q["sinceTime"])
    elif since is not None:
        since_dt = datetime.now(UTC) - timedelta(seconds=since)
    else:
        since_dt = None
    limit = int(q["limitBytes"]) if q.get("limitBytes") else None
    if q.get("follow") in TRUE:
        # the kubelet's refusals (container not started, unknown pod) must be an HTTP error, not a
        # broken stream: ask for an empty snapshot first, which raises the same ApiError
        provider.snapshot(ns, name, container, tail_lines=0)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0
        async for chunk in provider.stream(ns, name, container, tail_lines=tail, timestamps=stamps):
            if limit is not None:
                chunk = chunk[: max(0, limit - sent)]
            if chunk:
                await resp.write(chunk)
                sent += len(chunk)
            if limit is not None and sent >= limit:
                break
        await resp.write_eof()
        return resp
    # sinceSeconds/sinceTime select lines first, tailLines then counts from the end of that selection
    text = provider.snapshot(ns, name, container, tail_lines=tail if since_dt is None else None,
                             timestamps=stamps or since_dt is not None, previous=q.get("previous") in TRUE)
    if since_dt is not None:
        text = _since(text, since_dt, keep_stamps=stamps)
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail:] if tail > 0 else [])
    data = text.encode()
    if limit is not None:
        data = data[:limit]
    return web.Response(body=data, content_type="text/plain")

# -- scale --


def _parse_time(text: str) -> datetime:
    try:
        return parse_time(text)
    except ValueError:
        raise ApiError(400, f"invalid time: {text!r}", "BadRequest") from None


def _since(text: str, since: datetime, *, keep_stamps: bool) -> str:
    """Keep the log lines stamped at or after `since` (lines carry an RFC 3339 timestamp prefix)."""
    out = []
    for line in text.splitlines(keepends=True):
        stamp, _, rest = line.partition(" ")
        try:
            ok = _parse_time(stamp) >= since
        except ApiError:
            ok = True
            rest = line
        if ok:
            out.append(line if keep_stamps else rest)
    return "".join(out)
