// The pause switch (CONTRACT §16.4): a banner at the top while deliveries are paused
// (reason, since, until) with Resume, and a small form to pause (or, while paused, to
// replace the pause's reason and until). Times in UTC, saying so.
import { gql, reason } from "./api.js";
import { $ } from "./dom.js";
import { when } from "./time.js";

const FIELDS = "paused since until reason";

function show(p) {
  $("#pause-banner").classList.toggle("hidden", !p.paused);
  $("#pause-panel-summary").textContent = p.paused ? "Change the pause…" : "Pause deliveries…";
  $("#pause-deliveries").textContent = p.paused ? "Replace" : "Pause";
  if (!p.paused) return;
  $("#pause-reason").textContent = p.reason;
  $("#pause-since").textContent = when(p.since);
  $("#pause-until").textContent = p.until ? "until " + when(p.until) : "until resumed";
}

function failed(error) {
  const field = error.extensions && error.extensions.field;
  $("#pause-error").textContent = field ? `${field}: ${reason(error)}` : error.message;
}

export async function loadPause() {
  const body = await gql(`{ deliveryPause { ${FIELDS} } }`);
  if (body.errors) { failed(body.errors[0]); return; }
  show(body.data.deliveryPause);
}

/** The form's until: a UTC wall time ("2026-12-07T08:00"), or null when left empty. */
function untilOf(value) {
  if (!value) return null;
  const at = new Date(value + "Z");
  return isNaN(at) ? value : at.toISOString();
}

export async function pauseDeliveries(event) {
  event.preventDefault();
  const form = $("#pause-form");
  $("#pause-error").textContent = "";
  const variables = { reason: form.elements.reason.value, until: untilOf(form.elements.until.value) };
  const body = await gql(`mutation($until: DateTime, $reason: String!) {
    pauseDeliveries(until: $until, reason: $reason) { ${FIELDS} } }`, variables);
  if (body.errors) { failed(body.errors[0]); return; }
  form.reset();
  $("#pause-panel").open = false;
  show(body.data.pauseDeliveries);
}

export async function resumeDeliveries() {
  $("#pause-error").textContent = "";
  const body = await gql(`mutation { resumeDeliveries { ${FIELDS} } }`);
  if (body.errors) { failed(body.errors[0]); return; }
  show(body.data.resumeDeliveries);
}
