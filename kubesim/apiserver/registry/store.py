"""`Store`: the generic registry store, the API semantics of kube-apiserver's verbs over plain dicts (see
INTERNALS.md for the contract): create, get, list (pages, exact versions), update, patch (all patch types and
server-side apply), delete (finalizers, propagation, preconditions), deletecollection, watch, binding.

Upstream: k8s.io/apiserver/pkg/registry/generic/registry/store.go (`Create`, `Update`, `Delete` with
`deletionFinalizersForGarbageCollection`, `DeleteCollection`), and the steps it calls in order on a write:
rest.BeforeCreate/BeforeUpdate (`objectmeta.py`), the kind's strategy (`strategy.py`, `namespaces.py`,
`crds.py`), admission (`self.admission`, the plugins `cluster.py` installs), then storage (`storage.py`,
kubesim's etcd) and the watch cache (`watchcache.py`). Objects are kept with their serialized JSON, so reads
serialize nothing and public methods return fresh copies by decoding those bytes.
"""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubesim.apimachinery import errors, names
from kubesim.apimachinery.clock import Clock
from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from kubesim.apiserver.registry import apply as ssa
from kubesim.apiserver.registry import crds, deletion, namespaces, patch, strategy, viewstore
from kubesim.apiserver.registry.kinds import Registry, ResourceType
from kubesim.apiserver.registry.namespaces import DEFAULT_NAMESPACES
from kubesim.apiserver.registry.objectmeta import (
    check_identity,
    check_name,
    fill_for_create,
    prepare_for_update,
    spec_part,
)
from kubesim.apiserver.registry.views import dumps, is_view, view
from kubesim.apiserver.storage.storage import Storage, decode_continue, encode_continue
from kubesim.apiserver.storage.watch import Watch
from kubesim.apiserver.storage.watchcache import WatchCache

log = logging.getLogger("kubesim.apiserver.registry.store")


@dataclass
class AdmissionRequest:
    operation: str           # "CREATE" | "UPDATE" | "DELETE"
    rt: ResourceType
    namespace: str | None
    obj: dict | None
    old: dict | None
    subresource: str | None
    dry_run: bool


