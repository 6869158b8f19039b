"""Desired children of Sedna CRs: pure functions, no I/O (the functional core of the reconcile).

From a FederatedLearningJob or JointInferenceService dict plus the Models and Datasets it names, compute the
children Sedna's own controller would create (SPEC §4; kubeedge/sedna ``pkg/globalmanager``), with two
differences that make a level-triggered, stateless reconcile safe:

* Deterministic names. Sedna names FL pods ``<job>-aggregation-<random>``; Skiff names them
  ``<job>-aggregation-<h>`` / ``<job>-train-<h>`` with ``h`` a short hash of (CR uid, spec hash, worker index).
  Two reconciles running at once compute the same names, so the second create gets 409 AlreadyExists
  ("someone else did it") instead of making a duplicate; a reconcile interrupted half-way resumes by
  creating only what is missing. No "recently recreated" timer is needed. The uid is in the hash so a CR
  deleted and re-created under the same name never collides with its predecessor's terminating pods.
* A spec-hash label (``skiff.io/spec-hash``) on every child: a hash of everything the child is rendered
  from (the CR spec, the resolved Model/Dataset URLs and credentials, the child templates). A CR edit is
  seen by comparing labels; a hand edit of a child by comparing it with its rendered manifest (``drift.py``).
  FL pods share the job-wide hash (a federated round restarts as a whole when the job changes); JI
  Deployments, Services and HPAs each carry their own, so editing the edge worker rolls only the edge one.

Volumes, the storage initializer and S3 credentials are in ``storage.py``; the names Skiff derives are
checked (``checked_names``) so that a CR whose children the API server would refuse gets none.

Every child carries exactly one controller ownerReference to its CR, with the CR's Kind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

from operators.core.names import is_dns_label, is_dns_subdomain, is_label_value
from operators.sedna.storage import (
    S3_ENDPOINT_ANNOTATION,
    S3_SECRET_KEYS,
    S3_USE_HTTPS_ANNOTATION,
    Credential,
    Mount,
    inject_env,
    inject_mounts,
)
from operators.settings import default
from operators.templating import render

API_VERSION = "sedna.io/v1alpha1"
FL_KIND = "FederatedLearningJob"
JI_KIND = "JointInferenceService"
FL_PLURAL = "federatedlearningjobs"
JI_PLURAL = "jointinferenceservices"
FL_LABEL_PREFIX = "federatedlearningjob.sedna.io/"
JI_LABEL_PREFIX = "jointinferenceservice.sedna.io/"
SPEC_HASH_LABEL = "skiff.io/spec-hash"
MANAGED_BY = {"app.kubernetes.io/managed-by": "skiff"}

AGG_PORT = 7363
BIG_MODEL_PORT = 5000
DEFAULT_LC_SERVER = default("sedna_lc_server")  # Sedna's default LocalController address

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s utilrand.String's alphabet


class SpecError(ValueError):
    """The CR cannot be turned into children; ``reason`` is a CamelCase condition reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Child:
    """One desired child: its identity and spec hash (cheap); ``render()`` gives the manifest, rendered once
    on first use (callers must not mutate it)."""

    kind: str  # "Pod" | "Service" | "Deployment" | "HorizontalPodAutoscaler"
    name: str
    spec_hash: str
    worker_type: str
    render: Callable[[], dict] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "render", _once(self.render))


def _once(fn: Callable[[], dict]) -> Callable[[], dict]:
    """``fn()`` computed on the first call and returned by every call (lighter than ``functools.cache``,
    which a pass over 1,000 CRs would build 4,000 times)."""
    done: list[dict] = []

    def once() -> dict:
        if not done:
            done.append(fn())
        return done[0]
    return once


@dataclass(frozen=True)
class Desired:
    """The desired children of one CR, or the error that prevents having any."""

    kind: str
    namespace: str
    name: str
    uid: str
    children: tuple[Child, ...] = ()
    error: SpecError | None = None

    def by_kind(self, kind: str) -> dict[str, Child]:
        return {c.name: c for c in self.children if c.kind == kind}


