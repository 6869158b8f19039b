// What the page says, in the language the user picked in Airflow, and its times in the zone the user picked there.
//
// Airflow 3's UI keeps both choices in the browser: the language as i18next caches it (localStorage "i18nextLng",
// e.g. "zh-CN"), the time zone as JSON under "timezone" (its time-zone menu; absent: the browser's zone), and
// formats times as "YYYY-MM-DD HH:mm:ss" (airflow/ui/src/utils/datetimeUtils.ts, DEFAULT_DATETIME_FORMAT).
// English and Simplified Chinese are complete (every key in both; tests/unit/operators/ui/test_views.py checks it); any other
// language falls back to English.
"use strict";

export const MESSAGES = {
  en: {
    "title": "Skiff",
    "live": "live",
    "live.hint": "The page refreshes itself every few seconds",
    "loading": "Loading…",
    "signed_in": "Signed in as",
    "teams": "teams",
    "admin": "admin",
    "times_in": "Times in {zone}",
    "session_ended": "Your Airflow session has ended: reload the page to sign in again.",
    "quota.title": "Team quota",
    "quota.hint": "used / hard, live from each team's ResourceQuota",
    "quota.hint_kueue": "queueing: kueue: Kueue's queues decide, per flavor (the platform file's kueue.flavors); the bars are each team's ceiling",
    "quota.ceiling": "ResourceQuota: the ceiling, its queues' nominal quota plus what they may borrow (at most the cohort's), a hard cap for pods outside Kueue",
    "quota.none": "You are not in any team yet.",
    "quota.missing": "no quota",
    "res.cpu": "CPU", "res.memory": "memory", "res.gpu": "GPU", "res.storage": "storage",
    "unit.cores": "cores", "unit.GiB": "GiB", "unit.GPUs": "GPUs",
    "usage.title": "GPU-hours per user",
    "usage.hint": "last 30 days",
    "usage.hint_report": "last {days} days, hourly report of {time}",
    "usage.no_report": "No usage report yet: the usage_report DAG writes one every hour; then a bar per user appears here.",
    "usage.empty": "No GPU time in this report: a bar per user appears in the next hourly report after a training task has used a GPU.",
    "usage.axis": "GPU-hours (h)",
    "usage.bar": "{user}: {hours} GPU-hours held by training steps",
    "usage.eff_title": "GPU efficiency: GPU-hours used against held",
    "usage.eff_who": "team / user",
    "usage.eff_kind": "kind",
    "usage.eff_held": "held",
    "usage.eff_used": "used",
    "usage.eff_share": "efficiency",
    "usage.kind.training": "training steps",
    "usage.kind.instance": "development instances",
    "usage.kind.sedna": "Sedna workers",
    "usage.kind.all": "all",
    "usage.no_user": "(no user)",
    "usage.not_known": "not known",
    "usage.eff_not_measured": "dcgm-exporter reported none of these GPUs: how much they were used is not known",
    "usage.eff_of_measured": "of {hours} h measured",
    "usage.eff_hint": "Every pod of Skiff's that held a GPU in the period, from Prometheus: held is its GPU request over time, used its GPUs' utilisation (dcgm-exporter); efficiency is used against the GPU-hours dcgm-exporter measured.",
    "usage.eff_unknown": "GPU-hours held and used are not known: the report reads them from Prometheus ([skiff] prometheus_url).",
    "usage.eff_empty": "No pod of Skiff's held a GPU when Prometheus was sampled in this period (every few minutes: a pod that started since the last sample, or ran between two, is not counted yet).",
    "inst.title": "Development instances",
    "inst.new": "New instance",
    "inst.none": "No instances yet: “New instance” starts one.",
    "inst.none_viewer": "No instances yet. Your Airflow role may not create one.",
    "inst.name": "Name", "inst.state": "State", "inst.owner": "Owner", "inst.image": "Image",
    "inst.resources": "Resources", "inst.age": "Age", "inst.idle": "Idle", "inst.connect": "Connect",
    "inst.password": "Password",
    "inst.owner_only": "owner only",
    "inst.show": "show", "inst.hide": "hide",
    "inst.password_when_running": "when running",
    "inst.start_to_connect": "start it to connect",
    "inst.idle.stopped": "stopped",
    "inst.idle.unknown": "not known: the instance does not report activity",
    "inst.idle.starting": "not yet: starting",
    "use.line": "using CPU {cpu}, memory {memory}",
    "use.at": "read",
    "use.no_api": "use not known: the cluster serves no metrics API (metrics-server)",
    "use.no_reading": "use not known yet: no reading of this pod so far",
    "use.gpu": "GPU use: on the Grafana dashboard (dcgm-exporter)",
    "peak.memory": "peak memory {used} of {limit} limit ({percent} %)",
    "peak.memory_no_limit": "peak memory {used} (no limit)",
    "peak.memory_oom": "peak memory at its limit of {limit} (OOMKilled)",
    "peak.oom": "peak memory: the container was OOM-killed",
    "peak.and": ", ",
    "peak.cpu": "peak CPU {used} of {request} requested",
    "peak.cpu_no_request": "peak CPU {used} (no request)",
    "peak.readings": "{n} reading(s)",
    "peak.pods": "highest of its {n} pods",
    "peak.so_far": "so far",
    "peak.no_reading": "peak: no reading yet",
    "peak.none": "peak: none recorded",
    "peak.unreadable": "peak: not readable (the Job's {key} annotation is not Skiff's)",
    "inst.start": "Start", "inst.stop": "Stop", "inst.delete": "Delete",
    "inst.confirm_delete": "Delete instance “{name}” in {team}? Its StatefulSet, Service, password and ports go; the volumes stay.",
    "inst.cancel": "Cancel",
    "inst.requested": "{action} of {name} requested (run {run})",
    "inst.creating": "Creating {name} (run {run})",
    "inst.paused": "Paused in Airflow: {dags}. Actions that need them wait until an admin unpauses them.",
    "inst.may_not": "Your Airflow role may not trigger the instance DAGs: you can look, not act.",
    "state.Running": "Running", "state.Starting": "Starting", "state.Stopping": "Stopping", "state.Stopped": "Stopped",
    "state.Pending": "Pending", "state.Failed": "Failed", "state.Unknown": "Unknown",
    "form.name": "Name", "form.name_hint": "e.g. notebook", "form.team": "Team", "form.image": "Image",
    "form.cpu": "CPU", "form.memory": "Memory (Gi)", "form.gpu": "GPU", "form.free": "{n} free",
    "form.volumes": "Extra volumes", "form.no_volumes": "No shared volumes for this team.",
    "form.read_only": "read-only", "form.mount_path": "mount path",
    "form.ports": "Extra ports", "form.ports_hint": "e.g. 5000, 7860 (at most {n})",
    "form.create": "Create", "form.gpu_image": "GPU",
    "train.title": "Training",
    "train.hint": "running, waiting, failed and succeeded in the last 24 h",
    "train.filter": "Show",
    "train.filter.all": "all", "train.filter.active": "running and waiting", "train.filter.failed": "failed",
    "train.filter.success": "succeeded",
    "train.none": "No training task in the last 24 h.",
    "train.none_filtered": "No training task matches this filter.",
    "page.prev": "Previous",
    "page.next": "Next",
    "page.range": "{from}–{to} of {total}",
    "train.task": "Task", "train.state": "State", "train.team": "Team", "train.node": "Node", "train.gpu": "GPU",
    "train.started": "Started", "train.ended": "Ended", "train.reason": "Reason", "train.log": "Log",
    "train.scope_teams": "Your teams' training ({teams}).", "train.scope_more": "Airflow also lets you read {n} task(s) of other teams:",
    "train.scope_show": "show them", "train.scope_all": "Every training task Airflow lets you read, other teams' included.",
    "train.scope_mine": "Only my teams'",
    "reason.OOMKilled": "Out of memory (OOMKilled)", "reason.Unschedulable": "No node fits", "reason.QuotaWaitTimeout": "Team quota full", "reason.ExitCode": "The program failed", "reason.Preempted": "Preempted", "reason.Evicted": "Evicted", "reason.DeadlineExceeded": "Took too long", "reason.ImagePull": "Image not pulled", "reason.ContainerConfig": "Container misconfigured", "reason.NoPod": "No pod started", "reason.JobDeleted": "Job deleted", "reason.Other": "Failed",
    "train.try": "try {n}",
    "train.waiting_for": "waiting for {what}",
    "wait.pool": "a pool slot", "wait.quota": "quota", "wait.scheduling": "a node", "wait.kueue": "Kueue to admit it",
    "wait.preempted_gpus": "preempted, waiting for GPUs", "wait.preempted": "preempted, waiting for quota",
    "queue.title": "Kueue queue", "queue.training": "training", "queue.dev": "instances",
    "queue.flavor": "flavor {flavor}", "queue.title_hint": "nominal: the platform file's kueue.flavors.<flavor> (its borrowing_limit and lending_limit bound the next two); borrowed: used beyond it, from the cohort; lent: its idle quota other teams use",
    "queue.nominal": "nominal", "queue.used": "used", "queue.borrowed": "borrowed", "queue.lent": "lent",
    "ti.running": "running", "ti.queued": "queued", "ti.scheduled": "scheduled", "ti.up_for_retry": "up for retry",
    "ti.restarting": "restarting", "ti.failed": "failed", "ti.success": "succeeded",
    "sedna.title": "Sedna workloads",
    "sedna.hint": "federated learning and joint inference, desired vs actual children",
    "sedna.not_installed": "Sedna's CRDs are not installed on this cluster.",
    "sedna.none": "No FederatedLearningJob or JointInferenceService. A platform owner creates one with kubectl (docs/platform-owner-guide.md, “Sedna on the demo”).",
    "sedna.workload": "Workload", "sedna.phase": "Phase", "sedna.children": "Children", "sedna.events": "Last events",
    "dur.s": "{n}s", "dur.m": "{n}m", "dur.h": "{n}h", "dur.d": "{n}d", "dur.none": "–",
  },
  "zh-CN": {
    "title": "Skiff",
    "live": "实时",
    "live.hint": "页面每隔几秒自动刷新",
    "loading": "加载中…",
    "signed_in": "当前用户",
    "teams": "团队",
    "admin": "管理员",
    "times_in": "时间按 {zone} 显示",
    "session_ended": "Airflow 会话已结束：请刷新页面重新登录。",
    "quota.title": "团队配额",
    "quota.hint": "已用 / 上限，实时读取各团队的 ResourceQuota",
    "quota.hint_kueue": "排队方式为 Kueue：由 Kueue 队列按资源类别决定（平台文件中按资源类别给出的额定配额）；进度条为各团队的上限",
    "quota.ceiling": "ResourceQuota：上限，即其队列的额定配额加上可借入的部分（不超过整个队列组），对 Kueue 之外的容器组是硬性限制",
    "quota.none": "你还不属于任何团队。",
    "quota.missing": "无配额",
    "res.cpu": "CPU", "res.memory": "内存", "res.gpu": "GPU", "res.storage": "存储",
    "unit.cores": "核", "unit.GiB": "GiB", "unit.GPUs": "块 GPU",
    "usage.title": "每位用户的 GPU 时长",
    "usage.hint": "最近 30 天",
    "usage.hint_report": "最近 {days} 天，每小时报告，生成于 {time}",
    "usage.no_report": "还没有用量报告：usage_report DAG 每小时生成一份，之后这里会按用户显示条形图。",
    "usage.empty": "本报告中没有 GPU 用量：训练任务使用 GPU 后，下一份每小时报告会按用户显示条形图。",
    "usage.axis": "GPU 时长（小时）",
    "usage.bar": "{user}：训练任务占用 {hours} GPU 小时",
    "usage.eff_title": "GPU 效率：实际使用与占用的 GPU 小时",
    "usage.eff_who": "团队 / 用户",
    "usage.eff_kind": "类型",
    "usage.eff_held": "占用",
    "usage.eff_used": "实际使用",
    "usage.eff_share": "效率",
    "usage.kind.training": "训练任务",
    "usage.kind.instance": "开发实例",
    "usage.kind.sedna": "Sedna 工作负载",
    "usage.kind.all": "全部",
    "usage.no_user": "（无用户）",
    "usage.not_known": "未知",
    "usage.eff_not_measured": "dcgm-exporter 未报告这些 GPU：实际使用了多少未知",
    "usage.eff_of_measured": "基于已测量的 {hours} 小时",
    "usage.eff_hint": "本周期内占用过 GPU 的每个 Skiff Pod，数据来自 Prometheus：占用为其 GPU 请求量乘以时长，实际使用为其 GPU 利用率（dcgm-exporter）；效率为实际使用占 dcgm-exporter 已测量 GPU 小时的比例。",
    "usage.eff_unknown": "占用和实际使用的 GPU 小时未知：报告从 Prometheus 读取（[skiff] prometheus_url）。",
    "usage.eff_empty": "本周期内 Prometheus 的采样（每隔几分钟一次）中没有 Skiff 的 Pod 占用 GPU：上次采样后才启动、或在两次采样之间运行的 Pod 尚未计入。",
    "inst.title": "开发实例",
    "inst.new": "新建实例",
    "inst.none": "还没有实例：点击“新建实例”创建一个。",
    "inst.none_viewer": "还没有实例。你的 Airflow 角色无权创建实例。",
    "inst.name": "名称", "inst.state": "状态", "inst.owner": "所有者", "inst.image": "镜像",
    "inst.resources": "资源", "inst.age": "已运行", "inst.idle": "空闲", "inst.connect": "连接",
    "inst.password": "密码",
    "inst.owner_only": "仅所有者可见",
    "inst.show": "显示", "inst.hide": "隐藏",
    "inst.password_when_running": "运行时可见",
    "inst.start_to_connect": "启动后可连接",
    "inst.idle.stopped": "已停止",
    "inst.idle.unknown": "未知：实例未上报活动",
    "inst.idle.starting": "暂无：正在启动",
    "use.line": "正在使用 CPU {cpu}，内存 {memory}",
    "use.at": "读取于",
    "use.no_api": "用量未知：集群未提供指标 API（metrics-server）",
    "use.no_reading": "用量暂未知：尚无此 Pod 的读数",
    "use.gpu": "GPU 用量：见 Grafana 仪表盘（dcgm-exporter）",
    "peak.memory": "内存峰值 {used}，限额 {limit}（{percent} %）",
    "peak.memory_no_limit": "内存峰值 {used}（无限额）",
    "peak.memory_oom": "内存峰值达到限额 {limit}（内存不足被终止）",
    "peak.oom": "内存峰值：容器因内存不足被终止",
    "peak.and": "；",
    "peak.cpu": "CPU 峰值 {used}，请求 {request}",
    "peak.cpu_no_request": "CPU 峰值 {used}（无请求）",
    "peak.readings": "{n} 次读数",
    "peak.pods": "{n} 个 Pod 中最高",
    "peak.so_far": "截至目前",
    "peak.no_reading": "峰值：暂无读数",
    "peak.none": "峰值：没有记录",
    "peak.unreadable": "峰值：无法读取（作业的 {key} 注解不是 Skiff 写的）",
    "inst.start": "启动", "inst.stop": "停止", "inst.delete": "删除",
    "inst.confirm_delete": "删除 {team} 中的实例“{name}”？其 StatefulSet、Service、密码和端口将被删除，存储卷保留。",
    "inst.cancel": "取消",
    "inst.requested": "已请求对 {name} 执行{action}（运行 {run}）",
    "inst.creating": "正在创建 {name}（运行 {run}）",
    "inst.paused": "以下 DAG 在 Airflow 中已暂停：{dags}。依赖它们的操作会等待管理员恢复。",
    "inst.may_not": "你的 Airflow 角色无权触发实例 DAG：只能查看，不能操作。",
    "state.Running": "运行中", "state.Starting": "启动中", "state.Stopping": "停止中", "state.Stopped": "已停止",
    "state.Pending": "等待中", "state.Failed": "失败", "state.Unknown": "未知",
    "form.name": "名称", "form.name_hint": "例如 notebook", "form.team": "团队", "form.image": "镜像",
    "form.cpu": "CPU", "form.memory": "内存（Gi）", "form.gpu": "GPU", "form.free": "剩余 {n}",
    "form.volumes": "额外存储卷", "form.no_volumes": "该团队没有共享存储卷。",
    "form.read_only": "只读", "form.mount_path": "挂载路径",
    "form.ports": "额外端口", "form.ports_hint": "例如 5000, 7860（最多 {n} 个）",
    "form.create": "创建", "form.gpu_image": "GPU",
    "train.title": "训练",
    "train.hint": "最近 24 小时内运行中、等待中、失败和成功的任务",
    "train.filter": "显示",
    "train.filter.all": "全部", "train.filter.active": "运行中和等待中", "train.filter.failed": "失败",
    "train.filter.success": "成功",
    "train.none": "最近 24 小时没有训练任务。",
    "train.none_filtered": "没有符合筛选条件的训练任务。",
    "page.prev": "上一页",
    "page.next": "下一页",
    "page.range": "第 {from}–{to} 条，共 {total} 条",
    "train.task": "任务", "train.state": "状态", "train.team": "团队", "train.node": "节点", "train.gpu": "GPU",
    "train.started": "开始时间", "train.ended": "结束时间", "train.reason": "原因", "train.log": "日志",
    "train.scope_teams": "你所在团队的训练（{teams}）。", "train.scope_more": "Airflow 还允许你查看其他团队的 {n} 个任务：",
    "train.scope_show": "显示", "train.scope_all": "Airflow 允许你查看的全部训练任务，包括其他团队的。",
    "train.scope_mine": "只看我的团队",
    "reason.OOMKilled": "内存不足", "reason.Unschedulable": "没有可用节点", "reason.QuotaWaitTimeout": "团队配额已满", "reason.ExitCode": "程序出错退出", "reason.Preempted": "被抢占", "reason.Evicted": "被驱逐", "reason.DeadlineExceeded": "运行超时", "reason.ImagePull": "镜像拉取失败", "reason.ContainerConfig": "容器配置错误", "reason.NoPod": "没有启动容器组", "reason.JobDeleted": "训练作业已被删除", "reason.Other": "失败",
    "train.try": "第 {n} 次尝试",
    "train.waiting_for": "等待{what}",
    "wait.pool": "资源池槽位", "wait.quota": "配额", "wait.scheduling": "可用节点", "wait.kueue": "Kueue 准入",
    "wait.preempted_gpus": "已被抢占，等待 GPU", "wait.preempted": "已被抢占，等待配额",
    "queue.title": "Kueue 队列", "queue.training": "训练", "queue.dev": "开发实例",
    "queue.flavor": "资源类别 {flavor}", "queue.title_hint": "额定：平台文件中该资源类别的额定配额；借入：超出额定、从队列组借用的部分；借出：被其他团队使用的空闲配额",
    "queue.nominal": "额定", "queue.used": "已用", "queue.borrowed": "借入", "queue.lent": "借出",
    "ti.running": "运行中", "ti.queued": "排队中", "ti.scheduled": "已调度", "ti.up_for_retry": "等待重试",
    "ti.restarting": "重启中", "ti.failed": "失败", "ti.success": "成功",
    "sedna.title": "Sedna 工作负载",
    "sedna.hint": "联邦学习与联合推理，期望与实际的子资源",
    "sedna.not_installed": "此集群未安装 Sedna 的 CRD。",
    "sedna.none": "没有 FederatedLearningJob 或 JointInferenceService。平台负责人可以创建一个（见平台负责人指南中的 Sedna 演示一节）。",
    "sedna.workload": "工作负载", "sedna.phase": "阶段", "sedna.children": "子资源", "sedna.events": "最近事件",
    "dur.s": "{n}秒", "dur.m": "{n}分", "dur.h": "{n}小时", "dur.d": "{n}天", "dur.none": "–",
  },
};

