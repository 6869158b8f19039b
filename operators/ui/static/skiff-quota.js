// The team-quota card: each team's ResourceQuota as bars (used / hard) and, with Kueue, its queues' figures.
import { t } from "./skiff-i18n.js";
import { data, h, num, pill, replace } from "./skiff-common.js";

export function renderQuota(body) {
  const teams = body.teams || [];
  // queueing: kueue: Kueue's queues decide, the ResourceQuota is the team's ceiling (a hard cap for pods outside Kueue)
  const kueue = Object.keys(body.queues || {}).length > 0;
  const hint = document.querySelector("#quota-card .hint");
  if (hint) hint.textContent = t(kueue ? "quota.hint_kueue" : "quota.hint");
  if (!teams.length) return replace("quota", h("div", { class: "empty" }, t("quota.none")));
  replace("quota", teams.map((tm) => h("div", { class: "team", "data-team": tm.team },
    h("h3", {}, data("span", {}, tm.team), tm.missing ? pill(t("quota.missing"), "warn") : null),
    kueue && tm.bars.length ? h("div", { class: "sub ceiling-note" }, t("quota.ceiling")) : null,
    tm.bars.map((b) => {
      const level = b.percent >= 90 ? "bad" : b.percent >= 70 ? "warn" : "";
      return h("div", { class: "bar", "data-resource": b.resource },
        h("div", { class: "bar-label" }, h("span", {}, t("res." + b.resource)),
          h("span", {}, h("b", { class: "used" }, num(b.used)), " / ", h("span", { class: "hard" }, num(b.hard)), " " + t("unit." + b.unit))),
        h("div", { class: "track", title: b.percent + "%" }, h("div", { class: "fill " + level, style: `width:${Math.min(100, b.percent)}%` })));
    }),
    queueTable((body.queues || {})[tm.team]))));
}

// queueing: kueue: each of the team's Kueue queues, per flavor its nominal quota (the platform file's
// kueue.flavors.<flavor>) and what it borrows from the cohort or lends to it
function queueTable(queues) {
  if (!queues) return null;
  const rows = [];
  for (const kind of ["training", "dev"]) {
    for (const f of queues[kind] || []) {
      rows.push(h("tr", { "data-queue": kind, "data-flavor": f.flavor, "data-resource": f.resource },
        h("td", {}, t("queue." + kind), " · ", t("queue.flavor", { flavor: f.flavor }), " · ", t("res." + f.resource)),
        ...["nominal", "used", "borrowed", "lent"].map((k) => h("td", { class: "num " + k }, num(f[k]))),
        h("td", { class: "sub" }, t("unit." + f.unit))));
    }
  }
  if (!rows.length) return null;
  return h("table", { class: "queues" },
    h("thead", {}, h("tr", {}, h("th", { title: t("queue.title_hint") }, t("queue.title")),
      ...["nominal", "used", "borrowed", "lent"].map((k) => h("th", { class: "num" }, t("queue." + k))), h("th", {}, ""))),
    h("tbody", {}, rows));
}
