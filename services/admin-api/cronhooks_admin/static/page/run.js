// A delivery's run (CONTRACT §16.2): a 202 answer to a delivery that carried an api_token
// starts one; the agent reports how it ended, or its deadline passes. Shown below the
// delivery's attempts, its costs and logs as an attempt's (agent_report.js). Everything
// the agent sent (message, units, log text and data) goes in as text, never as markup.
import { el, text } from "./dom.js";
import { when } from "./time.js";
import { agentLogsView, costsView } from "./agent_report.js";

/** What the history asks of each delivery for its run. */
export const RUN_FIELDS = "run { state startedAt deadline finishedAt message costs { unit amount } logs { ts level msg data } }";

const STATES = { RUNNING: "running", SUCCEEDED: "succeeded", FAILED: "failed", TIMED_OUT: "timed out" };

function field(label, value) {
  return el("div", { class: "run-field" }, el("span", { class: "muted small" }, label), " ", value);
}

/** The run of delivery `d` as a block, or null when it started none. */
export function runView(d, zone) {
  const run = d.run;
  if (!run) return null;
  const state = run.state.toLowerCase();  // an enum value: RUNNING … TIMED_OUT
  const ended = run.finishedAt ? when(run.finishedAt, zone) : el("span", { class: "muted" }, "still running");
  return el("div", { class: "attempt run", "data-run-state": run.state },
    el("div", { class: "attempt-head" },
      el("strong", {}, "Run"),
      el("span", { class: "badge run-state run-" + state }, STATES[run.state] || state),
      costsView(run.costs, "cost")),
    el("div", { class: "run-fields" },
      field("Started", when(run.startedAt, zone)),
      field("Deadline", when(run.deadline, zone)),
      field("Ended", ended)),
    run.message ? el("div", { class: "run-message" + (run.state === "SUCCEEDED" ? "" : " status-failed") }, text(run.message)) : null,
    agentLogsView(run.logs, zone) || el("div", { class: "muted small" }, "The agent has logged nothing."));
}
