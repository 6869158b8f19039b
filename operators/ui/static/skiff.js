// Skiff's page, an Airflow 3 React app (plugin ``react_apps``): the Airflow UI imports this module and renders
// the component it leaves in ``globalThis.AirflowPlugin`` inside its own page, with no iframe, so links open as
// anywhere else in Airflow. The module brings no React of its own (Airflow lends none to plugins and there is no
// build step here): the component returns one host element, a <div>, and a ref callback renders the page into it
// with the DOM API. Opened alone (``/skiff/``) the same module renders into that page's <div id=skiff-standalone>.
//
// It polls the plugin's JSON API (URLs relative to this module: works under any base path) and renders with
// textContent only, so no user-supplied text (names, reasons, events) is ever parsed as HTML. Data values are in
// elements marked translate="no"; every other word comes from skiff-i18n.js.
import { MESSAGES, actionWord, formatTime, language, t, timeZone } from "./skiff-i18n.js";

const POLL_MS = 4000;
const PAGE_ROWS = 50;  // rows per page of a table: the browser lays out 50 rows at each refresh, not 500 (BENCHMARKS.md ui)
const HERE = new URL(".", import.meta.url);   // <ui root>skiff/static/
const API = new URL("../api/", HERE);         // <ui root>skiff/api/
let S = null;                                 // the mounted page's state (one at a time)

// ---------------------------------------------------------------- React host element
// React 19's element object (react/packages/shared/ReactSymbols.js REACT_ELEMENT_TYPE and
// packages/react/src/jsx/ReactJSXElement.js ReactElement): a <div> whose ref callback mounts the page and returns
// its clean-up, which React 19 calls on unmount (Airflow's UI runs React 19.2).
const REACT_ELEMENT = Symbol.for("react.transitional.element");
function mountRef(node) {
  if (!node) return undefined;
  return mount(node);
}
export default function SkiffPage() {
  const props = { className: "skiff-root", ref: mountRef, "data-skiff": "page" };
  return { $$typeof: REACT_ELEMENT, type: "div", key: null, ref: mountRef, props, _owner: null, _store: {} };
}
globalThis.AirflowPlugin = SkiffPage;

// ---------------------------------------------------------------- helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const data = (tag, attrs, ...children) => h(tag, { ...attrs, translate: "no" }, ...children);  // a value, not words
const $ = (id) => S.root.querySelector("#" + id);
function replace(id, ...nodes) {
  $(id).replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

async function api(path, opts = {}) {
  const init = { credentials: "same-origin", headers: { Accept: "application/json" }, ...opts };
  if (opts.body !== undefined) {
    init.method = opts.method || "POST";
    init.headers = { ...init.headers, "Content-Type": "application/json" };
    init.body = JSON.stringify(opts.body);
  }
  const r = await fetch(new URL(path, API), init);
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    const detail = body && body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : r.statusText;
    const err = new Error(r.status === 401 ? t("session_ended") : detail);
    err.status = r.status;
    throw err;
  }
  return body;
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return t("dur.none");
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return t("dur.s", { n: s });
  if (s < 3600) return t("dur.m", { n: Math.floor(s / 60) });
  if (s < 86400) return t("dur.h", { n: Math.floor(s / 3600) }) + " " + t("dur.m", { n: Math.floor((s % 3600) / 60) });
  return t("dur.d", { n: Math.floor(s / 86400) }) + " " + t("dur.h", { n: Math.floor((s % 86400) / 3600) });
}
/** Like ``t`` but each value becomes an element marked translate="no" (names, times: data, not words). */
function tData(key, vars) {
  const marks = {};
  for (const k of Object.keys(vars)) marks[k] = `\u0000${k}\u0000`;
  return t(key, marks).split("\u0000").map((part, i) => (i % 2 ? data("span", {}, String(vars[part])) : part));
}
function num(x) { return Number.isInteger(x) ? String(x) : (Math.round(x * 10) / 10).toString(); }
/** ``rows`` of the table's current page (``S.pages[id]``, kept within range) and its pager (null: one page). */
function paged(id, rows) {
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
  const page = S.pages[id] = Math.min(S.pages[id] || 0, pages - 1);
  const shown = rows.slice(page * PAGE_ROWS, (page + 1) * PAGE_ROWS);
  if (pages === 1) return [shown, null];
  const go = (p) => () => { S.pages[id] = p; RENDER[id](S.data[id]); };
  return [shown, h("div", { class: "pager", "data-pager": id, "data-total": rows.length },
    h("button", { class: "small", type: "button", "data-page": "prev", disabled: page === 0, onclick: go(page - 1) }, t("page.prev")),
    h("span", { class: "sub" }, tData("page.range", { from: page * PAGE_ROWS + 1, to: page * PAGE_ROWS + shown.length, total: rows.length })),
    h("button", { class: "small", type: "button", "data-page": "next", disabled: page === pages - 1, onclick: go(page + 1) }, t("page.next")))];
}
function pill(text, kind) { return h("span", { class: "pill " + (kind || "") }, text); }
function time(iso) { return iso ? data("time", { datetime: iso, title: iso }, formatTime(iso, S.zone)) : null; }

