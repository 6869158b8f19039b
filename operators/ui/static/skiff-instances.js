// The development-instances card: the table (links, SSH, the owner's password, stop/start/delete through the
// lifecycle DAGs) and the new-instance form.
import { actionWord, t } from "./skiff-i18n.js";
import { $, S, ago, api, confirmDialog, data, h, num, paged, pill, refreshInstances, replace, tData, toast, usageLine } from "./skiff-common.js";

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
  if (i.state !== "Running") { S.passwords.delete(key); return h("span", { class: "sub" }, t("inst.password_when_running")); }
  const shown = S.passwords.get(key);
  // a password is shown only with the epoch (start) it was read in: one read before a stop or a start is not
  if (shown && shown.epoch !== i.start_epoch) S.passwords.delete(key);
  else if (shown) {
    return h("span", { class: "secret" }, data("code", { class: "mono password" }, shown.password),
      h("button", { class: "small", type: "button", onclick: () => { S.passwords.delete(key); refreshInstances(); } }, t("inst.hide")));
  }
  return h("button", { class: "small show-password", type: "button", onclick: async () => {
    try {
      const r = await api(`instances/${encodeURIComponent(i.team)}/${encodeURIComponent(i.name)}/password`);
      S.passwords.set(key, { password: r.password, epoch: r.start_epoch });
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

export function renderInstances(body) {
  const rows = (body.instances || []).slice().sort((a, b) => b.mine - a.mine);  // the user's own first
  const may = (S.me && S.me.may_trigger) || {};
  for (const i of rows) {  // a revealed password is dropped on every state change (start makes a new one)
    const key = i.team + "/" + i.name;
    if (S.lastState.has(key) && S.lastState.get(key) !== i.state) S.passwords.delete(key);
    S.lastState.set(key, i.state);
  }
  // never point at a button the caller cannot use (a viewer: Airflow refuses them the create DAG)
  const mayCreate = !S.me || (S.me.may_trigger.create && !S.me.paused.includes("dev_instance_create"));
  if (!rows.length) return replace("instances", h("div", { class: "empty" }, t(mayCreate ? "inst.none" : "inst.none_viewer")));
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
        h("td", { class: "num" }, data("span", {}, `${res.cpu} CPU · ${res.memory}` + (res.gpu ? ` · ${res.gpu} GPU` : "")),
          usageLine(i.usage)),
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

export function fillForm() {
  const f = $("create-form"), opts = S.options;
  f.elements.team.replaceChildren(...teamOptions().map((tm) => data("option", { value: tm.team }, tm.team)));
  f.elements.image.replaceChildren(...opts.images.map((i) => data("option", { value: i.name, selected: i.default },
    i.name + (i.gpu ? `  (${t("form.gpu_image")})` : "") + (i.description ? " — " + i.description : ""))));
  // how many extra ports: the one number the create DAG and operators.devinstances.spec declare (MAX_EXTRA_PORTS)
  const ports = f.elements.extra_ports, most = opts.max_extra_ports;
  ports.pattern = `\\s*(\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*){0,${most - 1}})?`;
  ports.placeholder = t("form.ports_hint", { n: most });
  applyTeam();
}

export function applyTeam() {
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

export async function submitForm(ev) {
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
