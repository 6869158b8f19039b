// What every card of Skiff's page shares: the mounted page's state ``S``, the DOM helpers (``h``, and ``data`` for
// values marked translate="no"), the JSON API client (URLs relative to this module: any base path works), the
// pager, toasts, the confirm dialog, and ``load``, which fetches one card's JSON and hands it to its renderer in
// ``RENDER`` (skiff.js registers the cards' renderers there).
import { formatTime, t } from "./skiff-i18n.js";

export const PAGE_ROWS = 50;  // rows per page of a table: the browser lays out 50 rows at each refresh, not 500 (BENCHMARKS.md ui)
export const HERE = new URL(".", import.meta.url);   // <ui root>skiff/static/
const API = new URL("../api/", HERE);                // <ui root>skiff/api/
export let S = null;                                 // the mounted page's state (one at a time)
export function setPage(page) { S = page; }
export const RENDER = {};                            // card id -> render(body): filled by skiff.js

// ---------------------------------------------------------------- helpers
export function h(tag, attrs, ...children) {
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
export const data = (tag, attrs, ...children) => h(tag, { ...attrs, translate: "no" }, ...children);  // a value, not words
export const $ = (id) => S.root.querySelector("#" + id);
export function replace(id, ...nodes) {
  $(id).replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

export async function api(path, opts = {}) {
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

export function ago(seconds) {
  if (seconds === null || seconds === undefined) return t("dur.none");
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return t("dur.s", { n: s });
  if (s < 3600) return t("dur.m", { n: Math.floor(s / 60) });
  if (s < 86400) return t("dur.h", { n: Math.floor(s / 3600) }) + " " + t("dur.m", { n: Math.floor((s % 3600) / 60) });
  return t("dur.d", { n: Math.floor(s / 86400) }) + " " + t("dur.h", { n: Math.floor((s % 86400) / 3600) });
}
/** Like ``t`` but each value becomes an element marked translate="no" (names, times: data, not words). */
export function tData(key, vars) {
  const marks = {};
  for (const k of Object.keys(vars)) marks[k] = `\u0000${k}\u0000`;
  return t(key, marks).split("\u0000").map((part, i) => (i % 2 ? data("span", {}, String(vars[part])) : part));
}
export function num(x) { return Number.isInteger(x) ? String(x) : (Math.round(x * 10) / 10).toString(); }
/** ``rows`` of the table's current page (``S.pages[id]``, kept within range) and its pager (null: one page). */
export function paged(id, rows) {
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
const GIB = 1024 ** 3;
/** Bytes in GiB, two decimals ("0.29"). */
export const gib = (b) => (Math.round((b / GIB) * 100) / 100).toString();
/** A running pod's use now beside what it holds (operators/ui/live_usage.py), or why it is not known. */
export function usageLine(u) {
  if (!u) return null;
  const gpu = u.gpu ? [" · ", h("span", { class: "sub gpu-use" }, t("use.gpu"))] : [];
  if (u.missing) return h("div", { class: "sub usage", "data-missing": u.missing }, t("use." + u.missing), gpu);
  const of = (used, held, unit) => held === null || held === undefined ? `${used} ${unit}` : `${used} / ${held} ${unit}`;
  return h("div", { class: "sub usage", "data-cpu": u.cpu, "data-memory": u.memory },
    tData("use.line", { cpu: of(Math.round(u.cpu * 100) / 100, u.cpu_request, t("unit.cores")),
      memory: of(gib(u.memory), u.memory_limit === null ? null : gib(u.memory_limit), t("unit.GiB")) }),
    u.at ? [" · ", t("use.at"), " ", time(u.at)] : null, gpu);
}
export function pill(text, kind) { return h("span", { class: "pill " + (kind || "") }, text); }
export function time(iso) { return iso ? data("time", { datetime: iso, title: iso }, formatTime(iso, S.zone)) : null; }

export function toast(text, bad) {
  const el = $("toast");
  el.replaceChildren(...(Array.isArray(text) ? text : [bad ? data("span", {}, text) : text]));  // errors: the server's words
  el.className = "toast" + (bad ? " bad" : "");
  clearTimeout(S.toastTimer);
  S.toastTimer = setTimeout(() => el.classList.add("hidden"), 6000);
}

export function confirmDialog(text, yesLabel) {
  return new Promise((resolve) => {
    $("confirm-text").replaceChildren(...text);
    $("confirm-yes").textContent = yesLabel;
    $("confirm").classList.remove("hidden");
    const done = (answer) => { $("confirm").classList.add("hidden"); $("confirm-yes").onclick = $("confirm-no").onclick = null; resolve(answer); };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
  });
}

// ---------------------------------------------------------------- loading a card
export async function load(id) {
  const page = S;
  try {
    const query = (page.query || {})[id];  // e.g. training: "scope=all"
    const body = await api(query ? `${id}?${query}` : id);
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
export const refreshInstances = () => load("instances");
