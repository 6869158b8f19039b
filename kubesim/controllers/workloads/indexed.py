"""What the Job controller does for Indexed Jobs and for a Job's podFailurePolicy (pure functions).

- Indexed (`completionMode: Indexed`): each pod carries its completion index in the annotation and the label
  `batch.kubernetes.io/job-completion-index` (the label: PodIndexLabel, GA in 1.32), `JOB_COMPLETION_INDEX`
  from that label by fieldRef, the hostname `<job>-<index>` (with the template's `subdomain` kept: the pod's
  stable DNS name under a headless Service) and the generateName `<job>-<index>-`. An index succeeds once;
  `status.completedIndexes` lists the succeeded ones as intervals ("0-2,4"), and `status.succeeded` is their
  number. The controller creates pods for the lowest indexes that have neither succeeded nor an active pod.
  Upstream: pkg/controller/job/indexed_job_utils.go (`calculateSucceededIndexes`, `withOrderedIndexes`,
  `orderedIntervals.String`, `firstPendingIndexes`, `appendDuplicatedIndexPodsForRemoval`,
  `addCompletionIndexEnvVariable`, `addCompletionIndexAnnotation`/`Label`, `podGenerateNameWithIndex`) and
  job_controller.go `manageJob` (`template.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, completionIndex)`).
- podFailurePolicy: a failed pod is matched against the rules in order; the first rule whose `onExitCodes`
  (a terminated container's non-zero exit code, In/NotIn, optionally one container) or `onPodConditions` (a
  condition type and status, e.g. DisruptionTarget=True) matches decides: `FailJob` fails the Job at once
  (FailureTarget/Failed, reason PodFailurePolicy, the upstream message), `Ignore` does not count the pod
  against backoffLimit, `Count` counts it as usual. Upstream: pkg/controller/job/pod_failure_policy.go
  (`matchPodFailurePolicy`, `matchOnExitCodes`, `matchOnPodConditions`) and job_controller.go
  `getFailJobMessage`, `nonIgnoredFailedPodsCount`.
"""
from __future__ import annotations

import copy

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
MAX_GENERATED_NAME = 58          # apiserver storage/names MaxGeneratedNameLength (63 - 5 random characters)


def is_indexed(spec: dict) -> bool:
    return spec.get("completionMode") == "Indexed"


def completion_index(pod: dict) -> int | None:
    """The pod's completion index from its annotation (getCompletionIndex): None when absent or not a
    non-negative integer."""
    v = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    try:
        i = int(v)
    except (TypeError, ValueError):
        return None
    return i if i >= 0 else None


def parse_intervals(text: str | None, completions: int) -> list[list[int]]:
    """succeededIndexesFromString: "0-2,4" -> [[0, 2], [4, 4]], capped at completions, corrupt parts skipped."""
    out: list[list[int]] = []
    for part in (text or "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            a = int(first)
            b = int(last) if last else a
        except ValueError:
            continue
        if a >= completions:
            break
        b = min(b, completions - 1)
        if out and out[-1][1] == a - 1:
            out[-1][1] = b
        else:
            out.append([a, b])
    return out


def with_indexes(intervals: list[list[int]], indexes) -> list[list[int]]:
    """withOrderedIndexes: the intervals with `indexes` added, merged."""
    points = sorted({i for a, b in intervals for i in range(a, b + 1)} | set(indexes))
    out: list[list[int]] = []
    for i in points:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def format_intervals(intervals: list[list[int]]) -> str:
    """orderedIntervals.String: "0-2,4", and two neighbours as "5,6"."""
    parts = []
    for a, b in intervals:
        parts.append(str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}")
    return ",".join(parts)


def total(intervals: list[list[int]]) -> int:
    return sum(b - a + 1 for a, b in intervals)


def has(intervals: list[list[int]], i: int) -> bool:
    return any(a <= i <= b for a, b in intervals)


def pending_indexes(active_pods: list[dict], succeeded: list[list[int]], count: int, completions: int) -> list[int]:
    """firstPendingIndexes: the `count` lowest indexes below completions neither succeeded nor active."""
    taken = {completion_index(p) for p in active_pods} | {i for a, b in succeeded for i in range(a, b + 1)}
    return [i for i in range(completions) if i not in taken][:max(count, 0)]


def duplicates_for_removal(active_pods: list[dict], completions: int) -> list[dict]:
    """appendDuplicatedIndexPodsForRemoval: active pods without a valid index, with an index >= completions,
    and all but one (the last created) of each repeated index."""
    rm, by_index = [], {}
    for p in active_pods:
        i = completion_index(p)
        if i is None or i >= completions:
            rm.append(p)
        else:
            by_index.setdefault(i, []).append(p)
    for pods in by_index.values():
        rm += pods[:-1]
    return rm


def index_template(job: dict, template: dict, index: int) -> dict:
    """The pod template of one index: the env variable in every (init) container, annotation, label and
    hostname (manageJob with addCompletionIndexEnvVariables, PodIndexLabel on)."""
    t = copy.deepcopy(template)
    spec = t.setdefault("spec", {})
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            env = c.setdefault("env", [])
            if not any(e.get("name") == INDEX_ENV for e in env):
                env.append({"name": INDEX_ENV, "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.labels['{INDEX_KEY}']"}}})
    md = t.setdefault("metadata", {})
    md["annotations"] = {**(md.get("annotations") or {}), INDEX_KEY: str(index)}
    md["labels"] = {**(md.get("labels") or {}), INDEX_KEY: str(index)}
    spec["hostname"] = f"{job['metadata']['name']}-{index}"
    return t


def generate_name(job_name: str, index: int) -> str:
    """podGenerateNameWithIndex: `<job>-<index>-`, the job name cut so the prefix stays within 58 characters."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME:
        prefix = prefix[:MAX_GENERATED_NAME - len(suffix)] + suffix
    return prefix


def _exit_code_match(status: dict, req: dict) -> dict | None:
    """matchOnExitCodes: the first terminated container (then init container) with a non-zero exit code the
    requirement matches."""
    values, op, name = req.get("values") or [], req.get("operator"), req.get("containerName")
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            term = (cs.get("state") or {}).get("terminated")
            if term is None or (name is not None and name != cs.get("name")):
                continue
            code = term.get("exitCode", 0)
            if code != 0 and ((op == "In" and code in values) or (op == "NotIn" and code not in values)):
                return cs
    return None


def match_failure_policy(policy: dict | None, pod: dict) -> tuple[str | None, bool, str | None]:
    """matchPodFailurePolicy for a failed pod: (FailJob message or None, counts against backoffLimit, action)."""
    if not policy:
        return None, True, None
    status, md = pod.get("status") or {}, pod["metadata"]
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            cs = _exit_code_match(status, rule["onExitCodes"])
            if cs is None:
                continue
            msg = (f"Container {cs.get('name')} for pod {md['namespace']}/{md['name']} failed with exit code "
                   f"{cs['state']['terminated'].get('exitCode')} matching {action} rule at index {index}")
        elif rule.get("onPodConditions"):
            cond = next((c for c in status.get("conditions") or [] for pat in rule["onPodConditions"]
                         if c.get("type") == pat.get("type") and c.get("status") == pat.get("status")), None)
            if cond is None:
                continue
            msg = (f"Pod {md['namespace']}/{md['name']} has condition {cond['type']} matching {action} rule "
                   f"at index {index}")
        else:
            continue
        if action == "Ignore":
            return None, False, action
        if action == "Count":
            return None, True, action
        if action == "FailJob":
            return msg, True, action
    return None, True, None
