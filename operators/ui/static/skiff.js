// Skiff's page: polls the plugin's JSON API (relative URLs: works under any base path) and renders with
// textContent only, so no user-supplied text (names, reasons, events) is ever parsed as HTML.
"use strict";

const POLL_MS = 4000;
const state = { me: null, options: null, passwords: new Map(), busy: new Set() };

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
const $ = (id) => document.getElementById(id);
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
  const r = await fetch("api/" + path, init);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) {
    const detail = data && data.detail ? (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) : r.statusText;
    const err = new Error(r.status === 401 ? "Your Airflow session has ended: reload the page to sign in again." : detail);
    err.status = r.status;
    throw err;
  }
  return data;
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}
function num(x) { return Number.isInteger(x) ? String(x) : (Math.round(x * 10) / 10).toString(); }
function pill(text, kind) { return h("span", { class: "pill " + (kind || "") }, text); }

let toastTimer = null;
function toast(text, bad) {
  const t = $("toast");
  t.textContent = text;
  t.className = "toast" + (bad ? " bad" : "");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => t.classList.add("hidden"), 6000);
}

// window.confirm() is blocked inside Airflow's sandboxed iframe (no allow-modals): an in-page dialog instead.
function confirmDialog(text, yesLabel) {
  return new Promise((resolve) => {
    $("confirm-text").textContent = text;
    $("confirm-yes").textContent = yesLabel;
    $("confirm").classList.remove("hidden");
    const done = (answer) => { $("confirm").classList.add("hidden"); $("confirm-yes").onclick = $("confirm-no").onclick = null; resolve(answer); };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
  });
}

// ---------------------------------------------------------------- quota + usage
function renderQuota(data) {
  const teams = data.teams || [];
  if (!teams.length) return replace("quota", h("div", { class: "empty" }, "You are not in any team yet."));
  replace("quota", teams.map((t) => h("div", { class: "team", "data-team": t.team },
    h("h3", {}, t.team, t.missing ? pill("no quota", "warn") : null),
    t.bars.map((b) => {
      const level = b.percent >= 90 ? "bad" : b.percent >= 70 ? "warn" : "";
      return h("div", { class: "bar", "data-resource": b.resource },
        h("div", { class: "bar-label" }, h("span", {}, b.resource),
          h("span", {}, h("b", { class: "used" }, num(b.used)), " / ", h("span", { class: "hard" }, num(b.hard)), " " + b.unit)),
        h("div", { class: "track", title: b.percent + "%" }, h("div", { class: "fill " + level, style: `width:${Math.min(100, b.percent)}%` })));
    }))));
}

function renderUsage(data) {
  const rows = (data.users || []).slice().sort((a, b) => b.gpu_hours - a.gpu_hours);
  if (data.since && data.until) {
    const days = Math.round((Date.parse(data.until) - Date.parse(data.since)) / 86400000);
    $("usage-hint").textContent = `last ${days} days, report of ${new Date(data.generated).toLocaleString()}`;
  }
  if (!data.generated) return replace("usage", h("div", { class: "empty" }, "No usage report yet: the usage_report DAG writes one."));
  if (!rows.length) return replace("usage", h("div", { class: "empty" }, "No GPU time used in this period."));
  const ns = "http://www.w3.org/2000/svg";
  const rowH = 26, left = 110, right = 70, width = 520, height = rows.length * rowH + 8;
  const max = Math.max(...rows.map((r) => r.gpu_hours), 1);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "GPU-hours per user");
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  rows.forEach((r, i) => {
    const y = 4 + i * rowH, w = Math.max(2, ((width - left - right) * r.gpu_hours) / max);
    el("text", { x: left - 8, y: y + 15, "text-anchor": "end" }, r.user);
    const bar = el("rect", { x: left, y: y + 3, width: w, height: rowH - 8, rx: 4,
      class: "bar-rect" + (state.me && r.user === state.me.user ? " me" : ""), "data-user": r.user });
    bar.append(Object.assign(document.createElementNS(ns, "title"), { textContent: `${r.user}: ${num(r.gpu_hours)} GPU-hours` }));
    el("text", { x: left + w + 6, y: y + 15, class: "value" }, num(r.gpu_hours) + " h");
  });
  replace("usage", svg);
}

