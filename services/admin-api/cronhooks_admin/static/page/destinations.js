// Destinations (CONTRACT §17): those held by a 429/503 Retry-After now, those deliveries
// wait for (over a limit or held; summed over the dispatcher processes, as they told in the
// last seconds), and the limit overrides. The section shows only while there is any.
import { gql } from "./api.js";
import { $, el, patchKeyed } from "./dom.js";
import { relative, when } from "./time.js";

const DESTINATIONS = `{ destinationHolds { destination heldUntil }
  destinationWaiting { destination waiting }
  destinationLimits { destination maxConcurrent maxPerSecond } }`;

function renderHold(h) {
  return el("tr", { class: "destination-hold" },
    el("td", {}, el("span", { class: "badge status-failed" }, "held")),
    el("td", {}, el("code", {}, h.destination)),
    el("td", { class: "nowrap" }, "until ", when(h.heldUntil),
      el("span", { class: "muted" }, ` (${relative(h.heldUntil)})`)));
}

function renderWaiting(w) {
  const deliveries = w.waiting === 1 ? "1 delivery waits for its turn"
    : `${w.waiting} deliveries wait for their turn`;
  return el("tr", { class: "destination-waiting" },
    el("td", {}, el("span", { class: "badge status-pending" }, "waiting")),
    el("td", {}, el("code", {}, w.destination)),
    el("td", { class: "nowrap" }, deliveries));
}

function renderLimit(l) {
  const concurrent = l.maxConcurrent === null ? "default" : `${l.maxConcurrent}`;
  const rate = l.maxPerSecond === null ? "unlimited" : `${l.maxPerSecond}`;
  return el("tr", { class: "destination-limit" },
    el("td", {}, el("span", { class: "badge" }, "limit")),
    el("td", {}, el("code", {}, l.destination)),
    el("td", { class: "nowrap" }, `${concurrent} at once, ${rate} per second (per dispatcher)`));
}

export async function loadDestinations() {
  try {
    const body = await gql(DESTINATIONS);
    if (body.errors) throw new Error(body.errors[0].message);
    const { destinationHolds: holds, destinationWaiting: waiting,
      destinationLimits: limits } = body.data;
    patchKeyed($("#destination-holds tbody"), holds, {
      key: h => h.destination,
      signature: h => JSON.stringify([h, relative(h.heldUntil)]),
      render: renderHold,
    });
    patchKeyed($("#destination-waiting tbody"), waiting, {
      key: w => w.destination,
      signature: w => JSON.stringify(w),
      render: renderWaiting,
    });
    patchKeyed($("#destination-limits tbody"), limits, {
      key: l => l.destination,
      signature: l => JSON.stringify(l),
      render: renderLimit,
    });
    const shown = holds.length + waiting.length + limits.length;
    $("#destinations-section").classList.toggle("hidden", shown === 0);
    $("#destinations-error").textContent = "";
  } catch (err) {
    $("#destinations-section").classList.remove("hidden");
    $("#destinations-error").textContent = err.message;
  }
}
