"""GPU-hours *used* by training steps per user and team, beside the GPU-hours *held* the usage report counts.

Held is a Job's GPU request times its run time (``usage.summarise``); used is what the GPUs did meanwhile:
dcgm-exporter's ``DCGM_FI_DEV_GPU_UTIL`` (percent, per GPU, with the pod that holds it) joined with Skiff's
``skiff_pod_info`` (the step's user and team), summed over the period in Prometheus. A GPU at 50 % for two hours
is one GPU-hour used of two held. Only training steps (``kind="training"``), as held counts Jobs only.

The source is Prometheus (``[skiff] prometheus_url``), one instant query with a subquery over the period at
``STEP`` resolution, evaluated at the period's end. No address, or an error: the report says used is not known
(``source`` and ``problem``), never a number.
"""

from __future__ import annotations

from datetime import datetime

STEP_SECONDS = 300  # the subquery's resolution: one utilisation sample per GPU every 5 minutes of the period


def query(period_seconds: int, step_seconds: int = STEP_SECONDS) -> str:
    """GPU-hours used per (user, team) over the ``period_seconds`` before the evaluation time."""
    per_pod = ('sum by (namespace, pod) (max by (namespace, pod, UUID) (DCGM_FI_DEV_GPU_UTIL{pod!=""}) / 100)')
    info = 'max by (namespace, pod, user, team) (skiff_pod_info{kind="training"})'
    joined = f"{per_pod} * on (namespace, pod) group_left (user, team) {info}"
    return (f"sum by (user, team) (sum_over_time(({joined})[{period_seconds}s:{step_seconds}s])) "
            f"* {step_seconds} / 3600")


def parse(body: dict) -> dict[tuple[str, str], float]:
    """(user, team namespace) -> GPU-hours used, from Prometheus' query answer."""
    if body.get("status") != "success":
        raise ValueError(f"Prometheus answered {body.get('status')!r}: {body.get('error', '')}"[:300])
    return {(s["metric"].get("user", ""), s["metric"].get("team", "")): float(s["value"][1])
            for s in body["data"]["result"]}


def read(url: str, since: datetime, until: datetime, step_seconds: int = STEP_SECONDS,
         timeout: float = 60) -> dict[tuple[str, str], float]:
    """Prometheus' answer for ``[since, until)`` (raises on a transport error or a refused query)."""
    import httpx

    period = max(int((until - since).total_seconds()), step_seconds)
    r = httpx.get(url.rstrip("/") + "/api/v1/query", timeout=timeout,
                  params={"query": query(period, step_seconds), "time": f"{until.timestamp():.3f}"})
    if r.status_code >= 500 or "json" not in r.headers.get("content-type", ""):
        raise ValueError(f"Prometheus answered HTTP {r.status_code}")
    return parse(r.json())


def add_used(report: dict, used: dict[tuple[str, str], float] | None, problem: str | None,
             team_of_ns: dict[str, str]) -> dict:
    """Each ``by_user`` row gets ``gpu_hours_used`` (None when not known) and the report says the source."""
    by_row: dict[tuple[str, str], float] = {}
    for (user, ns), hours in (used or {}).items():
        key = (user, team_of_ns.get(ns, ns))
        by_row[key] = by_row.get(key, 0.0) + hours
    for row in report.get("by_user") or []:
        row["gpu_hours_used"] = None if used is None else round(by_row.get((row["user"], row["team"]), 0.0), 4)
    report["gpu_used"] = {"source": "prometheus" if used is not None else None, "problem": problem}
    return report