function toast(text, bad) {
  const el = $("toast");
  el.replaceChildren(...(Array.isArray(text) ? text : [bad ? data("span", {}, text) : text]));  // errors: the server's words
  el.className = "toast" + (bad ? " bad" : "");
  clearTimeout(S.toastTimer);
  S.toastTimer = setTimeout(() => el.classList.add("hidden"), 6000);
}

function confirmDialog(text, yesLabel) {
  return new Promise((resolve) => {
    $("confirm-text").replaceChildren(...text);
    $("confirm-yes").textContent = yesLabel;
    $("confirm").classList.remove("hidden");
    const done = (answer) => { $("confirm").classList.add("hidden"); $("confirm-yes").onclick = $("confirm-no").onclick = null; resolve(answer); };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
  });
}

// ---------------------------------------------------------------- skeleton (static text only, by key)
const loadingBox = '<div class="loading" data-i18n="loading"></div>';
const SKELETON = `
<header class="top">
  <div class="brand"><img data-asset="skiff.svg" alt=""><span translate="no">Skiff</span></div>
  <div class="who" id="who"><span data-i18n="loading"></span></div>
  <div class="zone" id="zone"></div>
  <div class="live" id="live" data-i18n="live" data-i18n-title="live.hint"></div>
</header>
<main>
  <section class="card" id="quota-card">
    <div class="card-head"><h2 data-i18n="quota.title"></h2><span class="hint" data-i18n="quota.hint"></span></div>
    <div class="quota-grid" id="quota">${loadingBox}</div>
  </section>
  <section class="card" id="usage-card">
    <div class="card-head"><h2 data-i18n="usage.title"></h2><span class="hint" id="usage-hint" data-i18n="usage.hint"></span></div>
    <div id="usage">${loadingBox}</div>
  </section>
  <section class="card wide" id="instances-card">
    <div class="card-head"><h2 data-i18n="inst.title"></h2>
      <button class="primary" id="new-instance" type="button" data-i18n="inst.new"></button></div>
    <div class="notice hidden" id="notice"></div>
    <form id="create-form" class="create hidden" autocomplete="off">
      <div class="row">
        <label><span data-i18n="form.name"></span><input name="name" required pattern="[a-z0-9]([a-z0-9\\-]*[a-z0-9])?" maxlength="40" data-i18n-placeholder="form.name_hint"></label>
        <label><span data-i18n="form.team"></span><select name="team" required></select></label>
        <label class="grow"><span data-i18n="form.image"></span><select name="image" required></select></label>
      </div>
      <div class="row">
        <label><span data-i18n="form.cpu"></span><input name="cpu" type="number" min="1" step="1" value="2" required><small data-free="cpu"></small></label>
        <label><span data-i18n="form.memory"></span><input name="memory" type="number" min="1" step="1" value="4" required><small data-free="memory"></small></label>
        <label><span data-i18n="form.gpu"></span><input name="gpu" type="number" min="0" step="1" value="0" required><small data-free="gpu"></small></label>
        <label class="grow"><span data-i18n="form.ports"></span><input name="extra_ports" pattern="\\s*(\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*){0,2})?" data-i18n-placeholder="form.ports_hint"></label>
      </div>
      <fieldset class="mounts"><legend data-i18n="form.volumes"></legend><div id="mounts"></div></fieldset>
      <div class="row end">
        <span class="form-error" id="form-error" translate="no"></span>
        <button type="button" id="cancel-create" data-i18n="inst.cancel"></button>
        <button class="primary" type="submit" data-i18n="form.create"></button>
      </div>
    </form>
    <div id="instances">${loadingBox}</div>
  </section>
  <section class="card wide" id="training-card">
    <div class="card-head"><h2 data-i18n="train.title"></h2><span class="hint" data-i18n="train.hint"></span>
      <label class="filter"><span data-i18n="train.filter"></span> <select id="training-filter">
        <option value="all" data-i18n="train.filter.all"></option><option value="active" data-i18n="train.filter.active"></option>
        <option value="failed" data-i18n="train.filter.failed"></option><option value="success" data-i18n="train.filter.success"></option>
      </select></label></div>
    <div id="training">${loadingBox}</div>
  </section>
  <section class="card wide" id="sedna-card">
    <div class="card-head"><h2 data-i18n="sedna.title"></h2><span class="hint" data-i18n="sedna.hint"></span></div>
    <div id="sedna">${loadingBox}</div>
  </section>
</main>
<div class="modal hidden" id="confirm" role="dialog" aria-modal="true">
  <div class="modal-box"><p id="confirm-text"></p>
    <div class="row end"><button type="button" id="confirm-no" data-i18n="inst.cancel"></button><button type="button" class="danger" id="confirm-yes"></button></div>
  </div>
</div>
<div class="toast hidden" id="toast"></div>`;

