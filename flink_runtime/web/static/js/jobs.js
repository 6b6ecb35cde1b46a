// The jobs list (its own page, and the running/completed tables of the overview).
// GET /jobs/overview gives states, times and task counts; each job's progress (splits
// done of total, records and bytes) comes from GET /jobs/:id and /jobs/:id/accumulators.

import * as api from "./api.js";
import { h, placeholder, Section, table } from "./dom.js";
import * as fmt from "./format.js";

// At most this many jobs get their progress read per refresh (the newest first).
const PROGRESS_LIMIT = 50;
// A job that ended no longer changes: its progress is read once.
const endedProgress = new Map();

function sumMetrics(details) {
  const total = { readRecords: 0, writeRecords: 0, readBytes: 0, writeBytes: 0 };
  for (const vertex of details.vertices || []) {
    const m = vertex.metrics || {};
    total.readRecords += m["read-records"] || 0;
    total.writeRecords += m["write-records"] || 0;
    total.readBytes += m["read-bytes"] || 0;
    total.writeBytes += m["write-bytes"] || 0;
  }
  return total;
}

// Sources' input splits from Flink's user-task accumulators "<vertex>.splits.total|completed".
export function splitsOf(accumulators) {
  const splits = { total: 0, completed: 0, known: false };
  for (const item of (accumulators && accumulators["user-task-accumulators"]) || []) {
    if (item.name.endsWith(".splits.total")) {
      splits.total += Number(item.value);
      splits.known = true;
    } else if (item.name.endsWith(".splits.completed")) splits.completed += Number(item.value);
  }
  return splits;
}

async function progressOf(job) {
  if (endedProgress.has(job.jid)) return endedProgress.get(job.jid);
  const [details, accumulators] = await Promise.all([
    api.getOptional(`jobs/${job.jid}`),
    api.getOptional(`jobs/${job.jid}/accumulators`), // live jobs only: an archived one is 404
  ]);
  const progress = { io: details ? sumMetrics(details) : null, splits: splitsOf(accumulators) };
  if (fmt.isTerminal(job.state)) endedProgress.set(job.jid, progress);
  return progress;
}

// The jobs of /jobs/overview, newest first, each with its progress.
export async function loadJobs() {
  const overview = await api.get("jobs/overview");
  const jobs = [...overview.jobs].sort((a, b) => (b["start-time"] || 0) - (a["start-time"] || 0));
  const progress = await Promise.all(jobs.slice(0, PROGRESS_LIMIT).map((job) => progressOf(job).catch(() => null)));
  return jobs.map((job, index) => ({ ...job, progress: progress[index] || null }));
}

function ioCell(io, records) {
  if (!io) return "–";
  return records
    ? `${fmt.count(io.readRecords)} / ${fmt.count(io.writeRecords)}`
    : `${fmt.bytes(io.readBytes)} / ${fmt.bytes(io.writeBytes)}`;
}

export function jobsTable(jobs, emptyText) {
  if (!jobs.length) return placeholder(emptyText || "No jobs.");
  const rows = jobs.map((job) => {
    const p = job.progress;
    const splits = p && p.splits.known ? fmt.progress(p.splits.completed, p.splits.total, "input splits done of total") : "–";
    return h(
      "tr",
      { class: "job-row", "data-job-id": job.jid },
      h("td", {}, h("a", { href: `#/jobs/${job.jid}`, class: "job-link" }, job.name)),
      h("td", {}, fmt.badge(job.state)),
      h("td", {}, fmt.time(job["start-time"])),
      h("td", { class: "num" }, fmt.duration(job.duration)),
      h("td", {}, fmt.taskBar(job.tasks || {})),
      h("td", {}, splits),
      h("td", { class: "num", title: "records read / written, summed over the vertices" }, ioCell(p && p.io, true)),
      h("td", { class: "num", title: "bytes read / written, summed over the vertices" }, ioCell(p && p.io, false)),
    );
  });
  return table(["Job", "State", "Started", "Duration", "Tasks", "Splits", "Records in / out", "Bytes in / out"], rows, {
    class: "jobs",
  });
}

// The Jobs page: every job this JobManager knows (also those of earlier runs, from its store).
export function jobsPage(main) {
  const section = new Section("Jobs");
  main.replaceChildren(section.element);
  return {
    async refresh() {
      const jobs = await loadJobs();
      section.update(jobs, (data) => jobsTable(data, "No jobs submitted yet."));
    },
  };
}
