"""Property tests (hypothesis) of the pure parts of kubesim's API: selectors and patches."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.apimachinery.selectors import parse_label_selector
from kubesim.apiserver.registry.patch import json_merge, json_patch, strategic_merge

KEYS = ["app", "tier", "example.com/team", "x_y"]
VALUES = ["a", "b", "prod", "v1.2", ""]
labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
requirement_st = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["=", "==", "!="]), st.sampled_from(VALUES[:-1])),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["in", "notin"]),
              st.lists(st.sampled_from(VALUES[:-1]), min_size=1, max_size=3)),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["exists", "!"]), st.none()),
)


def render(req, spaced: bool) -> str:
    key, op, val = req
    sp = " " if spaced else ""
    if op in ("in", "notin"):
        return f"{key} {op} ({','.join(val)})"
    if op == "exists":
        return key
    if op == "!":
        return f"!{key}"
    return f"{key}{sp}{op}{sp}{val}"


def reference(req, labels: dict) -> bool:
    """The Kubernetes semantics, written plainly."""
    key, op, val = req
    if op in ("=", "=="):
        return labels.get(key) == val
    if op == "!=":
        return labels.get(key) != val
    if op == "in":
        return key in labels and labels[key] in val
    if op == "notin":
        return key not in labels or labels[key] not in val
    if op == "exists":
        return key in labels
    return key not in labels


@settings(max_examples=300, deadline=None)
@given(st.lists(requirement_st, min_size=1, max_size=4), labels_st, st.booleans())
def test_label_selector_matches_kubernetes_semantics(reqs, labels, spaced):
    """Any AND of requirements, rendered in the query-string syntax, selects exactly what Kubernetes would."""
    selector = parse_label_selector(",".join(render(r, spaced) for r in reqs))
    assert selector.matches(labels) == all(reference(r, labels) for r in reqs)


json_leaf = st.one_of(st.integers(-5, 5), st.text("ab", max_size=2), st.booleans())
json_doc = st.recursive(json_leaf, lambda inner: st.dictionaries(st.text("abc", min_size=1, max_size=2), inner,
                                                                 max_size=3), max_leaves=8)
json_map = st.dictionaries(st.text("abc", min_size=1, max_size=2), json_doc, max_size=4)


@given(json_map, st.text("xyz", min_size=1, max_size=3), json_doc)
def test_json_patch_add_then_remove_restores(doc, key, value):
    """RFC 6902: adding a new member then removing it gives the original document back."""
    if key in doc:
        return
    added = json_patch(doc, [{"op": "add", "path": f"/{key}", "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "remove", "path": f"/{key}"}]) == doc


@given(json_map, json_map)
def test_strategic_merge_equals_json_merge_without_lists(live, patch):
    """Without lists or directives, a strategic merge patch is a JSON merge patch."""
    assert strategic_merge(live, patch) == json_merge(live, patch)


@given(json_map, json_map)
def test_json_merge_is_idempotent(live, patch):
    """Applying the same merge patch twice changes nothing the second time."""
    once = json_merge(live, patch)
    assert json_merge(once, patch) == once


op_st = st.lists(st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(["a", "b", "c"]),
                           st.integers(0, 3)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(op_st)
def test_exact_reads_replay_history(ops):
    """After any sequence of creates, updates and deletes, a list at any earlier resourceVersion with
    resourceVersionMatch=Exact returns exactly the state the store had then."""
    import json

    from kubesim.apimachinery.errors import ApiError
    from kubesim.apiserver.registry.store import Store
    store = Store()
    rt = store.registry.lookup("", "v1", "configmaps")

    def state():
        items, rv, _, _ = store.list_page(rt, "default")
        return rv, [(o["metadata"]["name"], o["data"]) for o in map(json.loads, items)]

    seen = [state()]
    for op, name, value in ops:
        try:
            if op == "delete":
                store.delete(rt, "default", name)
            else:
                try:
                    store.update(rt, "default", name, {"metadata": {"name": name}, "data": {"v": str(value)}})
                except ApiError as e:
                    if e.code != 404:
                        raise
                    store.create(rt, "default", {"metadata": {"name": name}, "data": {"v": str(value)}})
        except ApiError as e:
            assert e.code == 404 and op == "delete"
        seen.append(state())
    for rv, expected in seen:
        items, got_rv, _, _ = store.list_page(rt, "default", resource_version=rv, resource_version_match="Exact")
        assert got_rv == rv
        assert [(o["metadata"]["name"], o["data"]) for o in map(json.loads, items)] == expected


label_op_st = st.lists(st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(["a", "b", "c", "d"]),
                                 st.sampled_from(["ns1", "ns2"]), labels_st), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(label_op_st, st.lists(requirement_st, min_size=1, max_size=3))
def test_label_index_agrees_with_a_full_scan(ops, reqs):
    """Lists answered through the label index return exactly what filtering every object would."""
    from kubesim.apimachinery.errors import ApiError
    from kubesim.apiserver.registry.store import Store
    store = Store()
    rt = store.registry.lookup("", "v1", "configmaps")
    ns_rt = store.registry.lookup("", "v1", "namespaces")
    for ns in ("ns1", "ns2"):
        store.create(ns_rt, None, {"metadata": {"name": ns}})
    for op, name, ns, labels in ops:
        body = {"metadata": {"name": name, "labels": labels}, "data": {}}
        try:
            if op == "delete":
                store.delete(rt, ns, name)
            else:
                try:
                    store.update(rt, ns, name, body)
                except ApiError:
                    store.create(rt, ns, body)
        except ApiError as e:
            assert e.code == 404
    selector = ",".join(render(r, False) for r in reqs)
    for ns in (None, "ns1"):
        everything, _ = store.list(rt, ns)
        expected = [o["metadata"]["name"] for o in everything
                    if all(reference(r, o["metadata"].get("labels") or {}) for r in reqs)]
        got, _ = store.list(rt, ns, label_selector=selector)
        assert [o["metadata"]["name"] for o in got] == expected


# few keys, values and names: objects often enter and leave a selection
small_labels_st = st.dictionaries(st.sampled_from(KEYS[:2]), st.sampled_from(VALUES[:2]), max_size=2)
small_op_st = st.lists(st.tuples(st.sampled_from(["put", "put", "delete"]), st.sampled_from(["a", "b"]),
                                 st.sampled_from(["ns1", "ns2"]), small_labels_st), min_size=1, max_size=20)
small_req_st = st.one_of(
    st.tuples(st.sampled_from(KEYS[:2]), st.sampled_from(["=", "!="]), st.sampled_from(VALUES[:2])),
    st.tuples(st.sampled_from(KEYS[:2]), st.sampled_from(["in", "notin"]), st.lists(st.sampled_from(VALUES[:2]),
                                                                                   min_size=1, max_size=2)),
    st.tuples(st.sampled_from(KEYS[:2]), st.sampled_from(["exists", "!"]), st.none()),
)


@settings(max_examples=200, deadline=None)
@given(small_op_st, st.lists(small_req_st, min_size=1, max_size=2), st.sampled_from([None, "ns1"]),
       st.sampled_from([None, "a"]))
def test_watch_index_offers_what_a_full_scan_would(ops, reqs, namespace, name):
    """A watch (any namespace, name and label selector) receives exactly the events — ADDED/DELETED when an
    object enters or leaves its selection — that offering every committed event to it would give: the
    store's watch index skips only watches an event cannot concern."""
    import asyncio

    from kubesim.apimachinery.errors import ApiError
    from kubesim.apimachinery.selectors import parse_field_selector, parse_label_selector
    from kubesim.apiserver.registry.store import Store
    from kubesim.apiserver.storage.watch import Watch

    async def scenario():
        store = Store()
        rt = store.registry.lookup("", "v1", "configmaps")
        ns_rt = store.registry.lookup("", "v1", "namespaces")
        for ns in ("ns1", "ns2"):
            store.create(ns_rt, None, {"metadata": {"name": ns}})
        selector = ",".join(render(r, False) for r in reqs)
        field = f"metadata.name={name}" if name else None
        start = int(store.resource_version)
        indexed = store.watch(rt, namespace, str(start), selector, field)
        reference = Watch(store, rt, namespace, parse_label_selector(selector), parse_field_selector(field, rt))
        for op, obj_name, ns, labels in ops:
            body = {"metadata": {"name": obj_name, "labels": labels}, "data": {}}
            try:
                if op == "delete":
                    store.delete(rt, ns, obj_name)
                else:
                    try:
                        store.update(rt, ns, obj_name, body)
                    except ApiError:
                        store.create(rt, ns, body)
            except ApiError as e:
                assert e.code == 404
        for ev in store._history:
            if ev.rv > start:
                reference._offer(ev)

        def drain(w):
            out = []
            while not w.queue.empty():
                etype, obj, _data, rv = w.queue.get_nowait()
                out.append((etype, obj["metadata"]["namespace"], obj["metadata"]["name"], rv))
            return out
        assert drain(indexed) == drain(reference)
        indexed.close()
    asyncio.run(scenario())
