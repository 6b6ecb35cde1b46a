// The overview: TaskManagers, slots used and free, jobs by state, the JobManager's
// uptime, then the running and the completed jobs.
// GET /overview, /jobmanager/metrics, /taskmanagers, /jobs/overview.

import * as api from "./api.js";
import { h, Section, table } from "./dom.js";
import * as fmt from "./format.js";
import { jobsTable, loadJobs } from "./jobs.js";

function card(title, value, detail, attrs) {
  return h("div", { class: "card", ...(attrs || {}) }, h("div", { class: "card-title" }, title), h("div", { class: "card-value" }, value), h("div", { class: "card-detail" }, detail || ""));
}

function cards({ overview, metrics }) {
  const total = overview["slots-total"];
  const free = overview["slots-available"];
  const used = total - free;
  const uptime = metrics.uptime;
  return h(
    "div",
    { class: "cards" },
    card("TaskManagers", String(overview.taskmanagers), "registered", { id: "card-taskmanagers" }),
    card("Task slots", `${used} / ${total}`, `${used} used, ${free} free`, { id: "card-slots" }),
    card("Running jobs", String(overview["jobs-running"]), "", { id: "card-running" }),
    card(
      "Ended jobs",
      String(overview["jobs-finished"] + overview["jobs-cancelled"] + overview["jobs-failed"]),
      h(
        "span",
        {},
        fmt.badge("FINISHED"), ` ${overview["jobs-finished"]}  `,
        fmt.badge("CANCELED"), ` ${overview["jobs-cancelled"]}  `,
        fmt.badge("FAILED"), ` ${overview["jobs-failed"]}`,
      ),
    ),
    card("JobManager uptime", Number.isFinite(uptime) ? fmt.duration(uptime) : "n/a", `version ${overview["flink-version"]}`),
  );
}

export function taskManagersBrief(taskmanagers) {
  const rows = taskmanagers.map((tm) =>
    h(
      "tr",
      { class: "tm-row" },
      h("td", {}, h("a", { href: `#/taskmanagers/${encodeURIComponent(tm.id)}` }, tm.id)),
      h("td", {}, tm.path || tm.host || ""),
      h("td", {}, fmt.progress(tm.slotsNumber - tm.freeSlots, tm.slotsNumber, "slots used of total")),
      h("td", { class: "num" }, String(tm.assignedTasks)),
    ),
  );
  return table(["TaskManager", "Address", "Slots used", "Tasks"], rows, { class: "taskmanagers" });
}

export function overviewPage(main) {
  const summary = new Section(null, { id: "summary" });
  const running = new Section("Running jobs", { id: "running-jobs" });
  const taskmanagers = new Section("TaskManagers", { id: "overview-taskmanagers" });
  const completed = new Section("Completed jobs", { id: "completed-jobs" });
  main.replaceChildren(summary.element, running.element, taskmanagers.element, completed.element);
  return {
    async refresh() {
      const [overview, metricList, tms, jobs] = await Promise.all([
        api.get("overview"),
        api.getOptional("jobmanager/metrics?get=uptime"),
        api.get("taskmanagers"),
        loadJobs(),
      ]);
      summary.update({ overview, metrics: api.metricValues(metricList) }, cards);
      running.update(
        jobs.filter((job) => !fmt.isTerminal(job.state)),
        (list) => jobsTable(list, "No job is running."),
      );
      taskmanagers.update(tms.taskmanagers, taskManagersBrief);
      completed.update(
        jobs.filter((job) => fmt.isTerminal(job.state)),
        (list) => jobsTable(list, "No job has ended yet."),
      );
    },
  };
}
