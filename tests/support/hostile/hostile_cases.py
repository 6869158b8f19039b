"""The hostile-input catalogue as data: one row per case, shared by the test and by docs/hostile-inputs.md.

``expect`` is either ``"rejected"`` (the entry point refuses the input before anything is written, with a
message naming ``field`` and containing ``value`` as written) or ``"accepted"`` (the input is legal and is
carried safely: verbatim, quoted, never half-applied). ``value`` is the text the message must contain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MB = "x" * 1_000_000
FIVE_MB = "y" * 5_000_000
# "billion laughs": nine levels of nine aliases, 300 bytes that would expand to 9**9 strings
LAUGHS = "version: 1\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)) + "teams: []\n"
ARG_128K = "a" * (128 * 1024)


@dataclass(frozen=True)
class Case:
    id: str
    entry: str  # training | devinstance | platform | sedna | ui
    what: str  # one line for the docs table
    args: dict[str, Any] = field(default_factory=dict)
    expect: str = "rejected"
    field: str = ""
    value: str = ""  # a substring the message must carry (the offending value, as repr shows it)


T, D, P, S, U = "training", "devinstance", "platform", "sedna", "ui"
A = "action"  # dev_instance_stop/start/delete by bob against alice's running instance, on kubesim

CASES: list[Case] = [
    # ---- TrainingJobOperator arguments (validated when the DAG is parsed: no cluster, nothing written) ----
    Case("train-cpu-submilli", T, "cpu '0.0001m' rounds to zero millicores", {"cpu": "0.0001m"}, field="cpu",
         value="0.0001m"),
    Case("train-cpu-float-tiny", T, "cpu 1e-7 (a float that prints as 0)", {"cpu": 1e-7}, field="cpu", value="1e-07"),
    Case("train-cpu-negative", T, "cpu -1", {"cpu": -1}, field="cpu", value="-1"),
    Case("train-cpu-1e309", T, "cpu 1e309 (float infinity)", {"cpu": 1e309}, field="cpu", value="inf"),
    Case("train-cpu-nan", T, "cpu 'nan'", {"cpu": "nan"}, field="cpu", value="nan"),
    Case("train-cpu-9999Ei", T, "cpu '9999Ei' (beyond any Kubernetes quantity)", {"cpu": "9999Ei"}, field="cpu",
         value="9999Ei"),
    Case("train-cpu-newline", T, "cpu '500m\\n' (trailing newline)", {"cpu": "500m\n"}, expect="accepted"),
    Case("train-memory-tiny", T, "memory 1e-9 GiB (rounds to zero bytes)", {"memory": 1e-9}, field="memory",
         value="1e-09"),
    Case("train-memory-inf", T, "memory 'inf'", {"memory": "inf"}, field="memory", value="inf"),
    Case("train-memory-9999Ei", T, "memory 1e30 GiB (beyond 2^63 bytes)", {"memory": 1e30}, field="memory",
         value="1e+30"),
    Case("train-gpu-half", T, "gpu 0.5", {"gpu": 0.5}, field="gpu", value="0.5"),
    Case("train-namespace-unicode", T, "namespace 'équipe' (unicode)", {"namespace": "équipe"},
         field="namespace", value="équipe"),
    Case("train-namespace-long", T, "namespace of 64 characters", {"namespace": "n" * 64}, field="namespace",
         value="nnnn"),
    Case("train-namespace-newline", T, "namespace 'team\\n' through a `$` anchor", {"namespace": "team\n"},
         field="namespace", value="'team\\n'"),
    Case("train-pvc-newline", T, "pvc 'data\\n'", {"pvc": "data\n"}, field="pvc", value="'data\\n'"),
    Case("train-pool-newline", T, "online_pool_value 'online\\n'", {"online_pool_value": "online\n"},
         field="online_pool_value", value="'online\\n'"),
    Case("train-pool-key-newline", T, "online_pool_key 'pool\\n'", {"online_pool_key": "pool\n"},
         field="online_pool_key", value="'pool\\n'"),
    Case("train-env-dash", T, "env name 'MY-VAR' (not a C identifier)", {"env": {"MY-VAR": "1"}}, field="env",
         value="MY-VAR"),
    Case("train-env-digit", T, "env name '1ST'", {"env": {"1ST": "1"}}, field="env", value="1ST"),
    Case("train-env-newline", T, "env name 'PATH\\n'", {"env": {"PATH\n": "x"}}, field="env", value="'PATH\\n'"),
    Case("train-env-value-shell", T, "env value '$(reboot); `id`\\n'", {"env": {"X": "$(reboot); `id`\n"}},
         expect="accepted"),
    Case("train-args-shell", T, "run_args with ; | & $() ` and newlines", {"run_args": ["; rm -rf /", "a|b&c",
         "$(id)", "`id`", "line1\nline2"]}, expect="accepted"),
    Case("train-args-10000", T, "run_args of 10,000 elements", {"run_args": [f"--a{i}" for i in range(10_000)]},
         expect="accepted"),
    Case("train-arg-128k", T, "one run_args element of 128 KiB (kernel MAX_ARG_STRLEN)", {"run_args": [ARG_128K]},
         field="run_args[0]", value="131072"),
    Case("train-arg-1mb", T, "a 1 MB entry_path", {"entry_path": MB}, field="entry_path", value="1000000"),
    Case("train-argv-total", T, "20 arguments of 100 KiB (argv over 1 MiB)", {"run_args": ["b" * 100_000] * 20},
         field="run_args", value="2000"),
    Case("train-env-1mb", T, "an env value of 1 MB", {"env": {"BIG": MB}}, field="env[BIG]", value="1000000"),
    Case("train-workdir-shell", T, "work_dir '/root/$(id);x'", {"work_dir": "/root/$(id);x"}, expect="accepted"),
    Case("train-exec-unbalanced", T, "exec_command 'python \"-u' (unbalanced quote)", {"exec_command": 'python "-u'},
         field="exec_command", value="python"),
    Case("train-image-newline", T, "image 'repo/img:1\\n'", {"image": "repo/img:1\n"}, field="image",
         value="'repo/img:1\\n'"),
    Case("train-mount-double-slash", T, "volume mounted at '//root' (the home mount, not normalised)",
         {"volumes": [{"pvc": "data", "mount_path": "//root"}]}, field="volumes[0].mount_path", value="//root"),
    Case("train-mount-dot", T, "volume mounted at '/root/.'", {"volumes": [{"pvc": "data", "mount_path": "/root/."}]},
         field="volumes[0].mount_path", value="/root/."),
    Case("train-mount-dotdot", T, "volume mounted at '/data/../root'",
         {"volumes": [{"pvc": "data", "mount_path": "/data/../root"}]}, field="volumes[0].mount_path",
         value="/data/../root"),
    Case("train-mount-duplicate", T, "two volumes at '/data' and '/data/'",
         {"volumes": [{"pvc": "a", "mount_path": "/data"}, {"pvc": "b", "mount_path": "/data/"}]},
         field="volumes[1].mount_path", value="/data/"),
    Case("train-timeout-inf", T, "pod_discovery_timeout = inf (waits forever)",
         {"pod_discovery_timeout": float("inf")}, field="pod_discovery_timeout", value="inf"),
    Case("train-quota-wait-nan", T, "quota_wait = nan", {"quota_wait": float("nan")}, field="quota_wait",
         value="nan"),
    Case("train-label-newline", T, "a label value 'x\\n'", {"labels": {"team": "x\n"}}, field="labels",
         value="'x\\n'"),
    Case("train-volume-unknown-key", T, "a volume dict with an unknown key (was a raw TypeError)",
         {"volumes": [{"pvc": "data", "mount_path": "/data", "mode": "rw"}]}, field="volumes[0]", value="mode"),
    Case("train-volume-no-path", T, "a volume dict without mount_path (was a raw TypeError)",
         {"volumes": [{"pvc": "data"}]}, field="volumes[0]", value="data"),
    Case("train-labels-string", T, "labels given as a string (was a raw AttributeError)", {"labels": "team=x"},
         field="labels", value="team=x"),
    Case("train-gpu-huge", T, "gpu 10**30 (beyond int64)", {"gpu": 10**30}, field="gpu", value="1000000000"),
    Case("train-entry-dotdot", T, "entry_path '../../etc/passwd'", {"entry_path": "../../etc/passwd"},
         field="entry_path", value="../../etc/passwd"),
    Case("train-entry-absolute", T, "entry_path '/opt/x.py' (would silently become /root//opt/x.py)",
         {"entry_path": "/opt/x.py"}, field="entry_path", value="/opt/x.py"),
    Case("train-ttl-inf", T, "ttl_seconds_after_finished = inf", {"ttl_seconds_after_finished": float("inf")},
         field="ttl_seconds_after_finished", value="inf"),
    Case("train-ttl-negative", T, "ttl_seconds_after_finished = -5", {"ttl_seconds_after_finished": -5},
         field="ttl_seconds_after_finished", value="-5"),
    Case("train-label-kueue-queue", T, "label 'kueue.x-k8s.io/queue-name' (a queue of the user's choosing; under "
         "`queueing: quota` a Job left suspended)", {"labels": {"kueue.x-k8s.io/queue-name": "skiff"}},
         field="labels", value="kueue.x-k8s.io/queue-name"),
    Case("train-annotation-kueue-prebuilt", T, "pod annotation 'kueue.x-k8s.io/prebuilt-workload-name'",
         {"pod_annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "other"}}, field="pod_annotations",
         value="prebuilt-workload-name"),
    Case("train-label-kueue-subdomain", T, "label 'x.kueue.x-k8s.io/y' (a subdomain of Kueue's)",
         {"labels": {"x.kueue.x-k8s.io/y": "z"}}, field="labels", value="x.kueue.x-k8s.io/y"),
    # ---- development-instance parameters (the create DAG's params form; same checks as the UI) ----
    Case("dev-port-0", D, "extra port 0", {"extra_ports": [0]}, field="extra_ports[0]", value="0"),
    Case("dev-port-65536", D, "extra port 65536", {"extra_ports": [65536]}, field="extra_ports[0]", value="65536"),
    Case("dev-port-string", D, "extra port '8080; id'", {"extra_ports": ["8080; id"]}, field="extra_ports[0]",
         value="8080; id"),
    Case("dev-port-duplicate", D, "extra ports [5000, 5000]", {"extra_ports": [5000, 5000]}, field="extra_ports[1]",
         value="5000"),
    Case("dev-name-unicode", D, "name 'ноутбук'", {"name": "ноутбук"}, field="name", value="ноутбук"),
    Case("dev-name-long", D, "name of 60 characters (StatefulSet name over 52)", {"name": "n" * 60}, field="name",
         value="nnnn"),
    Case("dev-name-newline", D, "name 'nb\\n'", {"name": "nb\n"}, field="name", value="'nb\\n'"),
    Case("dev-cpu-submilli", D, "cpu '0.0001m'", {"cpu": "0.0001m"}, field="cpu", value="0.0001m"),
    Case("dev-memory-nan", D, "memory 'nan'", {"memory": "nan"}, field="memory", value="nan"),
    Case("dev-mount-double-slash", D, "mount at '//root' over the home volume",
         {"mounts": [{"pvc": "recsys-datasets", "path": "//root"}]}, field="mounts[0].path", value="//root"),
    Case("dev-mount-dotdot", D, "mount at '/data/../root'",
         {"mounts": [{"pvc": "recsys-datasets", "path": "/data/../root"}]}, field="mounts[0].path",
         value="/data/../root"),
    Case("dev-mount-duplicate", D, "the same path twice ('/data', '/data/.')",
         {"mounts": [{"pvc": "recsys-datasets", "path": "/data"}, {"pvc": "recsys-datasets", "path": "/data/."}]},
         field="mounts[1].path", value="/data/."),
    Case("dev-mount-other-pvc", D, "mount of another user's home PVC", {"mounts": [{"pvc": "bob-home",
         "path": "/bob"}]}, field="mounts[0].pvc", value="bob-home"),
    Case("dev-team-traversal", D, "team '../kube-system'", {"team": "../kube-system"}, field="team",
         value="../kube-system"),
    # ---- stop/start/delete: a user value that would become part of an API path (bob acting, alice's instance) ----
    Case("act-delete-team-path", A, "delete with team 'recsys/secrets/alice--nb-password' (reaches her Secret)",
         {"action": "delete", "team": "recsys/secrets/alice--nb-password"}, field="team", value="recsys/secrets"),
    Case("act-stop-team-dotdot", A, "stop with team '../namespaces/recsys'", {"action": "stop",
         "team": "../namespaces/recsys"}, field="team", value="../namespaces/recsys"),
    Case("act-delete-team-query", A, "delete with team 'recsys?dryRun=All'", {"action": "delete",
         "team": "recsys?dryRun=All"}, field="team", value="recsys?dryRun=All"),
    Case("act-start-team-fragment", A, "start with team 'recsys#'", {"action": "start", "team": "recsys#"},
         field="team", value="recsys#"),
    Case("act-delete-team-unlisted", A, "delete with team 'kube-system' (not in the platform file)",
         {"action": "delete", "team": "kube-system"}, field="team", value="kube-system"),
    Case("act-delete-name-path", A, "delete with name 'nb/../alice--nb' in bob's own team",
         {"action": "delete", "team": "recsys", "name": "nb/../alice--nb"}, field="name", value="nb/../alice--nb"),
    Case("act-delete-collision", A, "delete by 'alice-x' of 'nb' (was alice's 'x-nb' under <owner>-<name>)",
         {"action": "delete", "team": "recsys", "name": "nb", "user": "alice-x", "victim": "x-nb"},
         expect="accepted"),
    # ---- the platform file ----
    Case("platform-user-newline", P, "member user 'bob\\n' (through a `$`-anchored schema pattern)",
         {"replace": ("user: bob,", 'user: "bob\\n",')}, field="members[1].user", value="'bob\\n'"),
    Case("platform-image-newline", P, "image reference ending in a newline",
         {"replace": ('image: "docker.io/tensorflow/tensorflow:1.15.5"',
                      'image: "docker.io/tensorflow/tensorflow:1.15.5\\n"')}, field="images[2].image",
         value="1.15.5\\n"),
    Case("platform-quota-9999Ei", P, "quota memory '9999Ei'", {"replace": ("memory: 16Gi", "memory: 9999Ei")},
         field="quota.memory", value="9999Ei"),
    Case("platform-quota-1e309", P, "quota cpu 1e309", {"replace": ('cpu: "4"', "cpu: 1e309")},
         field="quota.cpu", value="1e309"),
    Case("platform-quota-negative", P, "quota gpu '-1'", {"replace": ('gpu: "1"', 'gpu: "-1"')}, field="quota.gpu",
         value="-1"),
    Case("platform-team-kube-system", P, "a team named 'kube-system'", {"replace": ("name: nlp", "name: kube-system")},
         field="teams[1].name", value="kube-system"),
    Case("platform-namespace-default", P, "a team whose namespace: is 'default'",
         {"replace": ("  - name: nlp\n", "  - name: nlp\n    namespace: default\n")}, field="teams[1].namespace",
         value="'default'"),
    Case("platform-namespace-kube-node-lease", P, "namespace: 'kube-node-lease' (and any 'kube-' name)",
         {"replace": ("  - name: nlp\n", "  - name: nlp\n    namespace: kube-node-lease\n")},
         field="teams[1].namespace", value="kube-node-lease"),
    Case("platform-team-is-other-namespace", P, "team 'nlp' while team recsys lives in namespace 'nlp'",
         {"replace": [("  - name: recsys\n", "  - name: recsys\n    namespace: nlp\n"),
                      ("  - name: nlp\n", "  - name: nlp\n    namespace: nlp-team\n")]},
         field="teams[1].name", value="namespace of teams[0]"),
    Case("platform-alias-bomb", P, "nested YAML aliases, 400 bytes expanding to 9**9 strings ('billion laughs')",
         {"text": LAUGHS}, field="YAML anchor", value="a0"),
    Case("platform-alias-self", P, "a self-referencing alias (was a raw RecursionError)",
         {"text": "version: 1\nteams: &t [*t]\n"}, field="YAML anchor", value="t"),
    Case("platform-file-5mb", P, "a platform file of 5 MB (refused before it is parsed)",
         {"replace": ("version: 1\n", f"version: 1\n# {FIVE_MB}\n")}, field="(file)", value="5002"),
    Case("platform-user-900kb", P, "a member user of 900 KB (echoed cut, with its size)",
         {"replace": ("user: bob,", f"user: {'y' * 900_000},")}, field="members[1].user",
         value="900000 characters"),
    Case("platform-pod-security-typo", P, "pod_security enforce 'privilegd' (a level Kubernetes does not know)",
         {"replace": ("pod_security: {enforce: baseline,", "pod_security: {enforce: privilegd,")},
         field="teams[0].pod_security.enforce", value="'privilegd'"),
    Case("platform-gpu-resource-cpu", P, "node_pools.gpu.resource 'cpu' (a core resource as the GPU)",
         {"replace": ("resource: nvidia.com/gpu", "resource: cpu")}, field="node_pools.gpu.resource", value="cpu"),
    Case("platform-gpu-resource-memory", P, "node_pools.gpu.resource 'kubernetes.io/memory' (native domain)",
         {"replace": ("resource: nvidia.com/gpu", "resource: kubernetes.io/memory")},
         field="node_pools.gpu.resource", value="kubernetes.io/memory"),
    Case("platform-image-credentials", P, "image 'bob:ghp_token@registry/...' (credentials shown to every member)",
         {"replace": ('image: "docker.io/tensorflow/tensorflow:2.15.0",',
                      'image: "bob:ghp_token@docker.io/tensorflow/tensorflow:2.15.0",'), "secret": "ghp_token"},
         field="images[0].image", value="***@docker.io"),
    Case("platform-default-cpu-zero", P, "limit_range.default_cpu '0' (was a raw ZeroDivisionError)",
         {"replace": ('default_cpu: "1"', 'default_cpu: "0"')}, field="limit_range.default_cpu", value="0"),
    Case("platform-file-unset", P, "no `[skiff] platform_file` (was: the packaged example, applied to the cluster)",
         {"unset": True}, field="[skiff] platform_file", value="AIRFLOW__SKIFF__PLATFORM_FILE"),
    Case("platform-home-pvc-collision", P, "user 'Bob' and user '<slug-and-hash-of-Bob>' (same home volume name)",
         {"collide": True}, field="user", value="Bob"),
    Case("platform-derived-queue-collision", P, "teams 'recsys' and 'recsys-dev' (both derive ClusterQueue "
         "'recsys-dev': one team's instances never admitted)", {"replace": ("name: nlp", "name: recsys-dev")},
         field="teams[1].name", value="ClusterQueue 'recsys-dev'"),
    Case("platform-derived-queue-collision-first", P, "team 'nlp-dev' listed before team 'nlp'",
         {"replace": [("name: recsys\n", "name: nlp-dev\n")]}, field="teams[1].name",
         value="teams[0] ('nlp-dev')"),
    Case("platform-kueue-lending-over-nominal", P, "kueue lending_limit 9 CPUs of a flavor with 3 (Kueue's webhook "
         "refuses it; was a 422 from platform_sync naming no file or line)",
         {"text": "version: 1\nqueueing: kueue\nteams:\n  - name: nlp\n    quota: {cpu: \"3\", memory: 8Gi, storage: 1Gi}\n"
                  "    kueue:\n      flavors:\n        default: {cpu: \"3\", memory: 8Gi, lending_limit: {cpu: \"9\"}}\n"},
         field="teams[0].kueue.flavors.default.lending_limit.cpu", value="less than or equal to the nominalQuota"),
    Case("platform-kueue-lending-no-nominal", P, "kueue lending_limit of a resource the flavor gives no quota",
         {"text": "version: 1\nqueueing: kueue\nteams:\n  - name: nlp\n    quota: {cpu: \"3\", memory: 8Gi, storage: 1Gi}\n"
                  "    kueue:\n      dev:\n        default: {cpu: \"1\", lending_limit: {memory: 1Gi}}\n"},
         field="teams[0].kueue.dev.default.lending_limit.memory", value="'1Gi'"),
    Case("platform-kueue-flavors-empty", P, "kueue.flavors: {} (a ClusterQueue with no flavor: Kueue's CRD refuses it)",
         {"text": "version: 1\nqueueing: kueue\nteams:\n  - name: nlp\n    quota: {cpu: \"3\", memory: 8Gi, storage: 1Gi}\n"
                  "    kueue: {flavors: {}}\n"}, field="teams[0].kueue.flavors", value="at least one"),
    Case("platform-teams-1001", P, "1,001 teams (10,000 took 22 s to check, on every page route)",
         {"text": "version: 1\nteams:\n" + "".join(
             f"  - {{name: t{i}, quota: {{cpu: '1', memory: 1Gi, storage: 9Gi}}, members: [{{user: u{i}}}]}}\n"
             for i in range(1001))}, field="teams", value="1001 teams; a platform file may have at most 1000"),
    # ---- Sedna CRs that pass the CRD schema but make no sense (a condition on that CR only) ----
    Case("sedna-hpa-min-over-max", S, "JointInferenceService hpa minReplicas 5 > maxReplicas 2",
         {"hpa": {"minReplicas": 5, "maxReplicas": 2}}, field="spec.cloudWorker.hpa.minReplicas", value="5"),
    Case("sedna-hpa-max-zero", S, "JointInferenceService hpa maxReplicas 0", {"hpa": {"maxReplicas": 0}},
         field="spec.cloudWorker.hpa.maxReplicas", value="0"),
    Case("sedna-model-url-unparseable", S, "Model spec.url 's3://[bucket/x' (urlsplit raises)",
         {"model_url": "s3://[bucket/x"}, field="spec.url", value="s3://[bucket/x"),
    Case("sedna-name-too-long", S, "JointInferenceService name of 63 characters (derived names too long)",
         {"name": "j" * 63}, field="name", value="jjjj"),
    # ---- the plugin's API bodies (POST /api/instances) ----
    Case("ui-body-not-json", U, "body 'not json'", {"raw": b"not json"}, field="body", value="not JSON"),
    Case("ui-body-array", U, "body '[1, 2]'", {"json": [1, 2]}, field="body", value="list"),
    Case("ui-unknown-field", U, "unknown field 'command'", {"json": {"command": "id"}}, field="command", value="id"),
    Case("ui-unknown-field-5mb", U, "an unknown field of 5 MB (its value echoed cut, with its size)",
         {"json": {"notes": FIVE_MB}}, field="notes", value="5000000 characters"),
    Case("ui-unknown-field-name-5mb", U, "an unknown field whose name is 5 MB", {"json": {FIVE_MB: 1}},
         field="yyyy", value="5000000 characters"),
    Case("ui-cpu-submilli", U, "cpu '0.0001m'", {"json": {"cpu": "0.0001m"}}, field="cpu", value="0.0001m"),
    Case("ui-name-1mb", U, "name of 1 MB", {"json": {"name": MB}}, field="name", value="xxxx"),
    Case("ui-port-out-of-range", U, "extra_ports [70000]", {"json": {"extra_ports": [70000]}},
         field="extra_ports[0]", value="70000"),
    Case("ui-mounts-not-list", U, "mounts as an object", {"json": {"mounts": {"pvc": "x"}}}, field="mounts",
         value="pvc"),
    Case("ui-gpu-bool", U, "gpu true", {"json": {"gpu": True}}, field="gpu", value="True"),
    Case("ui-memory-infinity", U, "memory Infinity (Python's JSON parser accepts it)",
         {"raw": b'{"name": "nb", "team": "recsys", "image": "tf2-cpu", "cpu": 1, "memory": Infinity}'},
         field="memory", value="inf"),
    Case("ui-cpu-nan", U, "cpu NaN", {"raw": b'{"name": "nb", "team": "recsys", "image": "tf2-cpu", "cpu": NaN}'},
         field="cpu", value="nan"),
    Case("ui-ports-10000", U, "extra_ports of 10,000 elements", {"json": {"extra_ports": list(range(10_000))}},
         field="extra_ports", value="10000"),
    Case("ui-mount-double-slash", U, "a mount at '//root'", {"json": {"mounts": [{"pvc": "recsys-datasets",
         "path": "//root"}]}}, field="mounts[0].path", value="//root"),
    Case("ui-team-traversal", U, "team '../kube-system'", {"json": {"team": "../kube-system"}}, field="team",
         value="../kube-system"),
    Case("ui-name-shell", U, "name 'nb; rm -rf /'", {"json": {"name": "nb; rm -rf /"}}, field="name",
         value="nb; rm -rf /"),
]


ENTRY_POINTS = {
    T: "`TrainingJobOperator(...)` arguments",
    D: "`dev_instance_create` params (DAG form)",
    P: "platform file (`parse_platform`)",
    S: "Sedna CR on kubesim (one reconcile pass)",
    U: "plugin API `POST /api/instances`",
    A: "`dev_instance_stop/start/delete` params (bob; alice's instance on kubesim)",
}
DOC = Path(__file__).parents[3] / "docs" / "hostile-inputs.md"
BEGIN, END = "<!-- cases: generated by `python tests/support/hostile/hostile_cases.py` -->", "<!-- end of cases -->"


def outcome(case: Case) -> str:
    if case.expect == "accepted" and case.entry == A:
        return "accepted, acts on the caller's own (absent) instance only: alice's objects unchanged"
    if case.expect == "accepted":
        return "accepted; carried verbatim (argv word / env value), never re-parsed by a shell"
    where = {S: "Failed condition + Warning Event on that CR only; no child of it; the other CR reconciled",
             U: "HTTP 400; kubesim saw no write",
             A: "ValueError before any request; every object unchanged (before/after listing)"}.get(case.entry, "ValueError before any write")
    return f"rejected, names `{case.field}` and the value: {where}"


def markdown_table() -> str:
    rows = ["| # | case id | entry point | input | outcome |", "|---|---|---|---|---|"]
    for i, c in enumerate(CASES, 1):
        what = c.what.replace("|", "\\|")
        rows.append(f"| {i} | `{c.id}` | {ENTRY_POINTS[c.entry]} | {what} | {outcome(c)} |")
    return "\n".join([BEGIN, *rows, END])


def write_doc() -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + markdown_table() + text[end:])


if __name__ == "__main__":
    write_doc()
