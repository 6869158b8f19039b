"""The checks the OpenAPI schema does not make: container names and images, ports, resource quantities,
requests <= limits, extended resources, selectors matching the template, config keys, immutable fields, the
pod update rule, and kubesim's own `kubesim.io/*` annotations.

Upstream: pkg/apis/core/validation/validation.go (`ValidatePodSpec`, `validateContainers`,
`ValidateResourceRequirements`, `ValidatePodUpdate`...), pkg/apis/apps/validation, pkg/apis/batch/validation.
"""
from __future__ import annotations

import copy
from decimal import Decimal

from kubesim.apimachinery import names as names_mod
from kubesim.apimachinery.fielderrors import Causes
from kubesim.apimachinery.resources import qty
from kubesim.apimachinery.selectors import label_selector_from_dict
from kubesim.apiserver.admission.defaults import TEMPLATE_PATHS, template_of
from kubesim.apiserver.admission.jobvalidation import check_job_spec, check_job_update

_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NATIVE_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}
POD_UPDATE_MSG = ("Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                  "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                  "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                  "to 1 if it was previously negative)")


def _quantity(causes: Causes, where: str, value) -> Decimal | None:
    try:
        q = qty(value)
    except ValueError:
        causes.invalid(where, value, _QUANTITY_MSG)
        return None
    if q < 0:
        causes.invalid(where, value, "must be greater than or equal to 0")
        return None
    return q


def check_container(c: dict, where: str, causes: Causes, names: set[str]) -> None:
    name = c.get("name")
    if not name:
        causes.required(f"{where}.name")
    elif not isinstance(name, str) or names_mod.dns_label_error(name):
        causes.invalid(f"{where}.name", name, names_mod.DNS_LABEL_MSG)
    elif name in names:
        causes.duplicate(f"{where}.name", name)
    else:
        names.add(name)
    if not c.get("image"):
        causes.required(f"{where}.image")
    port_names: set[str] = set()
    for i, p in enumerate(c.get("ports") or []):
        if not isinstance(p, dict):
            continue
        pw = f"{where}.ports[{i}]"
        cp = p.get("containerPort")
        if cp is None:
            causes.required(f"{pw}.containerPort")
        elif isinstance(cp, int) and not 1 <= cp <= 65535:
            causes.invalid(f"{pw}.containerPort", cp, "must be between 1 and 65535, inclusive")
        pn = p.get("name")
        if pn:
            if err := names_mod.port_name_error(pn):
                causes.invalid(f"{pw}.name", pn, err)
            elif pn in port_names:
                causes.duplicate(f"{pw}.name", pn)
            port_names.add(pn)
    res = c.get("resources") or {}
    if not isinstance(res, dict):
        return
    amounts: dict[str, dict[str, Decimal]] = {"limits": {}, "requests": {}}
    for kind in ("limits", "requests"):
        for r, v in (res.get(kind) or {}).items():
            q = _quantity(causes, f"{where}.resources.{kind}[{r}]", v)
            if q is not None:
                amounts[kind][r] = q
    for r, req in amounts["requests"].items():
        lim = amounts["limits"].get(r)
        extended = r not in NATIVE_RESOURCES and "/" in r and not r.startswith("hugepages-")
        if extended:
            if lim is None:
                causes.required(f"{where}.resources.limits", "Limit must be set for non overcommitable resources")
            elif lim != req:
                causes.invalid(f"{where}.resources.requests", res["requests"][r],
                               f"must be equal to {r} limit of {res['limits'][r]}")
            if req != req.to_integral_value():
                causes.invalid(f"{where}.resources.requests[{r}]", res["requests"][r], "must be an integer")
        elif lim is not None and req > lim:
            causes.invalid(f"{where}.resources.requests", res["requests"][r],
                           f"must be less than or equal to {r} limit of {res['limits'][r]}")
    for r, lim in amounts["limits"].items():
        if r not in NATIVE_RESOURCES and "/" in r and lim != lim.to_integral_value():
            causes.invalid(f"{where}.resources.limits[{r}]", res["limits"][r], "must be an integer")


def check_pod_spec(spec, where: str, causes: Causes) -> None:
    if not isinstance(spec, dict):
        causes.required(where)
        return
    containers = spec.get("containers")
    if not containers:
        causes.required(f"{where}.containers")
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or []):
            if isinstance(c, dict):
                check_container(c, f"{where}.{key}[{i}]", causes, names)
    policy = spec.get("restartPolicy")
    if policy not in (None, "Always", "OnFailure", "Never"):
        causes.unsupported(f"{where}.restartPolicy", policy, ["Always", "OnFailure", "Never"])
    ads = spec.get("activeDeadlineSeconds")
    if isinstance(ads, int) and ads <= 0:
        causes.invalid(f"{where}.activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive")
    for i, t in enumerate(spec.get("tolerations") or []):
        if isinstance(t, dict):
            op = t.get("operator") or "Equal"
            if op not in ("Equal", "Exists"):
                causes.unsupported(f"{where}.tolerations[{i}].operator", op, ["Equal", "Exists"])
            elif op == "Exists" and t.get("value"):
                causes.invalid(f"{where}.tolerations[{i}].operator", t.get("value"),
                               "value must be empty when `operator` is 'Exists'")
            elif op == "Equal" and not t.get("key"):
                causes.invalid(f"{where}.tolerations[{i}].operator", op,
                               "operator must be Exists when `key` is empty, which means \"match all values "
                               "and all keys\"")