// ---------------------------------------------------------------- instances
const STATE_KIND = { Running: "ok", Starting: "info", Stopping: "warn", Stopped: "" };

function instanceLinks(i) {
  const urls = i.urls || {};
  const names = { jupyter: "JupyterLab", "code-server": "VS Code", tensorboard: "TensorBoard" };
  const links = Object.entries(names).filter(([k]) => urls[k])
    .map(([k, label]) => h("a", { href: urls[k], target: "_blank", rel: "noopener", "data-link": k }, label));
  const extra = Object.keys(urls).filter((k) => k.startsWith("port-"))
    .map((k) => h("div", { class: "sub mono" }, `${k.slice(5)} → ${urls[k]}`));
  return h("div", { class: "links" }, links, extra);
}

function passwordCell(i) {
  const key = i.team + "/" + i.name;
  if (!i.mine) return h("span", { class: "sub" }, "owner only");
  if (state.passwords.has(key)) {
    return h("span", { class: "secret" }, h("code", { class: "mono password" }, state.passwords.get(key)),
      h("button", { class: "small", type: "button", onclick: () => { state.passwords.delete(key); refreshInstances(); } }, "hide"));
  }
  return h("button", { class: "small show-password", type: "button", onclick: async () => {
    try {
      const r = await api(`instances/${encodeURIComponent(i.team)}/${encodeURIComponent(i.name)}/password`);
      state.passwords.set(key, r.password);
      refreshInstances();
    } catch (e) { toast(e.message, true); }
  } }, "show");
}

async function act(i, action) {
  if (action === "delete" && !(await confirmDialog(
    `Delete instance “${i.name}” in ${i.team}? Its StatefulSet, Service, password and ports go; the volumes stay.`, "Delete"))) return;
  const key = i.team + "/" + i.name;
  state.busy.add(key);
  refreshInstances();
  try {
    const r = await api(`instances/${encodeURIComponent(i.team)}/${encodeURIComponent(i.name)}/${action}`, { body: {} });
    toast(`${action} of ${i.name} requested (run ${r.dag_run_id})`);
    if (action !== "start") state.passwords.delete(key);
  } catch (e) { toast(e.message, true); }
  setTimeout(() => { state.busy.delete(key); refreshInstances(); }, 1500);
}

