"""``python -m devstack demo``: Skiff on a simulated cluster, end to end (what ``make demo`` runs).

Starts kubesim (CPU, GPU and online-pool nodes; RBAC over HTTPS, a kubeconfig per user), an SMTP sink, ``airflow
standalone`` (on a PostgreSQL of its own, project-local ``AIRFLOW_HOME`` under ``.demo/``) and a Prometheus with
Skiff's scrape jobs and alert rules, sets up the demo team's queue, runs the example training pipeline once (the
scheduled run unpausing it starts: ``start_pipeline``), triggers the failure example and the data-parallel example
(``dags/training_data_parallel.py``: the model on 1 worker, then on 2 workers in one step, the speed-up; both ranks'
lines from the task log: ``show_data_parallel``), shows where each Job ran and the alert e-mail, creates alice's development instance and prints how to open it, runs the hourly usage report once more
(the page's GPU-hours chart then counts the steps: ``refresh_usage``), every user's password and what to do next, then keeps everything up for the UI until Ctrl-C (which stops every process, also when the output
is piped and the reader died with the same Ctrl-C).

``--kueue`` (``make demo KUEUE=1``): kubesim simulates Kueue and the platform file is the example switched to
``queueing: kueue``; after the failure example, nlp's step borrows recsys' idle GPUs and recsys' online step
reclaims them: Kueue preempts the borrower, which saves its checkpoint on SIGTERM, waits in the queue and resumes
from it (``devstack/demo_kueue.py``; the DAGs are ``devstack/demo_dags/kueue_demo.py``).

Whatever did not go as told is said at the end, with its reason, and the UI stays up to look at it (``--exit``:
the exit status is 1 then).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from devstack.airflow_env import REPO, STACK_USERS
from devstack.demo_kueue import show_kueue
from devstack.stack import Stack
from devstack.tee_files import append as append_to_files
from devstack.tee_files import reader_files

PIPELINE = "training_recommendation_daily"
FAILING = "training_failure_demo"
DATA_PARALLEL = "training_data_parallel"   # the model on 1 worker, then on 2 (one step, two pods), compared
DEV_CREATE = "dev_instance_create"
USAGE_REPORT = "usage_report"   # hourly: run once more at the end, so the page counts what the demo just ran
STARTUP_TIMEOUT_S = 600  # a busy 2-core machine took 6 minutes to bring airflow standalone up (measured)
RUN_TIMEOUT_S = 600  # and minutes for a run that takes 20 s on an idle one
# the longest the demo may take to say it is ready before one of its own limits stops it: the start, five runs
# (the data-parallel one beside the failure example; the usage report), the e-mail and the instance's Running (the piped-demo test
# waits exactly this, and pytest's timeout follows)
SCHEDULED_WAIT_S = 120  # unpaused, the daily pipeline's scheduled run appears within a scheduler loop or two
DEMO_LIMIT_S = STARTUP_TIMEOUT_S + SCHEDULED_WAIT_S + 5 * RUN_TIMEOUT_S + 30 + 30


_reader_gone = False
_tee_files: list[str] = []   # the files a `| tee FILE` reader writes, found at start (devstack/tee_files.py)


def say(msg: str = "") -> None:
    """One line of the demo's story. Never fails: when the reader is gone (``make demo | tee log`` and Ctrl-C
    killed ``tee``), later lines go to the terminal itself (``/dev/tty``) when there is one, and to the files tee
    wrote (``_tee_files``), so a broken pipe can never stop the clean-up and the last line ("stopped ...") is still
    seen and kept."""
    global _reader_gone
    line = f"[demo] {msg}" if msg else ""
    if not _reader_gone:
        try:
            print(line, flush=True)
            return
        except OSError:  # BrokenPipeError (EPIPE) and friends: Python already ignores SIGPIPE
            _reader_gone = True
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the Python docs' advice for EPIPE
            except OSError:
                pass
    append_to_files(_tee_files, line)
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(line + "\n")
    except OSError:  # no controlling terminal (a service, a test)
        pass


def find_tee_files() -> None:
    """Remember the files the reader of our output writes (``make demo | tee log``), while it is alive."""
    global _tee_files
    _tee_files = reader_files()


def show_run(stack: Stack, dag_id: str, run_id: str) -> None:
    from kubernetes import client

    core = client.CoreV1Api(stack.k8s())
    pods = [p for p in core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=skiff").items
            if (p.metadata.annotations or {}).get("skiff.io/run-id") == run_id]
    for ti in stack.task_instances(dag_id, run_id):
        line = f"  {ti['task_id']:<12} {ti['state']:<8} try {ti['try_number']}"
        for pod in pods:
            if pod.metadata.annotations.get("skiff.io/task-id") == ti["task_id"]:
                line += f"  pod {pod.metadata.name} ran on node {pod.spec.node_name}"
        say(line)


def start_pipeline(stack: Stack, wait_s: float = SCHEDULED_WAIT_S) -> str:
    """Start the daily pipeline once. Unpausing it (as triggering does) makes Airflow start the scheduled run of
    its latest day (``catchup=False``: that day only), so the demo follows that run; a trigger as well would be a
    second run of the same day, writing the same features, model and TensorBoard directories (issue 36). Only when
    no scheduled run appears does the demo trigger one, and says why."""
    from kubesim.testing import wait_until

    stack.unpause(PIPELINE)

    def scheduled() -> str | None:
        runs = stack.api("GET", f"/api/v2/dags/{PIPELINE}/dagRuns?run_type=scheduled")["dag_runs"]
        return next((r["dag_run_id"] for r in runs if r.get("run_type") == "scheduled"), None)
    try:
        run_id = wait_until(scheduled, wait_s, interval=1, what=f"{PIPELINE}'s scheduled run")
        say(f"unpaused {PIPELINE} (daily, catchup off): Airflow started the scheduled run of its latest day, "
            f"{run_id}; the demo follows it (a trigger too would run the same day twice)")
        return run_id
    except TimeoutError:
        say(f"unpaused {PIPELINE}: no scheduled run within {wait_s:.0f} s, so the demo triggers one (if Airflow "
            "starts the scheduled run later, the page shows both)")
        return stack.trigger(PIPELINE)


def show_data_parallel(stack: Stack, run_id: str, state: str) -> list[str]:
    """The 2-worker step's ranks as its task log has them (each rank's lines prefixed ``[rank R pod]``: of the
    script's own lines, the rendezvous and the last) and compare's speed-up line; what is missing, as problems."""
    if state != "success":
        return [f"{DATA_PARALLEL} {state}: {run_failure(stack, DATA_PARALLEL, run_id)}"]
    problems = []
    try:
        log = stack.task_log(DATA_PARALLEL, run_id, "train_two_workers")
        compared = stack.task_log(DATA_PARALLEL, run_id, "compare")
    except Exception as exc:  # noqa: BLE001 - the run succeeded; its logs not readable is a problem to say
        return [f"{DATA_PARALLEL}: its task logs could not be read: {exc}"]
    say("  train_two_workers: one Indexed Job, two pods found each other by name; its task log has both ranks:")
    for rank in (0, 1):
        lines = [line[line.index(f"[rank {rank} "):] for line in log.splitlines()
                 if f"[rank {rank} " in line and f"] rank {rank}: " in line]     # the script's own lines
        if not lines:
            problems.append(f"{DATA_PARALLEL}.train_two_workers: no line of rank {rank} in its task log")
            continue
        met = next((line for line in lines if "connected" in line), lines[0])     # the rendezvous, then the end
        for line in dict.fromkeys((met, lines[-1])):
            say(f"    {line[:300]}")
    speed = next((line[line.index("speed-up"):] for line in compared.splitlines() if "speed-up on 2 workers" in line),
                 None)
    if speed is None:
        problems.append(f"{DATA_PARALLEL}.compare: no speed-up line in its task log")
    else:
        say(f"  compare: {speed}")
    return problems


def run_failure(stack: Stack, dag_id: str, run_id: str) -> str:
    """Why a run did not succeed, task by task, in the words of the page's row (``views.failure_from_log``: the
    try's ``TrainingJobFailed`` reason, else its last exception), and where the logs are."""
    from operators.ui.views import failure_from_log

    parts = []
    for ti in stack.task_instances(dag_id, run_id):
        if ti["state"] in ("success", "skipped"):
            continue
        reason = None
        try:
            body = stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/"
                             f"{max(1, ti['try_number'] or 1)}?full_content=true")
            content = body.get("content")
            reason = failure_from_log(m for m in content if isinstance(m, dict)) if isinstance(content, list) else None
        except Exception:  # noqa: BLE001 - no log to read (HTTP error, none yet): the state is all there is to say
            pass
        parts.append(f"{ti['task_id']} {ti['state']} (try {ti['try_number']})" + (f": {reason}" if reason else ""))
    return "; ".join(parts or ["no task failed (the run itself did)"]) + f"; task logs: {stack.home / 'logs'}"


