"""The hostile-input catalogue (``hostile_cases.CASES``): every case against its real entry point.

* training: ``TrainingJobOperator(...)`` then ``build_manifest`` — validated when the DAG file is parsed or,
  at the latest, when ``execute`` computes the manifest before its first request (pure: no cluster client
  exists yet, so a refusal is before any write by construction); accepted cases render the Job manifest and
  the hostile text must arrive verbatim in argv/env, never re-parsed.
* devinstance: the create DAG's params through ``request_from_params`` with the example platform file.
* platform: the example platform file with one edit, through ``parse_platform``.
* sedna: the bad CR next to a good one on kubesim over HTTP, one reconcile pass: a Failed condition naming the
  field and value on the bad CR, no child of it, the good CR's children created (one CR never stops another).
* ui: ``POST /api/instances`` on the plugin's FastAPI app (authentication replaced by a fixed caller: the
  auth itself is proven in tests/*/ui/) with the cluster connection pointed at kubesim: a 400 naming the field,
  never a 500, and kubesim saw no write.
"""

from __future__ import annotations

import copy
import tracemalloc
from pathlib import Path

import pytest
import yaml

from operators.platform import PlatformError, parse_platform
from operators.platform.model import home_pvc
from tests.support.hostile.hostile_cases import CASES, Case

EXAMPLE_PATH = Path(__file__).parents[3] / "operators" / "platform" / "example.yaml"
EXAMPLE = EXAMPLE_PATH.read_text()
SAMPLES = Path(__file__).parents[2] / "support" / "sedna" / "samples"
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def by_entry(entry: str) -> list:
    return [pytest.param(c, id=c.id) for c in CASES if c.entry == entry]


def assert_names(case: Case, message: str) -> None:
    assert case.field in message and case.value in message, (case.id, message[:400])
    assert len(message) < 2000, f"{case.id}: message of {len(message)} characters echoes the whole value"


# ---- training ---------------------------------------------------------------------------------------------
def training_operator(**kw):
    from operators.training.operator import TrainingJobOperator

    args = {"task_id": "hostile", "image": "registry.example.com/train:1", "entry_path": "train.py",
            "owner": "alice", **kw}
    return TrainingJobOperator(**args)


@pytest.mark.parametrize("case", by_entry("training"))
def test_training_argument(case: Case):
    from operators.training.naming import TaskInstanceKey

    if case.expect == "rejected":  # when the DAG is parsed, or at the latest when the manifest is computed
        with pytest.raises(ValueError) as info:
            training_operator(**case.args).build_manifest(TaskInstanceKey("d", "t", "r", 1))
        assert_names(case, str(info.value))
        return
    op = training_operator(**case.args)
    job = op.build_manifest(TaskInstanceKey("d", "t", "r", 1))
    container = job["spec"]["template"]["spec"]["containers"][0]
    argv, env = container["command"], {e["name"]: e.get("value") for e in container.get("env", [])}
    from operators.training.spec import SCRIPT

    assert argv[:3] == ["/bin/bash", "-ic", SCRIPT]  # a constant script
    for arg in case.args.get("run_args", []):
        assert arg in argv  # verbatim, a positional parameter
    if "run_args" in case.args:
        assert argv[-len(case.args["run_args"]):] == case.args["run_args"]
    for name, value in case.args.get("env", {}).items():
        assert env[name] == value
    if "work_dir" in case.args:
        assert argv[4] == case.args["work_dir"]
    if "cpu" in case.args:
        assert container["resources"]["limits"]["cpu"] == case.args["cpu"].strip()


# ---- development instances -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", by_entry("devinstance"))
def test_devinstance_param(case: Case):
    from operators.devinstances.operator import request_from_params

    params = {"name": "nb", "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": 2, **case.args}
    with pytest.raises(ValueError) as info:
        request_from_params(parse_platform(EXAMPLE), "alice", params)
    assert_names(case, str(info.value))


# ---- platform file ---------------------------------------------------------------------------------------
def platform_text(case: Case) -> str:
    if case.args.get("collide"):
        twin = home_pvc("Bob").removesuffix("-home")  # a DNS-safe name shaped like Bob's hashed volume name
        data = yaml.safe_load(EXAMPLE)
        data["teams"][0]["members"] += [{"user": "Bob"}, {"user": twin}]
        return yaml.safe_dump(data)
    if "text" in case.args:
        return case.args["text"]
    text, edits = EXAMPLE, case.args["replace"]
    for old, new in [edits] if isinstance(edits, tuple) else edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