function translateStatic() {
  for (const el of S.root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of S.root.querySelectorAll("[data-i18n-title]")) el.title = t(el.dataset.i18nTitle);
  for (const el of S.root.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  S.root.setAttribute("lang", S.lang);
  replace("zone", tData("times_in", { zone: S.zone }));
}

function ensureStyles() {
  if (document.querySelector("link[data-skiff-css]")) return;
  document.head.append(h("link", { rel: "stylesheet", href: new URL("skiff.css", HERE).href, "data-skiff-css": "1" }));
}

// ---------------------------------------------------------------- quota + usage
function renderQuota(body) {
  const teams = body.teams || [];
  if (!teams.length) return replace("quota", h("div", { class: "empty" }, t("quota.none")));
  replace("quota", teams.map((tm) => h("div", { class: "team", "data-team": tm.team },
    h("h3", {}, data("span", {}, tm.team), tm.missing ? pill(t("quota.missing"), "warn") : null),
    tm.bars.map((b) => {
      const level = b.percent >= 90 ? "bad" : b.percent >= 70 ? "warn" : "";
      return h("div", { class: "bar", "data-resource": b.resource },
        h("div", { class: "bar-label" }, h("span", {}, t("res." + b.resource)),
          h("span", {}, h("b", { class: "used" }, num(b.used)), " / ", h("span", { class: "hard" }, num(b.hard)), " " + t("unit." + b.unit))),
        h("div", { class: "track", title: b.percent + "%" }, h("div", { class: "fill " + level, style: `width:${Math.min(100, b.percent)}%` })));
    }),
    queueTable((body.queues || {})[tm.team]))));
}

// queueing: kueue: each of the team's Kueue queues, its nominal quota and what it borrows from the cohort or lends
function queueTable(queues) {
  if (!queues) return null;
  const rows = [];
  for (const kind of ["training", "dev"]) {
    for (const f of queues[kind] || []) {
      rows.push(h("tr", { "data-queue": kind, "data-resource": f.resource },
        h("td", {}, t("queue." + kind), " · ", t("res." + f.resource)),
        ...["nominal", "used", "borrowed", "lent"].map((k) => h("td", { class: "num " + k }, num(f[k]))),
        h("td", { class: "sub" }, t("unit." + f.unit))));
    }
  }
  if (!rows.length) return null;
  return h("table", { class: "queues" },
    h("thead", {}, h("tr", {}, h("th", {}, t("queue.title")),
      ...["nominal", "used", "borrowed", "lent"].map((k) => h("th", { class: "num" }, t("queue." + k))), h("th", {}, ""))),
    h("tbody", {}, rows));
}

const SVG = "http://www.w3.org/2000/svg";
function niceMax(x) {
  const p = 10 ** Math.floor(Math.log10(Math.max(x, 1e-9)));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((v) => v >= x) || 10 * p;
}

function usageChart(rows) {
  // a horizontal bar per user, an x axis in hours with 5 ticks; no rows: the axes and a line saying what will come
  const rowH = 26, left = 110, right = 60, width = 520, axisH = 34, top = 6;
  const height = top + Math.max(rows.length, 2) * rowH + axisH;
  const max = rows.length ? niceMax(Math.max(...rows.map((r) => r.gpu_hours))) : 4, plotW = width - left - right;
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
    el("text", { x, y: axisY + 14, "text-anchor": "middle", class: "tick" }, String(Number(((max * i) / 4).toFixed(2))));
  }
  el("line", { x1: left, x2: left + plotW, y1: axisY, y2: axisY, class: "axis" });
  el("text", { x: left + plotW / 2, y: axisY + 30, "text-anchor": "middle", class: "axis-label" }, t("usage.axis"));
  rows.forEach((r, i) => {
    const y = top + i * rowH, w = Math.max(2, (plotW * r.gpu_hours) / max);
    el("text", { x: left - 8, y: y + 16, "text-anchor": "end", translate: "no" }, r.user);
    const bar = el("rect", { x: left, y: y + 4, width: w, height: rowH - 8, rx: 4,
      class: "bar-rect" + (S.me && r.user === S.me.user ? " me" : ""), "data-user": r.user });
    bar.append(Object.assign(document.createElementNS(SVG, "title"), { textContent: t("usage.bar", { user: r.user, hours: num(r.gpu_hours) }) }));
    el("text", { x: left + w + 6, y: y + 16, class: "value", translate: "no" }, num(r.gpu_hours) + " h");
  });
  return svg;
}

