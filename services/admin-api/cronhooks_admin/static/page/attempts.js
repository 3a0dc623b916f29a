// A delivery's attempts as the history shows them when opened: each attempt's request and
// response, what it cost and the agent's logs (CONTRACT §10, §16.1).
import { el, text } from "./dom.js";
import { when } from "./time.js";
import { agentLogsView, costsView } from "./agent_report.js";

/** "850 ms", "1.25 s", or "—". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function pretty(body) {
  try { return JSON.stringify(JSON.parse(body), null, 2); } catch { return body; }
}

function head(a, zone) {
  return el("div", { class: "attempt-head" },
    el("strong", {}, `Attempt ${a.attempt}`),
    a.attempt > 1 ? el("span", { class: "badge" }, "retry") : null,
    el("span", { class: "muted" }, when(a.startedAt, zone)),
    el("span", { class: "muted" }, duration(a.durationMs)),
    a.responseStatus !== null ? el("span", { class: "badge " + (a.responseStatus < 300 ? "status-success" : "status-failed") }, `HTTP ${a.responseStatus}`)
      : el("span", { class: "badge status-failed" }, "no response"),
    costsView(a.costs, "cost"));
}

function attemptView(a, zone) {
  if (a.logsExpired) {
    return el("div", { class: "attempt", "data-attempt": a.attempt }, head(a, zone),
      el("div", { class: "logs-expired" }, "logs expired — retention dropped this attempt's request and response bodies"),
      a.errorMessage ? el("div", { class: "status-failed" }, a.errorMessage) : null);
  }
  let response;
  if (a.responseBody) response = el("pre", { class: "response" }, pretty(a.responseBody));
  else if (a.errorMessage) response = el("div", { class: "no-response" }, el("strong", {}, "No response: "), a.errorMessage);
  else response = el("div", { class: "muted" }, "(empty body)");
  return el("div", { class: "attempt", "data-attempt": a.attempt }, head(a, zone),
    a.errorMessage && a.responseBody ? el("div", { class: "status-failed" }, a.errorMessage) : null,
    agentLogsView(a.agentLogs, zone),
    el("div", { class: "bodies" },
      el("div", {}, el("div", { class: "muted small" }, a.requestBodyTruncated ? "Request (its first 64 KiB)" : "Request"),
        el("pre", { class: "request" }, a.requestBodyTruncated ? a.requestBody : pretty(a.requestBody))),
      el("div", {}, el("div", { class: "muted small" }, "Response"), response)));
}

/** The opened delivery's attempts (or why it has none), a scheduled retry first. */
export function attemptViews(d, zone) {
  if (!d.attempts.length) {
    const why = d.status === "skipped" ? text(d.error) : "No attempt has finished yet.";
    return [el("div", { class: "muted attempt-none" }, why)];
  }
  // A scheduled retry says when (CONTRACT §15: nextAttemptAt).
  const next = d.nextAttemptAt
    ? [el("div", { class: "muted next-attempt" }, `Next attempt at ${when(d.nextAttemptAt, zone)}`)] : [];
  return next.concat(d.attempts.map(a => attemptView(a, zone)));
}
