// The GPU-hours card: a horizontal SVG bar per user from the last usage report (the usage_report DAG's), and its
// GPU efficiency table (held and used per team, user and kind of pod, from Prometheus).
import { formatTime, t } from "./skiff-i18n.js";
import { $, S, data, h, replace, tData } from "./skiff-common.js";

const SVG = "http://www.w3.org/2000/svg";
function niceMax(x) {
  const p = 10 ** Math.floor(Math.log10(Math.max(x, 1e-9)));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((v) => v >= x) || 10 * p;
}

const AXIS_MIN = 0.1;  // hours (6 minutes)
/** A tick's label: three significant digits, so that five ticks of a small axis never read alike. */
export function tickLabel(hours) { return String(Number(hours.toPrecision(3))); }

function usageChart(rows) {
  // a horizontal bar per user, an x axis in hours with 5 ticks; no rows: the axes and a line saying what will come
  const rowH = 26, left = 110, right = 60, width = 520, axisH = 34, top = 6;
  const height = top + Math.max(rows.length, 2) * rowH + axisH;
  // at least AXIS_MIN hours: short steps (seconds of GPU) gave an axis of 0.0003 h whose ticks all read "0"
  const max = rows.length ? niceMax(Math.max(...rows.map((r) => r.gpu_hours), AXIS_MIN)) : 4, plotW = width - left - right;
  const svg = document.createElementNS(SVG, "svg");
  for (const [k, v] of Object.entries({ class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": t("usage.title") })) svg.setAttribute(k, v);
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const axisY = height - axisH;
  for (let i = 0; i <= 4; i++) {
    const x = left + (plotW * i) / 4;
    el("line", { x1: x, x2: x, y1: top, y2: axisY, class: i ? "grid" : "axis" });
    el("text", { x, y: axisY + 14, "text-anchor": "middle", class: "tick" }, tickLabel((max * i) / 4));
  }
  el("line", { x1: left, x2: left + plotW, y1: axisY, y2: axisY, class: "axis" });
  el("text", { x: left + plotW / 2, y: axisY + 30, "text-anchor": "middle", class: "axis-label" }, t("usage.axis"));
  rows.forEach((r, i) => {
    const y = top + i * rowH, w = Math.max(2, (plotW * r.gpu_hours) / max);
    el("text", { x: left - 8, y: y + 16, "text-anchor": "end", translate: "no" }, r.user);
    const bar = el("rect", { x: left, y: y + 4, width: w, height: rowH - 8, rx: 4,
      class: "bar-rect" + (S.me && r.user === S.me.user ? " me" : ""), "data-user": r.user });
    // held by training Jobs (their GPU requests x their run time), in hundredths of an hour, as the report's rows
    // are rounded (views.gpu_hours_by_user): tenths drew 0.01 h as "0 h". Used against held: the table below
    bar.append(Object.assign(document.createElementNS(SVG, "title"), { textContent: t("usage.bar", { user: r.user, hours: tickLabel(r.gpu_hours) }) }));
    el("text", { x: left + w + 6, y: y + 16, class: "value", translate: "no" }, tickLabel(r.gpu_hours) + " h");
  });
  return svg;
}

export function renderUsage(body) {
  const rows = (body.users || []).slice().sort((a, b) => b.gpu_hours - a.gpu_hours);
  if (body.since && body.until) {
    const days = Math.round((Date.parse(body.until) - Date.parse(body.since)) / 86400000);
    $("usage-hint").replaceChildren(...tData("usage.hint_report", { days, time: formatTime(body.generated, S.zone) }));
  }
  const empty = !body.generated ? t("usage.no_report") : !rows.length ? t("usage.empty") : null;
  replace("usage", usageChart(rows), empty ? h("div", { class: "empty chart-empty" }, empty) : null,
    body.generated ? efficiencyTable(body.efficiency) : null);
}

// hundredths of an hour, as the report's bars (a 30-day total of 1234.56 h stays 1234.56 h, not 1.23e3)
const hours = (x) => data("span", {}, String(Math.round(x * 100) / 100) + " h");
const KINDS = { training: "usage.kind.training", instance: "usage.kind.instance", sedna: "usage.kind.sedna", all: "usage.kind.all" };

/** GPU-hours held and used and the efficiency per team and per user, each kind of pod on its own row (the report's
 * gpu section, from Prometheus: operators/platform/gpu_used.py). Not known: one line saying so and why, no number. */
function efficiencyTable(eff) {
  if (!eff) return null;  // a report written before it had the section
  const box = h("div", { class: "efficiency", id: "gpu-efficiency" }, h("h3", {}, t("usage.eff_title")));
  if (eff.source === null || eff.source === undefined) {
    box.append(h("div", { class: "sub eff-unknown" }, t("usage.eff_unknown"), " ", data("span", { class: "mono" }, eff.problem || "")));
    return box;
  }
  if (!eff.teams.length && !eff.users.length) {
    box.append(h("div", { class: "sub" }, t("usage.eff_empty")));
    return box;
  }
  const cell = (r) => {
    if (r.efficiency_percent === null) return h("td", { class: "num eff-none", title: t("usage.eff_not_measured") }, t("usage.not_known"));
    const partial = Math.round(100 * r.gpu_hours_measured) < Math.round(100 * r.gpu_hours_held);
    return h("td", { class: "num", "data-efficiency": r.efficiency_percent }, data("b", {}, `${r.efficiency_percent} %`),
      partial ? h("div", { class: "sub" }, tData("usage.eff_of_measured", { hours: String(Math.round(r.gpu_hours_measured * 100) / 100) })) : null);
  };
  const row = (who, sub, r, cls) => h("tr", { class: cls, "data-team": r.team, "data-user": r.user, "data-kind": r.kind },
    h("td", {}, who, sub), h("td", {}, KINDS[r.kind] ? t(KINDS[r.kind]) : data("span", {}, r.kind)), h("td", { class: "num" }, hours(r.gpu_hours_held)),
    h("td", { class: "num" }, r.gpu_hours_used === null ? t("usage.not_known") : hours(r.gpu_hours_used)), cell(r));
  const teamRows = eff.teams.map((r) => row(data("b", {}, r.team), null, r, "eff-team" + (r.kind === "all" ? " eff-total" : "")));
  const userRows = eff.users.map((r) => row(r.user ? data("span", {}, r.user) : h("span", { class: "sub" }, t("usage.no_user")),
    data("div", { class: "sub" }, r.team), r, "eff-user"));
  const heads = ["usage.eff_who", "usage.eff_kind", "usage.eff_held", "usage.eff_used", "usage.eff_share"];
  box.append(h("div", { class: "scroll" }, h("table", { class: "eff" },
    h("thead", {}, h("tr", {}, heads.map((k) => h("th", {}, t(k))))),
    h("tbody", {}, teamRows, userRows))), h("div", { class: "sub" }, t("usage.eff_hint")));
  return box;
}