function renderUsage(body) {
  const rows = (body.users || []).slice().sort((a, b) => b.gpu_hours - a.gpu_hours);
  if (body.since && body.until) {
    const days = Math.round((Date.parse(body.until) - Date.parse(body.since)) / 86400000);
    $("usage-hint").replaceChildren(...tData("usage.hint_report", { days, time: formatTime(body.generated, S.zone) }));
  }
  const empty = !body.generated ? t("usage.no_report") : !rows.length ? t("usage.empty") : null;
  replace("usage", usageChart(rows), empty ? h("div", { class: "empty chart-empty" }, empty) : null);
}

// ---------------------------------------------------------------- instances
const STATE_KIND = { Running: "ok", Starting: "info", Stopping: "warn", Stopped: "", Failed: "bad" };
const LINK_NAMES = { jupyter: "JupyterLab", "code-server": "VS Code", tensorboard: "TensorBoard" };

function instanceLinks(i) {
  const urls = i.urls || {};
  const links = Object.entries(LINK_NAMES).filter(([k]) => urls[k])
    .map(([k, label]) => h("a", { href: urls[k], target: "_blank", rel: "noopener", "data-link": k, translate: "no" }, label));
  const extra = Object.keys(urls).filter((k) => k.startsWith("port-"))
    .map((k) => data("div", { class: "sub mono" }, h("a", { href: `http://${urls[k]}/`, target: "_blank", rel: "noopener", "data-link": k }, `${k.slice(5)} → ${urls[k]}`)));
  return h("div", { class: "links" }, links, extra);
}

