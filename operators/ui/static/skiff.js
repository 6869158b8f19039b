// Skiff's page, an Airflow 3 React app (plugin ``react_apps``): the Airflow UI imports this module and renders
// the component it leaves in ``globalThis.AirflowPlugin`` inside its own page, with no iframe, so links open as
// anywhere else in Airflow. The module brings no React of its own (Airflow lends none to plugins and there is no
// build step here): the component returns one host element, a <div>, and a ref callback renders the page into it
// with the DOM API. Opened alone (``/skiff/``) the same module renders into that page's <div id=skiff-standalone>.
//
// It polls the plugin's JSON API (URLs relative to this module: works under any base path) and renders with
// textContent only, so no user-supplied text (names, reasons, events) is ever parsed as HTML. Data values are in
// elements marked translate="no"; every other word comes from skiff-i18n.js.
//
// The cards live in their own modules, all imported from here by relative URL: skiff-common.js (state, DOM helpers,
// API client, pager), skiff-quota.js, skiff-usage.js, skiff-instances.js (table and new-instance form),
// skiff-training.js, skiff-sedna.js; words and times in skiff-i18n.js. This module is the entry point: the React host
// element, the page's skeleton, polling, the header, and mounting.
import { MESSAGES, language, t, timeZone } from "./skiff-i18n.js";
import { $, HERE, RENDER, S, api, data, h, load, pill, replace, setPage, tData, toast } from "./skiff-common.js";
import { applyTeam, fillForm, renderInstances, submitForm } from "./skiff-instances.js";
import { renderQuota } from "./skiff-quota.js";
import { renderSedna } from "./skiff-sedna.js";
import { renderTraining } from "./skiff-training.js";
import { renderUsage } from "./skiff-usage.js";

const POLL_MS = 4000;

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
        <label class="grow"><span data-i18n="form.ports"></span><input name="extra_ports"></label>
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

// ---------------------------------------------------------------- polling
Object.assign(RENDER, { quota: renderQuota, usage: renderUsage, instances: renderInstances, training: renderTraining, sedna: renderSedna });

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
  const page = { root, me: null, options: null, passwords: new Map(), lastState: new Map(), busy: new Set(),
    filter: "all", pages: {}, data: {}, timer: null, toastTimer: null, stopped: false, lang: language(), zone: timeZone() };
  setPage(page);
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
    if (S === page) setPage(null);
  };
}

export { MESSAGES, mount };

const standalone = document.getElementById("skiff-standalone");
if (standalone) mount(standalone);
