// The training card: training task instances joined with their Jobs and pods, filtered by state.
import { t } from "./skiff-i18n.js";
import { S, ago, data, h, paged, pill, replace, time } from "./skiff-common.js";

const TI_KIND = { running: "ok", deferred: "ok", queued: "info", scheduled: "info", up_for_retry: "warn", restarting: "warn", failed: "bad", success: "ok" };
const FILTERS = { all: () => true, failed: (r) => r.state === "failed", success: (r) => r.state === "success",
  active: (r) => r.state !== "failed" && r.state !== "success" };

export function renderTraining(body) {
  const all = body.tasks || [];
  const rows = all.filter(FILTERS[S.filter] || FILTERS.all);
  if (!rows.length) return replace("training", h("div", { class: "empty" }, t(all.length ? "train.none_filtered" : "train.none")));
  const root = (S.me && S.me.ui_root) || "/";
  const [shown, pager] = paged("training", rows);
  const heads = ["train.task", "train.state", "train.team", "train.node", "train.gpu", "train.started", "train.ended", "train.reason", null];
  replace("training", h("div", { class: "scroll" }, h("table", { id: "training-table" },
    h("thead", {}, h("tr", {}, heads.map((k) => h("th", {}, k ? t(k) : "")))),
    h("tbody", {}, shown.map((r) => h("tr", { "data-task": `${r.dag_id}.${r.task_id}`, "data-state": r.state, "data-run": r.run_id },
      h("td", {}, data("b", {}, `${r.dag_id}.${r.task_id}`), h("div", { class: "sub" }, data("span", { class: "mono" }, r.run_id),
        r.try_number > 1 ? " · " + t("train.try", { n: r.try_number }) : "")),
      h("td", {}, pill(t("ti." + (r.state === "deferred" ? "running" : r.state)), TI_KIND[r.state]),
        r.waiting_for ? h("div", { class: "sub" }, t("train.waiting_for", { what: t("wait." + r.waiting_for) })) : null,
        r.queue_reason ? data("div", { class: "sub queue-reason" }, r.queue_reason) : null),
      data("td", {}, r.team || "–"),
      data("td", { class: "mono" }, r.node || "–"),
      h("td", { class: "num" }, r.gpu ? String(r.gpu) : "–"),
      h("td", { class: "num" }, time(r.started) || "–", r.age_seconds !== null && !r.ended ? h("div", { class: "sub" }, ago(r.age_seconds)) : null),
      h("td", { class: "num" }, time(r.ended) || "–"),
      data("td", { class: r.reason ? "reason" : "" }, r.reason || ""),
      h("td", {}, h("a", { href: root + r.log_path, class: "log-link" }, t("train.log"))))))), pager));
}