function passwordCell(i) {
  const key = i.team + "/" + i.name;
  if (!i.mine) return h("span", { class: "sub" }, t("inst.owner_only"));
  if (i.state !== "Running") return h("span", { class: "sub" }, t("inst.password_when_running"));
  if (S.passwords.has(key)) {
    return h("span", { class: "secret" }, data("code", { class: "mono password" }, S.passwords.get(key)),
      h("button", { class: "small", type: "button", onclick: () => { S.passwords.delete(key); refreshInstances(); } }, t("inst.hide")));
  }
  return h("button", { class: "small show-password", type: "button", onclick: async () => {
    try {
      const r = await api(`instances/${encodeURIComponent(i.team)}/${encodeURIComponent(i.name)}/password`);
      S.passwords.set(key, r.password);
      refreshInstances();
    } catch (e) { toast(e.message, true); }
  } }, t("inst.show"));
}

function idleCell(i) {
  if (i.idle_seconds !== null && i.idle_seconds !== undefined) return ago(i.idle_seconds);
  const why = i.state === "Stopped" ? "inst.idle.stopped" : i.state !== "Running" ? "inst.idle.starting" : "inst.idle.unknown";
  return h("span", { class: "sub", title: i.idle_detail || "" }, t(why));
}

async function act(i, action) {
  if (action === "delete" && !(await confirmDialog(tData("inst.confirm_delete", { name: i.name, team: i.team }), t("inst.delete")))) return;
  const key = i.team + "/" + i.name;
  S.passwords.delete(key);  // every action changes what the revealed password is worth
  S.busy.add(key);
  refreshInstances();
  try {
    const r = await api(`instances/${encodeURIComponent(i.team)}/${encodeURIComponent(i.name)}/${action}`, { body: {} });
    toast(tData("inst.requested", { action: actionWord(action), name: i.name, run: r.dag_run_id }));
  } catch (e) { toast(e.message, true); }
  setTimeout(() => { if (S) { S.busy.delete(key); refreshInstances(); } }, 1500);
}

function renderInstances(body) {
  const rows = (body.instances || []).slice().sort((a, b) => b.mine - a.mine);  // the user's own first
  const may = (S.me && S.me.may_trigger) || {};
  for (const i of rows) {  // a revealed password is dropped on every state change (start makes a new one)
    const key = i.team + "/" + i.name;
    if (S.lastState.has(key) && S.lastState.get(key) !== i.state) S.passwords.delete(key);
    S.lastState.set(key, i.state);
  }
  if (!rows.length) return replace("instances", h("div", { class: "empty" }, t("inst.none")));
  const showOwner = rows.some((i) => !i.mine);
  const [shown, pager] = paged("instances", rows);
  const heads = ["inst.name", "inst.state", showOwner ? "inst.owner" : undefined, "inst.image", "inst.resources",
    "inst.age", "inst.idle", "inst.connect", "inst.password", null].filter((k) => k !== undefined);
  replace("instances", h("div", { class: "scroll" }, h("table", { id: "instances-table" },
    h("thead", {}, h("tr", {}, heads.map((k) => h("th", {}, k ? t(k) : "")))),
    h("tbody", {}, shown.map((i) => {
      const key = i.team + "/" + i.name, busy = S.busy.has(key);  // every row shown is one the user may act on
      const stopped = i.state === "Stopped", res = i.resources || {};
      return h("tr", { "data-instance": i.name, "data-team": i.team, "data-state": i.state },
        h("td", {}, data("b", {}, i.name), data("div", { class: "sub" }, i.team)),
        h("td", {}, pill(t("state." + i.state), STATE_KIND[i.state]), i.reason ? data("div", { class: "sub" }, i.reason) : null),
        showOwner ? data("td", {}, i.owner) : null,
        data("td", { title: i.image }, i.image_name || i.image),
        h("td", { class: "num" }, data("span", {}, `${res.cpu} CPU · ${res.memory}` + (res.gpu ? ` · ${res.gpu} GPU` : ""))),
        h("td", { class: "num" }, ago(i.age_seconds)),
        h("td", { class: "num idle" }, idleCell(i)),
        h("td", {}, stopped ? h("span", { class: "sub" }, t("inst.start_to_connect")) : [instanceLinks(i),
          i.ssh ? data("code", { class: "mono ssh" }, i.ssh) : null]),
        h("td", {}, passwordCell(i)),
        h("td", { class: "actions" },
          stopped ? h("button", { class: "small", type: "button", "data-action": "start", disabled: busy || !may.start, onclick: () => act(i, "start") }, t("inst.start"))
                  : h("button", { class: "small", type: "button", "data-action": "stop", disabled: busy || !may.stop, onclick: () => act(i, "stop") }, t("inst.stop")),
          h("button", { class: "small danger", type: "button", "data-action": "delete", disabled: busy || !may.delete, onclick: () => act(i, "delete") }, t("inst.delete"))));
    })))), pager);
}