def usage_lines(report: dict) -> list[str]:
    """What the page's usage card shows from the report ``usage_report`` wrote: GPU-hours per user (from the Jobs)
    and the GPU efficiency rows (from Prometheus' samples, so a pod younger than a sample has no row yet)."""
    users = [f"{u['user']} ({u['team']}) {u['gpu_hours']:.2f} h" for u in report.get("by_user") or []
             if u.get("gpu_hours")]
    lines = [f"  GPU-hours per user: {', '.join(users) if users else 'none yet (no finished Job held a GPU)'}"]
    gpu = report.get("gpu") or {}
    if not gpu.get("source"):
        return [*lines, f"  GPU efficiency: not known: {gpu.get('problem') or 'no source'}"]
    rows = [f"{r['user'] or '-'} {r['kind']} {_percent(r['efficiency_percent'])}" for r in gpu.get("by_user") or []]
    every = f"{gpu['step_seconds'] // 60} min"   # the report's own resolution (gpu_used.STEP_SECONDS)
    return [*lines, f"  GPU efficiency (used against held; Prometheus sampled every {every}, a pod younger than "
            f"a sample has no row yet): {'; '.join(rows) if rows else 'no sample yet'}"]


def _percent(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.0f} %"


def refresh_usage(stack: Stack) -> list[str]:
    """Run the hourly usage report once now (its first run was before any step), so the page's GPU-hours chart
    and efficiency table count the demo's steps; print what they show. A problem is returned, not raised."""
    import json

    run_id = stack.trigger(USAGE_REPORT)
    state = stack.wait_run(USAGE_REPORT, run_id, timeout=RUN_TIMEOUT_S)
    if state != "success":
        return [f"{USAGE_REPORT} {state}: {run_failure(stack, USAGE_REPORT, run_id)}"]
    say(f"{USAGE_REPORT} (hourly) ran once more, so the page's usage card counts the steps above:")
    try:   # the stack leaves [skiff] usage_file at its default, under its AIRFLOW_HOME
        report = json.loads((stack.home / "skiff" / "usage.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{USAGE_REPORT} succeeded but its report is not readable: {exc}"]
    for line in usage_lines(report):
        say(line)
    return []


def show_dev_instance(stack: Stack) -> None:
    """alice, logged in, creates her development instance through dev_instance_create; print how to open it.
    The demo's nodes run it for real (kubesim/kubelet/procrt): its start-up script starts JupyterLab, TensorBoard and
    sshd, reached through the tcp-services ports on this machine's loopback, all behind the instance's password
    (on alice's page, never printed here)."""
    import shutil
    import urllib.request

    from kubernetes import client

    from devstack.demo_setup import DEMO_INSTANCE, DEMO_INSTANCE_OWNER, demo_instance_lines
    from kubesim.testing import wait_until
    from operators.devinstances import naming
    from operators.devinstances.inventory import get_instance
    from operators.devinstances.settings import Settings
    from operators.k8s import Kube

    owner, name, team = DEMO_INSTANCE_OWNER, DEMO_INSTANCE["name"], DEMO_INSTANCE["team"]
    say(f"{owner} creates a development instance ({DEV_CREATE}, triggered as {owner}) ...")
    run_id = stack.trigger(DEV_CREATE, DEMO_INSTANCE, user=owner)
    say(f"{DEV_CREATE}: {stack.wait_run(DEV_CREATE, run_id, timeout=RUN_TIMEOUT_S).upper()}")
    kube, apps = Kube(stack.k8s()), client.AppsV1Api(stack.k8s())
    ready = False
    try:   # Ready: its readiness probe reached JupyterLab on 8888 in the pod
        wait_until(lambda: (apps.read_namespaced_stateful_set(naming.statefulset_name(owner, name), team).status
                            .ready_replicas or 0) >= 1, 30, what="the demo instance Ready")
        ready = True
    except TimeoutError as exc:
        say(f"{exc}: it is still starting (kubectl get pods -n {team} -w; kubectl logs -n {team} "
            f"{naming.pod_name(owner, name)})")
    for line in demo_instance_lines(kube):
        say(line)
    # the stack's [skiff] devinstance_* settings are the declared defaults (stack.py passes it no AIRFLOW* variable)
    view = get_instance(kube, owner, team, name, Settings(), with_idle=False)
    jupyter = (view.urls if view else {}).get("jupyter")
    answers = False
    if ready and jupyter:
        try:
            with urllib.request.urlopen(jupyter + "login", timeout=5) as response:
                answers = response.status == 200
        except OSError:
            pass
    now = "JupyterLab answers now" if answers else "once the instance is Ready"
    say(f"these addresses answer on this machine ({now}): the instance's start-up script really runs as "
        "processes (kubesim's process nodes), behind ingress-nginx's tcp-services ports on 127.0.0.1")
    say(f"  JupyterLab: open its address, log in with the password {owner}'s page shows (her instance's row: "
        "show); ssh: the line above, same password; TensorBoard: the event files under her home's tensorboard/, "
        "no login")
    if not shutil.which("code-server", path=os.pathsep.join([os.path.join(sys.prefix, "bin"), os.defpath])):
        say("  code-server is not installed in the demo's image: the VS Code address shows a page saying so")
    say("  her files in /root are her home volume: they survive stop and start (the password changes at each start)")


def say_users(stack: Stack) -> None:
    """Every user of the demo's Airflow, a password a line (the simple auth manager generated them)."""
    say("users (Airflow's simple auth manager; passwords generated for this run):")
    for user, role in STACK_USERS.items():
        say(f"  {user:<6} {ROLE_NOTES.get(user, role):<44} password: {stack.password(user)}")


def say_kubeconfigs(stack: Stack) -> None:
    """A kubeconfig per person: kubesim enforces RBAC, so kubectl shows each exactly what they may do."""
    say("kubectl on the simulated cluster (RBAC enforced; Skiff acts as its ServiceAccount skiff/skiff):")
    say(f"  {'admin':<6} {'cluster admin (system:masters)':<44} export KUBECONFIG={stack.kubeconfig}")
    for user, path in stack.kubeconfigs.items():
        say(f"  {user:<6} {KUBE_NOTES.get(user, ''):<44} export KUBECONFIG={path}")


def say_next_steps(stack: Stack) -> None:
    say("next steps:")
    say(f"  1. open {stack.airflow_url}/plugin/skiff (Airflow's navigation: Skiff)")
    say("  2. log in as alice (she owns the notebook instance) or bob (same team, sees only his own); "
        "passwords above")
    say("  3. watch the simulated cluster beside the UI:")
    say(f"       export KUBECONFIG={stack.kubeconfig}")
    say("       kubectl get pods -n recsys -w")
    if "bob" in stack.kubeconfigs:
        say("  4. see what a team member may do (docs/dev-instances.md, \"Your shell\"):")
        say(f"       KUBECONFIG={stack.kubeconfigs['bob']} kubectl auth can-i --list -n recsys")
        for line in ROLE_LINES:
            say(f"     {line}")


# what each role may do, with kubectl and in Skiff (docs/dev-instances.md "Your shell": why no exec, even for an owner)
ROLE_LINES = (
    "with kubectl, a team admin (alice in recsys, carol in nlp) and a member (bob) may do the same: read the "
    "team's pods, logs, events, Jobs, volumes and quota; no Secrets, no writes, no exec or port-forward, not even "
    "into one's own instance (ssh and JupyterLab's terminal are that shell, behind its password)",
    "in Skiff they differ: a team admin sees the team's instances on the page and may stop, start and delete "
    "them for their owners; a member, only their own; nobody reads another's password",
)
KUBE_NOTES = {"alice": "recsys admin, in nlp: reads their work, logs", "bob": "recsys member: reads, no writes",
              "carol": "nlp admin: reads nlp's work, not recsys's"}
ROLE_NOTES = {"admin": "Airflow admin", "alice": "recsys team admin, owns the demo instance",
              "bob": "recsys member", "carol": "Airflow viewer (reads, cannot trigger)"}


def _interrupt(*_):
    raise KeyboardInterrupt


def demo(exit_after: bool, kueue: bool = False) -> int:
    from devstack.demo_setup import setup_demo

    t0 = time.monotonic()
    find_tee_files()
    workdir = Path(os.environ.get("SKIFF_DEMO_DIR") or REPO / ".demo")
    # the cluster as in production: kubesim enforcing RBAC over HTTPS, Skiff acting as its ServiceAccount, and
    # each demo user with a token and kubeconfig of their own (admin: kubesim's system:masters kubeconfig)
    # --kueue: kubesim simulates Kueue, the example platform file says queueing: kueue, and the Kueue demo's DAGs
    stack = Stack(workdir, dags_dirs=[REPO / "dags"] + ([REPO / "devstack" / "demo_dags"] if kueue else []),
                  nodes_file=REPO / "devstack" / "demo_nodes.yaml", rbac=True,
                  people=[u for u in STACK_USERS if u != "admin"], metrics=True, kueue=kueue)
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops the demo as cleanly as Ctrl-C does
    say("starting kubesim, an SMTP sink and airflow standalone...")
    try:
        stack.start(timeout=STARTUP_TIMEOUT_S)
        say(f"started in {time.monotonic() - t0:.0f} s")
        say(f"Airflow UI:   {stack.airflow_url}")
        say(f"kubesim API:  {stack.kubesim_url}   kubeconfig: {stack.kubeconfig}")
        say(f"logs:         {stack.workdir / 'logs'} (the stack's processes)   task logs: {stack.home / 'logs'} "
            f"(also in the UI: a task's Log tab)   e-mails: {stack.maildir}")
        if stack.monitoring is not None:
            pages = stack.monitoring.pages()
            say(f"Prometheus:   {stack.monitoring.url}   (deploy/monitoring's scrape jobs, alerts.yaml and "
                f"alerts-statsd.yaml: {', '.join(f'{p} {a}' for p, a in pages.items()) or 'no page answers yet'})")
        say_users(stack)
        say_kubeconfigs(stack)
        setup_demo(stack)
        say("applied the example platform file (operators/platform/example.yaml): teams recsys and nlp"
            + (", switched to queueing: kueue (one cohort; GPUs: recsys 2, nlp 1)" if kueue else ""))
        started = time.monotonic()
        run_id = start_pipeline(stack)
        state = stack.wait_run(PIPELINE, run_id, timeout=RUN_TIMEOUT_S)
        say(f"{PIPELINE} run {run_id}: {state.upper()} ({time.monotonic() - started:.0f} s after it started)")
        show_run(stack, PIPELINE, run_id)
        say(f"triggering {FAILING} (fails on purpose, to show the alert e-mail) and {DATA_PARALLEL} (the model "
            "on 1 worker, then on 2 workers in one step, then compared) ...")
        fail_id = stack.trigger(FAILING)
        dp_id, dp_started = stack.trigger(DATA_PARALLEL), time.monotonic()
        fail_state = stack.wait_run(FAILING, fail_id, timeout=RUN_TIMEOUT_S)
        say(f"{FAILING}: {fail_state.upper()}")
        dp_state = stack.wait_run(DATA_PARALLEL, dp_id, timeout=RUN_TIMEOUT_S)
        say(f"{DATA_PARALLEL} run {dp_id}: {dp_state.upper()} ({time.monotonic() - dp_started:.0f} s after it was "
            "triggered)")
        dp_problems = show_data_parallel(stack, dp_id, dp_state)
        deadline = time.monotonic() + 30
        while not stack.mails() and time.monotonic() < deadline:
            time.sleep(0.5)
        for m in stack.mails():
            say(f"e-mail to {m['To']}: {m['Subject']}")
        problems = [] if state == "success" else [f"{PIPELINE} {state}: {run_failure(stack, PIPELINE, run_id)}"]
        problems += dp_problems
        if kueue:
            problems += show_kueue(stack, say, RUN_TIMEOUT_S)
        show_dev_instance(stack)
        problems += refresh_usage(stack)
        say(f"ready {time.monotonic() - t0:.0f} s after start")
        say_next_steps(stack)
        for problem in problems:
            say(f"NOT AS TOLD: {problem}")
        if exit_after:
            return 1 if problems else 0
        say("everything is up: Ctrl-C stops every process the demo started.")
        while True:
            signal.pause()
    except KeyboardInterrupt:  # Ctrl-C is how the demo is meant to end: a clean stop, exit 0 (make said "Error 130")
        return 0
    finally:
        # Stop first, talk after: the terminal's Ctrl-C may have killed the reader of our output already. A second
        # Ctrl-C must not cut the clean-up short either.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop()
        say("stopped every process the demo started.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devstack")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the demo (make demo)")
    d.add_argument("--exit", action="store_true", help="stop once the demo runs have finished")
    d.add_argument("--kueue", action="store_true", help="queueing: kueue on a kubesim with Kueue; show a borrower "
                   "preempted by an online step and resuming from its checkpoint (make demo KUEUE=1)")
    args = ap.parse_args(argv)
    return demo(exit_after=args.exit, kueue=args.kueue)


if __name__ == "__main__":
    sys.exit(main())