function renderInstances(data) {
  const rows = data.instances || [];
  const may = (state.me && state.me.may_trigger) || {};
  if (!rows.length) return replace("instances", h("div", { class: "empty" }, "No instances yet: “New instance” starts one."));
  const showOwner = rows.some((i) => !i.mine);
  replace("instances", h("div", { class: "scroll" }, h("table", { id: "instances-table" },
    h("thead", {}, h("tr", {}, ["Name", "State", showOwner ? "Owner" : null, "Image", "Resources", "Age", "Idle", "Connect", "Password", ""]
      .filter((x) => x !== null).map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map((i) => {
      const key = i.team + "/" + i.name, busy = state.busy.has(key);  // every row shown is one the user may act on
      const stopped = i.state === "Stopped", res = i.resources || {};
      return h("tr", { "data-instance": i.name, "data-team": i.team },
        h("td", {}, h("b", {}, i.name), h("div", { class: "sub" }, i.team)),
        h("td", {}, pill(i.state, STATE_KIND[i.state]), i.reason ? h("div", { class: "sub" }, i.reason) : null),
        showOwner ? h("td", {}, i.owner) : null,
        h("td", { title: i.image }, i.image_name || i.image),
        h("td", { class: "num" }, `${res.cpu} CPU · ${res.memory}` + (res.gpu ? ` · ${res.gpu} GPU` : "")),
        h("td", { class: "num" }, ago(i.age_seconds)),
        h("td", { class: "num" }, stopped ? "–" : ago(i.idle_seconds)),
        h("td", {}, stopped ? h("span", { class: "sub" }, "start it to connect") : [instanceLinks(i),
          i.ssh ? h("code", { class: "mono ssh" }, i.ssh) : null]),
        h("td", {}, passwordCell(i)),
        h("td", { class: "actions" },
          stopped ? h("button", { class: "small", type: "button", "data-action": "start", disabled: busy || !may.start, onclick: () => act(i, "start") }, "Start")
                  : h("button", { class: "small", type: "button", "data-action": "stop", disabled: busy || !may.stop, onclick: () => act(i, "stop") }, "Stop"),
          h("button", { class: "small danger", type: "button", "data-action": "delete", disabled: busy || !may.delete, onclick: () => act(i, "delete") }, "Delete")));
    })))));
}

// ---------------------------------------------------------------- new-instance form
function teamOptions() { return ((state.options && state.options.teams) || []); }

function fillForm() {
  const f = $("create-form"), opts = state.options;
  f.elements.team.replaceChildren(...teamOptions().map((t) => h("option", { value: t.team }, t.team)));
  f.elements.image.replaceChildren(...opts.images.map((i) => h("option", { value: i.name, selected: i.default },
    i.name + (i.gpu ? "  (GPU)" : "") + (i.description ? " — " + i.description : ""))));
  applyTeam();
}

function applyTeam() {
  const f = $("create-form"), team = teamOptions().find((t) => t.team === f.elements.team.value);
  if (!team) return;
  for (const r of ["cpu", "memory", "gpu"]) {
    const free = team.free[r];
    const input = f.elements[r];
    if (free === undefined) { input.removeAttribute("max"); f.querySelector(`[data-free=${r}]`).textContent = ""; continue; }
    input.max = Math.floor(free);
    if (Number(input.value) > input.max) input.value = input.max;
    f.querySelector(`[data-free=${r}]`).textContent = `${num(free)} free`;
  }
  replace("mounts", team.volumes.length ? team.volumes.map((v) => h("div", { class: "mount", "data-pvc": v.pvc },
    h("label", {}, h("input", { type: "checkbox", name: "mount", value: v.pvc }), " " + v.pvc),
    h("input", { type: "text", name: "path-" + v.pvc, value: "/mnt/" + v.pvc, "aria-label": "mount path" }),
    h("label", {}, h("input", { type: "checkbox", name: "ro-" + v.pvc, checked: v.mode === "ro", disabled: v.mode === "ro" }), " read-only")))
    : h("div", { class: "sub" }, "No shared volumes for this team."));
}

async function submitForm(ev) {
  ev.preventDefault();
  const f = $("create-form");
  $("form-error").textContent = "";
  const mounts = [...f.querySelectorAll("input[name=mount]:checked")].map((c) => ({
    pvc: c.value, path: f.querySelector(`[name="path-${c.value}"]`).value,
    read_only: f.querySelector(`[name="ro-${c.value}"]`).checked }));
  const body = { name: f.elements.name.value.trim(), team: f.elements.team.value, image: f.elements.image.value,
    cpu: Number(f.elements.cpu.value), memory: Number(f.elements.memory.value), gpu: Number(f.elements.gpu.value), mounts };
  const submit = f.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const r = await api("instances", { body });
    toast(`Creating ${body.name} (run ${r.dag_run_id})`);
    f.classList.add("hidden");
    f.reset();
    refreshInstances();
  } catch (e) {
    $("form-error").textContent = e.message;
  } finally { submit.disabled = false; }
}

// ---------------------------------------------------------------- training + sedna
const TI_KIND = { running: "ok", deferred: "ok", queued: "info", scheduled: "info", up_for_retry: "warn", restarting: "warn", failed: "bad" };

