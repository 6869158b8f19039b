"""kube-apiserver's PodSecurity admission plugin (k8s.io/pod-security-admission, admission/admission.go), on by
default as in every kube-apiserver since 1.25, with its default configuration (every mode `privileged:latest`,
no exemptions).

- A namespace's labels choose the policy (api/helpers.go PolicyToEvaluate):
  `pod-security.kubernetes.io/{enforce,warn,audit}` = privileged | baseline | restricted and
  `...-version` = latest | v1.N. A namespace created or updated with a bad value is refused, 422, naming the
  label (`metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "x": must be one of ...`); a
  bad value already stored counts as `restricted` for enforce and `privileged` for warn and audit.
- **Pods** (create, and updates that change an image, isSignificantPodUpdate): the enforce level refuses,
  403 `pods "<name>" is forbidden: violates PodSecurity "baseline:latest": <reason> (<detail>), ...`; the
  warn level adds the warning `would violate PodSecurity "restricted:latest": ...` (a `Warning` header,
  warning.py; none on a refused request); the audit level's `would violate ...` goes to the log
  `kubesim.audit` (kubesim keeps no audit log, where the real one writes the
  `pod-security.kubernetes.io/audit-violations` annotation).
- **Pod-template workloads** (PodTemplate, ReplicationController, ReplicaSet, Deployment, StatefulSet,
  DaemonSet, Job, CronJob): warn and audit only, never refused (EvaluatePodController is called with
  enforce=false); the pods their controllers create are then refused at enforce, which the controller
  reports as a `FailedCreate` event.
- A refused pod's name is its `generateName` when it has one (admission/attributes.go extractResourceName:
  admission runs before the name is generated), so a Job's event reads `pods "train-" is forbidden: ...`.

The checks and their words: podsecurity_checks.py.
"""
from __future__ import annotations

import logging
import re

from kubesim.apimachinery.errors import ApiError, invalid
from kubesim.apiserver import warning
from kubesim.apiserver.admission.podsecurity_checks import evaluate, forbidden_detail

audit_log = logging.getLogger("kubesim.audit")

PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LEVELS = ("privileged", "baseline", "restricted")
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")

# (group, plural) -> path of the pod template in the object
TEMPLATES = {("", "podtemplates"): ("template",), ("", "replicationcontrollers"): ("spec", "template"),
             ("apps", "replicasets"): ("spec", "template"), ("apps", "deployments"): ("spec", "template"),
             ("apps", "statefulsets"): ("spec", "template"), ("apps", "daemonsets"): ("spec", "template"),
             ("batch", "jobs"): ("spec", "template"),
             ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template")}


def policy(labels: dict) -> tuple[dict, list[tuple[str, str, str]]]:
    """The namespace's policy `{mode: (level, minor or None)}` and the label errors `[(label, value, why)]`."""
    pol: dict = {mode: ("privileged", None) for mode in MODES}
    errors = []
    for mode in MODES:
        level, minor = pol[mode]
        key = PREFIX + mode
        if key in labels:
            level = labels[key]
            if level not in LEVELS:
                errors.append((key, labels[key], "must be one of privileged, baseline, restricted"))
                level = "restricted" if mode == "enforce" else "privileged"   # enforce fails closed, the rest open
        if key + "-version" in labels:
            value = labels[key + "-version"]
            m = _VERSION.match(value)
            if value != "latest" and m is None:
                errors.append((key + "-version", value, 'must be "latest" or "v1.x"'))
            minor = int(m.group(1)) if m else None
        pol[mode] = (level, minor)
    return pol, errors


def level_version(lv: tuple[str, int | None]) -> str:
    level, minor = lv
    return f"{level}:{'latest' if minor is None else f'v1.{minor}'}"


class PodSecurityAdmission:
    """The admission plugin; `store` is read for the namespace's labels."""

    def __init__(self, store):
        self.store = store
        self._ns_rt = store.registry.lookup("", "v1", "namespaces")

    def __call__(self, req) -> None:
        if req.operation not in ("CREATE", "UPDATE") or req.obj is None:
            return
        key = (req.rt.group, req.rt.plural)
        if key == ("", "namespaces"):
            if not req.subresource:
                self._validate_namespace(req)
            return
        if key == ("", "pods"):
            if req.subresource or (req.operation == "UPDATE" and not _significant_update(req.obj, req.old)):
                return
            self._evaluate(req, req.obj.get("metadata") or {}, req.obj.get("spec") or {}, enforce=True)
        elif key in TEMPLATES and not req.subresource:
            template = _dig(req.obj, TEMPLATES[key])
            if template is None:
                return
            if req.operation == "UPDATE" and template == _dig(req.old or {}, TEMPLATES[key]):
                return
            self._evaluate(req, template.get("metadata") or {}, template.get("spec") or {}, enforce=False)

    def _validate_namespace(self, req) -> None:
        _, errors = policy((req.obj.get("metadata") or {}).get("labels") or {})
        if errors:
            name = req.obj["metadata"].get("name", "")
            raise invalid(req.rt, name, [(f"metadata.labels[{label}]", "FieldValueInvalid",
                                          f'Invalid value: "{value}": {why}') for label, value, why in errors])

    def _evaluate(self, req, md: dict, spec: dict, *, enforce: bool) -> None:
        if not req.namespace:
            return
        try:
            ns = self.store.get(self._ns_rt, None, req.namespace)
        except ApiError:
            return
        pol, _ = policy(ns["metadata"].get("labels") or {})
        results: dict = {}

        def failures(lv):
            if lv not in results:
                results[lv] = evaluate(lv[0], lv[1], md, spec)
            return results[lv]

        if enforce and failures(pol["enforce"]):
            name = _name(req.obj)
            raise ApiError(403, f'{req.rt.plural} "{name}" is forbidden: violates PodSecurity '
                                f'"{level_version(pol["enforce"])}": {forbidden_detail(failures(pol["enforce"]))}',
                           "Forbidden", name=name, group=req.rt.group, kind=req.rt.plural)
        if failures(pol["audit"]):
            audit_log.info("%s %s/%s: would violate PodSecurity %r: %s", req.rt.plural, req.namespace,
                           _name(req.obj), level_version(pol["audit"]), forbidden_detail(failures(pol["audit"])))
        if failures(pol["warn"]):
            warning.add(f'would violate PodSecurity "{level_version(pol["warn"])}": '
                        f'{forbidden_detail(failures(pol["warn"]))}')


def _name(obj: dict) -> str:
    md = obj.get("metadata") or {}
    return md.get("generateName") or md.get("name") or "Unknown"


def _dig(obj: dict, path: tuple[str, ...]):
    for k in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _significant_update(pod: dict, old: dict | None) -> bool:
    """admission.go isSignificantPodUpdate: a changed image, seccomp annotation or container count."""
    if old is None:
        return True
    seccomp = "seccomp.security.alpha.kubernetes.io/pod"
    if ((pod.get("metadata") or {}).get("annotations") or {}).get(seccomp) != \
            ((old.get("metadata") or {}).get("annotations") or {}).get(seccomp):
        return True
    spec, ospec = pod.get("spec") or {}, old.get("spec") or {}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        new, prev = spec.get(key) or [], ospec.get(key) or []
        if len(new) != len(prev) or any(a.get("image") != b.get("image") for a, b in zip(new, prev, strict=True)):
            return True
    return False
