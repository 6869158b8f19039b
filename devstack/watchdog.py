"""Notice an ``airflow standalone`` component that exits, say so loudly and restart it.

``airflow standalone`` (airflow/cli/commands/standalone_command.py, ``StandaloneCommand.run``) starts the
scheduler, dag-processor, api-server and triggerer as child processes and then only prints their output: one that
exits stays dead (issue 29: a triggerer died and every deferred step would have hung). The watchdog looks at the
standalone process's children every ``interval`` seconds; a component seen once and gone now is started again on
its own (``airflow <component>`` with the stack's environment, its log in ``logs/<component>.log``), and the
restart is written to stderr and ``logs/watchdog.log``. A restarted component is watched the same way (its
process handle).

``missing`` is the pure decision (which components were seen and are gone); the thread only performs it.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")


def component_of(cmdline: Iterable[str]) -> str | None:
    """Which component an ``airflow <component>`` command line runs: ``python .../airflow triggerer``, or a
    title the component set itself (the api-server's ``airflow api_server -- host:... port:...``)."""
    args = [a for a in cmdline if a]
    for i, arg in enumerate(args[:-1]):
        if Path(arg).name == "airflow" and args[i + 1] in COMPONENTS:
            return args[i + 1]
    title = re.match(r"airflow (\S+)", args[0]) if args else None
    name = title.group(1).replace("_", "-") if title else None
    return name if name in COMPONENTS else None


def missing(seen: set[str], running: set[str]) -> list[str]:
    """Components that ran once and run no more, in start order."""
    return [c for c in COMPONENTS if c in seen and c not in running]


def announce(logs: Path, what: str) -> str:
    """Say ``what`` loudly: on stderr and in ``logs/watchdog.log``; returns the line."""
    line = f"[stack] {datetime.now(UTC):%H:%M:%S} {what}"
    with open(logs / "watchdog.log", "a") as f:
        f.write(line + "\n")
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:  # a reader gone (make demo | tee, Ctrl-C): the log file has it
        pass
    return line


def watch(stop: threading.Event, interval: float, check: Callable[[], object]) -> None:
    """Call ``check`` every ``interval`` seconds until ``stop`` is set (both watchdogs' thread)."""
    while not stop.wait(interval):
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - a watchdog that dies silently is what it exists to prevent
            try:
                print(f"[stack] watchdog error: {exc!r}", file=sys.stderr, flush=True)
            except OSError:
                pass


class Watchdog:
    def __init__(self, standalone, env: dict[str, str], logs: Path, *, spawn: Callable, airflow: str,
                 free_port: Callable[[], int] | None = None, interval: float = 2.0):
        self.standalone, self.env, self.logs, self.spawn, self.airflow = standalone, env, logs, spawn, airflow
        self.free_port = free_port  # a restarted component's log server gets a new port: a child of the dead
        # one (its serve-logs) may still hold the old
        self.interval = interval
        self.seen: set[str] = set()
        self.restarted: dict[str, object] = {}  # component -> its own process (Popen)
        self.restarts: list[str] = []  # what it said, one line a restart
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stack-watchdog", daemon=True)

    def start(self, running: Iterable[str] = ()) -> None:
        """Watch from now on; ``running``: components known to run now (the stack's health check saw every one),
        so that one dying before the first look is not missed."""
        self.seen |= set(running)
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def stop(self) -> list:
        """Stop watching (before the stack stops its processes); returns the processes it started."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 5)
        return list(self.restarted.values())

    def running(self) -> set[str]:
        import psutil

        found = set()
        try:
            children = psutil.Process(self.standalone.pid).children()
        except psutil.Error:
            children = []
        for child in children:
            try:
                if child.status() != psutil.STATUS_ZOMBIE and (name := component_of(child.cmdline())):
                    found.add(name)
            except psutil.Error:
                continue
        found |= {name for name, proc in self.restarted.items() if proc.poll() is None}
        return found

    def check(self) -> list[str]:
        """One look: restart what is gone; returns the components restarted."""
        if self.standalone.poll() is not None:  # the stack is stopping or standalone itself died: not ours to fix
            return []
        now = self.running()
        self.seen |= now
        gone = missing(self.seen, now)
        for name in gone:
            if self._stop.is_set():
                return []
            self._restart(name)
        return gone

    def _restart(self, name: str) -> None:
        log = self.logs / f"{name}.log"
        env = dict(self.env)
        if self.free_port is not None:
            env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] = str(self.free_port())
            env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"] = str(self.free_port())
        proc = self.spawn([self.airflow, name], log, env)
        self.restarted[name] = proc
        self.restarts.append(announce(self.logs, f"the {name} exited (airflow standalone does not restart it): "
                                                 f"restarted it as pid {proc.pid}, its log is {log}"))

    def _loop(self) -> None:
        watch(self._stop, self.interval, self.check)


class ProcessWatchdog:
    """The same for a stack whose components are processes of their own (the production profile,
    devstack/prod.py: two schedulers, two triggerers, a Celery worker, a dag-processor, the api-server, as the Helm
    chart's pods, which Kubernetes would restart). ``procs``: name -> process, the stack's own dict; a component
    that exits unasked is started again by ``restart(name)`` (which puts the new process in ``procs``) and said
    loudly. One stopped on purpose (``expect_exit``: a test's kill, a benchmark's restart) is left alone."""

    def __init__(self, procs: dict, restart: Callable[[str], object], logs: Path, *,
                 names: Callable[[], Iterable[str]] | None = None, interval: float = 2.0):
        self.procs, self.restart, self.logs, self.interval = procs, restart, logs, interval
        self.names = names or (lambda: list(procs))  # which of ``procs`` are components (not kubesim, the sink)
        self.expected: set[int] = set()  # pids of processes stopped on purpose
        self.restarts: list[str] = []
        self._lock = threading.Lock()  # a restart and an expect_exit/stop never interleave
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prod-watchdog", daemon=True)

    def start(self, running: Iterable[str] = ()) -> None:
        """Watch from now on (``running``: as ``Watchdog.start``; every process here is watched anyway)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def expect_exit(self, name: str) -> None:
        """``name``'s current process is about to be stopped on purpose."""
        with self._lock:
            self.expected.add(self.procs[name].pid)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            pass
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 5)

    def check(self) -> list[str]:
        """One look: restart what exited unasked; returns the components restarted."""
        done = []
        with self._lock:
            for name in list(self.names()):
                proc = self.procs.get(name)
                if self._stop.is_set():
                    break
                if proc is None or proc.pid in self.expected or proc.poll() is None:
                    continue
                code = proc.returncode
                new = self.restart(name)
                self.restarts.append(announce(self.logs, f"the {name} exited (code {code}): restarted it as pid "
                                                         f"{new.pid}, its log is {self.logs / (name + '.log')}"))
                done.append(name)
        return done

    def _loop(self) -> None:
        watch(self._stop, self.interval, self.check)