class Store:
    def __init__(self, registry: Registry | None = None, clock: Clock | None = None, history: int = 10000):
        self.registry = registry or Registry()
        self.clock = clock or Clock()
        self.lock = threading.RLock()
        self.history_size = history
        self.admission: list[Callable[[AdmissionRequest], None]] = []
        self.log_provider = None
        self.stats_provider = None      # the kubelet's usage sampler (kubelet/stats.py), when a cluster runs
        self.graceful_pod: Callable[[dict], bool] | None = None    # set by the kubelet: pods it stops itself
        self._subscribers: list[tuple[Callable, frozenset | None]] = []
        self.storage = Storage()
        self.cache = WatchCache(self.storage, self.lock, history)
        self._install_defaults()

    # ---- lifecycle ---------------------------------------------------------------------------------

    def _install_defaults(self) -> None:
        ns_rt = self.registry.lookup("", "v1", "namespaces")
        for name in DEFAULT_NAMESPACES:
            self.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def clear(self) -> None:
        """Per-test reset: a fresh cluster (default namespaces only). Plugins, subscribers, the log
        provider and CRD kinds are dropped (KubeSim re-creates the Cluster), open watches are closed.
        resourceVersions keep increasing, so a watch resumed from before the reset gets 410 Gone."""
        with self.lock:
            for w in list(self.cache.watches):
                w.close()
            self.admission = []
            self._subscribers = []
            self.log_provider = None
            self.stats_provider = None
            self.graceful_pod = None
            self.registry.reset()
            self.storage.reset()
            self.cache.reset()
        self._install_defaults()

    def subscribe(self, fn: Callable[[str, ResourceType, dict, dict | None], None], kinds=None) -> None:
        """`fn` after every committed change; `kinds`: only changes of these storage keys ((group, plural)),
        so a narrow subscriber (a benchmark's probe) does not cost a decode of every write."""
        self._subscribers.append((fn, frozenset(kinds) if kinds is not None else None))

    @property
    def resource_version(self) -> str:
        return str(self.storage.current_rv)

    @property
    def _current_rv(self) -> int:
        return self.storage.current_rv

    @property
    def _history(self):
        return self.cache.history

    @property
    def _watches(self):
        return self.cache.watches

    @property
    def watches_opened(self) -> int:
        return self.cache.opened

    # ---- helpers -----------------------------------------------------------------------------------

    def _bucket(self, rt: ResourceType) -> dict:
        return self.storage.bucket(rt)

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        return self.storage.key(rt, namespace, name)

    def _out(self, rt: ResourceType, obj: dict, data: bytes) -> dict:
        """A fresh copy of a stored object as `rt` serves it."""
        return view(rt, json.loads(data))

    def _check_namespace(self, rt: ResourceType, namespace: str | None, *, creating: str | None = None) -> None:
        namespaces.check_namespace(self.storage, rt, namespace, creating=creating)

    def _check_identity(self, rt: ResourceType, namespace: str | None, obj: dict) -> None:
        check_identity(rt, namespace, obj)

    def _now(self) -> str:
        return self.clock.rfc3339(self.clock.now())

    def _admit(self, req: AdmissionRequest) -> None:
        for plugin in list(self.admission):
            plugin(req)

    def _commit(self, rt: ResourceType, key, obj: dict | None, old: dict | None, etype: str) -> bytes:
        """Store (or remove) with a new resourceVersion, feed the watch cache, notify. Under the lock."""
        ev = self.storage.commit(rt, key, obj, old, etype)
        data, prev_data = ev.data, ev.old_data
        self.cache.record(ev)
        if self._subscribers:
            # on DELETED, `old` is the removed object's last state, as `obj` (INTERNALS.md)
            old_data = data if etype == "DELETED" else prev_data if old is not None else None
            for fn, kinds in list(self._subscribers):
                if kinds is not None and rt.storage_key not in kinds:
                    continue
                try:
                    fn(etype, rt, json.loads(data), json.loads(old_data) if old_data is not None else None)
                except Exception:      # a controller's bug must not fail the client's write
                    log.exception("kubesim: subscriber %r failed on %s %s", fn, etype, rt.plural)
        return data

    def finalize_removal(self, rt: ResourceType, key, last: dict) -> None:
        """Remove an object whose deletion is complete (a namespace emptied, a CRD's objects): DELETED."""
        self._commit(rt, key, None, last, "DELETED")

    # ---- verbs -------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str | None, obj: dict, *, dry_run: bool = False) -> dict:
        if is_view(rt):
            return viewstore.create(self, rt, namespace, obj, dry_run=dry_run)
        obj = json.loads(dumps(obj))
        with self.lock:
            check_identity(rt, namespace, obj)
            if rt.namespaced and not namespace:
                namespace = (obj.get("metadata") or {}).get("namespace")
            self._check_namespace(rt, namespace)
            bucket = self._bucket(rt)
            md = fill_for_create(rt, namespace, obj, now=self._now(),
                                 taken=lambda name: self._key(rt, namespace, name) in bucket)
            self._check_namespace(rt, namespace, creating=md["name"])
            key = self._key(rt, namespace, md["name"])
            if key in bucket:
                raise errors.already_exists(rt, md["name"])
            strategy.prepare_for_create(rt, obj)
            if crds.is_crd(rt):
                crds.precheck(self.registry, obj)
            strategy.prepare(rt, obj)
            self._admit(AdmissionRequest("CREATE", rt, namespace, obj, None, None, dry_run))
            if dry_run:
                obj["metadata"]["resourceVersion"] = ""
                return json.loads(dumps(obj))
            if crds.is_crd(rt):
                crds.establish(obj, self._now())
            data = self._commit(rt, key, obj, None, "ADDED")
            if crds.is_crd(rt):
                crds.serve(self.registry, obj)
            return self._out(rt, obj, data)

    def _get_entry(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[dict, bytes]:
        entry = self._bucket(rt).get(self._key(rt, namespace, name))
        if entry is None:
            raise errors.not_found(rt, name)
        return entry

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        with self.lock:
            obj, data = self._get_entry(rt, namespace, name)
            return self._out(rt, obj, data)

    def get_bytes(self, rt: ResourceType, namespace: str | None, name: str) -> bytes:
        """The serialized object (hot path for GET: no copy, no serialization)."""
        with self.lock:
            obj, data = self._get_entry(rt, namespace, name)
            if is_view(rt) or obj.get("apiVersion") != rt.api_version:
                return dumps(self._out(rt, obj, data))
            return data

    def list(self, rt: ResourceType, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], str]:
        with self.lock:
            rows = self.storage.select(rt, namespace, label_selector, field_selector)
            return [self._out(rt, o, d) for _k, o, d in rows], str(self.storage.current_rv)

    def list_page(self, rt: ResourceType, namespace=None, label_selector=None, field_selector=None,
                  limit: int | None = None, continue_token: str | None = None,
                  resource_version: str | None = None, resource_version_match: str | None = None):
        """(serialized items, resourceVersion, continue token or None, remainingItemCount or None).
        Like the real server, later pages come from the first page's snapshot (objects created, changed or
        deleted meanwhile do not show), and `resourceVersionMatch=Exact` reads the state at that version."""
        with self.lock:
            at = None
            if continue_token:
                start, at = decode_continue(continue_token)
                if at < self.cache.floor:
                    raise errors.gone("The provided continue parameter is too old to display a consistent list "
                                      "result. You can start a new list without the continue parameter.")
            elif resource_version_match == "Exact" and resource_version not in (None, "", "0"):
                at = int(resource_version)
            bucket = self.cache.snapshot(rt, at) if at is not None and at < self.storage.current_rv else None
            list_rv = at if at is not None else self.storage.current_rv
            rows = self.storage.select(rt, namespace, label_selector, field_selector, bucket)
            if continue_token:
                rows = [r for r in rows if r[0] > start]
            token = remaining = None
            if limit and limit > 0 and len(rows) > limit:
                remaining = len(rows) - limit
                rows = rows[:limit]
                token = encode_continue(rows[-1][0], list_rv)
            items = []
            for _k, obj, data in rows:
                if is_view(rt) or obj.get("apiVersion") != rt.api_version:
                    data = dumps(view(rt, obj))
                elif data is None:
                    data = dumps(obj)
                items.append(data)
            return items, str(list_rv), token, remaining

    def _write(self, rt, namespace, name, old, new, subresource, dry_run=False) -> dict:
        """Shared tail of update and patch: admission, generation, commit (or finalize deletion)."""
        key = self._key(rt, namespace, name)
        new = prepare_for_update(rt, old, new, subresource)
        strategy.prepare(rt, new)
        causes = names.metadata_causes(new.get("metadata") or {})
        if causes:
            raise errors.invalid(rt, name, causes)
        if namespaces.is_namespace(rt) and subresource != "status":
            new["status"] = json.loads(dumps(old.get("status") or {}))
        self._admit(AdmissionRequest("UPDATE", rt, namespace, new, json.loads(dumps(old)), subresource,
                                     dry_run))
        if spec_part(rt, new) != spec_part(rt, old):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if dry_run:
            return json.loads(dumps(new))
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:   # a no-op write does not bump the resourceVersion (as the real server)
            return self._out(rt, *self._bucket(rt)[key])
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            data = self._commit(rt, key, None, new, "DELETED")
            self._after_remove(rt, new)
            return self._out(rt, new, data)
        data = self._commit(rt, key, new, old, "MODIFIED")
        if crds.is_crd(rt) and subresource is None:
            crds.serve(self.registry, new, before=old)
        return self._out(rt, new, data)

    def bind(self, namespace: str, name: str, node: str, *, dry_run: bool = False) -> dict:
        """POST pods/<name>/binding: set spec.nodeName and the PodScheduled condition in one write;
        409 if the pod is already bound."""
        rt = self.registry.lookup("", "v1", "pods")
        with self.lock:
            old, _ = self._get_entry(rt, namespace, name)
            new = strategy.bind_pod(rt, old, node, self._now())
            return self._write(rt, namespace, name, old, new, "binding", dry_run)

    def update(self, rt: ResourceType, namespace: str | None, name: str, obj: dict, *,
               subresource: str | None = None, dry_run: bool = False) -> dict:
        if is_view(rt):
            return viewstore.update(self, rt, namespace, name, obj, subresource=subresource, dry_run=dry_run)
        obj = json.loads(dumps(obj))
        with self.lock:
            check_identity(rt, namespace, obj)
            self._check_namespace(rt, namespace)
            md = obj.get("metadata") or {}
            check_name(md.get("name") or name, name)
            old, _ = self._get_entry(rt, namespace, name)
            rv = md.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            if "uid" in md and md["uid"] and md["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {md['uid']}, "
                                                f"UID in object meta: {old['metadata']['uid']}")
            return self._write(rt, namespace, name, old, obj, subresource, dry_run)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch_type: str, body, *,
              subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False) -> dict:
        body = patch.decode_body(patch_type, body)
        if is_view(rt):
            return viewstore.patch(self, rt, namespace, name, patch_type, body, field_manager, dry_run)
        with self.lock:
            self._check_namespace(rt, namespace)
            key = self._key(rt, namespace, name)
            entry = self._bucket(rt).get(key)
            if patch_type == patch.APPLY:
                patch.require_field_manager(field_manager)
                if isinstance(body, dict):
                    check_identity(rt, namespace, body)
                if entry is None:
                    if subresource:
                        raise errors.not_found(rt, name)
                    body.setdefault("metadata", {})["name"] = name
                    body = ssa.on_create(body, field_manager, self._now())
                    return self.create(rt, namespace, body, dry_run=dry_run)
            if entry is None:
                raise errors.not_found(rt, name)
            old = entry[0]
            new = patch.apply_patch(json.loads(entry[1]), patch_type, body, custom=rt.is_custom,
                                    manager=field_manager if patch_type == patch.APPLY else None, force=force,
                                    now=self._now())
            if not isinstance(new, dict):
                raise ApiError(422, "the patched object is not a JSON object", "Invalid")
            md = new.get("metadata") or {}
            check_name(md.get("name", name), name)
            rv = md.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            check_identity(rt, namespace, new)
            return self._write(rt, namespace, name, old, new, subresource, dry_run)

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, propagation: str | None = None,
               preconditions: dict | None = None, dry_run: bool = False,
               grace_period_seconds: int | None = None) -> dict:
        if is_view(rt):
            return viewstore.delete(self, rt, namespace, name, propagation=propagation,
                                    preconditions=preconditions, dry_run=dry_run,
                                    grace_period_seconds=grace_period_seconds)
        with self.lock:
            old, _ = self._get_entry(rt, namespace, name)
            if namespaces.is_namespace(rt):
                namespaces.check_delete(name)
            deletion.check(rt, name, old["metadata"], preconditions, propagation)
            self._admit(AdmissionRequest("DELETE", rt, namespace, None, json.loads(dumps(old)), None,
                                         dry_run))
            new = json.loads(dumps(old))
            nmd = new["metadata"]
            finalizers = deletion.finalizers_for(propagation or rt.default_propagation, nmd)
            is_namespace = namespaces.is_namespace(rt)
            if dry_run:
                return new
            grace = deletion.pod_grace_period(rt, old, grace_period_seconds, self.graceful_pod)
            if grace:        # the kubelet stops the containers, then deletes it with grace 0
                if not nmd.get("deletionTimestamp"):
                    deletion.mark_graceful(nmd, finalizers, self.clock.now(), grace)
                    data = self._commit(rt, self._key(rt, namespace, name), new, old, "MODIFIED")
                    return self._out(rt, new, data)
                return json.loads(dumps(old))
            if not finalizers and not is_namespace:
                data = self._commit(rt, self._key(rt, namespace, name), None, new, "DELETED")
                self._after_remove(rt, new)
                return self._out(rt, new, data)
            if nmd.get("deletionTimestamp") and finalizers == (nmd.get("finalizers") or []):
                return json.loads(dumps(old))       # already being deleted: nothing changes
            deletion.mark_deleting(nmd, finalizers, self._now(), grace_period_seconds)
            if is_namespace:
                new.setdefault("status", {})["phase"] = "Terminating"
            data = self._commit(rt, self._key(rt, namespace, name), new, old, "MODIFIED")
            if is_namespace:
                namespaces.empty(self, name)
            return self._out(rt, new, data)

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector=None,
                          field_selector=None, propagation: str | None = None, dry_run: bool = False) -> list[dict]:
        with self.lock:
            if namespace is not None:
                self._check_namespace(rt, namespace)
            rows = self.storage.select(rt, namespace, label_selector, field_selector)
            out = []
            for key, obj, _d in rows:
                try:
                    out.append(self.delete(rt, obj["metadata"].get("namespace"), key[1],
                                           propagation=propagation, dry_run=dry_run))
                except ApiError as e:
                    if e.code != 404:
                        raise
            return out

    def _after_remove(self, rt: ResourceType, obj: dict) -> None:
        if crds.is_crd(rt):
            crds.remove(self, obj)
        if rt.namespaced:
            ns = obj["metadata"].get("namespace")
            if ns:
                namespaces.maybe_finish(self, ns)

    # ---- watch -------------------------------------------------------------------------------------

    def watch(self, rt: ResourceType, namespace: str | None, resource_version: str | None,
              label_selector=None, field_selector=None) -> Watch:
        """Must be called on the event loop that will consume the watch."""
        label = label_selector if isinstance(label_selector, LabelSelector) else parse_label_selector(
            label_selector)
        field = field_selector if isinstance(field_selector, FieldSelector) else parse_field_selector(
            field_selector, rt)
        with self.lock:
            return self.cache.watch(rt, namespace, resource_version, label, field)

    def _drop_watch(self, w: Watch) -> None:
        self.cache._drop_watch(w)

    @property
    def watch_count(self) -> int:
        """Open watches (a client that disconnects closes its watch)."""
        return len(self.cache.watches)

    def close_watches(self) -> int:
        """Cut every open watch (fault injection): clients see their stream end."""
        return self.cache.close_all()

    def check_list_rv(self, resource_version: str | None, match: str | None) -> None:
        """A list at an exact, no-longer-kept resourceVersion → 410 Gone; at a version the server has not
        reached → 504 `Too large resource version` (the real server first waits 3 s for it)."""
        with self.lock:
            self.cache.check_list_rv(resource_version, match)
