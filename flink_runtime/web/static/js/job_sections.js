// The tables of the job page, each drawn from one REST answer in Flink's shape:
// vertices (GET /jobs/:id), subtasks (GET /jobs/:id/vertices/:vid), exceptions
// (GET /jobs/:id/exceptions), checkpoints (GET /jobs/:id/checkpoints) and the job's
// configuration (GET /jobs/:id/config).

import { h, placeholder, table } from "./dom.js";
import * as fmt from "./format.js";

// A vertex's "tasks" (counts keyed by upper-case state) as the job overview's lower-case counts.
function taskCounts(vertex) {
  const counts = { total: vertex.parallelism };
  for (const [state, n] of Object.entries(vertex.tasks || {})) counts[state.toLowerCase()] = n;
  return counts;
}

export function verticesTable(vertices, selectedId, onSelect) {
  const rows = vertices.map((vertex) => {
    const m = vertex.metrics || {};
    return h(
      "tr",
      {
        class: `vertex-row${vertex.id === selectedId ? " selected" : ""}`,
        "data-vertex-id": vertex.id,
        onclick: () => onSelect(vertex.id),
      },
      h("td", {}, vertex.name),
      h("td", {}, fmt.badge(vertex.status)),
      h("td", { class: "num" }, String(vertex.parallelism)),
      h("td", {}, fmt.taskBar(taskCounts(vertex))),
      h("td", { class: "num" }, `${fmt.count(m["read-records"])} / ${fmt.count(m["write-records"])}`),
      h("td", { class: "num" }, `${fmt.bytes(m["read-bytes"])} / ${fmt.bytes(m["write-bytes"])}`),
      h("td", { class: "num" }, fmt.duration(vertex.duration)),
    );
  });
  return table(["Vertex", "State", "Parallelism", "Tasks", "Records in / out", "Bytes in / out", "Duration"], rows, {
    class: "vertices clickable",
  });
}

// vertex: GET /jobs/:id/vertices/:vid; splitsDone: {subtask index: splits processed} for a source.
export function subtasksTable(vertex, splitsDone) {
  if (!vertex) return placeholder("Subtasks are kept for jobs of this JobManager run only.");
  const source = vertex["input-splits"];
  const header = source
    ? h("p", {}, "Input splits: ", fmt.progress(source.completed, source.total, "splits completed of total"), source.assignments > source.total ? ` (${source.assignments} hand-outs: some were redone)` : "")
    : null;
  const rows = vertex.subtasks.map((subtask) => {
    const m = subtask.metrics || {};
    const where = subtask.host ? `${subtask.host}` : subtask.endpoint || "–";
    const done = splitsDone && splitsDone[subtask.subtask];
    return h(
      "tr",
      { class: "subtask-row", "data-subtask": subtask.subtask },
      h("td", { class: "num" }, String(subtask.subtask)),
      h("td", {}, fmt.badge(subtask.status)),
      h("td", { class: "num" }, String(subtask.attempt)),
      h("td", { title: subtask["taskmanager-id"] || "" }, where, subtask["taskmanager-id"] ? h("div", { class: "muted small" }, subtask["taskmanager-id"]) : null),
      h("td", {}, fmt.time(subtask["start-time"])),
      h("td", {}, fmt.time(subtask["end-time"])),
      h("td", { class: "num" }, fmt.duration(subtask.duration)),
      h("td", { class: "num" }, source ? (Number.isFinite(done) ? fmt.count(done) : "–") : "n/a"),
      h("td", { class: "num" }, `${fmt.count(m["read-records"])} / ${fmt.count(m["write-records"])}`),
      h("td", { class: "num" }, `${fmt.bytes(m["read-bytes"])} / ${fmt.bytes(m["write-bytes"])}`),
    );
  });
  const failures = vertex.subtasks.filter((subtask) => subtask["failure-cause"]);
  return h(
    "div",
    {},
    header,
    table(["#", "State", "Attempt", "Host", "Started", "Ended", "Duration", "Splits done", "Records in / out", "Bytes in / out"], rows, { class: "subtasks" }),
    failures.map((subtask) =>
      h("details", { class: "failure" }, h("summary", {}, `Subtask ${subtask.subtask}, attempt ${subtask.attempt}: failure cause`), h("pre", {}, String(subtask["failure-cause"]))),
    ),
  );
}

