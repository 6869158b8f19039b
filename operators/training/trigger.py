"""The deferrable half of ``TrainingJobOperator``: runs in the triggerer, watches the Job and streams its logs.

The Job and its pods are seen through the process's shared informers (``operators.k8s.informer``): all the
triggers following Jobs in one namespace share one Job watch and one pod watch, so the API server's open
watches grow with the namespaces, not the waiting tasks. Log streams stay one per pod, while it runs.

Importable from the installed ``operators`` package (the triggerer imports triggers by class path).
Log lines go through ``self.log``, which Airflow 3 writes into the task's log while the task is deferred
(a file of its own beside the worker's); the last lines also travel in the event, for the worker to write.
``on_kill`` (Airflow 3.3: a user marked/cleared the deferred task) deletes the Job, propagation Background, so
its pods go too; ``cleanup`` only releases local resources (it also runs on triggerer restarts, when the Job
must keep running).  A trigger *timeout* (execution_timeout) is handled worker-side in
``TrainingJobOperator.resume_execution``.

Known limits: a trigger moved to another triggerer (restart, rebalancing) starts its log streams again from the
pod's first line, so the task log can show lines twice; a task killed before any triggerer has picked the
trigger up never reaches ``on_kill`` (Airflow only cancels running triggers): the Job then ends at its
``activeDeadlineSeconds`` (the task's ``execution_timeout``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from operators.k8s.connection import async_api_client
from operators.k8s.informer import shared_informers
from operators.k8s.resource import JOBS
from operators.k8s.rest import AsyncKube
from operators.training.follow import FollowSettings, follow_job

LOG_DRAIN_SECONDS = 1.0


class TrainingJobTrigger(BaseTrigger):
    def __init__(self, *, namespace: str, name: str, uid: str | None = None,
                 kubernetes_conn_id: str | None = None, settings: dict | None = None,
                 not_before: float | None = None) -> None:
        super().__init__()
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.settings = settings or {}
        self.not_before = not_before

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"namespace": self.namespace, "name": self.name, "uid": self.uid,
             "kubernetes_conn_id": self.kubernetes_conn_id, "settings": self.settings,
             "not_before": self.not_before},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("Watching Job %s/%s and streaming its pods' logs", self.namespace, self.name)
        last_line = 0.0  # monotonic time of the last pod line logged

        def emit(line: str) -> None:
            nonlocal last_line
            last_line = time.monotonic()
            self.log.info("%s", line)

        informers = shared_informers(self.kubernetes_conn_id)
        async with informers.api() as api:  # the process's one client for the connection (log streams, reads)
            result = await follow_job(api, self.namespace, self.name, FollowSettings(**self.settings), emit,
                                      uid=self.uid, informers=informers)
        # A Job that ends within seconds of the deferral can fire before the scheduler has processed the
        # worker's defer-exit, which Airflow 3.3 then treats as "state changed externally" and fails the try
        # (apache/airflow#67287, #71580, #72716). Holding such an early event a few seconds avoids it.
        if self.not_before and (hold := self.not_before - time.time()) > 0:
            self.log.debug("Job finished early; resuming the task in %.1fs (Airflow defer-race guard)", hold)
            await asyncio.sleep(hold)
        # The triggerer closes this trigger's log file as soon as it learns the trigger finished, and that news
        # can overtake log lines still queued on its log socket (they then go to the triggerer's own log): a
        # burst of pod lines right before the event loses its end. A short pause lets them drain; the worker
        # also writes the pod's last lines into the task log from the event (TrainingJobOperator).
        if (drain := LOG_DRAIN_SECONDS - (time.monotonic() - last_line)) > 0:
            await asyncio.sleep(drain)
        yield TriggerEvent(result)

    async def on_kill(self) -> None:
        await delete_job(self.kubernetes_conn_id, self.namespace, self.name, log=self.log)


async def delete_job(conn_id: str | None, namespace: str, name: str, *, log=None) -> bool:
    """Delete the Job and (Background propagation) its pods; False if it was already gone."""
    async with async_api_client(conn_id) as api:
        deleted = await AsyncKube(api).delete(JOBS, namespace, name)
    if deleted and log is not None:
        log.info("Deleted Job %s/%s (propagation Background)", namespace, name)
    return deleted
