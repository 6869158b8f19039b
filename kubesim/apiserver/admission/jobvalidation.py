"""A Job's completion mode and podFailurePolicy, checked as kube-apiserver does (the schema leaves them
open): Indexed needs completions and at most 100000 parallelism; a podFailurePolicy needs restartPolicy
Never, at most 20 rules, each with an action (FailJob, Ignore, Count; FailIndex only with
backoffLimitPerIndex) and exactly one of onExitCodes (operator In/NotIn, 1 to 255 ordered unique values, no 0
with In, a containerName of the template) or onPodConditions (at most 20, status True/False/Unknown); and
podReplacementPolicy Failed with a podFailurePolicy. On update completionMode and podFailurePolicy are
immutable.

Upstream: pkg/apis/batch/validation/validation.go (`validateJobSpec`, `validatePodFailurePolicy`,
`validatePodFailurePolicyRule`, `validatePodFailurePolicyRuleOnExitCodes`,
`validatePodFailurePolicyRuleOnPodConditions`, `validatePodReplacementPolicy`, `ValidateJobSpecUpdate`).
"""
from __future__ import annotations

from kubesim.apimachinery import names as names_mod
from kubesim.apimachinery.fielderrors import Causes

MAX_INDEXED_PARALLELISM = 100000
MAX_RULES = 20
MAX_EXIT_CODES = 255
MAX_CONDITION_PATTERNS = 20
ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
OPERATORS = ["In", "NotIn"]
CONDITION_STATUSES = ["False", "True", "Unknown"]


def _too_many(causes: Causes, field: str, n: int, limit: int) -> None:
    causes.append((field, "FieldValueTooMany", f"Too many: {n}: must have at most {limit} items"))


def check_job_spec(spec: dict, causes: Causes) -> None:
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.unsupported("spec.completionMode", mode, ["NonIndexed", "Indexed"])
    if mode == "Indexed":
        if spec.get("completions") is None:
            causes.required("spec.completions", "when completion mode is Indexed")
        par = spec.get("parallelism")
        if isinstance(par, int) and par > MAX_INDEXED_PARALLELISM:
            causes.invalid("spec.parallelism", par, f"must be less than or equal to {MAX_INDEXED_PARALLELISM} "
                           "when completion mode is Indexed")
    policy = spec.get("podFailurePolicy")
    tspec = ((spec.get("template") or {}).get("spec") or {})
    if isinstance(policy, dict):
        _check_policy(spec, policy, tspec, causes)
        replacement = spec.get("podReplacementPolicy")
        if replacement is not None and replacement != "Failed":
            causes.unsupported("spec.podReplacementPolicy", replacement, ["Failed"])
        restart = tspec.get("restartPolicy")
        if restart == "OnFailure":
            causes.invalid("spec.template.spec.restartPolicy", restart,
                           'only "Never" is supported when podFailurePolicy is specified')


def check_job_update(spec: dict, old_spec: dict, causes: Causes) -> None:
    if spec.get("podFailurePolicy") != old_spec.get("podFailurePolicy"):
        causes.invalid("spec.podFailurePolicy", spec.get("podFailurePolicy"), "field is immutable")


def _check_policy(spec: dict, policy: dict, tspec: dict, causes: Causes) -> None:
    rules = policy.get("rules") or []
    if len(rules) > MAX_RULES:
        _too_many(causes, "spec.podFailurePolicy.rules", len(rules), MAX_RULES)
    containers = {c.get("name") for key in ("containers", "initContainers") for c in tspec.get(key) or []
                  if isinstance(c, dict)}
    for i, rule in enumerate(rules):
        where = f"spec.podFailurePolicy.rules[{i}]"
        if not isinstance(rule, dict):
            causes.invalid(where, rule, "must be an object")
            continue
        action = rule.get("action")
        if not action:
            causes.required(f"{where}.action", "valid values: " + _quoted(ACTIONS))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                causes.invalid(f"{where}.action", action, "requires the backoffLimitPerIndex to be set")
        elif action not in ACTIONS:
            causes.unsupported(f"{where}.action", action, ACTIONS)
        on_codes, on_conds = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if on_codes is not None:
            _check_exit_codes(on_codes, f"{where}.onExitCodes", containers, causes)
        if on_conds:
            if len(on_conds) > MAX_CONDITION_PATTERNS:
                _too_many(causes, f"{where}.onPodConditions", len(on_conds), MAX_CONDITION_PATTERNS)
            for j, pat in enumerate(on_conds):
                pw = f"{where}.onPodConditions[{j}]"
                err = names_mod.qualified_name_error(str((pat or {}).get("type") or ""))
                if err:
                    causes.invalid(f"{pw}.type", (pat or {}).get("type"), err)
                status = (pat or {}).get("status")
                if not status:
                    causes.required(f"{pw}.status", "valid values: " + _quoted(CONDITION_STATUSES))
                elif status not in CONDITION_STATUSES:
                    causes.unsupported(f"{pw}.status", status, CONDITION_STATUSES)
        if on_codes is not None and on_conds:
            causes.append((where, "FieldValueInvalid",
                           "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"))
        if on_codes is None and not on_conds:
            causes.append((where, "FieldValueInvalid",
                           "Invalid value: specifying one of OnExitCodes and OnPodConditions is required"))


def _check_exit_codes(req: dict, where: str, containers: set, causes: Causes) -> None:
    op = req.get("operator")
    if not op:
        causes.required(f"{where}.operator", "valid values: " + _quoted(OPERATORS))
    elif op not in OPERATORS:
        causes.unsupported(f"{where}.operator", op, OPERATORS)
    name = req.get("containerName")
    if name is not None and name not in containers:
        causes.invalid(f"{where}.containerName", name,
                       "must be one of the container or initContainer names in the pod template")
    values = req.get("values") or []
    if not values:
        causes.invalid(f"{where}.values", values, "at least one value is required")
    elif len(values) > MAX_EXIT_CODES:
        _too_many(causes, f"{where}.values", len(values), MAX_EXIT_CODES)
    seen: set = set()
    ordered = True
    for j, v in enumerate(values):
        if op == "In" and v == 0:
            causes.invalid(f"{where}.values[{j}]", v, "must not be 0 for the In operator")
        if v in seen:
            causes.duplicate(f"{where}.values[{j}]", v)
        seen.add(v)
        if j and isinstance(v, int) and isinstance(values[j - 1], int) and values[j - 1] > v:
            ordered = False
    if not ordered:
        causes.invalid(f"{where}.values", values, "must be ordered")


def _quoted(values: list[str]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"
