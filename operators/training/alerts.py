"""Failure (and retry) e-mails through the smtp provider's ``SmtpNotifier``, and the one-line DAG defaults.

    default_args=skiff_default_args(team="recsys", owner_email="alice@example.com")

gives every task retries with exponential back-off, an e-mail on failure (optionally on retry) and, for
``TrainingJobOperator``, the team's namespace (its queue).

Subject: ``[Skiff] <dag>.<task> failed: <reason>``; body: reason, try number, log tail, link to the task log.
The reason travels from ``execute`` to the callback inside the exception (``TrainingJobFailed.reason``); other
exceptions contribute their first line.  The mail body is built here and handed to ``SmtpNotifier.notify``
directly, so nothing from the logs is ever evaluated as a Jinja template.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from airflow.configuration import conf

from operators import settings
from operators.training.operator import TrainingJobFailed
from operators.training.spec import default_pvc


def failure_reason(exception: BaseException | str | None) -> str:
    if isinstance(exception, TrainingJobFailed):
        return exception.reason
    if exception is None:
        return "unknown (no exception recorded)"
    text = str(exception).strip() or type(exception).__name__
    return text.splitlines()[0][:300]


def log_tail(exception: BaseException | None) -> list[str]:
    return list(getattr(exception, "log_tail", []) or [])


def task_log_url(ti: Any) -> str | None:
    """The UI link to this try's log: ``ti.log_url`` when Airflow provides it, else built from config."""
    url = getattr(ti, "log_url", None)
    if url:
        return str(url)
    base = settings.get("ui_base_url") or conf.get("api", "base_url", fallback=None)
    if not base or ti is None:
        return None
    run_id, map_index = quote(str(ti.run_id), safe=""), getattr(ti, "map_index", -1)
    url = f"{base.rstrip('/')}/dags/{ti.dag_id}/runs/{run_id}/tasks/{ti.task_id}"
    if map_index not in (None, -1):
        url += f"/mapped/{map_index}"
    return f"{url}?try_number={ti.try_number}"


def compose(context: dict, event: str = "failed") -> tuple[str, str]:
    """(subject, html body) for a task that ``event`` ("failed" / "is up for retry")."""
    ti = context.get("ti") or context.get("task_instance")
    exc = context.get("exception")
    reason = failure_reason(exc)
    dag_id = getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", "?")
    task_id = getattr(ti, "task_id", "?")
    subject = f"[Skiff] {dag_id}.{task_id} {event}: {reason}"
    subject = " ".join(subject.split())[:250]  # one header line
    url = task_log_url(ti)
    tail = log_tail(exc)
    rows = [
        ("Task", f"{dag_id}.{task_id}"),
        ("Run", str(getattr(ti, "run_id", "?"))),
        ("Try", str(getattr(ti, "try_number", "?"))),
        ("Reason", reason),
    ]
    rows += [("Preempted", p) for p in getattr(exc, "preemptions", None) or []]  # Kueue: when, and by what
    rows += [("Usage", line) for line in getattr(exc, "usage", None) or []]      # training/usage.py
    body = ["<h3>Skiff: a training task " + html.escape(event) + "</h3>", "<table>"]
    body += [f"<tr><th align='left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows]
    body.append("</table>")
    if url:
        body.append(f"<p><a href=\"{html.escape(url, quote=True)}\">Task log in Airflow</a>: "
                    f"{html.escape(url)}</p>")
    if tail:
        body.append(f"<p>Last {len(tail)} log lines:</p><pre>" + html.escape("\n".join(tail)) + "</pre>")
    return subject, "\n".join(body)


class SkiffAlert:
    """A task callback that mails ``to`` through ``SmtpNotifier`` (connection ``smtp_conn_id``)."""

    def __init__(self, to: str | Iterable[str], *, event: str = "failed", smtp_conn_id: str = "smtp_default"):
        self.to = [to] if isinstance(to, str) else list(to)
        self.event = event
        self.smtp_conn_id = smtp_conn_id

    def __call__(self, context: dict) -> None:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier  # where it runs, not at DAG parse

        subject, body = compose(context, self.event)
        SmtpNotifier(to=self.to, subject=subject, html_content=body, smtp_conn_id=self.smtp_conn_id).notify(context)

    def __repr__(self) -> str:
        return f"SkiffAlert(to={self.to!r}, event={self.event!r})"


def skiff_default_args(
    *,
    team: str,
    owner_email: str | Iterable[str],
    owner: str | None = None,
    retries: int = 2,
    retry_delay: timedelta = timedelta(minutes=1),
    max_retry_delay: timedelta = timedelta(minutes=30),
    alert_on_retry: bool = False,
    smtp_conn_id: str = "smtp_default",
    **extra: Any,
) -> dict[str, Any]:
    """``default_args`` for a team's DAG: retries with exponential back-off, failure e-mails, the team queue.

    ``owner`` (default: the part of the first e-mail address before ``@``) also names the default PVC,
    ``<owner>-home``, that ``TrainingJobOperator`` mounts at ``/root``.
    """
    emails = [owner_email] if isinstance(owner_email, str) else list(owner_email)
    if not emails or not all(isinstance(e, str) and "@" in e for e in emails):
        raise ValueError(f"owner_email={owner_email!r}: give at least one e-mail address")
    owner = owner or emails[0].split("@", 1)[0]
    default_pvc(owner)  # same sanitising the operator applies
    args: dict[str, Any] = {
        "owner": owner,
        "namespace": team,
        "retries": retries,
        "retry_delay": retry_delay,
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": max_retry_delay,
        "on_failure_callback": SkiffAlert(emails, smtp_conn_id=smtp_conn_id),
    }
    if alert_on_retry:
        args["on_retry_callback"] = SkiffAlert(emails, event="is up for retry", smtp_conn_id=smtp_conn_id)
    args.update(extra)
    return args
