"""Validate a training step's inputs and build its container command (pure functions, no I/O).

Every check raises ``ValueError`` naming the field and the offending value, so a bad DAG fails before
anything is written to the cluster.

The command is injection-proof by construction.  SPEC §1's
``/bin/bash -ic "cd ${workDir} && ${execCommand} /root/${entryPath} ${runArgs}"`` becomes the argv list::

    ["/bin/bash", "-ic", SCRIPT, "skiff", work_dir, checkpoint_dir, "keep" | "remove", *exec_command,
     "/root/" + entry_path, *run_args]

The bash script is a constant; user values only ever arrive as positional parameters and are expanded
quoted (``"$1"``, ``"$@"``), which bash never re-parses, so no value can inject shell.  ``-i`` is kept from
the reference so the user's ``/root/.bashrc`` (on their PVC: conda, PATH...) is still loaded.

The script (``SCRIPT``) enters ``work_dir``, creates the step's checkpoint directory (``checkpoint.py``; empty:
none), runs the program as its child and waits for it, passing SIGTERM on: the kubelet signals only a
container's PID 1 (``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer``: StopContainer with
the grace period), and a program that *is* PID 1 without its own handler ignores SIGTERM (the kernel delivers
no default action to a namespace's init), so without the script a plain ``python train.py`` would only end at
SIGKILL. It exits with the program's status (128 + signal if a signal ended it: 137 for the OOM killer's
SIGKILL), and after an exit 0 that no SIGTERM preceded (a finished step, not a stopped one) removes the
checkpoint directory when told ``remove``. Bash's own messages (``cd`` failing, a program not found) go to
the container's stderr as before.
``exec_command`` is the program (and options) that runs the entry file: a list of argv words, or a string
split ONCE with ``shlex.split`` (``"python -u"`` -> ``["python", "-u"]``); it is never evaluated by a shell.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.core.checks import invalid
from operators.core.checks import text as _text
from operators.core.names import is_dns_label, is_dns_subdomain, is_label_key, is_label_value
from operators.core.nodepools import NodePools
from operators.core.quantity import cpu_quantity, gpu_count, memory_gi
from operators.core.volumes import ROOT_MOUNT, Volume, home_pvc, volumes
from operators.training.checkpoint import CHECKPOINT_ROOT, RESERVED_ENV
from operators.training.gang import ENV_NAMES as GANG_ENV
from operators.training.gang import workers_count

SHELL = "/bin/bash"
SCRIPT = (
    'cd -- "$1" || exit; c=$2; k=$3; shift 3; '
    'trap \'t=1; kill -TERM "$p" 2>/dev/null\' TERM; '
    '[ -z "$c" ] || mkdir -p -- "$c" || exit; '
    # an interactive bash speaks of its background job on its own stderr ("[1] 42" at the start, a tcsetattr
    # complaint when a signal ends it): silenced from here on, while the program keeps the container's stderr
    'exec 3>&2 2>/dev/null; "$@" 2>&3 3>&- & p=$!; exec 3>&-; [ -z "$t" ] || kill -TERM "$p"; '
    # a trap interrupts wait (status > 128) while the program still runs: wait on until it has ended
    'while :; do wait "$p"; r=$?; [ "$r" -gt 128 ] && kill -0 "$p" 2>/dev/null || break; done; '
    # a gang's checkpoint directory is shared: rank 0 (its completion index, which writes it) removes it
    'if [ -z "$t" ] && [ "$r" -eq 0 ] && [ "$k" = remove ] && [ "${JOB_COMPLETION_INDEX:-0}" = 0 ]; then '
    'case $c in */../*|*/..) ;; */.skiff/checkpoints/?*) rm -rf -- "$c";; esac; fi; '
    '(exit "$r")'
)
ARGV0 = "skiff"  # $0 of the script, shows in bash error messages

# a C identifier: what every shell and ``os.environ`` user can read back ($NAME); Kubernetes allows more
_ENV_NAME = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
# Linux refuses argv + envp together beyond ARG_MAX (2 MiB by default; one string: ``core.checks``); a Job
# also must stay far below etcd's 1.5 MiB request limit, so the whole command and env are held to 1 MiB.
MAX_ARGV_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TrainingJobSpec:
    """Validated, normalised inputs of one training Job (what the template needs besides identity)."""

    image: str
    namespace: str
    command: list[str]
    env: dict[str, str]
    cpu: str
    memory_gi: str
    gpu: int
    pvc: str
    volumes: tuple[Volume, ...]
    online: bool
    pool_key: str
    pool_value: str
    # the GPU resource and taint, the online pool's taint effect: the platform file's node_pools
    node_pools: NodePools = NodePools()
    checkpoint_dir: str = ""  # SKIFF_CHECKPOINT_DIR (checkpoint.py); "" until the task instance is known
    workers: int = 1  # pods of the step (gang.py); > 1: an Indexed Job with a headless Service


def exec_argv(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise invalid("exec_command", value, f"cannot be split into words ({exc})") from exc
    elif isinstance(value, Sequence):
        words = [_text(f"exec_command[{i}]", w, allow_empty=True) for i, w in enumerate(value)]
    else:
        raise invalid("exec_command", value, "must be a string like 'python -u' or a list of words")
    if not words or not words[0]:
        raise invalid("exec_command", value, "must name a program")
    for word in words:
        _text("exec_command", word, allow_empty=True)
    return words


def build_command(work_dir: Any, exec_command: Any, entry_path: Any, run_args: Any, checkpoint_dir: str = "",
                  keep_checkpoint: bool = True) -> list[str]:
    """The container argv (see module docstring): user values are positional parameters, never code.
    ``checkpoint_dir``: built by ``checkpoint.checkpoint_dir`` (never user text as given), "" for none."""
    work = _text("work_dir", work_dir)
    argv = exec_argv(exec_command)
    if entry_path is not None:
        entry = _text("entry_path", entry_path)
        if entry.startswith("/") or ".." in entry.split("/"):
            raise invalid("entry_path", entry_path, f"must be a path relative to {ROOT_MOUNT} without '..' (a file in "
                                                 "the image: entry_path=None and name it in exec_command)")
        argv.append(f"{ROOT_MOUNT}/{entry}")
    if isinstance(run_args, str | bytes) or not isinstance(run_args, Sequence):
        raise invalid("run_args", run_args, "must be a list of arguments, e.g. ['--epochs', '3']")
    argv.extend(_text(f"run_args[{i}]", a, allow_empty=True) for i, a in enumerate(run_args))
    if checkpoint_dir and (not checkpoint_dir.startswith(CHECKPOINT_ROOT + "/") or ".." in checkpoint_dir.split("/")):
        raise invalid("checkpoint_dir", checkpoint_dir, f"must be under {CHECKPOINT_ROOT}")
    command = [SHELL, "-ic", SCRIPT, ARGV0, work, checkpoint_dir, "keep" if keep_checkpoint else "remove", *argv]
    total = sum(len(a.encode("utf-8", "surrogatepass")) + 1 for a in command)
    if total > MAX_ARGV_BYTES:
        raise invalid("run_args", f"{len(run_args)} arguments", f"the command is {total} bytes; at most "
                   f"{MAX_ARGV_BYTES} (Linux ARG_MAX, etcd's request limit)")
    return command


def env_vars(env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise invalid("env", env, "must be a dict of NAME -> value")
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise invalid("env", name, "is not a valid environment variable name (letters, digits and '_', "
                                    "not starting with a digit)")
        if name in RESERVED_ENV:
            raise invalid("env", name, "is set by Skiff for every training step (the checkpoint directory, the try, "
                                       "resume and preemptions): choose another name")
        if value is None:
            raise invalid(f"env[{name}]", value, "must be a string")
        out[name] = _text(f"env[{name}]", value, allow_empty=True)
    return out


def image_ref(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("image", value, "an image is required, e.g. 'registry/team/train:1.2'")
    if value != value.strip() or any(c.isspace() for c in value):
        raise invalid("image", value, "must not contain whitespace")
    return value


def default_pvc(owner: str) -> str:
    """The user's default PVC: ``<owner>-home``, with a hash of the name when it is not DNS-safe as written
    (``operators.platform.home_pvc``: distinct users never share a volume)."""
    return home_pvc(owner or "airflow")


def label_key(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(field, value, "must be a label key like 'node.example.com/pool'")
    if not is_label_key(value):
        raise invalid(field, value, "is not a valid label key")
    return value


def build_spec(
    *,
    image: Any,
    namespace: Any,
    work_dir: Any,
    exec_command: Any,
    entry_path: Any,
    run_args: Any,
    env: Any,
    cpu: Any,
    memory: Any,
    gpu: Any,
    pvc: Any,
    volumes_: Any,
    online: Any,
    pool_key: Any,
    pool_value: Any,
    node_pools: NodePools | None = None,
    checkpoint_dir: str = "",
    keep_checkpoint: bool = True,
    workers: Any = 1,
) -> TrainingJobSpec:
    if not is_dns_label(namespace):
        raise invalid("namespace", namespace, "is not a valid namespace (DNS-1123 label, <= 63 chars)")
    if not is_dns_subdomain(pvc):
        raise invalid("pvc", pvc, "is not a valid PVC name (DNS-1123 subdomain)")
    if not isinstance(online, bool):
        raise invalid("online", online, "must be true or false")
    if not is_label_value(pool_value) or not pool_value:
        raise invalid("online_pool_value", pool_value, "is not a valid label value")
    if workers_count(workers) > 1:
        for name in env_vars(env):
            if name in GANG_ENV:
                raise invalid("env", name, f"is set by Skiff for each of the {workers} workers (rank, world size, "
                                           "rendezvous, TF_CONFIG): choose another name")
    return TrainingJobSpec(
        image=image_ref(image),
        namespace=namespace,
        command=build_command(work_dir, exec_command, entry_path, run_args, checkpoint_dir, keep_checkpoint),
        checkpoint_dir=checkpoint_dir,
        env=env_vars(env),
        cpu=cpu_quantity(cpu),
        memory_gi=memory_gi(memory),
        gpu=gpu_count(gpu),
        pvc=pvc,
        volumes=volumes(volumes_),
        online=online,
        pool_key=label_key("online_pool_key", pool_key),
        pool_value=pool_value,
        node_pools=node_pools or NodePools(),
        workers=workers_count(workers),
    )
