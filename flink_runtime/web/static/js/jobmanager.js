// The JobManager page: its process metrics (Status.JVM.*, the planner's), configuration,
// environment and logs. GET /jobmanager/metrics, /jobmanager/config,
// /jobmanager/environment, /jobmanager/logs, /jobmanager/logs/:name (text).

import * as api from "./api.js";
import { h, placeholder, Section, table } from "./dom.js";
import * as fmt from "./format.js";

const LOG_TAIL_BYTES = 64 * 1024;

function metricText(name, value) {
  if (/Memory|RSS/.test(name)) return fmt.bytes(value);
  if (/CPU\.Load/.test(name)) return fmt.percent(value);
  if (/CPU\.Time$/.test(name)) return fmt.duration(value / 1e6);
  if (name === "uptime") return fmt.duration(value);
  return fmt.count(value);
}

function keyValues(pairs, className) {
  return table(["Key", "Value"], pairs.map(([key, value]) => h("tr", {}, h("td", { class: "key" }, key), h("td", {}, value))), { class: className });
}

export function jobManagerPage(main) {
  const metrics = new Section("Metrics", { id: "jobmanager-metrics" });
  const config = new Section("Configuration", { id: "jobmanager-config" });
  const environment = new Section("Environment", { id: "jobmanager-environment" });
  const logs = new Section("Logs", { id: "jobmanager-logs" });
  const logText = h("pre", { id: "jobmanager-log", class: "log" }, "Pick a log above.");
  main.replaceChildren(metrics.element, config.element, environment.element, logs.element, logText);

  async function show(name) {
    logText.textContent = "Loading…";
    try {
      const content = await api.text(`jobmanager/logs/${encodeURIComponent(name)}`, { Range: `bytes=-${LOG_TAIL_BYTES}` });
      logText.textContent = content || "(empty)";
      logText.scrollTop = logText.scrollHeight;
    } catch (error) {
      logText.textContent = `Not available: ${error.message}`;
    }
  }

  return {
    async refresh() {
      const names = await api.get("jobmanager/metrics");
      const values = api.metricValues(await api.get(`jobmanager/metrics?get=${names.map((m) => m.id).join(",")}`));
      metrics.update(values, (data) =>
        keyValues(
          Object.keys(data).sort().map((name) => [name, metricText(name, data[name])]),
          "jobmanager-metrics",
        ),
      );
      config.update(await api.get("jobmanager/config"), (data) => keyValues(data.map((entry) => [entry.key, entry.value]), "config"));
      environment.update(await api.getOptional("jobmanager/environment"), (data) =>
        data
          ? keyValues(
              [
                ["Version", data.jvm.version],
                ["Architecture", data.jvm.arch],
                ["Command line", data.jvm.options.join(" ")],
                ["Path", data.classpath.join("\n")],
              ],
              "environment",
            )
          : placeholder("Not available."),
      );
      logs.update((await api.getOptional("jobmanager/logs")) || { logs: [] }, (data) =>
        data.logs.length
          ? table(
              ["Log", "Size", "Modified"],
              data.logs.map((log) =>
                h(
                  "tr",
                  { class: "log-row" },
                  h("td", {}, h("button", { class: "link log-link", onclick: () => show(log.name) }, log.name)),
                  h("td", { class: "num", "data-sort": log.size }, fmt.bytes(log.size)),
                  h("td", { "data-sort": log.mtime }, fmt.time(log.mtime)),
                ),
              ),
              { class: "logs" },
            )
          : placeholder("This JobManager writes no log file."),
      );
    },
  };
}