const ACTION_WORDS = { "zh-CN": { stop: "停止", start: "启动", delete: "删除" } };

/** The language Airflow's UI shows (its i18next choice), as one of ours; English for any other. Only a key of
 * our own dictionaries is ever returned (it becomes the page's lang attribute): "__proto__" or "constructor" in
 * localStorage are inherited properties of MESSAGES, not languages (issue 30, class 7). */
export function language() {
  let lng = "";
  try { lng = localStorage.getItem("i18nextLng") || ""; } catch (e) { lng = ""; }
  lng = String(lng || document.documentElement.lang || navigator.language || "en").slice(0, 35);
  if (lng === "zh-CN" || lng.toLowerCase() === "zh" || lng.toLowerCase().startsWith("zh-hans")) return "zh-CN";
  return Object.prototype.hasOwnProperty.call(MESSAGES, lng) ? lng : "en";
}

/** ``t("form.free", {n: 3})`` in the current language; a key missing there falls back to English. */
export function t(key, vars) {
  const lang = language();
  const text = (MESSAGES[lang] && MESSAGES[lang][key]) ?? MESSAGES.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, k) => (vars && vars[k] !== undefined ? String(vars[k]) : `{${k}}`));
}

export function actionWord(action) {
  const words = ACTION_WORDS[language()];
  return words ? words[action] || action : action;
}

/** The time zone Airflow's UI shows times in: its menu's choice, else the browser's. */
export function timeZone() {
  try {
    const stored = localStorage.getItem("timezone");
    if (stored) {
      const zone = JSON.parse(stored);
      new Intl.DateTimeFormat("en", { timeZone: zone });  // throws on a zone the browser does not know
      return zone;
    }
  } catch (e) { /* an unreadable choice: the browser's zone, as Airflow does */ }
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

const FORMATS = new Map();  // zone -> its formatter: making one costs more than formatting (0.3 ms: 1,000 times a page)
function formatter(zone) {
  if (!FORMATS.has(zone)) {
    FORMATS.set(zone, new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    }));
  }
  return FORMATS.get(zone);
}

/** An ISO time as Airflow shows it: "YYYY-MM-DD HH:mm:ss" in the chosen zone ("" for none). */
export function formatTime(iso, zone) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const parts = {};
  for (const p of formatter(zone || timeZone()).formatToParts(d)) parts[p.type] = p.value;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
}
