"""Admission (first plugin): defaulting and validation as kube-apiserver does them.

- Built-in kinds: API defaulting clients rely on (pod restartPolicy/dnsPolicy/schedulerName/..., container
  imagePullPolicy, Service clusterIP allocation, Job selector + controller-uid/job-name labels, Deployment
  and StatefulSet strategies), then the Kubernetes 1.31 OpenAPI schema shipped by `kubernetes-validate`
  (read offline, one compiled validator per kind), then the checks the schema lacks (container names and
  images, ports, resource quantities, requests <= limits, extended resources, immutable fields).
- Custom resources: structural pruning of fields the CRD's openAPIV3Schema does not declare (unless
  `x-kubernetes-preserve-unknown-fields`), then validation against that schema (`nullable`,
  `x-kubernetes-int-or-string`, `x-kubernetes-embedded-resource` respected).

Every write is validated whole, as the real server does; what makes that cheap is not skipping anything:
the built-in schemas are compiled per node into predicates (`schema_ok`; the causes come from the walk only
when an object is invalid), and a CR's errors per top-level field are kept by the field's content
(`CustomValidator`), so a status write does not re-check a spec it has seen.

Failures raise `Invalid` (422) whose causes name the field path and value, with the real messages.

This module is the admission plugin and its order only; the rules live beside it: `defaults.py`,
`builtin_schema.py`, `kindvalidation.py`, `crschema.py`, `fielderrors.py`; Service addresses: registry/serviceips.py. Upstream, the same order is
k8s.io/apiserver/pkg/registry/generic/registry/store.go `Create`/`Update` calling the strategy's
`PrepareForCreate`, then `Validate` (pkg/registry/<group>/<kind>/strategy.go).
"""
from __future__ import annotations

from kubesim.apimachinery.fielderrors import Causes, invalid_error
from kubesim.apiserver.admission.builtin_schema import SCHEMAS, builtin_errors, drop_unknown_fields, schema_ok
from kubesim.apiserver.admission.crschema import validate_custom
from kubesim.apiserver.admission.defaults import default_object
from kubesim.apiserver.admission.kindvalidation import check_object
from kubesim.apiserver.registry import serviceips


class Validator:
    """The admission plugin: default, validate, and refuse with 422 Invalid before anything is written."""

    def __init__(self, store):
        self.store = store
        self.ips = serviceips.ClusterIPs()
        serviceips.reserve_existing(store, self.ips)

    def __call__(self, req) -> None:
        serviceips.release_deleted(req, self.ips)
        if req.operation == "DELETE" or req.obj is None:
            return
        rt, obj, old = req.rt, req.obj, req.old
        name = (obj.get("metadata") or {}).get("name", "")
        causes = Causes()
        if rt.crd_schema is not None:
            if req.subresource not in (None, "status"):
                return
            validate_custom(rt, obj, causes)
        else:
            if req.subresource is not None:
                return    # status writes come from controllers; spec rules do not apply
            validator = SCHEMAS.validator(rt.api_version, rt.kind)
            if validator is not None:
                drop_unknown_fields(obj, validator.schema)
            default_object(rt, obj, old, self.ips)
            if validator is not None and not schema_ok(validator.schema)(obj):
                builtin_errors(obj, validator.schema, [], causes)
            if not causes:
                check_object(rt, obj, old, causes)
            if not causes and (rt.group, rt.plural) == ("", "services") and old is None and not req.dry_run:
                serviceips.claim(obj, self.ips, causes)
        if causes:
            raise invalid_error(rt, name, causes)
