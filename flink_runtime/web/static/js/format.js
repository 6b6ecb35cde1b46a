// How numbers, times and states read on the page. The REST API answers epoch
// milliseconds with -1 for "not reached", as Flink does.

import { h } from "./dom.js";

export const TERMINAL_JOB_STATES = new Set(["FINISHED", "CANCELED", "FAILED", "SUSPENDED"]);

export function isTerminal(state) {
  return TERMINAL_JOB_STATES.has(state);
}

export function duration(ms) {
  if (ms === undefined || ms === null || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  let seconds = Math.floor(ms / 1000);
  const days = Math.floor(seconds / 86400);
  seconds -= days * 86400;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  if (days) return `${days}d ${hours}h ${minutes}m`;
  if (hours) return `${hours}h ${minutes}m ${seconds}s`;
  if (minutes) return `${minutes}m ${seconds}s`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

// Always a date with the time (YYYY-MM-DD HH:MM:SS, local time): a list of jobs spans days.
export function time(epochMs) {
  if (!epochMs || epochMs < 0) return "–";
  const at = new Date(epochMs);
  const two = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

export function bytes(value) {
  if (value === undefined || value === null || value < 0 || Number.isNaN(value)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let amount = Number(value);
  let unit = 0;
  while (amount >= 1024 && unit < units.length - 1) {
    amount /= 1024;
    unit += 1;
  }
  return `${unit ? amount.toFixed(amount < 10 ? 1 : 0) : amount} ${units[unit]}`;
}

export function count(value) {
  if (value === undefined || value === null || value < 0 || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US");
}

export function percent(fraction) {
  if (fraction === undefined || fraction === null || Number.isNaN(fraction)) return "n/a";
  return `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;
}

// A job or task state as a coloured badge (colours in dashboard.css, shared with the graph).
export function badge(state) {
  return h("span", { class: `badge state-${state}` }, state || "?");
}

// Task counts by state (the job overview's "tasks") as a bar of coloured segments.
export function taskBar(tasks) {
  const total = tasks.total || 0;
  const order = ["finished", "running", "initializing", "deploying", "scheduled", "created", "canceling", "canceled", "failed", "reconciling"];
  const segments = order
    .filter((key) => tasks[key] > 0)
    .map((key) =>
      h("span", {
        class: `segment state-${key.toUpperCase()}`,
        title: `${tasks[key]} ${key}`,
        "data-width": tasks[key] / Math.max(1, total),
      }),
    );
  const bar = h("span", { class: "taskbar", title: `${tasks.finished || 0} of ${total} tasks finished` }, segments);
  // Widths through the CSSOM: the page's CSP forbids style attributes in markup.
  for (const segment of segments) segment.style.width = `${segment.dataset.width * 100}%`;
  return h("span", { class: "tasks" }, bar, ` ${tasks.finished || 0}/${total}`);
}

// A small progress bar for a fraction (done of total).
export function progress(done, total, label) {
  const fraction = total > 0 ? Math.min(1, done / total) : 0;
  const fill = h("span", { class: "fill" });
  fill.style.width = `${fraction * 100}%`;
  return h("span", { class: "progress", title: label || `${done} of ${total}` }, h("span", { class: "track" }, fill), ` ${count(done)}/${count(total)}`);
}