function exceptionEntry(entry, open) {
  const where = [entry.taskName, entry.endpoint].filter(Boolean).join(" @ ");
  return h(
    "details",
    { class: "exception", open },
    h("summary", {}, h("span", { class: "muted" }, fmt.time(entry.timestamp)), " ", h("strong", {}, entry.exceptionName || "Exception"), where ? ` · ${where}` : ""),
    h("pre", { class: "stacktrace" }, entry.stacktrace || ""),
    (entry.concurrentExceptions || []).map((other) => exceptionEntry(other, false)),
  );
}

export function exceptionsView(exceptions) {
  if (!exceptions) return placeholder("Not available.");
  const entries = (exceptions.exceptionHistory && exceptions.exceptionHistory.entries) || [];
  if (!entries.length && !exceptions["root-exception"]) return placeholder("No exceptions.");
  if (!entries.length) {
    return h("details", { class: "exception", open: true }, h("summary", {}, "Root exception"), h("pre", { class: "stacktrace" }, exceptions["root-exception"]));
  }
  // The newest (the root cause of the job's current state) is open; older ones fold.
  return h(
    "div",
    { class: "exceptions" },
    entries.map((entry, index) => exceptionEntry(entry, index === 0)),
    exceptions.exceptionHistory.truncated ? placeholder("Older exceptions are not shown.") : null,
  );
}

function summaryRow(name, summary, format) {
  const figures = summary || {};
  return h("tr", {}, h("td", {}, name), ["min", "avg", "p90", "max"].map((key) => h("td", { class: "num" }, figures[key] === undefined ? "–" : format(figures[key]))));
}

export function checkpointsView(stats) {
  if (!stats) return placeholder("Not available (checkpoint statistics are kept for jobs of this JobManager run).");
  const counts = stats.counts || {};
  const summary = stats.summary || {};
  const history = stats.history || [];
  const rows = history.map((cp) =>
    h(
      "tr",
      { class: "checkpoint-row" },
      h("td", { class: "num" }, String(cp.id)),
      h("td", {}, fmt.badge(cp.status)),
      h("td", {}, cp.is_savepoint ? `Savepoint (${cp.checkpoint_type})` : "Checkpoint"),
      h("td", {}, fmt.time(cp.trigger_timestamp)),
      h("td", { class: "num" }, fmt.duration(cp.end_to_end_duration)),
      h("td", { class: "num" }, fmt.bytes(cp.checkpointed_size)),
      h("td", { class: "num" }, fmt.bytes(cp.state_size)),
      h("td", { class: "num" }, `${cp.num_acknowledged_subtasks}/${cp.num_subtasks}`),
      h("td", { class: "path" }, cp.external_path || cp.failure_message || ""),
    ),
  );
  return h(
    "div",
    {},
    h(
      "p",
      { class: "counts" },
      `Completed: ${counts.completed || 0} · In progress: ${counts.in_progress || 0} · Failed: ${counts.failed || 0} · Restored: ${counts.restored || 0}`,
    ),
    counts.completed
      ? table(["", "min", "avg", "p90", "max"], [summaryRow("End to end duration", summary.end_to_end_duration, fmt.duration), summaryRow("Checkpointed size", summary.checkpointed_size, fmt.bytes)], { class: "summary" })
      : null,
    history.length
      ? table(["ID", "Status", "Type", "Triggered", "Duration", "Checkpointed size", "State size", "Acknowledged", "Path or failure"], rows, { class: "checkpoints" })
      : placeholder("No checkpoint or savepoint taken yet."),
  );
}

function keyValues(entries) {
  return table(["Key", "Value"], entries.map(([key, value]) => h("tr", {}, h("td", { class: "key" }, key), h("td", {}, typeof value === "object" ? JSON.stringify(value) : String(value)))), { class: "config" });
}

export function configView(config) {
  if (!config) return placeholder("Not available.");
  const execution = { ...(config["execution-config"] || {}) };
  const user = execution["user-config"] || {};
  delete execution["user-config"];
  return h(
    "div",
    { class: "config-view" },
    keyValues(Object.entries(execution)),
    h("h3", {}, "User configuration"),
    Object.keys(user).length ? keyValues(Object.entries(user).sort()) : placeholder("The job sets no configuration of its own."),
  );
}