def check_script_annotations(md: dict, where: str, causes: Causes) -> None:
    """kubesim's test API (`kubesim.io/*` annotations, INTERNALS.md) is checked like any field."""
    ann = (md or {}).get("annotations") or {}
    for key, kind in (("duration", float), ("exit-code", int), ("log-lines", int)):
        value = ann.get(f"kubesim.io/{key}")
        if value in (None, ""):
            continue
        try:
            ok = kind(value) >= 0 and (key != "exit-code" or int(value) <= 255)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            causes.invalid(f"{where}.annotations[kubesim.io/{key}]", value,
                           "must be a non-negative " + ("number of seconds" if kind is float else
                                                        "integer" + (" <= 255" if key == "exit-code" else "")))
    for key in ("cpu-usage", "memory-usage", "gpu-util"):   # simulated use (kubelet/stats.py)
        value = ann.get(f"kubesim.io/{key}")
        if value in (None, ""):
            continue
        try:
            number = float(qty(str(value)))
            ok = number >= 0 and (key != "gpu-util" or number <= 100)
        except (TypeError, ValueError, ArithmeticError):
            ok = False
        if not ok:
            causes.invalid(f"{where}.annotations[kubesim.io/{key}]", value,
                           "must be a percent from 0 to 100" if key == "gpu-util" else
                           "must be a non-negative quantity (e.g. 500m, 300Mi)")


_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")


def _check_selector(selector: dict, labels: dict, where: str, causes: Causes) -> None:
    """An apps/v1 selector: known operators, not empty, and it selects the template's labels."""
    for i, e in enumerate(selector.get("matchExpressions") or []):
        op = e.get("operator") if isinstance(e, dict) else None
        if op not in _SELECTOR_OPERATORS:
            causes.unsupported(f"spec.selector.matchExpressions[{i}].operator", op, list(_SELECTOR_OPERATORS))
            return
    sel = label_selector_from_dict(selector)
    if sel.empty or not sel.matches(labels):
        causes.invalid(f"{where}.metadata.labels", labels, "`selector` does not match template `labels`")


def _check_config_keys(obj: dict, causes: Causes) -> None:
    """Secret and ConfigMap `data`/`binaryData` keys must be config keys (they become file names)."""
    for f in ("data", "binaryData"):
        entries = obj.get(f)
        for k in entries if isinstance(entries, dict) else ():
            err = names_mod.config_key_error(k)
            if err:
                causes.invalid(f"{f}[{k}]", k, err)


def check_object(rt, obj: dict, old: dict | None, causes: Causes) -> None:
    kind = (rt.group, rt.plural)
    if kind in (("", "secrets"), ("", "configmaps")):
        _check_config_keys(obj, causes)
        return
    if kind == ("", "pods"):
        check_script_annotations(obj.get("metadata"), "metadata", causes)
        check_pod_spec(obj.get("spec"), "spec", causes)
        if old is not None:
            _check_pod_update(obj, old, causes)
        return
    if kind in TEMPLATE_PATHS:
        path = TEMPLATE_PATHS[kind]
        tmpl = template_of(obj, path)
        where = ".".join(path)
        if tmpl is None:
            causes.required(where)
        else:
            check_script_annotations(tmpl.get("metadata"), f"{where}.metadata", causes)
            check_pod_spec(tmpl.get("spec"), f"{where}.spec", causes)
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            selector = (obj.get("spec") or {}).get("selector")
            if kind[0] == "apps":
                if not selector:
                    causes.required("spec.selector")
                else:
                    _check_selector(selector, labels, where, causes)
            if kind == ("batch", "jobs"):
                policy = (tmpl.get("spec") or {}).get("restartPolicy")
                if policy not in ("OnFailure", "Never"):
                    causes.unsupported(f"{where}.spec.restartPolicy", policy, ["OnFailure", "Never"])
    spec = obj.get("spec") or {}
    old_spec = (old or {}).get("spec") or {}
    for where, amounts in _quantity_maps(kind, spec):
        for r, v in (amounts or {}).items() if isinstance(amounts, dict) else ():
            _quantity(causes, f"{where}[{r}]", v)
    if kind == ("batch", "jobs"):
        for f in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            v = spec.get(f)
            if isinstance(v, int) and v < (1 if f == "activeDeadlineSeconds" else 0):
                causes.invalid(f"spec.{f}", v, "must be greater than or equal to "
                               + ("1" if f == "activeDeadlineSeconds" else "0"))
        check_job_spec(spec, causes)
        if old is not None:
            check_job_update(spec, old_spec, causes)
            for f in ("selector", "completionMode"):
                if spec.get(f) != old_spec.get(f):
                    causes.invalid(f"spec.{f}", spec.get(f), "field is immutable")
            if _job_template_changed(spec, old_spec, (old.get("status") or {}).get("startTime")):
                causes.invalid("spec.template", spec.get("template"), "field is immutable")
    elif kind in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        if isinstance(spec.get("replicas"), int) and spec["replicas"] < 0:
            causes.invalid("spec.replicas", spec["replicas"], "must be greater than or equal to 0")
        if old is not None and spec.get("selector") != old_spec.get("selector"):
            causes.invalid("spec.selector", spec.get("selector"), "field is immutable")
    elif kind == ("", "services"):
        if old is not None and old_spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP"):
            causes.invalid("spec.clusterIP", spec.get("clusterIP"), "field is immutable")
    elif kind in (("rbac.authorization.k8s.io", "rolebindings"), ("rbac.authorization.k8s.io", "clusterrolebindings")):
        # ValidateRoleBindingUpdate: a binding's role is fixed for its life (delete and recreate to change it)
        if old is not None and obj.get("roleRef") != old.get("roleRef"):
            causes.invalid("roleRef", obj.get("roleRef"), "cannot change roleRef")
    elif kind == ("apiextensions.k8s.io", "customresourcedefinitions"):
        for i, ver in enumerate(spec.get("versions") or []):
            if isinstance(ver, dict) and not ((ver.get("schema") or {}).get("openAPIV3Schema")):
                causes.required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required")