// ---------------------------------------------------------------- new-instance form
function teamOptions() { return ((S.options && S.options.teams) || []); }

function fillForm() {
  const f = $("create-form"), opts = S.options;
  f.elements.team.replaceChildren(...teamOptions().map((tm) => data("option", { value: tm.team }, tm.team)));
  f.elements.image.replaceChildren(...opts.images.map((i) => data("option", { value: i.name, selected: i.default },
    i.name + (i.gpu ? `  (${t("form.gpu_image")})` : "") + (i.description ? " — " + i.description : ""))));
  applyTeam();
}

function applyTeam() {
  const f = $("create-form"), team = teamOptions().find((tm) => tm.team === f.elements.team.value);
  if (!team) return;
  for (const r of ["cpu", "memory", "gpu"]) {
    const free = team.free[r], input = f.elements[r];
    if (free === undefined) { input.removeAttribute("max"); f.querySelector(`[data-free=${r}]`).textContent = ""; continue; }
    input.max = Math.floor(free);
    if (Number(input.value) > input.max) input.value = input.max;
    f.querySelector(`[data-free=${r}]`).textContent = t("form.free", { n: num(free) });
  }
  replace("mounts", team.volumes.length ? team.volumes.map((v) => h("div", { class: "mount", "data-pvc": v.pvc },
    h("label", {}, h("input", { type: "checkbox", name: "mount", value: v.pvc }), data("span", {}, " " + v.pvc)),
    h("input", { type: "text", name: "path-" + v.pvc, value: "/mnt/" + v.pvc, "aria-label": t("form.mount_path") }),
    h("label", {}, h("input", { type: "checkbox", name: "ro-" + v.pvc, checked: v.mode === "ro", disabled: v.mode === "ro" }), " " + t("form.read_only"))))
    : h("div", { class: "sub" }, t("form.no_volumes")));
}

async function submitForm(ev) {
  ev.preventDefault();
  const f = $("create-form");
  $("form-error").textContent = "";
  const mounts = [...f.querySelectorAll("input[name=mount]:checked")].map((c) => ({
    pvc: c.value, path: f.querySelector(`[name="path-${c.value}"]`).value,
    read_only: f.querySelector(`[name="ro-${c.value}"]`).checked }));
  const ports = f.elements.extra_ports.value.split(",").map((p) => p.trim()).filter(Boolean).map(Number);
  const body = { name: f.elements.name.value.trim(), team: f.elements.team.value, image: f.elements.image.value,
    cpu: Number(f.elements.cpu.value), memory: Number(f.elements.memory.value), gpu: Number(f.elements.gpu.value), mounts };
  if (ports.length) body.extra_ports = ports;
  const submit = f.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const r = await api("instances", { body });
    toast(tData("inst.creating", { name: body.name, run: r.dag_run_id }));
    f.classList.add("hidden");
    f.reset();
    refreshInstances();
  } catch (e) {
    $("form-error").textContent = e.message;
  } finally { submit.disabled = false; }
}

// ---------------------------------------------------------------- training + sedna
const TI_KIND = { running: "ok", deferred: "ok", queued: "info", scheduled: "info", up_for_retry: "warn", restarting: "warn", failed: "bad", success: "ok" };
const FILTERS = { all: () => true, failed: (r) => r.state === "failed", success: (r) => r.state === "success",
  active: (r) => r.state !== "failed" && r.state !== "success" };