def with_queue_labels(desired: Desired, labels: Mapping[str, str] | None) -> Desired:
    """``desired`` with Kueue's queue labels (``queueing: kueue``: the team's LocalQueue and a priority class) on
    every pod its children make: an FL Pod's own labels, a JI Deployment's pod template labels. Kueue's manager
    Configuration (operators.platform.kueue.manager_config) manages every workload of a team namespace,
    ``manageJobsWithoutQueueName``; its pod integration gates a pod whose controller is no Kueue integration
    (a FederatedLearningJob, a ReplicaSet: kueue pkg/controller/jobs/pod/pod_webhook.go,
    ``IsPodOwnerManagedByKueue``) and admits it only through the LocalQueue it names: without the label
    Sedna's children would wait forever. Not part of the spec hash: switching a cluster to Kueue relabels a
    Deployment's template (drift) and gives new FL pods the label; running pods stay as they are."""
    if not labels or desired.error:
        return desired

    def labelled(child: Child) -> Child:
        if child.kind not in ("Pod", "Deployment"):
            return child
        inner = child.render

        def render_labelled() -> dict:
            manifest = json.loads(json.dumps(inner()))
            meta = manifest["metadata"] if child.kind == "Pod" else manifest["spec"]["template"]["metadata"]
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            return manifest
        return Child(child.kind, child.name, child.spec_hash, child.worker_type, render_labelled)
    return replace(desired, children=tuple(labelled(c) for c in desired.children))


# ---------------------------------------------------------------- shared helpers


# The templates that shape children: their text is part of every spec hash, so editing one rolls the children
# out. Not event.yaml.j2 (Events; the RBAC is in k8s_templates/rbac/): editing it must restart nothing.
CHILD_TEMPLATES = ("fl-pod.yaml.j2", "ji-deployment.yaml.j2", "ji-hpa.yaml.j2", "owner-reference.yaml.j2",
                   "storage-initializer.yaml.j2", "worker-service.yaml.j2")


@lru_cache(maxsize=1)
def templates_digest(root: Any = None) -> str:
    """Hash of the child-shaping Sedna templates (``CHILD_TEMPLATES``): changing one rolls the children out.
    ``root``: the template directory (default: the installed ``k8s_templates/sedna``)."""
    h = hashlib.sha256()
    root = root or files("k8s_templates").joinpath("sedna")
    for name in CHILD_TEMPLATES:
        h.update(name.encode() + b"\0" + root.joinpath(name).read_bytes())
    return h.hexdigest()[:12]


