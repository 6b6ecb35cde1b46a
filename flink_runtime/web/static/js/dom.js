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

// A table from column headers and rows of cells (a cell: text or a node). A click on a
// header sorts the rows by that column (again: the other way); the order is kept per table
// class across the page's refreshes. A cell sorts by its data-sort attribute, else its text.
const sortOrders = new Map();

function sortKey(row, column) {
  const cell = row.cells[column];
  if (!cell) return "";
  const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  const number = Number(raw.replace(/,/g, "").split(/[\s/]/)[0]);
  return raw !== "" && Number.isFinite(number) ? number : raw.toLowerCase();
}

function applySort(element, column, descending) {
  const body = element.tBodies[0];
  const rows = [...body.rows];
  rows.sort((a, b) => {
    const x = sortKey(a, column);
    const y = sortKey(b, column);
    const order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
    return descending ? -order : order;
  });
  body.append(...rows);
  element.querySelectorAll("th").forEach((th, index) => {
    th.dataset.sorted = index === column ? (descending ? "desc" : "asc") : "";
  });
}

export function table(headers, rows, attrs) {
  const key = (attrs && attrs.class) || headers.join("|");
  const element = h(
    "table",
    attrs || {},
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((title, column) =>
          h(
            "th",
            {
              class: "sortable",
              title: "Sort by this column",
              onclick: () => {
                const saved = sortOrders.get(key);
                const descending = saved && saved.column === column ? !saved.descending : false;
                sortOrders.set(key, { column, descending });
                applySort(element, column, descending);
              },
            },
            title,
          ),
        ),
      ),
    ),
    h("tbody", {}, rows),
  );
  const saved = sortOrders.get(key);
  if (saved) applySort(element, saved.column, saved.descending);
  return element;
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
