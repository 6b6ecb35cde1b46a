// One job's page: its header and buttons, graph, vertices, the selected vertex's
// subtasks, a timeline of all subtasks, exceptions, checkpoints and configuration.
// It refreshes with the app's polling and at once when GET /jobs/:id/events (a long
// poll) reports a state change.

import { JobActions } from "./actions.js";
import * as api from "./api.js";
import { h, placeholder, Section } from "./dom.js";
import * as fmt from "./format.js";
import { jobGraph } from "./graph.js";
import { checkpointsView, configView, exceptionsView, subtasksTable, verticesTable } from "./job_sections.js";
import { timeline } from "./timeline.js";

const EVENT_WAIT_SECONDS = 25;
const JOB_METRICS = "uptime,numRestarts,lastCheckpointDuration,lastCheckpointSize";

function fact(label, value, id) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value", id }, value));
}

function headerFacts({ details, metrics }) {
  return h(
    "div",
    { class: "facts" },
    fact("State", fmt.badge(details.state), "job-state"),
    fact("Type", details["job-type"] || "–"),
    fact("Started", fmt.time(details["start-time"])),
    fact("Ended", fmt.time(details["end-time"])),
    fact("Duration", fmt.duration(details.duration)),
    fact("Restarts", Number.isFinite(metrics.numRestarts) ? String(metrics.numRestarts) : "n/a"),
    fact("Last checkpoint", metrics.lastCheckpointDuration >= 0 ? `${fmt.duration(metrics.lastCheckpointDuration)}, ${fmt.bytes(metrics.lastCheckpointSize)}` : "–"),
    ...(details.rounds ? [fact("Rounds", roundsText(details.rounds), "job-rounds")] : []),
  );
}

// A continuous job runs in rounds; between two it waits for new input, its subtasks done
// with the last round and their slots kept for the next (as a Flink streaming job holds
// its slots) until slot.idle.timeout.
function roundsText(rounds) {
  const last = rounds["last-round-end"] > 0 ? `, last ended ${fmt.time(rounds["last-round-end"])}` : "";
  const held = `${rounds.slots} slot${rounds.slots === 1 ? "" : "s"} held`;
  const now = rounds.waiting ? `waiting for new input (${held})` : `round ${rounds.count} running (${held})`;
  return `${rounds.count}${last}; ${now}`;
}

// Per-subtask splits of a source vertex, from its metrics "<subtask>.numSplitsProcessed".
async function splitsDone(jobId, vertex) {
  if (!vertex || !vertex["input-splits"]) return null;
  const names = vertex.subtasks.map((subtask) => `${subtask.subtask}.numSplitsProcessed`).join(",");
  const values = api.metricValues(await api.getOptional(`jobs/${jobId}/vertices/${vertex.id}/metrics?get=${names}`));
  const done = {};
  for (const [name, value] of Object.entries(values)) done[Number(name.split(".")[0])] = value;
  return done;
}

export function jobPage(main, jobId, app) {
  const title = h("h1", { class: "job-title" }, h("span", { class: "muted" }, "Job "), jobId);
  const facts = new Section(null, { class: "job-facts" });
  const actions = new JobActions(jobId, () => app.refreshNow());
  const graph = new Section("Job graph", { id: "job-graph" });
  const vertices = new Section("Vertices", { id: "vertices" });
  const subtasks = new Section("Subtasks", { id: "subtasks" });
  const times = new Section("Timeline", { id: "timeline" });
  const exceptions = new Section("Exceptions", { id: "exceptions" });
  const checkpoints = new Section("Checkpoints and savepoints", { id: "checkpoints" });
  const config = new Section("Configuration", { id: "configuration" });
  const header = h("div", { class: "job-header" }, title, facts.element, actions.element);
  main.replaceChildren(header, graph.element, vertices.element, subtasks.element, times.element, exceptions.element, checkpoints.element, config.element);

  let selected = null;
  let endedAndLoaded = false;
  let stopped = false;
  let last = null; // the last answers, to redraw at once when a vertex is selected
  const select = (vertexId) => {
    selected = vertexId;
    if (last) draw(last);
    app.refreshNow();
  };

  function draw(data) {
    const { details, subtaskAnswers, splits } = data;
    graph.update({ plan: details.plan, vertices: details.vertices, selected }, (d) =>
      h("div", { class: "graph-scroll" }, jobGraph(d.plan, d.vertices, d.selected, select)),
    );
    vertices.update({ vertices: details.vertices, selected }, (d) => verticesTable(d.vertices, d.selected, select));
    const chosen = details.vertices.find((vertex) => vertex.id === selected);
    subtasks.element.querySelector("h2").textContent = chosen ? `Subtasks of ${chosen.name}` : "Subtasks";
    subtasks.update({ vertex: subtaskAnswers[selected] || null, splits }, (d) => subtasksTable(d.vertex, d.splits));
    const known = Object.values(subtaskAnswers).filter(Boolean);
    times.update({ known, now: details.now }, (d) =>
      d.known.length ? timeline(d.known, d.now) : placeholder("Subtasks are kept for jobs of this JobManager run only."),
    );
  }

  async function refresh() {
    if (endedAndLoaded || stopped) return;
    const details = await api.get(`jobs/${jobId}`);
    title.replaceChildren(details.name, " ", h("span", { class: "muted small" }, details.jid));
    document.title = `${details.name} · flink-runtime`;
    if (!selected && details.vertices.length) selected = details.vertices[0].id;
    const [subtaskList, exceptionAnswer, checkpointAnswer, configAnswer, metricList] = await Promise.all([
      Promise.all(details.vertices.map((vertex) => api.getOptional(`jobs/${jobId}/vertices/${vertex.id}`))),
      api.getOptional(`jobs/${jobId}/exceptions`),
      api.getOptional(`jobs/${jobId}/checkpoints`),
      api.getOptional(`jobs/${jobId}/config`),
      api.getOptional(`jobs/${jobId}/metrics?get=${JOB_METRICS}`),
    ]);
    const subtaskAnswers = Object.fromEntries(details.vertices.map((vertex, index) => [vertex.id, subtaskList[index]]));
    const splits = await splitsDone(jobId, subtaskAnswers[selected]);
    last = { details, subtaskAnswers, splits };
    facts.update({ details: { ...details, now: 0, timestamps: 0, plan: 0, vertices: 0 }, metrics: api.metricValues(metricList) }, headerFacts);
    actions.update(details.state);
    draw(last);
    exceptions.update(exceptionAnswer, exceptionsView);
    checkpoints.update(checkpointAnswer, checkpointsView);
    config.update(configAnswer, configView);
    // An ended job no longer changes: stop asking (a new visit reads it again).
    endedAndLoaded = fmt.isTerminal(details.state) && !actions.busy;
  }

  // Follow the job's state changes as they happen; the app's polling covers the figures.
  async function follow() {
    let since = 0;
    while (!stopped && !endedAndLoaded) {
      try {
        const answer = await api.get(`jobs/${jobId}/events?since=${since}&timeout=${EVENT_WAIT_SECONDS}`);
        if (stopped) return;
        if (answer.events.length) app.refreshNow();
        since = answer.next;
      } catch (error) {
        if (error.status === 404) return; // a job of an earlier JobManager run: no events
        await new Promise((resolve) => setTimeout(resolve, 3000));
      }
    }
  }
  follow();

  return {
    refresh,
    dispose() {
      stopped = true;
      actions.dispose();
    },
  };
}
