"""GPU-hours *held* and *used* per user, team and kind of pod (training step, development instance, Sedna
worker), and the efficiency (used / held), for the usage report (issue 37).

All three measures come from Prometheus, summed over the report's period by one instant query (a subquery per
measure at ``STEP_SECONDS`` resolution, evaluated at the period's end), joined on (namespace, pod) with Skiff's
``skiff_pod_info`` (user, team, kind):

* **held**: ``skiff_pod_requests{resource="gpu"}`` (what each live pod of Skiff's requests). Prometheus, not
  the cluster, because the report covers a *past* period: the cluster knows only the pods alive now (an
  instance stopped last week, a step's pod gone with its Job, which Kubernetes deletes a day after it finished
  by default: ``ttl_seconds_after_finished``), while Prometheus has each pod's requests for as far back as it
  keeps data. Held from the Jobs (``usage.summarise``'s ``gpu_hours``) stays the per-user bar; it is not the
  denominator here: it counts only Jobs still in the cluster, in the period they finished, so a step running
  now or one deleted by its TTL would put used against a held it was never counted in;
* **used**: dcgm-exporter's ``DCGM_FI_DEV_GPU_UTIL`` (percent, per GPU, labelled with the pod that holds it),
  a GPU at 50 % for two hours being one GPU-hour used;
* **measured**: the held GPU-hours for which dcgm-exporter reported the pod's GPUs (a node without
  dcgm-exporter, a pod pending before it has a GPU, a failed scrape: held but not measured). Efficiency is used
  / measured, so a missing exporter reads as not known, never as an idle GPU.

Each pod is in exactly one row (its info series' user, team and kind; the ``max by`` keeps one series per pod
when several api-server replicas serve the same info), and the three measures of a row are sums over the same
samples, so held, used and measured line up and nothing is counted twice. Prometheus not configured, or an
error: the report says held and used are not known (``source`` None and ``problem``), never a number.
"""

from __future__ import annotations

from datetime import datetime

STEP_SECONDS = 300  # the subqueries' resolution: one sample per pod every 5 minutes of the period
INFO = "max by (namespace, pod, user, team, kind) (skiff_pod_info)"
# per pod: GPUs requested, GPUs busy (0..n), and GPUs requested where dcgm-exporter reports the pod's GPUs
HELD = 'max by (namespace, pod) (skiff_pod_requests{resource="gpu"} > 0)'
USED = 'sum by (namespace, pod) (max by (namespace, pod, UUID) (DCGM_FI_DEV_GPU_UTIL{pod!=""}) / 100)'
MEASURED = f'{HELD} and on (namespace, pod) DCGM_FI_DEV_GPU_UTIL{{pod!=""}}'
MEASURES = {"held": HELD, "used": USED, "measured": MEASURED}
KIND_ORDER = ("training", "instance", "sedna")


def measure_query(per_pod: str, period_seconds: int, step_seconds: int = STEP_SECONDS) -> str:
    """GPU-hours of ``per_pod`` (a per-(namespace, pod) GPU count) per (user, team, kind) over the period."""
    # (per_pod): "and" binds looser than "*", so a bare "held and on (...) dcgm * on (...) info" joins wrongly
    joined = f"({per_pod}) * on (namespace, pod) group_left (user, team, kind) {INFO}"
    return (f"sum by (user, team, kind) (sum_over_time(({joined})[{period_seconds}s:{step_seconds}s])) "
            f"* {step_seconds} / 3600")


def query(period_seconds: int, step_seconds: int = STEP_SECONDS) -> str:
    """The three measures in one answer (evaluated at one time), told apart by a ``measure`` label."""
    return " or ".join(f'label_replace({measure_query(expr, period_seconds, step_seconds)}, "measure", "{name}", '
                       f'"", "")' for name, expr in MEASURES.items())


Key = tuple[str, str, str]  # (user, team namespace, kind)


def parse(body: dict) -> dict[Key, dict[str, float]]:
    """(user, team namespace, kind) -> {held, used, measured} GPU-hours, from Prometheus' query answer."""
    if body.get("status") != "success":
        raise ValueError(f"Prometheus answered {body.get('status')!r}: {body.get('error', '')}"[:300])
    out: dict[Key, dict[str, float]] = {}
    for s in body["data"]["result"]:
        m = s["metric"]
        row = out.setdefault((m.get("user", ""), m.get("team", ""), m.get("kind", "")), {})
        row[m["measure"]] = float(s["value"][1])
    return out


def read(url: str, since: datetime, until: datetime, step_seconds: int = STEP_SECONDS,
         timeout: float = 60) -> dict[Key, dict[str, float]]:
    """Prometheus' answer for ``[since, until)`` (raises on a transport error or a refused query)."""
    import httpx

    period = max(int((until - since).total_seconds()), step_seconds)
    r = httpx.get(url.rstrip("/") + "/api/v1/query", timeout=timeout,
                  params={"query": query(period, step_seconds), "time": f"{until.timestamp():.3f}"})
    if r.status_code >= 500 or "json" not in r.headers.get("content-type", ""):
        raise ValueError(f"Prometheus answered HTTP {r.status_code}")
    return parse(r.json())


def _row(held: float, used: float, measured: float) -> dict:
    """Rounded hours and the efficiency (% of measured); used is not known where nothing was measured."""
    known = measured > 0
    return {"gpu_hours_held": round(held, 4), "gpu_hours_measured": round(measured, 4),
            "gpu_hours_used": round(used, 4) if known else None,
            "efficiency_percent": round(100 * used / measured, 1) if known else None}


def _order(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def section(hours: dict[Key, dict[str, float]] | None, problem: str | None, team_of_ns: dict[str, str],
            step_seconds: int = STEP_SECONDS) -> dict:
    """The report's ``gpu`` section: rows per (user, team, kind) and per (team, kind), each team also with its
    ``kind: "all"`` total; ``hours`` None (not known): no rows, ``source`` None and the ``problem``."""
    if hours is None:
        return {"source": None, "problem": problem, "step_seconds": step_seconds, "by_user": [], "by_team": []}
    users: dict[Key, list[float]] = {}
    teams: dict[tuple[str, str], list[float]] = {}
    for (user, ns, kind), m in hours.items():
        if not m.get("held"):  # no GPU held (used alone would be a pod the info series no longer names)
            continue
        values = [m.get("held", 0.0), m.get("used", 0.0), m.get("measured", 0.0)]
        team = team_of_ns.get(ns, ns)
        for table, key in ((users, (user, team, kind)), (teams, (team, kind)), (teams, (team, "all"))):
            acc = table.setdefault(key, [0.0, 0.0, 0.0])
            for i, v in enumerate(values):
                acc[i] += v
    by_user = [{"user": u, "team": t, "kind": k, **_row(*v)}
               for (u, t, k), v in sorted(users.items(), key=lambda kv: (kv[0][1], kv[0][0], _order(kv[0][2])))]
    by_team = [{"team": t, "kind": k, **_row(*v)}
               for (t, k), v in sorted(teams.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]), kv[0][1]))]
    return {"source": "prometheus", "problem": None, "step_seconds": step_seconds, "by_user": by_user,
            "by_team": by_team}
