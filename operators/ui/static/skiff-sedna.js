// The Sedna card: FederatedLearningJobs and JointInferenceServices with their children and events.
import { t } from "./skiff-i18n.js";
import { data, h, pill, replace, time } from "./skiff-common.js";

export function renderSedna(body) {
  const rows = body.workloads || [];
  if (!body.installed) return replace("sedna", h("div", { class: "empty" }, t("sedna.not_installed")));
  if (!rows.length) return replace("sedna", h("div", { class: "empty" }, t("sedna.none")));
  replace("sedna", h("table", { id: "sedna-table" },
    h("thead", {}, h("tr", {}, ["sedna.workload", "sedna.phase", "sedna.children", "sedna.events"].map((k) => h("th", {}, t(k))))),
    h("tbody", {}, rows.map((w) => h("tr", { "data-workload": `${w.namespace}/${w.name}` },
      h("td", {}, data("b", {}, w.name), data("div", { class: "sub" }, `${w.kind} · ${w.namespace}`)),
      h("td", {}, data("span", {}, pill(w.phase, /fail/i.test(w.phase) ? "bad" : /succeed|running|ready/i.test(w.phase) ? "ok" : "info")),
        w.error ? data("div", { class: "sub reason" }, w.error) : null),
      h("td", {}, pill(`${w.actual}/${w.desired}`, w.in_sync ? "ok" : "warn"),
        data("div", { class: "sub" }, w.children.map((c) => `${c.actual}/${c.desired} ${c.kind}`).join(" · "))),
      h("td", {}, w.events.length ? w.events.map((e) => data("div", { class: "sub" },
        pill(e.reason || e.type || "", e.type === "Warning" ? "warn" : ""), " ", time(e.time), " ", e.message || "")) : "–"))))));
}