@pytest.mark.parametrize("case", by_entry("platform"))
def test_platform_file(case: Case, monkeypatch):
    if case.args.get("unset"):  # the whole product's view of it: tests/integration/hostile ::test_without_the_setting_...
        from operators.platform import load_platform

        monkeypatch.delenv("AIRFLOW__SKIFF__PLATFORM_FILE", raising=False)
        with pytest.raises(PlatformError) as info:
            load_platform()
        assert_names(case, str(info.value))
        return
    text = platform_text(case)
    if case.args.get("collide"):
        platform = parse_platform(text)  # both users are legal: their volumes must differ
        users = [m.user if hasattr(m, "user") else m for m in platform.team("recsys").users]
        assert "Bob" in users
        twin = home_pvc("Bob").removesuffix("-home")
        assert home_pvc("Bob") != home_pvc(twin), "two users share one home PVC"
        return
    tracemalloc.start()
    try:
        with pytest.raises(PlatformError) as info:
            parse_platform(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_names(case, str(info.value))
    assert case.args.get("secret", "\0") not in str(info.value), "the error echoes the credential"
    assert "Traceback" not in str(info.value)
    # nothing bigger than the text itself is built on the way to the refusal (an alias bomb expands nothing)
    assert peak < 20 * len(text) + 20_000_000, f"{case.id}: {peak} bytes allocated for {len(text)} of text"


def test_home_volume_names_are_injective_over_tricky_users():
    """Case ``platform-home-pvc-collision`` generalised: names that are DNS-safe, not DNS-safe, and DNS-safe
    names shaped exactly like another user's hashed name all get distinct volumes."""
    users = ["bob", "Bob", "BOB", "bob.smith", "bob-smith", "Bob.Smith", "b" * 58, "b" * 59, "bob-home", "bob_"]
    users += [home_pvc(u).removesuffix("-home") for u in list(users)]
    names = {u: home_pvc(u) for u in set(users)}
    assert len(set(names.values())) == len(names), names


# ---- Sedna -----------------------------------------------------------------------------------------------
@pytest.fixture
def sedna(k8s):
    from operators.sedna.install import install_crds
    from operators.sedna.kube import MODELS, Kube

    kube = Kube(k8s)
    install_crds(kube)
    for name, url in (("helmet-detection-inference-little-model", "/data/little/little.pb"),
                      ("helmet-detection-inference-big-model", "/data/big/big.pb")):
        kube.create(MODELS, "default", {"apiVersion": "sedna.io/v1alpha1", "kind": "Model",
                                        "metadata": {"name": name, "namespace": "default"},
                                        "spec": {"url": url, "format": "pb"}})
    return kube


def ji(name: str) -> dict:
    obj = yaml.safe_load((SAMPLES / "jointinferenceservice_v1alpha1.yaml").read_text())
    obj["metadata"].update(name=name, namespace="default")
    for worker in ("cloudWorker", "edgeWorker"):
        spec = obj["spec"][worker]["template"]["spec"]
        if str(spec.get("nodeName", "")).startswith("$"):
            spec["nodeName"] = "edge-node"
    return obj


@pytest.mark.parametrize("case", by_entry("sedna"))
def test_sedna_cr(case: Case, sedna, k8s, kubesim):
    from operators.sedna.kube import DEPLOYMENTS, HPAS, JI_SERVICES, MODELS, Kube
    from operators.sedna.reconcile import reconcile_joint_inference

    bad = ji(case.args.get("name", "bad-ji"))
    if "hpa" in case.args:
        bad["spec"]["cloudWorker"]["hpa"] = copy.deepcopy(case.args["hpa"])
    if "model_url" in case.args:
        sedna.create(MODELS, "default", {"apiVersion": "sedna.io/v1alpha1", "kind": "Model",
                                         "metadata": {"name": "bad-model", "namespace": "default"},
                                         "spec": {"url": case.args["model_url"], "format": "pb"}})
        bad["spec"]["cloudWorker"]["model"]["name"] = "bad-model"
    good = ji("good-ji")
    good["spec"]["cloudWorker"]["hpa"] = {"minReplicas": 1, "maxReplicas": 3}
    sedna.create(JI_SERVICES, "default", bad)  # the CRD schema admits it
    sedna.create(JI_SERVICES, "default", good)
    summary = reconcile_joint_inference(Kube(k8s))
    assert summary["invalid"] == 1, summary
    bad_name = bad["metadata"]["name"]
    cond = next(c for c in sedna.get(JI_SERVICES, "default", bad_name)["status"]["conditions"]
                if c["type"] == "Failed")
    assert cond["status"] == "True"
    assert_names(case, cond["message"])
    sel = "jointinferenceservice.sedna.io/name"
    assert sedna.list(DEPLOYMENTS, "default", f"{sel}={bad_name}") == []  # nothing half-created
    assert sedna.list(HPAS, "default", f"{sel}={bad_name}") == []
    assert len(sedna.list(DEPLOYMENTS, "default", f"{sel}=good-ji")) == 2
    assert len(sedna.list(HPAS, "default", f"{sel}=good-ji")) == 1


# ---- the plugin's API ------------------------------------------------------------------------------------
@pytest.fixture
def plugin_api(kubesim, kubeconfig, monkeypatch):
    from fastapi.testclient import TestClient

    from operators.auth import Caller, current_user
    from operators.ui.app import create_app

    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT",
                       f'{{"conn_type": "kubernetes", "extra": {{"kube_config_path": "{kubeconfig}"}}}}')
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(EXAMPLE_PATH))
    app = create_app()
    app.dependency_overrides[current_user] = lambda: Caller("alice", "token", False, None)
    kubesim.reset_stats()
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("case", by_entry("ui"))
def test_plugin_api_body(case: Case, plugin_api, kubesim):
    if "raw" in case.args:
        r = plugin_api.post("/api/instances", content=case.args["raw"],
                            headers={"content-type": "application/json"})
    else:
        body = {"name": "nb", "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": 2}
        body = case.args["json"] if not isinstance(case.args["json"], dict) else {**body, **case.args["json"]}
        r = plugin_api.post("/api/instances", json=body)
    assert r.status_code == 400, (case.id, r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert "Traceback" not in detail
    assert_names(case, detail)
    writes = {k: v for k, v in kubesim.stats()["by_resource"].items() if k.split()[0] in WRITES}
    assert writes == {}, writes


def test_the_doc_lists_every_case():
    """docs/hostile-inputs.md carries the table generated from CASES: a case added, removed or changed without
    regenerating the doc fails here."""
    from tests.support.hostile.hostile_cases import DOC, markdown_table

    assert markdown_table() in DOC.read_text()
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 40


def test_a_new_instance_password_is_masked_by_airflows_secrets_masker():
    """Defence in depth behind the leak search of tests/*/devinstances/: a password Skiff generates is registered
    with Airflow's secrets masker, so any log line or rendered value that would carry it shows ``***``."""
    from airflow.sdk._shared.secrets_masker import redact

    from operators.devinstances.lifecycle import PASSWORD_BYTES, new_password

    password = new_password()
    assert PASSWORD_BYTES * 8 >= 128 and len(password) >= 32
    line = f"ApiException 422: Secret body {{'stringData': {{'password': '{password}'}}}}"
    assert password not in redact(line) and "***" in redact(line)


def test_jinja_in_a_run_time_value_is_not_rendered_again():
    """A user's text that looks like a template (a DAG run param, a form value) reaches a templated field as
    data: Airflow renders the DAG author's template once and never re-renders the values it substitutes."""
    op = training_operator(run_args=["{{ params.x }}", "--n"])
    hostile = "{{ conn.kubernetes_default.password }}{% raw %}{{ 7*7 }}"
    assert op.render_template(op.run_args, {"params": {"x": hostile}}) == [hostile, "--n"]


# ---- stop/start/delete with a hostile team or name: bob against alice's instance, on kubesim -----------------
LISTED = [("v1", "namespaces"), ("v1", "secrets"), ("v1", "services"), ("v1", "configmaps"), ("v1", "pods"),
          ("v1", "persistentvolumeclaims"), ("apps/v1", "statefulsets")]


def cluster_listing(kube) -> dict:
    """Every object Skiff could touch, by (resource, namespace, name) -> (uid, resourceVersion): the before/after
    listing that shows a refused action changed nothing anywhere."""
    from operators.k8s.resource import Resource

    return {(plural, o["metadata"].get("namespace"), o["metadata"]["name"]):
            (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for gv, plural in LISTED for o in kube.list(Resource(gv, plural))}


@pytest.fixture
def alices_instances(kubesim, k8s, kubeconfig, monkeypatch):
    from kubernetes import client

    from kubesim.testing import wait_until
    from operators.devinstances import lifecycle
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.k8s import Kube
    from operators.platform import ENV_PLATFORM_FILE, example_path

    monkeypatch.setenv(ENV_PLATFORM_FILE, str(example_path()))
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT",
                       f'{{"conn_type": "kubernetes", "extra": {{"kube_config_path": "{kubeconfig}"}}}}')
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "recsys"}})
    for claim in ("alice-home", "bob-home", "recsys-datasets"):
        core.create_namespaced_persistent_volume_claim("recsys", {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    platform, kube = parse_platform(EXAMPLE), Kube(k8s)
    for name in ("nb", "x-nb"):
        params = {"name": name, "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": 2}
        lifecycle.create(kube, request_from_params(platform, "alice", params), Settings.from_config())
    apps = client.AppsV1Api(k8s)
    wait_until(lambda: all((s.status.ready_replicas or 0) == 1 for s in apps.list_namespaced_stateful_set(
        "recsys").items), what="alice's instances ready")
    return kube


@pytest.mark.parametrize("case", by_entry("action"))
def test_instance_action_param(case: Case, alices_instances, kubesim):
    from types import SimpleNamespace

    from operators.devinstances.operator import DevInstanceOperator

    kube = alices_instances
    before = cluster_listing(kube)
    args = case.args
    op = DevInstanceOperator(task_id=args["action"], action=args["action"])
    context = {"params": {"name": args.get("name", "nb"), "team": args["team"], "owner": None},
               "dag_run": SimpleNamespace(triggering_user_name=args.get("user", "bob"))}
    kubesim.reset_stats()
    if case.expect == "rejected":
        from airflow.sdk.exceptions import AirflowFailException

        # a refusal by rule fails the task at once, without retries (AirflowFailException, issue 19)
        with pytest.raises((ValueError, AirflowFailException)) as info:
            op.execute(context)
        assert_names(case, str(info.value))
        assert kubesim.stats()["total"] == 0, kubesim.stats()["by_resource"]  # refused before any request
    else:
        result = op.execute(context)
        assert result["state"] == "Deleted" and "nothing to do" in result["message"], result
    assert cluster_listing(kube) == before


# ---- an unconfigured install: no [skiff] platform_file ---------------------------------------------------------
def test_without_the_setting_nothing_is_read_applied_or_invented(kubesim, k8s, kubeconfig, monkeypatch):
    """``platform_sync`` (unpaused by default) once read the packaged example when ``[skiff] platform_file`` was
    unset: it created the example's teams and made its users admins. Now the platform DAGs fail saying how to
    set it, dev-instance actions are refused, and nothing is written (before/after listing)."""
    from types import SimpleNamespace

    from operators.devinstances.operator import DevInstanceOperator, team_namespace_and_admins
    from operators.k8s import Kube
    from operators.platform import load_platform
    from operators.platform.admission import enforced_platform
    from operators.platform.dags import platform_asset, run_platform_sync

    monkeypatch.delenv("AIRFLOW__SKIFF__PLATFORM_FILE", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT",
                       f'{{"conn_type": "kubernetes", "extra": {{"kube_config_path": "{kubeconfig}"}}}}')
    kube = Kube(k8s)
    before = cluster_listing(kube)
    kubesim.reset_stats()
    how = "AIRFLOW__SKIFF__PLATFORM_FILE"
    for call in (load_platform, run_platform_sync, lambda: team_namespace_and_admins("recsys", "root"),
                 lambda: DevInstanceOperator(task_id="create", action="create").execute({
                     "params": {"name": "nb", "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": 2},
                     "dag_run": SimpleNamespace(triggering_user_name="alice")})):
        with pytest.raises(PlatformError) as info:
            call()
        assert "[skiff] platform_file is not set" in str(info.value) and how in str(info.value)
    assert enforced_platform() is None  # training: no teams invented, nothing enforced from the example
    assert platform_asset().watchers == []  # the DAG file still parses; there is no file to watch
    assert kubesim.stats()["total"] == 0
    assert cluster_listing(kube) == before
