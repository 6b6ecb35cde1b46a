// Building DOM and SVG from data. Text always goes in as text nodes, never as HTML:
// job names, exception messages and log lines come from users, and this page holds
// the REST token.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(element, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "text") element.textContent = value;
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// h("td", {class: "num"}, "42"): an HTML element.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s("rect", {x: 0, y: 0}): an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

// A table from column headers and rows of cells (a cell: text or a node).
export function table(headers, rows, attrs) {
  return h(
    "table",
    attrs || {},
    h("thead", {}, h("tr", {}, headers.map((title) => h("th", {}, title)))),
    h("tbody", {}, rows),
  );
}

// A section that is rebuilt only when its data changed: a refresh every few seconds
// must not close an open stack trace, reset a scroll position or steal focus.
export class Section {
  constructor(title, attrs) {
    this.body = h("div", { class: "section-body" });
    this.element = h("section", attrs || {}, title ? h("h2", {}, title) : null, this.body);
    this.key = undefined;
  }

  update(data, render) {
    const key = JSON.stringify(data);
    if (key === this.key) return;
    this.key = key;
    this.body.replaceChildren(render(data));
  }
}

export function placeholder(text) {
  return h("p", { class: "muted" }, text);
}
