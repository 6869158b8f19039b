"""Server-side printing: a list or object answered as a `meta.k8s.io/v1` Table when the client asks for one
(`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl get` sends), so kubectl shows the
columns people read first (READY, STATUS, RESTARTS, COMPLETIONS...) instead of NAME and AGE.

Columns and cells follow kube-apiserver's printers, k8s.io/kubernetes/pkg/printers/internalversion/printers.go
(`AddHandlers` column definitions; `printPod`, `printJob`, `printNode`, ... for the cells), generated as the
server does with `Wide: true` (kubectl hides priority > 0 columns unless `-o wide`). Kinds without a printer
get the default table (apiserver/pkg/registry/rest/table.go: Name, Created At); custom resources get Name plus
their CRD version's `additionalPrinterColumns`, or Age when it declares none
(apiextensions-apiserver/pkg/registry/customresource/tableconvertor/tableconvertor.go). Descriptions come from
the same OpenAPI schema kubesim validates with (the SwaggerDoc strings printers.go uses).
"""
from __future__ import annotations

from datetime import datetime

from kubesim.apiserver.endpoints import openapi
from kubesim.apiserver.endpoints.printers_kinds import CELLS, COLUMNS, since
from kubesim.apiserver.registry.kinds import ResourceType

META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def wants_table(accept: str | None) -> bool:
    """The first media type the client accepts is a Table (kubectl lists Table first, JSON after)."""
    first = (accept or "").split(",")[0]
    return "as=Table" in first.replace(" ", "")


def _column(name: str, typ: str, priority: int, doc, fmt: str = "") -> dict:
    if isinstance(doc, tuple):
        doc = openapi.field_doc(*doc)
    col = {"name": name, "type": typ, "format": fmt, "description": doc or "", "priority": priority}
    return col


def columns_for(rt: ResourceType, crd: dict | None) -> list[dict]:
    """The Table's columnDefinitions for `rt` (`crd`: its CustomResourceDefinition, for a custom resource)."""
    name_col = _column("Name", "string", 0, (META, "name"), "name")
    if crd is not None:
        extra = _printer_columns(crd, rt.version)
        return [name_col] + [_column(c["name"], c["type"], int(c.get("priority", 0)), c.get("description", ""),
                                     c.get("format", "")) for c in extra]
    spec = COLUMNS.get(rt.storage_key)
    if spec is None:
        return [name_col, _column("Created At", "date", 0, (META, "creationTimestamp"))]
    return [_column(n, t, p, d, "name" if n == "Name" else "") for n, t, p, d in spec]


def _printer_columns(crd: dict, version: str) -> list[dict]:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version and v.get("additionalPrinterColumns"):
            return v["additionalPrinterColumns"]
    return [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def cells_for(rt: ResourceType, crd: dict | None, obj: dict, now: datetime) -> list:
    md = obj.get("metadata") or {}
    if crd is not None:
        return [md.get("name")] + [_crd_cell(c, obj, now) for c in _printer_columns(crd, rt.version)]
    fn = CELLS.get(rt.storage_key)
    if fn is None:
        return [md.get("name"), md.get("creationTimestamp")]
    return fn(obj, now)


def _crd_cell(col: dict, obj: dict, now: datetime):
    """tableconvertor.go: a simple JSONPath; strings printed, dates as ages, numbers and booleans as is."""
    value = _json_path(obj, col.get("jsonPath", ""))
    if value is None:
        return None
    typ = col.get("type")
    if typ == "date":
        return since(value, now) if isinstance(value, str) else None
    if typ == "integer":
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if typ == "number":
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if typ == "boolean":
        return value if isinstance(value, bool) else None
    return value if isinstance(value, str) else openapi.compact_json(value)


def _json_path(obj, path: str):
    """`.status.phase`, `.spec.items[0].name`: the simple paths CRDs' printer columns use."""
    cur = obj
    for part in [p for p in path.replace("[", ".[").split(".") if p]:
        if part.startswith("[") and part.endswith("]"):
            try:
                cur = cur[int(part[1:-1])] if isinstance(cur, list) else None
            except (ValueError, IndexError):
                return None
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return None
    return cur


def row_object(obj: dict, include: str) -> dict | None:
    """`includeObject`: Metadata (the default: PartialObjectMetadata), Object (the whole object) or None."""
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def table(rt: ResourceType, crd: dict | None, objects: list[dict], meta: dict, include: str,
          now: datetime) -> dict:
    rows = []
    for obj in objects:
        row = {"cells": cells_for(rt, crd, obj, now)}
        conditions = _row_conditions(rt, obj)
        if conditions:
            row["conditions"] = conditions
        ro = row_object(obj, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": columns_for(rt, crd), "rows": rows}


def _row_conditions(rt: ResourceType, obj: dict) -> list[dict] | None:
    """printers.go printPod: a finished pod's row says so (podSuccessConditions / podFailedConditions)."""
    if rt.storage_key != ("", "pods"):
        return None
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


def _crd_of(store, rt: ResourceType) -> dict | None:
    if rt.crd_schema is None:
        return None
    crd_rt = store.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    try:
        return store.get(crd_rt, None, f"{rt.plural}.{rt.group}")
    except Exception:   # noqa: BLE001 - a CRD deleted meanwhile: print it as a CR without columns
        return {}


def as_table(store, rt: ResourceType, body: bytes, query) -> bytes:
    """A list or object answer (JSON bytes) turned into the Table kube-apiserver would answer instead."""
    import json

    from kubesim.apimachinery.gojson import go_json
    doc = json.loads(body)
    if "items" in doc:
        objects, meta = doc["items"], doc.get("metadata") or {}
    else:
        objects, meta = [doc], {"resourceVersion": (doc.get("metadata") or {}).get("resourceVersion", "")}
    for obj in objects:
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
    include = query.get("includeObject") or "Metadata"
    return go_json(table(rt, _crd_of(store, rt), objects, meta, include, store.clock.now()))


def watch_tables(store, rt: ResourceType, request):
    """For a watch asked as Tables (`kubectl get -w`): a function from an event's object to the JSON of a
    one-row Table (the apiserver's watch handler transforms each event's object as a GET would), else None."""
    if not wants_table(request.headers.get("Accept")):
        return None
    import json
    crd = _crd_of(store, rt)
    include = request.query.get("includeObject") or "Metadata"

    def one(obj: dict) -> bytes:
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        return json.dumps(table(rt, crd, [obj], meta, include, store.clock.now()), separators=(",", ":")).encode()
    return one
