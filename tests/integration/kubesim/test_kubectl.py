"""Real kubectl against kubesim, as a user would run it against a cluster: Debian's kubectl (package
kubernetes-client 1.20, unpacked by `make kubectl` into .tools/) always, and any other kubectl on PATH too
(e.g. a 1.32 one), each test once per binary.

What each kubectl needs from the server, and where kubesim does it: OpenAPI v2 protobuf for 1.20's client-side
validation and `explain` (routes_openapi.py), OpenAPI v3 with `fieldValidation` for 1.32's server-side strict
validation and `explain` (field_validation.py), Tables for `get` (printers.py), access reviews for
`auth can-i` (access_review.py), node Leases for `describe node` (kubelet/heartbeats.py).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kubesim import KubeSim
from kubesim.testing import wait_until

REPO = Path(__file__).resolve().parents[3]
DEBIAN_KUBECTL = REPO / ".tools" / "kubernetes-client" / "usr" / "bin" / "kubectl"
FL_CRD = REPO / "k8s_templates" / "sedna" / "crds" / "sedna.io_federatedlearningjobs.yaml"
MEMBER_TOKEN = "alice-token"


def _version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=60).stdout
        return json.loads(out)["clientVersion"]["gitVersion"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return ""


def _binaries() -> list:
    """Debian's kubectl (skipped, saying how to get it, when absent), then any other kubectl on PATH."""
    params = [pytest.param(str(DEBIAN_KUBECTL), id="debian-kubectl", marks=pytest.mark.skipif(
        not DEBIAN_KUBECTL.is_file(), reason=f"Debian's kubectl is not unpacked at {DEBIAN_KUBECTL}: run `make kubectl`"))]
    other = shutil.which("kubectl")
    version = _version(other) if other else ""
    params.append(pytest.param(other or "kubectl", id="path-kubectl", marks=pytest.mark.skipif(
        not version, reason="no other kubectl on PATH (a newer one is also tested when present)")))
    return params


@pytest.fixture(params=_binaries(), scope="module")
def kubectl_bin(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """kubesim with RBAC on, over HTTPS (kubectl sends a token only over TLS): the admin's kubeconfig and a team
    member's (alice, in group team-members)."""
    sim = KubeSim(authz="rbac", tls=True).start()
    tmp = tmp_path_factory.mktemp("kubectl")
    sim.access.add_user_token(MEMBER_TOKEN, "alice", ("team-members",))
    yield sim, sim.write_kubeconfig(tmp / "admin"), sim.write_kubeconfig(tmp / "alice", token=MEMBER_TOKEN,
                                                                         user="alice", namespace="team")
    sim.stop()


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path, home: Path):
        self.binary, self.kubeconfig, self.home = binary, kubeconfig, home

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}  # its own discovery cache
        proc = subprocess.run([self.binary, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr or proc.stdout}"
        return proc


@pytest.fixture
def admin(cluster, kubectl_bin, tmp_path) -> Kubectl:
    sim, admin_kc, _ = cluster
    sim.reset()
    return Kubectl(kubectl_bin, admin_kc, tmp_path)


def headers(out: str) -> list[str]:
    return re.split(r"\s{2,}", out.splitlines()[0].strip())


def rows(out: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()[1:] if line.strip()]


JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: %(name)s}
spec:
  template:
    metadata: {annotations: {kubesim.io/duration: "0.2"}}
    spec:
      restartPolicy: Never
      containers: [{name: train, image: busybox, %(field)s: IfNotPresent}]
"""

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
"""

STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
"""


def test_apply_validates_and_refuses_a_misspelt_field(admin):
    """Debian's 1.20 validates against /openapi/v2 before sending; 1.32 asks the server (fieldValidation=Strict):
    either way the misspelt `imagePulPolicy` is refused naming it, and nothing is created."""
    bad = admin("apply", "-f", "-", stdin=JOB % {"name": "typo", "field": "imagePulPolicy"}, check=False)
    assert bad.returncode != 0
    assert 'unknown field "imagePulPolicy"' in bad.stderr or \
        'unknown field "spec.template.spec.containers[0].imagePulPolicy"' in bad.stderr, bad.stderr
    assert "NotFound" in admin("get", "job", "typo", check=False).stderr
    assert admin("apply", "-f", "-", stdin=JOB % {"name": "ok", "field": "imagePullPolicy"}).stdout.strip() == \
        "job.batch/ok created"


def test_get_prints_the_servers_columns(admin, cluster):
    """kube-apiserver's columns (pkg/printers/internalversion/printers.go), cells included."""
    admin("apply", "-f", "-", stdin=JOB % {"name": "train", "field": "imagePullPolicy"})
    admin("apply", "-f", "-", stdin=DEPLOYMENT)
    admin("apply", "-f", "-", stdin=STATEFULSET)
    admin("apply", "-f", str(FL_CRD))
    admin("apply", "-f", "-", stdin="apiVersion: sedna.io/v1alpha1\nkind: FederatedLearningJob\n"
                                    "metadata: {name: fl}\nspec: {aggregationWorker: {model: {name: m}, "
                                    "template: {spec: {containers: [{name: a, image: x}]}}}, trainingWorkers: []}\n")
    wait_until(lambda: rows(admin("get", "jobs").stdout)[0][1] == "Complete", 30, what="the Job to complete")
    assert headers(admin("get", "jobs").stdout) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert rows(admin("get", "jobs").stdout)[0][:3] == ["train", "Complete", "1/1"]
    pods = admin("get", "pods", "-l", "job-name=train").stdout
    assert headers(pods) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows(pods)[0][1:4] == ["0/1", "Completed", "0"]
    nodes = admin("get", "nodes").stdout
    assert headers(nodes) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert {r[1] for r in rows(nodes)} == {"Ready"} and {r[4] for r in rows(nodes)} == {"v1.31.0"}
    wide = admin("get", "nodes", "-o", "wide").stdout
    assert headers(wide)[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    wait_until(lambda: rows(admin("get", "deployments").stdout)[0][1] == "2/2", 30, what="web ready")
    assert headers(admin("get", "deployments").stdout) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert rows(admin("get", "deployments").stdout)[0][:4] == ["web", "2/2", "2", "2"]
    assert headers(admin("get", "statefulsets").stdout) == ["NAME", "READY", "AGE"]
    # Sedna's CRDs declare no additionalPrinterColumns: the server's default for a CRD is Age
    assert headers(admin("get", "federatedlearningjobs").stdout) == ["NAME", "AGE"]
    assert rows(admin("get", "fl").stdout)[0][0] == "fl"


def test_get_prints_a_crds_additional_printer_columns(admin):
    crd = yaml.safe_load(FL_CRD.read_text())
    crd["metadata"]["name"] = "widgets.example.com"
    crd["spec"].update(group="example.com", names={"kind": "Widget", "listKind": "WidgetList", "plural": "widgets",
                                                   "singular": "widget"})
    version = crd["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"] = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}
    version["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    version.pop("subresources", None)
    admin("apply", "-f", "-", stdin=json.dumps(crd))
    wait_until(lambda: admin("get", "widgets", check=False).returncode == 0, 30, what="the Widget kind served")
    admin("apply", "-f", "-", stdin="apiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w}\n"
                                    "spec: {size: 3, color: red}\n")
    out = admin("get", "widgets").stdout
    assert headers(out) == ["NAME", "SIZE", "AGE"] and rows(out)[0][:2] == ["w", "3"]
    assert headers(admin("get", "widgets", "-o", "wide").stdout) == ["NAME", "SIZE", "COLOR", "AGE"]


def test_get_endpointslices_prints_the_servers_columns(admin):
    """`kubectl get endpointslices -A` (the resource is served, workloads/endpointslice.py) with printers.go's
    EndpointSlice columns: the `kubernetes` slice, a Service's slice with its pods' addresses, `<unset>` for a
    Service selecting nothing yet; `describe service` (kubectl >= 1.30 reads the slices) lists the endpoint."""
    admin("apply", "-f", "-", stdin=DEPLOYMENT)
    admin("expose", "deployment", "web", "--port=8080", "--target-port=80")
    admin("create", "service", "clusterip", "idle", "--tcp=80:80")

    def by_name():
        return {r[1].rsplit("-", 1)[0] if r[1] != "kubernetes" else r[1]: r
                for r in rows(admin("get", "endpointslices", "-A").stdout)}
    wait_until(lambda: len(by_name().get("web", [""] * 5)[4].split(",")) == 2, 30, what="two web endpoints")
    out = admin("get", "endpointslices", "-A").stdout
    assert headers(out) == ["NAMESPACE", "NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    got = by_name()
    assert got["kubernetes"][:5] == ["default", "kubernetes", "IPv4", "6443", "127.0.0.1"]
    assert got["web"][2:4] == ["IPv4", "80"] and all(re.fullmatch(r"10\.\d+\.\d+\.\d+", a)
                                                     for a in got["web"][4].split(","))
    assert got["idle"][2:5] == ["IPv4", "<unset>", "<unset>"]
    ips = set(got["web"][4].split(","))
    described = admin("describe", "service", "web").stdout
    endpoints = re.search(r"Endpoints:\s+(\S+)", described).group(1)
    assert {e.rsplit(":", 1)[0] for e in endpoints.split(",")} == ips


def test_get_pvc_pv_and_quota_print_the_servers_columns(admin):
    """A claim bound to the volume provisioned for it (`kubectl get pvc` shows VOLUME and CAPACITY, `get pv` its
    CLAIM), and a quota's REQUEST/LIMIT (printers.go printPersistentVolumeClaim, printPersistentVolume,
    printResourceQuota); the claim's deletion takes its volume (policy Delete)."""
    admin("apply", "-f", "-", stdin="apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: home}\n"
                                    "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}\n")
    admin("create", "quota", "q", "--hard=requests.cpu=4,limits.memory=8Gi,pods=10")
    wait_until(lambda: rows(admin("get", "pvc").stdout)[0][1] == "Bound", 30, what="the claim bound")
    pvc = admin("get", "pvc").stdout
    assert headers(pvc)[:6] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS"]
    volume = rows(pvc)[0][2]
    assert re.fullmatch(r"pvc-[0-9a-f-]{36}", volume) and rows(pvc)[0][3:5] == ["5Gi", "RWO"], rows(pvc)
    pv = admin("get", "pv").stdout
    assert headers(pv)[:6] == ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM"]
    assert rows(pv)[0][:6] == [volume, "5Gi", "RWO", "Delete", "Bound", "default/home"], rows(pv)
    wait_until(lambda: "requests.cpu: 0/4" in admin("get", "quota", "q").stdout, 30, what="the quota's status")
    quota = admin("get", "quota", "q").stdout
    assert headers(quota) == ["NAME", "AGE", "REQUEST", "LIMIT"], quota
    assert quota.splitlines()[1].split(None, 2)[2].split("  ")[0] == "pods: 0/10, requests.cpu: 0/4", quota
    assert quota.rstrip().endswith("limits.memory: 0/8Gi"), quota
    admin("delete", "pvc", "home")
    wait_until(lambda: not rows(admin("get", "pv").stdout), 30, what="the volume deleted with its claim")


def test_get_rolebindings_prints_the_role_and_wide_the_subjects(admin):
    """printers.go printRoleBinding / printClusterRoleBinding: ROLE as Kind/name; -o wide adds the subjects as
    rbac's SubjectsStrings splits them (service accounts as namespace/name)."""
    # applied, not `kubectl create rolebinding`: kubectl >= 1.32 sends that one as protobuf, which kubesim refuses
    # with 415 (tests/integration/kubesim/test_api_crud.py); kube-apiserver reads it
    admin("apply", "-f", "-", stdin="apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n"
                                    "metadata: {name: rb}\nroleRef: {apiGroup: rbac.authorization.k8s.io, "
                                    "kind: ClusterRole, name: view}\nsubjects:\n"
                                    "- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}\n"
                                    "- {kind: Group, name: team-members, apiGroup: rbac.authorization.k8s.io}\n"
                                    "- {kind: ServiceAccount, name: skiff, namespace: default}\n")
    out = admin("get", "rolebindings", "rb").stdout
    assert headers(out) == ["NAME", "ROLE", "AGE"] and rows(out)[0][:2] == ["rb", "ClusterRole/view"], out
    wide = admin("get", "rolebindings", "rb", "-o", "wide").stdout
    assert headers(wide) == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], wide
    assert rows(wide)[0][3:] == ["alice", "team-members", "default/skiff"], wide
    admin("apply", "-f", "-", stdin="apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
                                    "metadata: {name: crb}\nroleRef: {apiGroup: rbac.authorization.k8s.io, "
                                    "kind: ClusterRole, name: edit}\n"
                                    "subjects: [{kind: ServiceAccount, name: bot, namespace: team}]\n")
    crb = admin("get", "clusterrolebindings", "crb", "-o", "wide").stdout
    assert headers(crb) == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], crb
    assert rows(crb)[0][1] == "ClusterRole/edit" and rows(crb)[0][-1] == "team/bot", crb


