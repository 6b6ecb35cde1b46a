// TaskManagers: the list (slots, tasks, CPU and memory) and one TaskManager's page
// (its resources, the subtasks it runs, its log). GET /taskmanagers, /taskmanagers/:id,
// /taskmanagers/:id/metrics?get=..., /taskmanagers/:id/log (text). A JobManager without
// the metrics or log endpoints shows "n/a" / "not available".

import * as api from "./api.js";
import { h, placeholder, Section, table } from "./dom.js";
import * as fmt from "./format.js";

const METRICS = [
  "Status.JVM.CPU.Load",
  "Status.JVM.Memory.Heap.Used",
  "Status.JVM.Memory.Heap.Max",
  "Status.Python.CPU.Load",
  "Status.Python.Memory.RSS",
];
// The tail of a log worth showing in a page (a Range request; a server without Range
// support answers the whole, size-bounded file).
const LOG_TAIL_BYTES = 256 * 1024;

async function metricsOf(tmId) {
  try {
    const list = await api.getOptional(`taskmanagers/${encodeURIComponent(tmId)}/metrics?get=${METRICS.join(",")}`);
    return api.metricValues(list);
  } catch {
    return {};
  }
}

function cpu(values) {
  const jvm = values["Status.JVM.CPU.Load"];
  const python = values["Status.Python.CPU.Load"];
  if (jvm === undefined && python === undefined) return "n/a";
  return `Spark JVM ${fmt.percent(jvm)} · Python ${fmt.percent(python)}`;
}

function memory(values, details) {
  const used = values["Status.JVM.Memory.Heap.Used"] ?? (details && details.metrics && details.metrics.heapUsed) ?? 0;
  const max = values["Status.JVM.Memory.Heap.Max"] ?? (details && details.metrics && details.metrics.heapMax) ?? 0;
  const rss = values["Status.Python.Memory.RSS"];
  const heap = max > 0 ? `heap ${fmt.bytes(used)} / ${fmt.bytes(max)}` : "heap n/a";
  return `${heap} · Python RSS ${rss === undefined ? "n/a" : fmt.bytes(rss)}`;
}

function heartbeat(at) {
  return at > 0 ? `${fmt.duration(Math.max(0, Date.now() - at))} ago` : "–";
}

function listTable(rows) {
  if (!rows.length) return placeholder("No TaskManager is registered.");
  return table(
    ["TaskManager", "Address", "Slots used", "Tasks", "Cores", "Memory", "CPU load", "Memory in use", "Last heartbeat"],
    rows.map(({ tm, values }) =>
      h(
        "tr",
        { class: "tm-row", "data-tm-id": tm.id },
        h("td", {}, h("a", { href: `#/taskmanagers/${encodeURIComponent(tm.id)}` }, tm.id)),
        h("td", {}, tm.path || tm.host || "–"),
        h("td", {}, fmt.progress(tm.slotsNumber - tm.freeSlots, tm.slotsNumber, "slots used of total")),
        h("td", { class: "num" }, String(tm.assignedTasks)),
        h("td", { class: "num" }, String(tm.hardware ? tm.hardware.cpuCores : "–")),
        h("td", { class: "num" }, tm.hardware ? fmt.bytes(tm.hardware.physicalMemory) : "–"),
        h("td", {}, cpu(values)),
        h("td", {}, memory(values, null)),
        h("td", {}, heartbeat(tm.timeSinceLastHeartbeat)),
      ),
    ),
    { class: "taskmanagers" },
  );
}

export function taskManagersPage(main) {
  const section = new Section("TaskManagers", { id: "taskmanager-list" });
  main.replaceChildren(section.element);
  return {
    async refresh() {
      const { taskmanagers } = await api.get("taskmanagers");
      const values = await Promise.all(taskmanagers.map((tm) => metricsOf(tm.id)));
      section.update(
        taskmanagers.map((tm, index) => ({ tm: { ...tm, timeSinceLastHeartbeat: Math.floor(tm.timeSinceLastHeartbeat / 5000) * 5000 }, values: values[index] })),
        listTable,
      );
    },
  };
}

// The subtasks this TaskManager runs: its live jobs' vertices, filtered by taskmanager-id.
async function tasksOn(tmId, allocatedSlots) {
  const jobIds = [...new Set((allocatedSlots || []).map((slot) => slot.jobId))];
  const rows = [];
  for (const jobId of jobIds) {
    const details = await api.getOptional(`jobs/${jobId}`);
    if (!details) continue;
    const answers = await Promise.all(details.vertices.map((vertex) => api.getOptional(`jobs/${jobId}/vertices/${vertex.id}`)));
    for (const vertex of answers.filter(Boolean)) {
      for (const subtask of vertex.subtasks) {
        if (subtask["taskmanager-id"] === tmId) rows.push({ job: details, vertex, subtask });
      }
    }
  }
  return rows;
}

