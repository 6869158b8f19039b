"""`Store`: the API semantics of kube-apiserver over plain dicts (see INTERNALS.md for the contract).

Objects are kept with their serialized JSON (bytes) cached per version, so reads serialize nothing and
public methods return fresh copies by decoding those bytes.
"""
from __future__ import annotations

import base64
import itertools
import json
import logging
import random
import string
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kubesim import apply as ssa
from kubesim import errors, names, patch, strategy
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.qos import qos_class
from kubesim.registry import Registry, ResourceType, crd_resource_types
from kubesim.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from kubesim.views import dumps, event_to_core, is_view, view
from kubesim.watch import Event, Watch, WatchIndex, running_loop

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")   # the NamespaceLifecycle admission
# kinds whose status a create may carry (a kubelet registers its Node with status)
_STATUS_ON_CREATE = {("", "nodes")}

log = logging.getLogger("kubesim.store")


@dataclass
class AdmissionRequest:
    operation: str           # "CREATE" | "UPDATE" | "DELETE"
    rt: ResourceType
    namespace: str | None
    obj: dict | None
    old: dict | None
    subresource: str | None
    dry_run: bool


def _has_status_subresource(rt: ResourceType) -> bool:
    return "status" in rt.subresources


def _spec_part(rt: ResourceType, obj: dict) -> dict:
    """What a generation bump looks at: everything but metadata (and status, if it is a subresource)."""
    skip = {"metadata", "kind", "apiVersion"}
    if _has_status_subresource(rt):
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    def __init__(self, registry: Registry | None = None, clock: Clock | None = None, history: int = 10000):
        self.registry = registry or Registry()
        self.clock = clock or Clock()
        self.lock = threading.RLock()
        self.history_size = history
        self.admission: list[Callable[[AdmissionRequest], None]] = []
        self.log_provider = None
        self._subscribers: list[tuple[Callable, frozenset | None]] = []
        self._watches = WatchIndex()
        self.watches_opened = 0      # ever, monotonic: tests wait on it to know a watch reached the server
        self._rv = itertools.count(1)
        self._current_rv = 0
        self._data: dict[tuple[str, str], dict[tuple[str, str], tuple[dict, bytes]]] = {}
        # label index: storage key -> (label key, value) -> object keys (answers `k=v` selectors)
        self._labels: dict[tuple[str, str], dict[tuple[str, str], set]] = {}
        self._history: deque[Event] = deque()
        self._history_floor = 0     # events with rv <= floor are no longer kept
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
            for w in list(self._watches):
                w.close()
            self.admission = []
            self._subscribers = []
            self.log_provider = None
            self.registry.reset()
            self._data = {}
            self._labels = {}
            self._history.clear()
            self._history_floor = self._current_rv
        self._install_defaults()

    def subscribe(self, fn: Callable[[str, ResourceType, dict, dict | None], None], kinds=None) -> None:
        """`fn` after every committed change; `kinds`: only changes of these storage keys ((group, plural)),
        so a narrow subscriber (a benchmark's probe) does not cost a decode of every write."""
        self._subscribers.append((fn, frozenset(kinds) if kinds is not None else None))

    @property
    def resource_version(self) -> str:
        return str(self._current_rv)

    # ---- helpers -----------------------------------------------------------------------------------

    def _bucket(self, rt: ResourceType) -> dict:
        return self._data.setdefault(rt.storage_key, {})

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        return (namespace or "" if rt.namespaced else "", name)

    def _out(self, rt: ResourceType, obj: dict, data: bytes) -> dict:
        """A fresh copy of a stored object as `rt` serves it."""
        return view(rt, json.loads(data))

    def _check_namespace(self, rt: ResourceType, namespace: str | None, *, creating: str | None = None) -> None:
        """The namespace must exist; `creating` (the new object's name) must not go into a Terminating one."""
        if not rt.namespaced:
            return
        if not namespace:
            raise ApiError(400, "the server could not find the requested resource: a namespace is required",
                           "BadRequest")
        ns = self._data.get(("", "namespaces"), {}).get(("", namespace))
        if ns is None:
            raise errors.namespace_not_found(namespace)
        if creating is not None and ns[0].get("status", {}).get("phase") == "Terminating":
            raise ApiError(403, f'{rt.plural} "{creating}" is forbidden: unable to create new content in '
                                f"namespace {namespace} because it is being terminated", "Forbidden",
                           name=creating, kind=rt.plural)

    def _admit(self, req: AdmissionRequest) -> None:
        for plugin in list(self.admission):
            plugin(req)

    def _commit(self, rt: ResourceType, key, obj: dict | None, old: dict | None, etype: str) -> bytes:
        """Stamp a new resourceVersion, store (or remove), record history, notify. Under the lock."""
        rv = next(self._rv)
        self._current_rv = rv
        target = obj if obj is not None else old
        target["metadata"]["resourceVersion"] = str(rv)
        data = dumps(target)
        bucket = self._bucket(rt)
        before = bucket.get(key)
        self._index(rt.storage_key, key, before, obj)
        prev, prev_data = None, None
        if etype == "DELETED":
            bucket.pop(key, None)
            prev, prev_data = before if before else (old, None)
        else:
            bucket[key] = (obj, data)
            if etype == "MODIFIED":
                prev, prev_data = old, before[1] if before and before[0] is old else None
        if prev is not None and prev_data is None:
            prev_data = dumps(prev)
        # ev.old: the stored object this event replaced (watch selectors use it; snapshots undo with it)
        ev = Event(rv, etype, rt.storage_key, key[0], key[1], data, prev_data, target, prev)
        self._history.append(ev)
        while len(self._history) > self.history_size:
            self._history_floor = self._history.popleft().rv
        running = running_loop()
        for w in self._watches.candidates(ev):
            w._offer(ev, running)
        ev.settle()
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

    def _index(self, skey, key, before: tuple | None, after: dict | None) -> None:
        """Move `key` in the label index from the stored object's labels to the new object's."""
        index = self._labels.setdefault(skey, {})
        old_labels = (before[0]["metadata"].get("labels") or {}) if before else {}
        new_labels = (after["metadata"].get("labels") or {}) if after is not None else {}
        for pair in old_labels.items():
            if new_labels.get(pair[0]) != pair[1]:
                keys = index.get(pair)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[pair]
        for pair in new_labels.items():
            if old_labels.get(pair[0]) != pair[1]:
                index.setdefault(pair, set()).add(key)

    def _fresh_metadata(self, rt: ResourceType, namespace: str | None, obj: dict) -> dict:
        md = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = md
        if not md.get("name"):
            prefix = md.get("generateName")
            if not prefix:
                raise errors.invalid(rt, "", [("metadata.name", "FieldValueRequired",
                                               "Required value: name or generateName is required")])
            while True:
                name = prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
                if self._key(rt, namespace, name) not in self._bucket(rt):
                    break
            md["name"] = name
        err = names.object_name_error(rt, md["name"])
        if err:
            raise errors.invalid(rt, md["name"], [("metadata.name", "FieldValueInvalid",
                                                   f'Invalid value: "{md["name"]}": {err}')])
        causes = names.metadata_causes(md)
        if causes:
            raise errors.invalid(rt, md["name"], causes)
        if rt.namespaced:
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = self.clock.rfc3339(self.clock.now())
        md["generation"] = 1
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(k, None)
        return md

    def _check_identity(self, rt: ResourceType, namespace: str | None, obj: dict) -> None:
        if not isinstance(obj, dict):
            raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version and not (
                rt.is_custom and api_version.split("/")[0] == rt.group):
            raise ApiError(400, f"the API version in the data ({api_version}) does not match the expected "
                                f"API version ({rt.api_version})", "BadRequest")
        if kind and kind != rt.kind:
            raise ApiError(400, f"{kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                                f"the kind in the data does not match the URL", "BadRequest")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        md = obj.get("metadata") or {}
        if rt.namespaced and md.get("namespace") and namespace and md["namespace"] != namespace:
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on "
                                "the request", "BadRequest")

    # ---- verbs -------------------------------------------------------------------------------------

    def _storage_rt(self, rt: ResourceType) -> ResourceType:
        return self.registry.versions_of(*rt.storage)[0]

    def _to_storage(self, rt: ResourceType, namespace: str | None, obj: dict) -> dict:
        """An events.k8s.io/v1 body, checked against its URL, as the stored core/v1 Event."""
        obj = json.loads(dumps(obj))
        self._check_identity(rt, namespace, obj)
        return event_to_core(obj)

    def create(self, rt: ResourceType, namespace: str | None, obj: dict, *, dry_run: bool = False) -> dict:
        if is_view(rt):
            return view(rt, self.create(self._storage_rt(rt), namespace, self._to_storage(rt, namespace, obj),
                                         dry_run=dry_run))
        obj = json.loads(dumps(obj))
        with self.lock:
            self._check_identity(rt, namespace, obj)
            if rt.namespaced and not namespace:
                namespace = (obj.get("metadata") or {}).get("namespace")
            self._check_namespace(rt, namespace)
            md = self._fresh_metadata(rt, namespace, obj)
            self._check_namespace(rt, namespace, creating=md["name"])
            key = self._key(rt, namespace, md["name"])
            if key in self._bucket(rt):
                raise errors.already_exists(rt, md["name"])
            if _has_status_subresource(rt) and (rt.group, rt.plural) not in _STATUS_ON_CREATE:
                # status is the controllers' (written through /status): a create cannot set it
                obj.pop("status", None)
                if (rt.group, rt.plural) == ("", "persistentvolumes"):
                    obj["status"] = {"phase": "Pending"}
            if rt.plural == "pods" and not rt.group:
                # the pod strategy's PrepareForCreate: a client cannot set status; every new pod is Pending
                obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
            if rt.plural == "namespaces" and not rt.group:
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
                md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md["name"]
            if rt.plural == "customresourcedefinitions":
                self._crd_precheck(obj)
            strategy.prepare(rt, obj)
            self._admit(AdmissionRequest("CREATE", rt, namespace, obj, None, None, dry_run))
            if dry_run:
                obj["metadata"]["resourceVersion"] = ""
                return json.loads(dumps(obj))
            if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
                self._crd_established(obj)
            data = self._commit(rt, key, obj, None, "ADDED")
            if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
                for crt in crd_resource_types(obj):
                    self.registry.register(crt)
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

    def _select(self, rt, namespace, label_selector, field_selector, bucket: dict | None = None):
        label = label_selector if isinstance(label_selector, LabelSelector) else parse_label_selector(
            label_selector)
        field = field_selector if isinstance(field_selector, FieldSelector) else parse_field_selector(
            field_selector, rt)
        current = bucket is None
        bucket = self._bucket(rt) if bucket is None else bucket
        name = field.exact_name()
        pairs = label.equality_pairs() if current else []
        if name is not None and (namespace is not None or not rt.namespaced):
            e = bucket.get(self._key(rt, namespace, name))
            entries = [(self._key(rt, namespace, name), e)] if e else []
        elif pairs:      # the label index narrows the candidates; every requirement is still checked below
            index = self._labels.get(rt.storage_key, {})
            keys = set.intersection(*(index.get(p, set()) for p in pairs))
            entries = sorted((k, bucket[k]) for k in keys if namespace is None or k[0] == namespace)
        else:
            entries = sorted(bucket.items()) if namespace is None else sorted(
                (k, v) for k, v in bucket.items() if k[0] == namespace)
        out = []
        for key, (obj, data) in entries:
            if not label.empty and not label.matches(obj["metadata"].get("labels")):
                continue
            if not field.empty and not field.matches(view(rt, obj) if is_view(rt) else obj):
                continue
            out.append((key, obj, data))
        return out

    def list(self, rt: ResourceType, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], str]:
        with self.lock:
            rows = self._select(rt, namespace, label_selector, field_selector)
            return [self._out(rt, o, d) for _k, o, d in rows], str(self._current_rv)

    def _snapshot(self, rt: ResourceType, rv: int) -> dict:
        """rt's objects as they were at resourceVersion `rv`, rebuilt by undoing the newer history events;
        410 Expired if the history no longer reaches back that far (etcd compaction on a real server)."""
        if rv < self._history_floor:
            raise errors.gone(f"too old resource version: {rv} ({self._history_floor + 1})")
        state = dict(self._bucket(rt))
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            if ev.key != rt.storage_key:
                continue
            key = (ev.namespace, ev.name)
            if ev.type == "ADDED":
                state.pop(key, None)
            else:
                state[key] = (ev.old, ev.old_data)
        return state

    def list_page(self, rt: ResourceType, namespace=None, label_selector=None, field_selector=None,
                  limit: int | None = None, continue_token: str | None = None,
                  resource_version: str | None = None, resource_version_match: str | None = None):
        """(serialized items, resourceVersion, continue token or None, remainingItemCount or None).
        Like the real server, later pages come from the first page's snapshot (objects created, changed or
        deleted meanwhile do not show), and `resourceVersionMatch=Exact` reads the state at that version."""
        with self.lock:
            at = None
            if continue_token:
                try:
                    token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                    start, at = tuple(token["k"]), int(token["rv"])
                except Exception:
                    raise ApiError(400, "continue key is not valid: illegal base64 data", "BadRequest") \
                        from None
                if at < self._history_floor:
                    raise errors.gone("The provided continue parameter is too old to display a consistent list "
                                      "result. You can start a new list without the continue parameter.")
            elif resource_version_match == "Exact" and resource_version not in (None, "", "0"):
                at = int(resource_version)
            bucket = self._snapshot(rt, at) if at is not None and at < self._current_rv else None
            list_rv = at if at is not None else self._current_rv
            rows = self._select(rt, namespace, label_selector, field_selector, bucket)
            if continue_token:
                rows = [r for r in rows if r[0] > start]
            token = remaining = None
            if limit and limit > 0 and len(rows) > limit:
                remaining = len(rows) - limit
                rows = rows[:limit]
                token = base64.urlsafe_b64encode(json.dumps({"k": list(rows[-1][0]),
                                                             "rv": list_rv}).encode()).decode()
            items = []
            for _k, obj, data in rows:
                if is_view(rt) or obj.get("apiVersion") != rt.api_version:
                    data = dumps(view(rt, obj))
                elif data is None:
                    data = dumps(obj)
                items.append(data)
            return items, str(list_rv), token, remaining

    def _prepare_update(self, rt, old: dict, new: dict, subresource: str | None) -> dict:
        """Apply the status-subresource rules and server-owned metadata to an incoming object."""
        old_md = old["metadata"]
        if subresource == "binding":      # built by Store.bind: spec.nodeName and status only
            return new
        if subresource == "status":
            merged = json.loads(dumps(old))
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        new = dict(new)
        md = dict(new.get("metadata") or {})
        if "managedFields" not in md and old_md.get("managedFields"):
            md["managedFields"] = old_md["managedFields"]   # a write without managedFields keeps them
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "namespace", "name"):
            if k in old_md:
                md[k] = old_md[k]
            else:
                md.pop(k, None)
        if old_md.get("deletionTimestamp") is None:
            md.pop("deletionTimestamp", None)
        new["metadata"] = md
        if _has_status_subresource(rt):
            if "status" in old:
                new["status"] = json.loads(dumps(old["status"]))
            else:
                new.pop("status", None)
        return new

    def _write(self, rt, namespace, name, old, new, subresource, dry_run=False) -> dict:
        """Shared tail of update and patch: admission, generation, commit (or finalize deletion)."""
        key = self._key(rt, namespace, name)
        new = self._prepare_update(rt, old, new, subresource)
        strategy.prepare(rt, new)
        causes = names.metadata_causes(new.get("metadata") or {})
        if causes:
            raise errors.invalid(rt, name, causes)
        if rt.plural == "namespaces" and not rt.group and subresource != "status":
            new["status"] = json.loads(dumps(old.get("status") or {}))
        self._admit(AdmissionRequest("UPDATE", rt, namespace, new, json.loads(dumps(old)), subresource,
                                     dry_run))
        if _spec_part(rt, new) != _spec_part(rt, old):
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
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io" and subresource is None:
            for crt in crd_resource_types(old):
                self.registry.unregister(crt)
            for crt in crd_resource_types(new):
                self.registry.register(crt)
        return self._out(rt, new, data)

    def bind(self, namespace: str, name: str, node: str, *, dry_run: bool = False) -> dict:
        """POST pods/<name>/binding: set spec.nodeName and the PodScheduled condition in one write;
        409 if the pod is already bound."""
        rt = self.registry.lookup("", "v1", "pods")
        with self.lock:
            old, _ = self._get_entry(rt, namespace, name)
            bound = (old.get("spec") or {}).get("nodeName")
            if bound:
                raise errors.conflict(rt, name, f'pod {name} is already assigned to node "{bound}"')
            if old["metadata"].get("deletionTimestamp"):
                raise errors.conflict(rt, name, f"pod {name} is being deleted, cannot be assigned to a host")
            new = json.loads(dumps(old))
            new.setdefault("spec", {})["nodeName"] = node
            status = new.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": self.clock.rfc3339(self.clock.now())})
            status["conditions"] = conds
            return self._write(rt, namespace, name, old, new, "binding", dry_run)

    def update(self, rt: ResourceType, namespace: str | None, name: str, obj: dict, *,
               subresource: str | None = None, dry_run: bool = False) -> dict:
        if is_view(rt):
            return view(rt, self.update(self._storage_rt(rt), namespace, name,
                                         self._to_storage(rt, namespace, obj), subresource=subresource,
                                         dry_run=dry_run))
        obj = json.loads(dumps(obj))
        with self.lock:
            self._check_identity(rt, namespace, obj)
            self._check_namespace(rt, namespace)
            md = obj.get("metadata") or {}
            if md.get("name") and md["name"] != name:
                raise ApiError(400, "the name of the object ({}) does not match the name on the URL ({})".format(md["name"], name), "BadRequest")
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
            return self._patchview(rt, namespace, name, patch_type, body, field_manager, dry_run)
        with self.lock:
            self._check_namespace(rt, namespace)
            key = self._key(rt, namespace, name)
            entry = self._bucket(rt).get(key)
            if patch_type == patch.APPLY:
                if not field_manager:
                    raise ApiError(400, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                                        "value: is required for apply patch", "BadRequest")
                if isinstance(body, dict):
                    self._check_identity(rt, namespace, body)
                if entry is None:
                    if subresource:
                        raise errors.not_found(rt, name)
                    body.setdefault("metadata", {})["name"] = name
                    body = ssa.on_create(body, field_manager, self.clock.rfc3339(self.clock.now()))
                    return self.create(rt, namespace, body, dry_run=dry_run)
            if entry is None:
                raise errors.not_found(rt, name)
            old = entry[0]
            new = patch.apply_patch(json.loads(entry[1]), patch_type, body, custom=rt.is_custom,
                                    manager=field_manager if patch_type == patch.APPLY else None, force=force,
                                    now=self.clock.rfc3339(self.clock.now()))
            if not isinstance(new, dict):
                raise ApiError(422, "the patched object is not a JSON object", "Invalid")
            md = new.get("metadata") or {}
            if md.get("name", name) != name:
                raise ApiError(400, "the name of the object ({}) does not match the name on the URL ({})".format(md.get("name"), name), "BadRequest")
            rv = md.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            self._check_identity(rt, namespace, new)
            return self._write(rt, namespace, name, old, new, subresource, dry_run)

    def _patchview(self, rt, namespace, name, patch_type, body, field_manager, dry_run) -> dict:
        """PATCH through a view (events.k8s.io/v1): patch the object as served, store it converted back."""
        with self.lock:
            self._check_namespace(rt, namespace)
            entry = self._bucket(rt).get(self._key(rt, namespace, name))
            if patch_type == patch.APPLY and not field_manager:
                raise ApiError(400, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                                    "value: is required for apply patch", "BadRequest")
            if entry is None:
                if patch_type != patch.APPLY or not isinstance(body, dict):
                    raise errors.not_found(rt, name)
                body.setdefault("metadata", {})["name"] = name
                return self.create(rt, namespace, body, dry_run=dry_run)
            current = view(rt, json.loads(entry[1]))
            new = patch.apply_patch(current, patch_type, body, custom=False)
            if not isinstance(new, dict):
                raise ApiError(422, "the patched object is not a JSON object", "Invalid")
            return self.update(rt, namespace, name, new, dry_run=dry_run)

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, propagation: str | None = None,
               preconditions: dict | None = None, dry_run: bool = False,
               grace_period_seconds: int | None = None) -> dict:
        if is_view(rt):
            return view(rt, self.delete(self._storage_rt(rt), namespace, name, propagation=propagation,
                                         preconditions=preconditions, dry_run=dry_run,
                                         grace_period_seconds=grace_period_seconds))
        with self.lock:
            old, _ = self._get_entry(rt, namespace, name)
            if rt.plural == "namespaces" and not rt.group and name in _UNDELETABLE_NAMESPACES:
                raise ApiError(403, f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                               "Forbidden", name=name, kind="namespaces")
            md = old["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != md["uid"]:
                raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                                f"UID in object meta: {md['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
                raise errors.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                                                f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                                f"{md['resourceVersion']}")
            if propagation not in (None, "Background", "Foreground", "Orphan"):
                raise ApiError(400, f"DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: "
                                    f"Unsupported value: \"{propagation}\": supported values: \"Foreground\", "
                                    f"\"Background\", \"Orphan\"", "BadRequest")
            self._admit(AdmissionRequest("DELETE", rt, namespace, None, json.loads(dumps(old)), None,
                                         dry_run))
            policy = propagation or rt.default_propagation
            new = json.loads(dumps(old))
            nmd = new["metadata"]
            finalizers = list(nmd.get("finalizers") or [])
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Background":
                finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")] \
                    if nmd.get("deletionTimestamp") else finalizers
            is_namespace = rt.plural == "namespaces" and not rt.group
            if dry_run:
                return new
            if not finalizers and not is_namespace:
                data = self._commit(rt, self._key(rt, namespace, name), None, new, "DELETED")
                self._after_remove(rt, new)
                return self._out(rt, new, data)
            if nmd.get("deletionTimestamp") and finalizers == (nmd.get("finalizers") or []):
                return json.loads(dumps(old))       # already being deleted: nothing changes
            if not nmd.get("deletionTimestamp"):
                nmd["deletionTimestamp"] = self.clock.rfc3339(self.clock.now())
                nmd["deletionGracePeriodSeconds"] = grace_period_seconds or 0
                nmd["generation"] = nmd.get("generation", 1) + 1
            if finalizers:
                nmd["finalizers"] = finalizers
            if is_namespace:
                new.setdefault("status", {})["phase"] = "Terminating"
            data = self._commit(rt, self._key(rt, namespace, name), new, old, "MODIFIED")
            if is_namespace:
                self._empty_namespace(name)
            return self._out(rt, new, data)

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector=None,
                          field_selector=None, propagation: str | None = None, dry_run: bool = False) -> list[dict]:
        with self.lock:
            if namespace is not None:
                self._check_namespace(rt, namespace)
            rows = self._select(rt, namespace, label_selector, field_selector)
            out = []
            for key, obj, _d in rows:
                try:
                    out.append(self.delete(rt, obj["metadata"].get("namespace"), key[1],
                                           propagation=propagation, dry_run=dry_run))
                except ApiError as e:
                    if e.code != 404:
                        raise
            return out

    # ---- namespaces and CRDs -------------------------------------------------------------------------

    def _empty_namespace(self, namespace: str) -> None:
        """The namespace controller's job, done at once: delete everything in a Terminating namespace."""
        for rt in self.registry.all():
            if not rt.namespaced:
                continue
            for key in [k for k in list(self._bucket(rt)) if k[0] == namespace]:
                if key in self._bucket(rt):
                    try:
                        self.delete(rt, namespace, key[1], propagation="Background")
                    except ApiError:
                        pass
        self._maybe_finish_namespace(namespace)

    def _maybe_finish_namespace(self, namespace: str) -> None:
        ns_rt = self.registry.lookup("", "v1", "namespaces")
        entry = self._bucket(ns_rt).get(("", namespace))
        if entry is None or entry[0].get("status", {}).get("phase") != "Terminating":
            return
        for key, bucket in self._data.items():
            if key != ("", "namespaces") and any(k[0] == namespace for k in bucket):
                return
        ns = entry[0]
        if ns["metadata"].get("finalizers"):
            return
        self._commit(ns_rt, ("", namespace), None, json.loads(entry[1]), "DELETED")

    def _after_remove(self, rt: ResourceType, obj: dict) -> None:
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
            for crt in crd_resource_types(obj):
                bucket = self._data.get(crt.storage_key, {})
                for key in list(bucket):
                    if key in bucket:
                        self._commit(crt, key, None, json.loads(bucket[key][1]), "DELETED")
                self.registry.unregister(crt)
        if rt.namespaced:
            ns = obj["metadata"].get("namespace")
            if ns:
                self._maybe_finish_namespace(ns)

    def _crd_precheck(self, crd: dict) -> None:
        rt = self.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        causes = []
        if not spec.get("group"):
            causes.append(("spec.group", "FieldValueRequired", "Required value"))
        if not names.get("plural"):
            causes.append(("spec.names.plural", "FieldValueRequired", "Required value"))
        if not names.get("kind"):
            causes.append(("spec.names.kind", "FieldValueRequired", "Required value"))
        if not spec.get("versions"):
            causes.append(("spec.versions", "FieldValueRequired", "Required value: must have exactly one "
                                                                  "version marked as storage version"))
        name = crd["metadata"]["name"]
        if not causes and name != f"{names['plural']}.{spec['group']}":
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
        if causes:
            raise errors.invalid(rt, name, causes)

    def _crd_established(self, crd: dict) -> None:
        now = self.clock.rfc3339(self.clock.now())
        names = dict(crd["spec"]["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        crd["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
            "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
        }

    # ---- watch -------------------------------------------------------------------------------------

    def watch(self, rt: ResourceType, namespace: str | None, resource_version: str | None,
              label_selector=None, field_selector=None) -> Watch:
        """Must be called on the event loop that will consume the watch."""
        label = label_selector if isinstance(label_selector, LabelSelector) else parse_label_selector(
            label_selector)
        field = field_selector if isinstance(field_selector, FieldSelector) else parse_field_selector(
            field_selector, rt)
        with self.lock:
            w = Watch(self, rt, namespace, label, field)
            if resource_version in (None, "", "0"):
                for _key, obj, data in self._select(rt, namespace, label, field):
                    if is_view(rt) or obj.get("apiVersion") != rt.api_version:
                        obj = view(rt, obj)
                        data = dumps(obj)
                    w.queue.put_nowait(("ADDED", obj, data, self._current_rv))
                w.last_rv = self._current_rv
            else:
                try:
                    since = int(resource_version)
                except ValueError:
                    raise ApiError(400, f"invalid resource version: {resource_version!r}", "BadRequest") \
                        from None
                if since < self._history_floor:
                    raise errors.gone(f"too old resource version: {since} ({self._history_floor + 1})")
                for ev in self._history:
                    if ev.rv > since:
                        w._offer(ev)
                w.last_rv = max(since, w.last_rv)
            self._watches.add(w)
            self.watches_opened += 1
            return w

    def _drop_watch(self, w: Watch) -> None:
        with self.lock:
            self._watches.discard(w)

    @property
    def watch_count(self) -> int:
        """Open watches (a client that disconnects closes its watch)."""
        return len(self._watches)

    def close_watches(self) -> int:
        """Cut every open watch (fault injection): clients see their stream end."""
        with self.lock:
            ws = list(self._watches)
        for w in ws:
            w.close()
        return len(ws)

    def check_list_rv(self, resource_version: str | None, match: str | None) -> None:
        """A list at an exact, no-longer-kept resourceVersion → 410 Gone; at a version the server has not
        reached → 504 `Too large resource version` (the real server first waits 3 s for it)."""
        if not resource_version or resource_version == "0":
            return
        try:
            rv = int(resource_version)
        except ValueError:
            raise ApiError(400, f"invalid resource version: {resource_version!r}", "BadRequest") from None
        if match == "Exact" and rv < self._history_floor:
            raise errors.gone("The resourceVersion for the provided list is too old.")
        if rv > self._current_rv:
            raise ApiError(504, f"Too large resource version: {rv}, current: {self._current_rv}", "Timeout",
                           causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