def test_get_hpa_prints_the_servers_columns(admin):
    """printHorizontalPodAutoscaler's columns, of an HPA defaulted as kube-apiserver does (autoscaling/v2
    defaults.go: minReplicas 1, a CPU metric at 80% utilization when none is given)."""
    admin("apply", "-f", "-", stdin="apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n"
                                    "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
                                    "  maxReplicas: 3\n")
    out = admin("get", "hpa").stdout
    assert headers(out) == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"], out
    assert rows(out)[0][:5] == ["h", "Deployment/web", "cpu: <unknown>/80%", "1", "3"], out   # minReplicas defaulted


def test_statefulset_rollout_history_and_undo(admin):
    """`kubectl rollout history/undo statefulset` read the set's ControllerRevisions (apps/v1, served; one per
    template, workloads/statefulset.py as stateful_set_control.go): two revisions after an image change; undo
    brings the first template back under revision 3, and the pods run the old image again."""
    admin("apply", "-f", "-", stdin=STATEFULSET)
    admin("rollout", "status", "statefulset/db", "--timeout=60s")
    admin("set", "image", "statefulset/db", "db=postgres:16")
    wait_until(lambda: [r[0] for r in rows(admin("rollout", "history", "statefulset/db").stdout)[1:]] == ["1", "2"],
               30, what="two revisions")
    first = admin("rollout", "history", "statefulset/db", "--revision=1").stdout
    assert re.search(r"Image:\s+postgres\s*$", first, re.M), first
    out = admin("get", "controllerrevisions").stdout
    assert headers(out) == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert {(r[1], r[2]) for r in rows(out)} == {("statefulset.apps/db", "1"), ("statefulset.apps/db", "2")}
    assert "rolled back" in admin("rollout", "undo", "statefulset/db").stdout
    wait_until(lambda: [r[0] for r in rows(admin("rollout", "history", "statefulset/db").stdout)[1:]] == ["2", "3"],
               30, what="the first revision renumbered 3")
    wait_until(lambda: admin("get", "pod", "db-0", "-o", "jsonpath={.spec.containers[0].image}",
                             check=False).stdout == "postgres", 30, what="db-0 back on the old image")