function tasksTable(rows) {
  if (!rows.length) return placeholder("This TaskManager runs no task now.");
  return table(
    ["Job", "Vertex", "Subtask", "Attempt", "State", "Started", "Duration"],
    rows.map(({ job, vertex, subtask }) =>
      h(
        "tr",
        { class: "task-row" },
        h("td", {}, h("a", { href: `#/jobs/${job.jid}` }, job.name)),
        h("td", {}, vertex.name),
        h("td", { class: "num" }, `${subtask.subtask + 1}/${vertex.parallelism}`),
        h("td", { class: "num" }, String(subtask.attempt)),
        h("td", {}, fmt.badge(subtask.status)),
        h("td", {}, fmt.time(subtask["start-time"])),
        h("td", { class: "num" }, fmt.duration(subtask.duration)),
      ),
    ),
    { class: "tasks" },
  );
}

// Flink's ResourceProfileInfo in words: "1.5 cores, 512 MB heap, 0 B managed".
function resourceText(resource) {
  if (!resource) return "–";
  const mib = (value) => fmt.bytes((value || 0) * 2 ** 20);
  return `${resource.cpuCores} cores, ${mib(resource.taskHeapMemory)} task heap, ${mib(resource.managedMemory)} managed`;
}

// One line per slot in use: its resources and its job (GET /taskmanagers/:id allocatedSlots).
function slotsText(allocated) {
  if (!allocated || !allocated.length) return "none";
  return h("ul", { class: "slot-resources" }, ...allocated.map((slot) => h("li", {}, `${resourceText(slot.resource)} (job ${slot.jobId || "–"})`)));
}

function detailsView({ tm, values }) {
  const resource = tm.totalResource || {};
  const rows = [
    ["ID", tm.id],
    ["Address", tm.path || "–"],
    ["Slots", `${tm.slotsNumber - tm.freeSlots} used of ${tm.slotsNumber} (${tm.freeSlots} free)`],
    ["Resources", `${resourceText(tm.totalResource)} in total; free: ${resourceText(tm.freeResource)}`],
    ["Slots in use", slotsText(tm.allocatedSlots)],
    ["CPU cores", String(tm.hardware ? tm.hardware.cpuCores : "–")],
    ["Physical memory", tm.hardware ? fmt.bytes(tm.hardware.physicalMemory) : "–"],
    ["Spark JVM heap (configured)", resource.taskHeapMemory ? fmt.bytes(resource.taskHeapMemory * 2 ** 20) : "–"],
    ["CPU load", cpu(values)],
    ["Memory in use", memory(values, tm)],
  ];
  return table(["", ""], rows.map(([key, value]) => h("tr", {}, h("td", { class: "key" }, key), h("td", {}, value))), { class: "config" });
}

export function taskManagerPage(main, encodedId) {
  const tmId = decodeURIComponent(encodedId);
  const facts = new Section(`TaskManager ${tmId}`, { id: "taskmanager" });
  const tasks = new Section("Tasks", { id: "taskmanager-tasks" });
  const logText = h("pre", { id: "taskmanager-log", class: "log" }, "Loading…");
  const reload = h("button", { onclick: () => loadLog() }, "Reload log");
  const log = h("section", { id: "taskmanager-log-section" }, h("h2", {}, "Log ", reload), logText);
  main.replaceChildren(facts.element, tasks.element, log);

  async function loadLog() {
    try {
      const content = await api.text(`taskmanagers/${encodeURIComponent(tmId)}/log`, { Range: `bytes=-${LOG_TAIL_BYTES}` });
      logText.textContent = content || "(empty)";
      logText.scrollTop = logText.scrollHeight;
    } catch (error) {
      logText.textContent = error.status === 404 || error.status === 405 ? "Not available." : `Not available: ${error.message}`;
    }
  }
  loadLog();

  return {
    async refresh() {
      const details = await api.get(`taskmanagers/${encodeURIComponent(tmId)}`);
      const [values, running] = await Promise.all([metricsOf(tmId), tasksOn(tmId, details.allocatedSlots)]);
      facts.update({ tm: { ...details, timeSinceLastHeartbeat: 0 }, values }, detailsView);
      tasks.update(running, tasksTable);
    },
  };
}
