// The subtasks' timeline: one row per subtask, a bar from its start-time (deployed) to
// its end-time (or now), split into the states it passed (its "status-duration", in the
// order it entered them) and coloured as the graph.

import { h, placeholder, s } from "./dom.js";
import * as fmt from "./format.js";

const ROW = 18;
const LABEL = 240; // px for the row names
const WIDTH = 1000; // the drawing's own units; the SVG scales to the page

// States a subtask passes before it is deployed: the timeline starts at start-time.
const BEFORE_DEPLOYMENT = new Set(["CREATED", "SCHEDULED"]);

function segments(subtask, end) {
  const parts = [];
  let at = subtask["start-time"];
  for (const [state, ms] of Object.entries(subtask["status-duration"] || {})) {
    if (BEFORE_DEPLOYMENT.has(state)) continue;
    if (at >= end) break; // a final state's duration runs on until now
    parts.push({ state, from: at, to: Math.min(end, at + ms) });
    at += ms;
  }
  if (!parts.length) parts.push({ state: subtask.status, from: subtask["start-time"], to: end });
  return parts;
}

// vertices: [{id, name, subtasks: [...]}] from GET /jobs/:id/vertices/:vid; now: the server's clock.
export function timeline(vertices, now) {
  const rows = [];
  for (const vertex of vertices) {
    for (const subtask of vertex.subtasks || []) {
      if (subtask["start-time"] > 0) rows.push({ vertex, subtask });
    }
  }
  if (!rows.length) return placeholder("No subtask has been deployed yet.");
  const start = Math.min(...rows.map((row) => row.subtask["start-time"]));
  const end = Math.max(now, ...rows.map((row) => row.subtask["end-time"]));
  const span = Math.max(1, end - start);
  const scale = (WIDTH - LABEL - 10) / span;
  const x = (t) => LABEL + (t - start) * scale;
  const height = rows.length * ROW + 24;

  const drawn = rows.map(({ vertex, subtask }, index) => {
    const y = index * ROW + 4;
    const finish = subtask["end-time"] > 0 ? subtask["end-time"] : now;
    const name = `${vertex.name} (${subtask.subtask + 1}/${vertex.parallelism})`;
    const tip = `${name}, attempt ${subtask.attempt}: ${subtask.status}, ${fmt.duration(finish - subtask["start-time"])}`;
    return s(
      "g",
      { class: "timeline-row", "data-vertex-id": vertex.id, "data-subtask": subtask.subtask },
      s("title", {}, tip),
      s("text", { x: LABEL - 6, y: y + 12, "text-anchor": "end", class: "timeline-label" }, name.length > 38 ? `…${name.slice(-37)}` : name),
      segments(subtask, finish).map((part) =>
        s("rect", { x: x(part.from), y, width: Math.max(1, (part.to - part.from) * scale), height: ROW - 4, class: `bar state-${part.state}` }),
      ),
    );
  });
  const axis = [0, 0.25, 0.5, 0.75, 1].map((fraction) =>
    s("text", { x: LABEL + fraction * (WIDTH - LABEL - 10), y: height - 6, "text-anchor": fraction === 1 ? "end" : fraction ? "middle" : "start", class: "axis" }, `+${fmt.duration(fraction * span)}`),
  );
  return h(
    "div",
    { class: "timeline" },
    s("svg", { viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", preserveAspectRatio: "xMinYMin meet", class: "timeline-svg" }, drawn, axis),
  );
}