def test_explain_reads_the_schema(admin):
    out = admin("explain", "jobs.spec.backoffLimit").stdout
    assert "backoffLimit" in out and "<integer>" in out
    assert "Specifies the number of retries before marking this job failed" in out


def test_auth_can_i_answers_from_rbac(admin, cluster, tmp_path):
    sim, _admin_kc, alice_kc = cluster
    admin("create", "namespace", "team")
    # a team's member role (as Skiff's): the team's workloads and its own RBAC, nothing cluster-wide
    admin("create", "role", "member", "-n", "team", "--verb=*", "--resource=pods,jobs.batch,deployments.apps,"
          "roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io")
    admin("create", "rolebinding", "members", "-n", "team", "--role=member", "--group=team-members")
    alice = Kubectl(admin.binary, alice_kc, tmp_path)
    assert alice("auth", "can-i", "create", "pods", "-n", "team").stdout.strip() == "yes"
    assert alice("auth", "can-i", "create", "roles", "-n", "team").stdout.strip() == "yes"
    denied = alice("auth", "can-i", "create", "clusterroles", check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    assert alice("auth", "can-i", "list", "pods", "-n", "default", check=False).stdout.strip() == "no"
    assert admin("auth", "can-i", "create", "clusterroles").stdout.strip() == "yes"


def _minor(binary: str) -> int:
    m = re.match(r"v1\.(\d+)", _version(binary))
    return int(m.group(1)) if m else 0


def test_api_resources_lists_the_review_kinds_and_whoami_answers(admin, cluster, tmp_path):
    """`kubectl api-resources` reads discovery: the authorization.k8s.io and authentication.k8s.io review
    kinds are there (create-only, so `--verbs=list` leaves them out); `kubectl auth whoami` (kubectl >= 1.28)
    posts a SelfSubjectReview."""
    out = admin("api-resources", "--api-group=authorization.k8s.io").stdout
    assert {r[0]: r[-2:] for r in rows(out)} == {
        "localsubjectaccessreviews": ["true", "LocalSubjectAccessReview"],
        "selfsubjectaccessreviews": ["false", "SelfSubjectAccessReview"],
        "selfsubjectrulesreviews": ["false", "SelfSubjectRulesReview"],
        "subjectaccessreviews": ["false", "SubjectAccessReview"]}
    assert {r[0] for r in rows(admin("api-resources", "--api-group=authentication.k8s.io").stdout)} == {
        "selfsubjectreviews", "tokenreviews"}
    assert "selfsubjectaccessreviews" not in admin("api-resources", "--verbs=list").stdout
    if _minor(admin.binary) < 28:
        return                      # no `auth whoami` before 1.28
    alice = Kubectl(admin.binary, cluster[2], tmp_path)
    out = alice("auth", "whoami").stdout
    assert re.search(r"Username\s+alice\b", out) and "team-members" in out, out


def test_describe_node_shows_its_lease_and_heartbeats(admin):
    node = rows(admin("get", "nodes").stdout)[0][0]
    out = admin("describe", "node", node).stdout
    assert "Failed to get lease" not in out
    assert re.search(rf"HolderIdentity:\s+{node}\b", out), out
    renew = re.search(r"RenewTime:\s+(.+)", out).group(1)
    assert "<unset>" not in renew and " 0001 " not in renew
    ready = next(line for line in out.splitlines() if line.strip().startswith("Ready "))
    assert "0001" not in ready and "KubeletReady" in ready    # heartbeat and transition times are set


def test_rollout_status_then_delete_cascades(admin):
    admin("apply", "-f", "-", stdin=DEPLOYMENT)
    out = admin("rollout", "status", "deployment/web", "--timeout=60s").stdout
    assert 'deployment "web" successfully rolled out' in out
    assert len(rows(admin("get", "replicasets", "-l", "app=web").stdout)) == 1
    assert "deleted" in admin("delete", "deployment", "web").stdout
    # the garbage collector deletes the ReplicaSet and then its pods (cascade=background, kubectl's default)
    wait_until(lambda: "No resources found" in admin("get", "replicasets,pods", "-l", "app=web").stderr, 30,
               what="the ReplicaSet and pods gone")


def test_pod_security_refusal_and_warning(admin):
    """PodSecurity (podsecurity.py) as kubectl shows it: the warn level's text after `Warning:` on stderr, the
    enforce level's refusal as the server's Forbidden message."""
    admin("create", "namespace", "psa")
    admin("label", "namespace", "psa", "pod-security.kubernetes.io/enforce=baseline",
          "pod-security.kubernetes.io/warn=restricted")
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: psa}\nspec:\n  containers: [{name: c, image: busybox%s}]\n"
    ok = admin("apply", "-f", "-", stdin=pod % ("plain", ""))
    assert 'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false' in ok.stderr
    bad = admin("apply", "-f", "-", stdin=pod % ("priv", ", securityContext: {privileged: true}"), check=False)
    assert bad.returncode != 0
    assert ('pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must '
            'not set securityContext.privileged=true)') in bad.stderr, bad.stderr
