// The job page's buttons: cancel (PATCH /jobs/:id?mode=cancel), savepoint
// (POST /jobs/:id/savepoints) and stop with a savepoint (POST /jobs/:id/stop), the two
// last polled at GET /jobs/:id/savepoints/:triggerid until COMPLETED.

import * as api from "./api.js";
import { h } from "./dom.js";
import * as fmt from "./format.js";

const POLL_MS = 1000;

// Flink's TriggerId: 32 hex digits; a retried trigger with the same id is the same request.
function triggerId() {
  return crypto.randomUUID().replace(/-/g, "");
}

function failureText(cause) {
  if (!cause) return "failed";
  const trace = cause["stack-trace"] || "";
  return trace.split("\n")[0] || cause.class || "failed";
}

async function awaitSavepoint(jobId, requestId, isStopped) {
  for (;;) {
    const status = await api.get(`jobs/${jobId}/savepoints/${requestId}`);
    if (status.status && status.status.id === "COMPLETED") {
      const operation = status.operation || {};
      if (operation["failure-cause"]) throw new Error(failureText(operation["failure-cause"]));
      return operation.location;
    }
    if (isStopped()) return null;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

// The action bar of one job; update(state) enables what the state allows.
export class JobActions {
  constructor(jobId, onChange) {
    this.jobId = jobId;
    this.onChange = onChange;
    this.stopped = false;
    this.busy = false;
    this.state = null;
    this.directory = h("input", {
      id: "savepoint-directory",
      type: "text",
      placeholder: "savepoint directory (default: state.savepoints.dir)",
      size: 40,
    });
    this.cancelButton = h("button", { id: "cancel-job", class: "danger", onclick: () => this.askCancel() }, "Cancel job");
    this.confirm = h(
      "span",
      { id: "cancel-confirm", class: "confirm", hidden: true },
      "Cancel this job? ",
      h("button", { id: "cancel-confirm-yes", class: "danger", onclick: () => this.cancel() }, "Yes, cancel"),
      h("button", { id: "cancel-confirm-no", onclick: () => this.showConfirm(false) }, "No"),
    );
    this.savepointButton = h("button", { id: "trigger-savepoint", onclick: () => this.savepoint(false) }, "Savepoint");
    this.stopButton = h("button", { id: "stop-job", onclick: () => this.savepoint(true) }, "Stop with savepoint");
    this.message = h("span", { id: "action-message", class: "action-message", role: "status" });
    this.element = h("div", { class: "actions" }, this.cancelButton, this.confirm, this.directory, this.savepointButton, this.stopButton, this.message);
  }

  dispose() {
    this.stopped = true;
  }

  update(state) {
    this.state = state;
    const ended = fmt.isTerminal(state);
    this.cancelButton.disabled = ended || this.busy;
    this.savepointButton.disabled = state !== "RUNNING" || this.busy;
    this.stopButton.disabled = state !== "RUNNING" || this.busy;
    this.directory.disabled = ended;
    if (ended) this.showConfirm(false);
  }

  say(text, kind) {
    this.message.textContent = text;
    this.message.className = `action-message ${kind || ""}`;
  }

  showConfirm(shown) {
    this.confirm.hidden = !shown;
    this.cancelButton.hidden = shown;
  }

  askCancel() {
    this.showConfirm(true);
  }

  async run(label, work) {
    this.busy = true;
    this.update(this.state);
    this.say(`${label}…`);
    try {
      this.say(await work(), "ok");
    } catch (error) {
      this.say(`${label} failed: ${error.message}`, "error");
    } finally {
      this.busy = false;
      this.update(this.state);
      this.onChange();
    }
  }

  cancel() {
    this.showConfirm(false);
    return this.run("Cancelling", async () => {
      await api.send("PATCH", `jobs/${this.jobId}?mode=cancel`);
      return "Cancellation requested.";
    });
  }

  savepoint(stop) {
    const directory = this.directory.value.trim();
    return this.run(stop ? "Stopping with a savepoint" : "Taking a savepoint", async () => {
      // Flink's field names: kebab case for a savepoint, camel case for a stop.
      const body = stop ? { triggerId: triggerId() } : { "cancel-job": false, triggerId: triggerId() };
      if (directory) body[stop ? "targetDirectory" : "target-directory"] = directory;
      const answer = await api.send("POST", `jobs/${this.jobId}/${stop ? "stop" : "savepoints"}`, body);
      const location = await awaitSavepoint(this.jobId, answer["request-id"], () => this.stopped);
      return location ? `${stop ? "Stopped; savepoint" : "Savepoint"} at ${location}` : "";
    });
  }
}
