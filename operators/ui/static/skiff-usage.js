// The GPU-hours card: a horizontal SVG bar per user from the last usage report (the usage_report DAG's).
import { formatTime, t } from "./skiff-i18n.js";
import { $, S, h, replace, tData } from "./skiff-common.js";

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
    // held (the Jobs' GPU requests x their run time) and, where the report read Prometheus, used (the GPUs' utilisation);
    // hundredths of an hour, as the report's rows are rounded (views.gpu_hours_by_user): tenths drew 0.01 h as "0 h"
    const used = r.gpu_hours_used === null || r.gpu_hours_used === undefined ? null
      : { used: tickLabel(r.gpu_hours_used), share: Math.round((100 * r.gpu_hours_used) / r.gpu_hours) };
    bar.append(Object.assign(document.createElementNS(SVG, "title"), { textContent: t("usage.bar", { user: r.user, hours: tickLabel(r.gpu_hours) })
      + (used ? " · " + t("usage.used", used) : "") }));
    el("text", { x: left + w + 6, y: y + 16, class: "value", translate: "no", "data-used": used ? used.used : "" },
      tickLabel(r.gpu_hours) + " h" + (used ? ` · ${used.share} %` : ""));
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
  // used GPU-hours not known (no Prometheus, or it did not answer): said once under the chart, never a number
  const noUsed = body.generated && rows.length && body.used_problem ? h("div", { class: "sub used-unknown" }, t("usage.used_unknown")) : null;
  replace("usage", usageChart(rows), empty ? h("div", { class: "empty chart-empty" }, empty) : null, noUsed);
}
