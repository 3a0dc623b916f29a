// Open alerts (CONTRACT §10/§12): webhooks that keep failing, newest first. The section
// shows only while there is one; "History" opens the failing webhook's deliveries.
import { gql } from "./api.js";
import { $, el, patchKeyed } from "./dom.js";
import { openHistory } from "./history.js";
import { relative, when } from "./time.js";

const OPEN_ALERTS = `{ alerts(open: true, limit: 50) {
  id webhookId kind raisedAt consecutiveFailures lastError disabled } }`;

function render(a) {
  return el("tr", { "data-id": a.id, class: a.disabled ? "alert disabled" : "alert" },
    el("td", {}, el("span", { class: "badge status-failed" }, a.disabled ? "disabled" : "failing")),
    el("td", {}, `${a.kind} webhook ${a.webhookId}`),
    el("td", { class: "nowrap" }, `${a.consecutiveFailures} failed in a row`),
    el("td", { class: "nowrap" }, when(a.raisedAt), el("span", { class: "muted" }, ` (${relative(a.raisedAt, { past: true })})`)),
    el("td", { class: "error-cell", title: a.lastError || "" }, a.lastError || ""),
    el("td", { class: "actions" },
      el("button", { class: "show-history", onclick: () => openHistory(a.kind, a.webhookId) }, "History")));
}

export async function loadAlerts() {
  try {
    const body = await gql(OPEN_ALERTS);
    if (body.errors) throw new Error(body.errors[0].message);
    const alerts = body.data.alerts;
    patchKeyed($("#alerts tbody"), alerts, {
      key: a => a.id,
      signature: a => JSON.stringify([a, relative(a.raisedAt, { past: true })]),
      render,
    });
    $("#alerts-section").classList.toggle("hidden", alerts.length === 0);
    $("#alerts-error").textContent = "";
  } catch (err) {
    $("#alerts-section").classList.remove("hidden");
    $("#alerts-error").textContent = err.message;
  }
}

/** An alert's admin_url ends in #webhook-{id}: open that webhook's history (once the
 * list is loaded, which knows its kind). */
export async function openLinkedWebhook() {
  const m = /^#webhook-(\d+)$/.exec(location.hash);
  if (!m) return;
  const row = document.querySelector(`tr[data-id="${m[1]}"][data-kind]`);
  if (row) await openHistory(row.dataset.kind, Number(m[1]));
}
