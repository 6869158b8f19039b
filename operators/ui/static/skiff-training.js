// The training card: training task instances joined with their Jobs and pods, filtered by state.
import { t } from "./skiff-i18n.js";
import { S, ago, data, gib, h, load, paged, pill, replace, tData, time, usageLine } from "./skiff-common.js";

const TI_KIND = { running: "ok", deferred: "ok", queued: "info", scheduled: "info", up_for_retry: "warn", restarting: "warn", failed: "bad", success: "ok" };
const FILTERS = { all: () => true, failed: (r) => r.state === "failed", success: (r) => r.state === "success",
  active: (r) => r.state !== "failed" && r.state !== "success" };

const PEAK_ANNOTATION = "skiff.io/usage-peak";  // operators/training/usage.py PEAK_ANNOTATION
const cores = (x) => (Math.round(x * 100) / 100).toString();

/** A training step's peak (operators/ui/live_usage.py step_peak): memory against its limit, CPU against its
 * request, per pod (a gang's highest pod); "so far" while it runs; in words when none is recorded or readable. */
export function peakLine(p) {
  if (!p) return null;
  if (p.missing) return h("div", { class: "sub peak", "data-missing": p.missing },
    p.missing === "unreadable" ? tData("peak.unreadable", { key: PEAK_ANNOTATION }) : t("peak." + p.missing));
  const memory = p.oom ? (p.memory_limit === null ? t("peak.oom") : tData("peak.memory_oom", { limit: `${gib(p.memory_limit)} ${t("unit.GiB")}` }))
    : p.memory_limit === null ? tData("peak.memory_no_limit", { used: `${gib(p.memory)} ${t("unit.GiB")}` })
      : tData("peak.memory", { used: gib(p.memory), limit: `${gib(p.memory_limit)} ${t("unit.GiB")}`, percent: Math.round(p.memory_percent) });
  const cpu = p.cpu === null ? null : p.cpu_request === null ? tData("peak.cpu_no_request", { used: cores(p.cpu) })
    : tData("peak.cpu", { used: cores(p.cpu), request: `${cores(p.cpu_request)} ${t("unit.cores")}` });
  return h("div", { class: "sub peak", "data-memory": p.memory, "data-cpu": p.cpu, "data-final": String(p.final) },
    memory, cpu ? [t("peak.and"), ...cpu] : null,
    p.readings ? [" · ", t("peak.readings", { n: p.readings })] : null, p.pods > 1 ? [" · ", t("peak.pods", { n: p.pods })] : null,
    p.final ? null : [" · ", t("peak.so_far")]);
}

function setScope(scope) {
  S.query = { ...(S.query || {}), training: scope === "all" ? "scope=all" : "" };
  S.pages.training = 0;
  load("training");
}

// whose training is shown: the caller's teams by default; Airflow's own rule lets them read more (say so)
function scopeNote(body) {
  if (body.teams === null || body.teams === undefined) return null;  // an Airflow admin: every team
  if (body.scope === "all") {
    return h("div", { class: "sub scope-note" }, t("train.scope_all"), " ",
      h("a", { href: "#", class: "scope-toggle", onclick: (ev) => { ev.preventDefault(); setScope("teams"); } }, t("train.scope_mine")));
  }
  return h("div", { class: "sub scope-note" }, tData("train.scope_teams", { teams: body.teams.join(", ") || "–" }),
    body.other_teams ? [" ", t("train.scope_more", { n: body.other_teams }), " ",
      h("a", { href: "#", class: "scope-toggle", onclick: (ev) => { ev.preventDefault(); setScope("all"); } }, t("train.scope_show"))] : "");
}

export function renderTraining(body) {
  const all = body.tasks || [];
  const rows = all.filter(FILTERS[S.filter] || FILTERS.all);
  const note = scopeNote(body);
  if (!rows.length) return replace("training", note, h("div", { class: "empty" }, t(all.length ? "train.none_filtered" : "train.none")));
  const root = (S.me && S.me.ui_root) || "/";
  const [shown, pager] = paged("training", rows);
  const heads = ["train.task", "train.state", "train.team", "train.node", "train.gpu", "train.started", "train.ended", "train.reason", null];
  replace("training", note, h("div", { class: "scroll" }, h("table", { id: "training-table" },
    h("thead", {}, h("tr", {}, heads.map((k) => h("th", {}, k ? t(k) : "")))),
    h("tbody", {}, shown.map((r) => h("tr", { "data-task": `${r.dag_id}.${r.task_id}`, "data-state": r.state, "data-run": r.run_id },
      h("td", {}, h("a", { href: `${root}dags/${encodeURIComponent(r.dag_id)}`, class: "dag-link" }, data("b", {}, r.dag_id)),
        data("b", {}, `.${r.task_id}`),
        h("div", { class: "sub" }, h("a", { href: `${root}dags/${encodeURIComponent(r.dag_id)}/runs/${encodeURIComponent(r.run_id)}`, class: "run-link mono" }, data("span", {}, r.run_id)),
        r.try_number > 1 ? " · " + t("train.try", { n: r.try_number }) : "")),
      h("td", {}, pill(t("ti." + (r.state === "deferred" ? "running" : r.state)), TI_KIND[r.state]),
        r.waiting_for ? h("div", { class: "sub waiting-for" }, r.waiting_for.startsWith("preempted") ? t("wait." + r.waiting_for)
          : t("train.waiting_for", { what: t("wait." + r.waiting_for) })) : null,
        r.queue_reason ? data("div", { class: "sub queue-reason" }, r.queue_reason) : null),
      data("td", {}, r.team || "–"),
      // a distributed step: one row, its node the shown pod's, "×N" its pods
      h("td", {}, data("span", { class: "mono" }, r.node || "–"), r.workers > 1 ? h("div", { class: "sub" }, "×" + r.workers) : null,
        usageLine(r.usage), peakLine(r.peak)),
      h("td", { class: "num" }, r.gpu ? String(r.gpu) : "–"),
      h("td", { class: "num" }, time(r.started) || "–", r.age_seconds !== null && !r.ended ? h("div", { class: "sub" }, ago(r.age_seconds)) : null),
      h("td", { class: "num" }, time(r.ended) || "–"),
      // the reason's class in the page's language, the cluster's own words (English) under it
      h("td", { class: r.reason ? "reason" : "" }, r.reason_class ? h("b", { class: "reason-class" }, t("reason." + r.reason_class)) : null,
        r.reason ? data("div", { class: "reason-text" }, r.reason) : ""),
      h("td", {}, h("a", { href: root + r.log_path, class: "log-link" }, t("train.log"))))))), pager));
}