def spec_hash(*parts: Any) -> str:
    data = json.dumps([templates_digest(), *parts], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()[:10]


def short_suffix(*parts: Any, length: int = 5) -> str:
    n = int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        n, r = divmod(n, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[r])
    return "".join(out)


def sedna_labels(prefix: str, name: str, uid: str, worker_type: str | None = None) -> dict[str, str]:
    """runtime.generateLabels: <kind>.<group>/name, /uid and, for a worker, /worker-type (lower case)."""
    labels = {prefix + "name": name, prefix + "uid": uid}
    if worker_type:
        labels[prefix + "worker-type"] = worker_type.lower()
    return labels


@lru_cache(maxsize=4096)  # pure; the identity pass of 1,000 CRs must not render a template per CR
def _owner_reference_yaml(kind: str, name: str, uid: str) -> str:
    return json.dumps(render("sedna/owner-reference.yaml.j2", kind=kind, name=name, uid=uid))


def owner_reference(kind: str, name: str, uid: str) -> dict:
    return json.loads(_owner_reference_yaml(kind, name, uid))


def _template(cr: dict, path: str) -> dict:
    """The pod template at spec.<path>, checked to be usable."""
    node: Any = cr.get("spec") or {}
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not isinstance(node.get("spec"), dict):
        raise SpecError("InvalidSpec", f"spec.{path}.spec is missing in {cr['kind']} {cr['metadata']['name']!r}")
    containers = node["spec"].get("containers")
    if not isinstance(containers, list) or not containers:
        raise SpecError(
            "InvalidSpec", f"spec.{path}.spec.containers must be a non-empty list, got {containers!r}"
        )
    return node  # read-only here: the manifest functions copy the spec before injecting into it


def _resolve(kind: str, store: Mapping[str, dict], name: Any, field_path: str, namespace: str) -> dict:
    """The Model or Dataset named at ``field_path``; a missing one is an error, never an empty URL."""
    if not isinstance(name, str) or not name:
        raise SpecError("InvalidSpec", f"{field_path} must name a {kind}, got {name!r}")
    obj = store.get(name)
    if obj is None:
        raise SpecError(
            f"{kind}NotFound", f"{kind} {name!r} (named by {field_path}) not found in namespace {namespace!r}"
        )
    url = (obj.get("spec") or {}).get("url")
    if not isinstance(url, str) or not url:
        raise SpecError("InvalidSpec", f"{kind} {name!r} has no spec.url (got {url!r})")
    try:
        scheme = urlsplit(url).scheme
    except ValueError as e:  # e.g. "s3://[bucket/x": an unbalanced IPv6 bracket
        raise SpecError("InvalidSpec", f"{kind} {name!r}: spec.url {url!r} is not a valid URL ({e})") from e
    if not scheme and not url.startswith("/"):
        raise SpecError("InvalidSpec", f"{kind} {name!r}: spec.url {url!r} must be an absolute node path "
                                       "or an s3:// / http(s):// URL")
    return obj


def _credential(secrets: Mapping[str, dict | None], secret: Any, field_path: str, ns: str) -> Credential | None:
    """The S3 credential named at ``field_path`` (a Secret in the CR's namespace), checked to hold both keys.
    ``secrets``: name -> ``{"keys": [...], "annotations": {...}}`` (see ``storage.secret_summary``), None if absent."""
    if secret in (None, ""):
        return None
    if not isinstance(secret, str):
        raise SpecError("InvalidSpec", f"{field_path} must name a Secret, got {secret!r}")
    found = secrets.get(secret)
    if found is None:
        raise SpecError("SecretNotFound", f"Secret {secret!r} (named by {field_path}) not found in namespace {ns!r}")
    if "forbidden" in found:
        raise SpecError("Forbidden", f"Secret {secret!r} (named by {field_path}) may not be read by Skiff in "
                                     f"namespace {ns!r}: Skiff acts only in namespaces it is bound in (team "
                                     f"namespaces; python -m operators.rbac teams)")
    missing = [k for k in S3_SECRET_KEYS if k not in found["keys"]]
    if missing:
        raise SpecError("SecretKeyMissing", f"Secret {secret!r} (named by {field_path}) has no key "
                                            f"{' or '.join(map(repr, missing))} (S3 keys: {', '.join(S3_SECRET_KEYS)})")
    ann = found.get("annotations") or {}
    endpoint = ann.get(S3_ENDPOINT_ANNOTATION)
    if endpoint and "://" not in endpoint:
        endpoint = ("http://" if ann.get(S3_USE_HTTPS_ANNOTATION) == "0" else "https://") + endpoint
    return Credential(secret, endpoint or None)


def _source_mount(env_name: str, kind: str, obj: dict, secrets: Mapping[str, dict | None], ns: str) -> Mount:
    cred = _credential(secrets, (obj.get("spec") or {}).get("credentialName"),
                       f"{kind} {obj['metadata']['name']!r} spec.credentialName", ns)
    return Mount(env_name, obj["spec"]["url"], cred)


def _parses(url: str) -> bool:
    try:
        urlsplit(url)
        return True
    except ValueError:
        return False


# what the API server enforces on the names Skiff derives (a Service name is a DNS-1035 label)
_NAME_RULES = {"Service": (63, "a DNS-1035 label"), "Pod": (253, "a DNS-1123 subdomain"),
               "Deployment": (253, "a DNS-1123 subdomain"), "HorizontalPodAutoscaler": (253, "a DNS-1123 subdomain")}


def checked_names(desired: Desired) -> Desired:
    """The same ``desired``, or its error if a name derived from the CR's would be rejected by the API server
    (checked before anything is written: a job must not get its pods without its Service)."""
    name = desired.name
    if not is_label_value(name):
        return replace(desired, children=(), error=SpecError(
            "InvalidName", f"metadata.name {name!r} is {len(name)} characters: Sedna's labels carry it, "
                           "so it must be a valid label value (at most 63 characters)"))
    for c in desired.children:
        limit, rule = _NAME_RULES[c.kind]
        ok = is_dns_label(c.name) and c.name[0].isalpha() if c.kind == "Service" else is_dns_subdomain(c.name)
        if not ok:
            return replace(desired, children=(), error=SpecError(
                "InvalidName", f"metadata.name {name!r}: the {c.kind} name {c.name!r} derived from it is "
                               f"{len(c.name)} characters, must be {rule} of at most {limit}; use a shorter name"))
    return desired


# ---------------------------------------------------------------- FederatedLearningJob


def desired_federated_learning(
    job: dict, models: Mapping[str, dict], datasets: Mapping[str, dict], lc_server: str = DEFAULT_LC_SERVER,
    secrets: Mapping[str, dict | None] | None = None,
) -> Desired:
    """Children of a FederatedLearningJob. ``models``/``datasets``/``secrets``: by name, in the job's
    namespace (``secrets``: ``storage.secret_summary`` of each Secret a credentialName names, None if absent)."""
    meta = job["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    secrets = secrets or {}
    try:
        spec = job.get("spec") or {}
        agg_template = _template(job, "aggregationWorker.template")
        model_name = (spec.get("aggregationWorker") or {}).get("model", {}).get("name")
        model = _resolve("Model", models, model_name, "spec.aggregationWorker.model.name", ns)
        model_mounts = [_source_mount("MODEL_URL", "Model", model, secrets, ns)]
        if spec.get("pretrainedModel"):
            pretrained = _resolve(
                "Model", models, spec["pretrainedModel"].get("name"), "spec.pretrainedModel.name", ns
            )
            model_mounts.append(_source_mount("PRETRAINED_MODEL_URL", "Model", pretrained, secrets, ns))
        workers = spec.get("trainingWorkers")
        if not isinstance(workers, list) or not workers:
            raise SpecError("InvalidSpec", f"spec.trainingWorkers must be a non-empty list, got {workers!r}")
        trainers = []
        for i, w in enumerate(workers):
            dataset = _resolve(
                "Dataset", datasets, (w.get("dataset") or {}).get("name"),
                f"spec.trainingWorkers[{i}].dataset.name", ns,
            )
            trainers.append((_template(job, f"trainingWorkers.{i}.template"), dataset,
                             _source_mount("TRAIN_DATASET_URL", "Dataset", dataset, secrets, ns)))
        transmitter = spec.get("transmitter") or {}
        s3 = transmitter.get("s3")
        if s3 is not None and not (isinstance(s3, dict) and isinstance(s3.get("aggDataPath"), str)
                                   and s3["aggDataPath"] and _parses(s3["aggDataPath"])):
            raise SpecError("InvalidSpec", f"spec.transmitter.s3.aggDataPath must be an s3:// URL, got {s3!r}")
        transmitter_mounts = [Mount("AGG_DATA_PATH", s3["aggDataPath"], _credential(
            secrets, s3.get("credentialName"), "spec.transmitter.s3.credentialName", ns))] if s3 else []
    except SpecError as e:
        return Desired(FL_KIND, ns, name, uid, error=e)

    # the resolved URLs and credentials (Secret name and endpoint, never a key) shape the pods
    sources = [model_mounts, [m for _, _, m in trainers], transmitter_mounts]
    job_hash = spec_hash(FL_KIND, ns, name, uid, spec, sources, lc_server)
    owner = owner_reference(FL_KIND, name, uid)
    participants = str(len(trainers))
    agg_service = f"{name}-aggregation"
    transmitter_env = {"TRANSMITTER": "s3" if s3 else "ws"}

    def pod(worker_type: str, index: int | str, template: dict, env: dict, mounts: list[Mount]) -> Child:
        suffix = short_suffix(uid, job_hash, index)
        pod_name = f"{name}-{worker_type}-{suffix}"
        env = {**env, "WORKER_NAME": f"{'aggworker' if worker_type == 'aggregation' else 'trainworker'}-{suffix}"}

        def manifest() -> dict:
            pod_spec = json.loads(json.dumps(template["spec"]))  # render twice, inject once each
            mount_env = inject_mounts(pod_spec, mounts)
            inject_env(pod_spec, {**env, **mount_env})
            # Sedna forces hostNetwork on training workers (edge nodes); Skiff does not: Pod Security "baseline",
            # a team namespace's default level, forbids host namespaces, and a trainer reaches the aggregator
            # through its Service (AGG_IP) without it
            pod_spec.setdefault("restartPolicy", "OnFailure")
            tmeta = template.get("metadata") or {}
            labels = {
                **(tmeta.get("labels") or {}), **MANAGED_BY,
                **sedna_labels(FL_LABEL_PREFIX, name, uid, worker_type), SPEC_HASH_LABEL: job_hash,
            }
            return render(
                "sedna/fl-pod.yaml.j2", name=pod_name, namespace=ns, labels=labels,
                annotations=tmeta.get("annotations") or {}, owner=owner, pod_spec=pod_spec,
            )

        return Child("Pod", pod_name, job_hash, worker_type, manifest)

    children = [
        pod(
            "aggregation", "aggregation", agg_template,
            {"NAMESPACE": ns, "JOB_NAME": name, "AGG_BIND_PORT": str(AGG_PORT),
             "PARTICIPANTS_COUNT": participants, **transmitter_env},
            model_mounts + transmitter_mounts,
        )
    ]
    for i, (template, dataset, dataset_mount) in enumerate(trainers):
        children.append(pod(
            "train", i, template,
            {"AGG_IP": f"{agg_service}.{ns}", "AGG_PORT": str(AGG_PORT), "JOB_NAME": name,
             "PARTICIPANTS_COUNT": participants, "NAMESPACE": ns, "MODEL_NAME": model_name,
             "DATASET_NAME": dataset["metadata"]["name"], "LC_SERVER": lc_server, **transmitter_env},
            model_mounts + [dataset_mount] + transmitter_mounts,
        ))
    children.append(_service(FL_LABEL_PREFIX, ns, name, uid, owner, agg_service, "aggregation", AGG_PORT))
    return checked_names(Desired(FL_KIND, ns, name, uid, tuple(children)))


def _service(prefix: str, ns: str, cr_name: str, uid: str, owner: dict, svc_name: str, worker_type: str,
             port: int) -> Child:
    selector = sedna_labels(prefix, cr_name, uid, worker_type)
    h = spec_hash("Service", ns, svc_name, selector, port)

    def manifest() -> dict:
        return render(
            "sedna/worker-service.yaml.j2", name=svc_name, namespace=ns,
            labels={**MANAGED_BY, **selector, SPEC_HASH_LABEL: h}, selector=selector, owner=owner, port=port,
        )

    return Child("Service", svc_name, h, worker_type, manifest)


# ---------------------------------------------------------------- JointInferenceService


def _check_hpa(path: str, hpa: Any) -> None:
    """Bounds the HPA API does not check on create (kube-apiserver only checks them on the HPA itself, after the
    Deployment exists): 1 <= minReplicas <= maxReplicas, integers. A bad one is this CR's condition."""
    if hpa is None:
        return
    if not isinstance(hpa, dict):
        raise SpecError("InvalidSpec", f"{path} must be an object, got {hpa!r}")
    top, low = hpa.get("maxReplicas"), hpa.get("minReplicas", 1)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise SpecError("InvalidSpec", f"{path}.maxReplicas={top!r}: must be an integer >= 1")
    if isinstance(low, bool) or not isinstance(low, int) or low < 1:
        raise SpecError("InvalidSpec", f"{path}.minReplicas={low!r}: must be an integer >= 1")
    if low > top:
        raise SpecError("InvalidSpec", f"{path}.minReplicas={low!r}: must not exceed maxReplicas={top!r}")


def desired_joint_inference(
    svc: dict, models: Mapping[str, dict], lc_server: str = DEFAULT_LC_SERVER,
    secrets: Mapping[str, dict | None] | None = None,
) -> Desired:
    """Children of a JointInferenceService. ``models``/``secrets``: by name, in the service's namespace."""
    meta = svc["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    secrets = secrets or {}
    try:
        spec = svc.get("spec") or {}
        cloud, edge = spec.get("cloudWorker") or {}, spec.get("edgeWorker") or {}
        cloud_template = _template(svc, "cloudWorker.template")
        edge_template = _template(svc, "edgeWorker.template")
        cloud_model = _resolve("Model", models, (cloud.get("model") or {}).get("name"),
                               "spec.cloudWorker.model.name", ns)
        edge_model = _resolve("Model", models, (edge.get("model") or {}).get("name"),
                              "spec.edgeWorker.model.name", ns)
        cloud_mount = _source_mount("MODEL_URL", "Model", cloud_model, secrets, ns)
        edge_mount = _source_mount("MODEL_URL", "Model", edge_model, secrets, ns)
        hem = edge.get("hardExampleMining")
        if not isinstance(hem, dict) or not hem.get("name"):
            raise SpecError("InvalidSpec", f"spec.edgeWorker.hardExampleMining.name is required, got {hem!r}")
        for path, worker in (("cloudWorker", cloud), ("edgeWorker", edge)):
            _check_hpa(f"spec.{path}.hpa", worker.get("hpa"))
    except SpecError as e:
        return Desired(JI_KIND, ns, name, uid, error=e)

    owner = owner_reference(JI_KIND, name, uid)
    cloud_service = f"{name}-cloud"
    # HEM_PARAMETERS: the JSON of the parameter list, as Go's json.Marshal writes it (compact, key order)
    hem_params = json.dumps(
        [{"key": p.get("key"), "value": p.get("value")} for p in hem.get("parameters") or []],
        separators=(",", ":"),
    )
    children = [
        _deployment(ns, name, uid, owner, "cloud", cloud_template, cloud_mount,
                    {"BIG_MODEL_BIND_PORT": str(BIG_MODEL_PORT)}, lc_server),
        _service(JI_LABEL_PREFIX, ns, name, uid, owner, cloud_service, "cloud", BIG_MODEL_PORT),
        _deployment(ns, name, uid, owner, "edge", edge_template, edge_mount,
                    {"BIG_MODEL_IP": f"{cloud_service}.{ns}", "BIG_MODEL_PORT": str(BIG_MODEL_PORT),
                     "HEM_NAME": hem["name"], "HEM_PARAMETERS": hem_params, "LC_SERVER": lc_server},
                    lc_server),
    ]
    for worker_type, worker in (("cloud", cloud), ("edge", edge)):
        if worker.get("hpa"):
            children.append(_hpa(ns, name, uid, owner, worker_type, worker["hpa"]))
    return checked_names(Desired(JI_KIND, ns, name, uid, tuple(children)))


def _deployment(ns: str, svc: str, uid: str, owner: dict, worker_type: str, template: dict, model: Mount,
                env: dict, lc_server: str) -> Child:
    dep_name = f"{svc}-deployment-{worker_type}"
    labels = sedna_labels(JI_LABEL_PREFIX, svc, uid, worker_type)
    # Sedna's edgemesh label (runtime.injectDeploymentParam), in the selector too
    selector = {**labels, "app.sedna.io": f"{svc}-{worker_type}-svc"}
    h = spec_hash("Deployment", ns, dep_name, uid, template, model.url,
                  *([model.credential] if model.credential else []), env, lc_server)
    env = {**env, "NAMESPACE": ns, "SERVICE_NAME": svc,
           "WORKER_NAME": f"{worker_type}worker-{short_suffix(uid, worker_type)}"}

    def manifest() -> dict:
        pod_spec = json.loads(json.dumps(template["spec"]))
        mount_env = inject_mounts(pod_spec, [model])
        inject_env(pod_spec, {**env, **mount_env})
        tmeta = template.get("metadata") or {}
        return render(
            "sedna/ji-deployment.yaml.j2", name=dep_name, namespace=ns,
            labels={**MANAGED_BY, **selector, SPEC_HASH_LABEL: h}, selector=selector,
            template_labels={**(tmeta.get("labels") or {}), **selector},
            template_annotations=tmeta.get("annotations") or {}, owner=owner, pod_spec=pod_spec,
        )

    return Child("Deployment", dep_name, h, worker_type, manifest)


def _hpa(ns: str, svc: str, uid: str, owner: dict, worker_type: str, hpa: dict) -> Child:
    deployment = f"{svc}-deployment-{worker_type}"
    hpa_name = f"hpa-{deployment}"
    labels = sedna_labels(JI_LABEL_PREFIX, svc, uid, worker_type)
    h = spec_hash("HorizontalPodAutoscaler", ns, hpa_name, uid, hpa)

    def manifest() -> dict:
        return render(
            "sedna/ji-hpa.yaml.j2", name=hpa_name, namespace=ns,
            labels={**MANAGED_BY, **labels, SPEC_HASH_LABEL: h}, owner=owner, deployment=deployment,
            max_replicas=hpa["maxReplicas"], min_replicas=hpa.get("minReplicas"),
            metrics=hpa.get("metrics"), behavior=hpa.get("behavior"),
        )

    return Child("HorizontalPodAutoscaler", hpa_name, h, worker_type, manifest)