function renderTraining(body) {
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

function renderSedna(body) {
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

// ---------------------------------------------------------------- polling
const RENDER = { quota: renderQuota, usage: renderUsage, instances: renderInstances, training: renderTraining, sedna: renderSedna };

async function load(id) {
  const page = S;
  try {
    const body = await api(id);
    if (S !== page || page.stopped) return true;
    page.data[id] = body;
    RENDER[id](body);
    return true;
  } catch (e) {
    if (S !== page || page.stopped) return true;
    replace(id, data("div", { class: "error-line" }, e.message));
    return e.status !== 401;
  }
}
const refreshInstances = () => load("instances");

async function refreshMe(page) {
  // who may do what changes while the page is open (a DAG paused, or deactivated a while by Airflow's parser)
  try {
    const me = await api("me");
    if (S === page && !page.stopped) { page.me = me; renderWho(); }
  } catch (e) { /* the cards' own requests say what is wrong */ }
  return true;
}

async function refresh(withMe = true) {
  const page = S;
  const ok = await Promise.all([...Object.keys(RENDER).map(load), withMe ? refreshMe(page) : true]);
  if (S !== page || page.stopped) return;
  $("live").classList.toggle("stale", ok.includes(false));
  if (!ok.includes(false)) page.timer = setTimeout(refresh, POLL_MS);
}

function followChoices() {
  // Airflow's language and time-zone menus write localStorage in this same window (no storage event): look often
  if (!S || S.stopped || (S.lang === language() && S.zone === timeZone())) return;
  S.lang = language();
  S.zone = timeZone();
  translateStatic();
  renderWho();
  for (const [id, body] of Object.entries(S.data)) RENDER[id](body);
}

function renderWho() {
  if (!S.me) return;
  replace("who", t("signed_in") + " ", data("b", {}, S.me.user), S.me.admin ? pill(t("admin"), "info") : null,
    S.me.teams.length ? [" · " + t("teams") + " ", data("span", {}, S.me.teams.join(", "))] : "");
  const notice = $("notice");
  if (S.me.paused.length) {
    notice.replaceChildren(...tData("inst.paused", { dags: S.me.paused.join(", ") }));
    notice.classList.remove("hidden");
  } else if (!S.me.may_trigger.create) {
    notice.replaceChildren(t("inst.may_not"));
    notice.classList.remove("hidden");
  } else {
    notice.classList.add("hidden");
  }
  $("new-instance").disabled = !S.me.may_trigger.create || S.me.paused.includes("dev_instance_create");
}

async function start(page) {
  try {
    page.me = await api("me");
  } catch (e) {
    replace("who", data("span", { class: "error-line" }, e.message));
    return;
  }
  if (S !== page) return;
  renderWho();
  $("new-instance").onclick = async () => {
    try {
      page.options = await api("instances/options");
      fillForm();
      $("create-form").classList.remove("hidden");
      $("create-form").elements.name.focus();
    } catch (e) { toast(e.message, true); }
  };
  $("cancel-create").onclick = () => $("create-form").classList.add("hidden");
  $("create-form").elements.team.onchange = applyTeam;
  $("create-form").onsubmit = submitForm;
  $("training-filter").onchange = (ev) => { page.filter = ev.target.value; page.pages.training = 0; if (page.data.training) renderTraining(page.data.training); };
  refresh(false);
}

/** Render the page into ``root``; returns the clean-up that stops its polling. */
function mount(root) {
  if (S) S.stopped = true;
  const page = S = { root, me: null, options: null, passwords: new Map(), lastState: new Map(), busy: new Set(),
    filter: "all", pages: {}, data: {}, timer: null, toastTimer: null, stopped: false, lang: language(), zone: timeZone() };
  ensureStyles();
  root.classList.add("skiff-root");
  root.innerHTML = SKELETON;  // static markup only: every value is rendered later with textContent
  for (const img of root.querySelectorAll("[data-asset]")) img.src = new URL(img.dataset.asset, HERE).href;
  translateStatic();
  page.choices = setInterval(followChoices, 500);
  start(page);
  return () => {
    page.stopped = true;
    clearTimeout(page.timer);
    clearInterval(page.choices);
    if (S === page) S = null;
  };
}

export { MESSAGES, mount };

const standalone = document.getElementById("skiff-standalone");
if (standalone) mount(standalone);
