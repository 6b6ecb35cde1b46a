// The job graph: dagre (vendor/dagre.min.js, a global) places the vertices and routes
// the edges; this draws them as SVG. A vertex shows its chained operators, parallelism,
// state (colour) and records in and out; an edge its ship strategy (FORWARD, HASH, ...).

import { s } from "./dom.js";
import * as fmt from "./format.js";

const LINE = 16; // px between text lines
const PAD = 10;
const FONT = "12px system-ui, sans-serif";
const BOLD = `600 ${FONT}`;

let measure;
function textWidth(text, font) {
  measure = measure || document.createElement("canvas").getContext("2d");
  measure.font = font;
  return measure.measureText(text).width;
}

// A vertex's lines: its chained operators ("Read text -> Select" is a chain of two),
// then its figures.
function vertexLines(vertex) {
  const operators = String(vertex.name).split(" -> ");
  const m = vertex.metrics || {};
  return {
    operators,
    figures: [
      `Parallelism: ${vertex.parallelism}`,
      `Records in: ${fmt.count(m["read-records"])}  out: ${fmt.count(m["write-records"])}`,
    ],
  };
}

function drawVertex(vertex, box, selected, onSelect) {
  const { operators, figures } = vertexLines(vertex);
  const left = box.x - box.width / 2;
  const top = box.y - box.height / 2;
  const texts = [];
  let y = top + PAD + 12;
  for (const operator of operators) {
    texts.push(s("text", { x: left + PAD, y, class: "operator" }, operator));
    y += LINE;
  }
  y += 4;
  for (const figure of figures) {
    texts.push(s("text", { x: left + PAD, y, class: "figure" }, figure));
    y += LINE;
  }
  return s(
    "g",
    {
      class: `vertex state-${vertex.status}${selected ? " selected" : ""}`,
      "data-vertex-id": vertex.id,
      "data-vertex-name": vertex.name,
      onclick: () => onSelect(vertex.id),
    },
    s("title", {}, `${vertex.name}\n${vertex.status}`),
    s("rect", { x: left, y: top, width: box.width, height: box.height, rx: 6, ry: 6 }),
    s("rect", { x: left, y: top, width: 6, height: box.height, class: "state-stripe" }),
    s("text", { x: left + box.width - PAD, y: top + PAD + 12, class: "status", "text-anchor": "end" }, vertex.status),
    texts,
  );
}

function drawEdge(edge, label) {
  const points = edge.points || [];
  if (!points.length) return null;
  const d = points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
  return s(
    "g",
    { class: "edge" },
    s("path", { d, "marker-end": "url(#arrow)" }),
    s("rect", { x: edge.x - label.width / 2, y: edge.y - 10, width: label.width, height: 18, rx: 3, class: "edge-label-bg" }),
    s("text", { x: edge.x, y: edge.y + 3, "text-anchor": "middle", class: "edge-label" }, label.text),
  );
}

// plan: the "plan" of GET /jobs/:id (nodes with their inputs); vertices: its "vertices".
export function jobGraph(plan, vertices, selectedId, onSelect) {
  const byId = new Map(vertices.map((vertex) => [vertex.id, vertex]));
  const graph = new dagre.graphlib.Graph({ multigraph: true });
  graph.setGraph({ rankdir: "LR", nodesep: 30, ranksep: 70, marginx: 12, marginy: 12 });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const node of plan.nodes || []) {
    const vertex = byId.get(node.id) || { id: node.id, name: node.description, parallelism: node.parallelism, status: "CREATED" };
    const { operators, figures } = vertexLines(vertex);
    const widest = Math.max(
      ...operators.map((line) => textWidth(line, BOLD)),
      ...figures.map((line) => textWidth(line, FONT)),
      textWidth(vertex.status, FONT) + 40,
    );
    graph.setNode(node.id, { width: Math.ceil(widest) + 2 * PAD + 60, height: (operators.length + figures.length) * LINE + 2 * PAD + 4, vertex });
  }
  const labels = new Map();
  for (const node of plan.nodes || []) {
    for (const input of node.inputs || []) {
      if (!graph.hasNode(input.id)) continue;
      const name = `${input.num}`;
      const text = input.ship_strategy || "";
      const label = { text, width: textWidth(text, FONT) + 10 };
      labels.set(`${input.id}|${node.id}|${name}`, label);
      graph.setEdge(input.id, node.id, { width: label.width, height: 18, labelpos: "c" }, name);
    }
  }
  dagre.layout(graph);

  const size = graph.graph();
  const edges = graph.edges().map((e) => drawEdge(graph.edge(e), labels.get(`${e.v}|${e.w}|${e.name}`)));
  const nodes = graph.nodes().map((id) => drawVertex(graph.node(id).vertex, graph.node(id), id === selectedId, onSelect));
  const width = Math.ceil(size.width || 100);
  const height = Math.ceil(size.height || 60);
  return s(
    "svg",
    { class: "job-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "job graph" },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))),
    edges,
    nodes,
  );
}