function renderTraining(data) {
  const rows = data.tasks || [];
  if (!rows.length) return replace("training", h("div", { class: "empty" }, "No training running, waiting or recently failed."));
  const root = (state.me && state.me.ui_root) || "/";
  replace("training", h("table", { id: "training-table" },
    h("thead", {}, h("tr", {}, ["Task", "State", "Team", "Node", "GPU", "Age", "Reason", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map((t) => h("tr", { "data-task": `${t.dag_id}.${t.task_id}`, "data-state": t.state },
      h("td", {}, h("b", {}, `${t.dag_id}.${t.task_id}`), h("div", { class: "sub mono" }, t.run_id + (t.try_number > 1 ? ` · try ${t.try_number}` : ""))),
      h("td", {}, pill(t.state === "deferred" ? "running" : t.state, TI_KIND[t.state]),
        t.waiting_for ? h("div", { class: "sub" }, "waiting for " + t.waiting_for) : null),
      h("td", {}, t.team || "–"),
      h("td", { class: "mono" }, t.node || "–"),
      h("td", { class: "num" }, t.gpu ? String(t.gpu) : "–"),
      h("td", { class: "num" }, ago(t.age_seconds)),
      h("td", { class: t.reason ? "reason" : "" }, t.reason || ""),
      h("td", {}, h("a", { href: root + t.log_path, target: "_top", class: "log-link" }, "Log")))))));
}

function renderSedna(data) {
  const rows = data.workloads || [];
  if (!data.installed) return replace("sedna", h("div", { class: "empty" }, "Sedna's CRDs are not installed on this cluster."));
  if (!rows.length) return replace("sedna", h("div", { class: "empty" }, "No FederatedLearningJob or JointInferenceService."));
  replace("sedna", h("table", { id: "sedna-table" },
    h("thead", {}, h("tr", {}, ["Workload", "Phase", "Children", "Last events"].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map((w) => h("tr", { "data-workload": `${w.namespace}/${w.name}` },
      h("td", {}, h("b", {}, w.name), h("div", { class: "sub" }, `${w.kind} · ${w.namespace}`)),
      h("td", {}, pill(w.phase, /fail/i.test(w.phase) ? "bad" : /succeed|running|ready/i.test(w.phase) ? "ok" : "info"),
        w.error ? h("div", { class: "sub reason" }, w.error) : null),
      h("td", {}, pill(`${w.actual}/${w.desired}`, w.in_sync ? "ok" : "warn"),
        h("div", { class: "sub" }, w.children.map((c) => `${c.actual}/${c.desired} ${c.kind}`).join(" · "))),
      h("td", {}, w.events.length ? w.events.map((e) => h("div", { class: "sub" },
        pill(e.reason || e.type || "", e.type === "Warning" ? "warn" : ""), " ", e.message || "")) : "–"))))));
}

// ---------------------------------------------------------------- polling
async function load(id, path, render) {
  try {
    render(await api(path));
    return true;
  } catch (e) {
    replace(id, h("div", { class: "error-line" }, e.message));
    return e.status !== 401;
  }
}
const refreshInstances = () => load("instances", "instances", renderInstances);

async function refresh() {
  const ok = await Promise.all([
    load("quota", "quota", renderQuota), load("usage", "usage", renderUsage), refreshInstances(),
    load("training", "training", renderTraining), load("sedna", "sedna", renderSedna)]);
  $("live").classList.toggle("stale", ok.includes(false));
  if (!ok.includes(false)) setTimeout(refresh, POLL_MS);
}

async function start() {
  try {
    state.me = await api("me");
  } catch (e) {
    replace("who", h("span", { class: "error-line" }, e.message));
    return;
  }
  replace("who", "Signed in as ", h("b", {}, state.me.user), state.me.admin ? pill("admin", "info") : null,
    state.me.teams.length ? " · teams " + state.me.teams.join(", ") : "");
  $("new-instance").disabled = !state.me.may_trigger.create || state.me.paused.includes("dev_instance_create");
  if (state.me.paused.length) {
    $("notice").textContent = `Paused in Airflow: ${state.me.paused.join(", ")}. Actions that need them wait until an admin unpauses them.`;
    $("notice").classList.remove("hidden");
  } else if (!state.me.may_trigger.create) {
    $("notice").textContent = "Your Airflow role may not trigger the instance DAGs: you can look, not act.";
    $("notice").classList.remove("hidden");
  }
  $("new-instance").onclick = async () => {
    try {
      state.options = await api("instances/options");
      fillForm();
      $("create-form").classList.remove("hidden");
      $("create-form").elements.name.focus();
    } catch (e) { toast(e.message, true); }
  };
  $("cancel-create").onclick = () => $("create-form").classList.add("hidden");
  $("create-form").elements.team.onchange = applyTeam;
  $("create-form").onsubmit = submitForm;
  refresh();
}

document.addEventListener("DOMContentLoaded", start);
