// The subtasks' timeline: one row per subtask, a bar per attempt (its prior attempts, as
// the subtasks answer's "prior-attempts" keeps them, then the current one) from its
// start-time (deployed) to its end-time (or now), split into the states it passed (its
// "status-duration", in the order it entered them) and coloured as the graph.

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

// A subtask's attempts that were deployed, oldest first.
function attemptsOf(subtask) {
  return [...(subtask["prior-attempts"] || []), subtask].filter((attempt) => attempt["start-time"] > 0);
}

// vertices: [{id, name, subtasks: [...]}] from GET /jobs/:id/vertices/:vid; now: the server's clock.
export function timeline(vertices, now) {
  const rows = [];
  for (const vertex of vertices) {
    for (const subtask of vertex.subtasks || []) {
      const attempts = attemptsOf(subtask);
      if (attempts.length) rows.push({ vertex, subtask, attempts });
    }
  }
  if (!rows.length) return placeholder("No subtask has been deployed yet.");
  const all = rows.flatMap((row) => row.attempts);
  const start = Math.min(...all.map((attempt) => attempt["start-time"]));
  // An ended job's axis ends where its last attempt ended, not at "now" (which runs on).
  const ended = all.every((attempt) => attempt["end-time"] > 0);
  const end = Math.max(ended ? 0 : now, ...all.map((attempt) => attempt["end-time"]));
  const span = Math.max(1, end - start);
  const scale = (WIDTH - LABEL - 10) / span;
  const x = (t) => LABEL + (t - start) * scale;
  const height = rows.length * ROW + 24;

  const drawn = rows.map(({ vertex, subtask, attempts }, index) => {
    const y = index * ROW + 4;
    const name = `${vertex.name} (${subtask.subtask + 1}/${vertex.parallelism})`;
    const bars = attempts.map((attempt) => {
      const finish = attempt["end-time"] > 0 ? attempt["end-time"] : now;
      const cause = attempt["failure-cause"] ? ` (${attempt["failure-cause"].split("\n")[0]})` : "";
      const tip = `${name}, attempt ${attempt.attempt}: ${attempt.status}, ${fmt.duration(finish - attempt["start-time"])}${cause}`;
      return s(
        "g",
        { class: "timeline-attempt", "data-attempt": attempt.attempt, "data-status": attempt.status },
        s("title", {}, tip),
        segments(attempt, finish).map((part) =>
          s("rect", { x: x(part.from), y, width: Math.max(1, (part.to - part.from) * scale), height: ROW - 4, class: `bar state-${part.state}` }),
        ),
      );
    });
    return s(
      "g",
      { class: "timeline-row", "data-vertex-id": vertex.id, "data-subtask": subtask.subtask, "data-attempts": attempts.length },
      s("text", { x: LABEL - 6, y: y + 12, "text-anchor": "end", class: "timeline-label" }, name.length > 38 ? `…${name.slice(-37)}` : name),
      bars,
    );
  });
  const axis = [0, 0.25, 0.5, 0.75, 1].map((fraction) =>
    s("text", { x: LABEL + fraction * (WIDTH - LABEL - 10), y: height - 6, "text-anchor": fraction === 1 ? "end" : fraction ? "middle" : "start", class: "axis" }, `+${fmt.duration(fraction * span)}`),
  );
  return h(
    "div",
    { class: "timeline" },
    s("svg", { viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", preserveAspectRatio: "xMinYMin meet", class: "timeline-svg", "data-start": start, "data-end": end }, drawn, axis),
  );
}