# pod template fields a suspended Job that never started may change (JobMutableNodeSchedulingDirectives, GA
# in 1.27: pkg/registry/batch/job/strategy.go AllowMutableSchedulingDirectives) - what Kueue sets on start
_SCHEDULING_DIRECTIVES = (("spec", "nodeSelector"), ("spec", "tolerations"), ("spec", "affinity"),
                          ("spec", "schedulingGates"), ("metadata", "labels"), ("metadata", "annotations"))


def _job_template_changed(spec: dict, old_spec: dict, started: str | None) -> bool:
    new, old = spec.get("template"), old_spec.get("template")
    if new == old:
        return False
    if not old_spec.get("suspend") or started or not isinstance(new, dict) or not isinstance(old, dict):
        return True
    new, old = copy.deepcopy(new), copy.deepcopy(old)
    for part, field in _SCHEDULING_DIRECTIVES:
        for t in (new, old):
            (t.get(part) or {}).pop(field, None)
    return new != old


def _quantity_maps(kind: tuple[str, str], spec: dict):
    """(field path, {resource: quantity}) of the kinds whose quantities the schema leaves unchecked."""
    if kind == ("", "resourcequotas"):
        yield "spec.hard", spec.get("hard")
    elif kind == ("", "persistentvolumeclaims"):
        res = spec.get("resources") or {}
        yield "spec.resources.requests", res.get("requests")
        yield "spec.resources.limits", res.get("limits")
    elif kind == ("", "limitranges"):
        for i, item in enumerate(spec.get("limits") or []):
            if isinstance(item, dict):
                for f in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio"):
                    yield f"spec.limits[{i}].{f}", item.get(f)


def _check_pod_update(new: dict, old: dict, causes: Causes) -> None:
    """A pod's spec is immutable but for images, activeDeadlineSeconds, added tolerations (and binding)."""
    ns, os_ = copy.deepcopy(new.get("spec") or {}), old.get("spec") or {}
    for key in ("containers", "initContainers"):
        for c_new, c_old in zip(ns.get(key) or [], os_.get(key) or [], strict=False):
            if isinstance(c_new, dict) and isinstance(c_old, dict) and "image" in c_old:
                c_new["image"] = c_old["image"]
    old_ads, new_ads = os_.get("activeDeadlineSeconds"), ns.get("activeDeadlineSeconds")
    if new_ads is not None and (old_ads is None or new_ads <= old_ads):
        ns["activeDeadlineSeconds"] = old_ads
        if old_ads is None:
            ns.pop("activeDeadlineSeconds")
    old_tol = os_.get("tolerations") or []
    new_tol = ns.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if old_tol:
            ns["tolerations"] = old_tol
        else:
            ns.pop("tolerations", None)
    if os_.get("schedulingGates"):
        # a gated pod: gates may be removed (not added) and nodeSelector entries added (PodSchedulingReadiness,
        # pkg/apis/core/validation ValidatePodUpdate with AllowMutableSchedulingDirectives)
        new_gates, old_gates = ns.get("schedulingGates") or [], os_.get("schedulingGates") or []
        if all(g in old_gates for g in new_gates):
            ns["schedulingGates"] = old_gates
        old_sel, new_sel = os_.get("nodeSelector") or {}, ns.get("nodeSelector") or {}
        if all(new_sel.get(k) == v for k, v in old_sel.items()):
            if old_sel:
                ns["nodeSelector"] = old_sel
            else:
                ns.pop("nodeSelector", None)
    if not os_.get("nodeName") and ns.get("nodeName"):
        ns.pop("nodeName")     # binding (kubesim's scheduler binds with an update)
    if ns != os_:
        causes.forbidden("spec", POD_UPDATE_MSG)
