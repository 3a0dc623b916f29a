// The webhook list (cron and change webhooks share one id space and one table). It
// refreshes by itself; rows whose content did not change are left as they are.
import { gql, reason } from "./api.js";
import { $, el, patchKeyed } from "./dom.js";
import { inZone, relative } from "./time.js";
import { API } from "./kinds.js";
import { openEditor } from "./editor.js";
import { openHistory, runNow } from "./history.js";

const COMMON = `id url description enabled lastDeliveryStatus lastDeliveryAt disabledReason
  stats { last7d { total successRate } }`;
const LIST = `{ cronWebhooks { ${COMMON} cronSchedule scheduleDescription timezone nextRunAt }
  changeWebhooks { ${COMMON} includePatterns excludePatterns maxDepth } }`;

function fires(w) {
  if (w.kind === "cron") {
    return [el("div", { class: "schedule-words" }, w.scheduleDescription),
      el("code", {}, w.cronSchedule), el("div", { class: "muted small" }, w.timezone)];
  }
  const except = w.excludePatterns.length ? " except " + w.excludePatterns.join(", ") : "";
  return ["on change of " + w.includePatterns.join(", ") + except,
    el("div", { class: "muted small" }, "edits below depth " + w.maxDepth)];
}

function nextRun(w) {
  if (w.kind !== "cron") return ["on change"];
  if (!w.nextRunAt) return [el("span", { class: "muted" }, "—")];
  const t = inZone(w.nextRunAt, w.timezone);
  return [el("span", { class: "nowrap" }, t.time, " ", el("span", { class: "muted" }, t.abbr)),
    el("div", { class: "muted small nowrap" }, `${t.date} · ${relative(w.nextRunAt)}`)];
}

function successRate(w) {
  const { total, successRate: rate } = w.stats.last7d;
  if (rate === null) return el("span", { class: "muted" }, "—");
  const pct = Math.round(rate * 100);
  return el("span", { class: pct >= 95 ? "status-success" : pct >= 50 ? "" : "status-failed" },
    `${pct}%`, el("span", { class: "muted" }, ` of ${total}`));
}

function render(w) {
  const status = w.lastDeliveryStatus;
  return el("tr", { "data-id": w.id, "data-kind": w.kind },
    el("td", { class: "muted" }, w.id),
    el("td", { class: "url" }, el("div", {}, w.url), w.description ? el("div", { class: "muted small" }, w.description) : null),
    el("td", {}, ...fires(w)),
    el("td", {}, ...nextRun(w)),
    el("td", {}, status ? el("span", { class: "badge status-" + status }, status) : el("span", { class: "muted" }, "—"),
      w.lastDeliveryAt ? el("div", { class: "muted small" }, relative(w.lastDeliveryAt, { past: true })) : null),
    el("td", {}, successRate(w)),
    el("td", {}, el("span", { class: "badge " + (w.enabled ? "state-active" : "state-paused") }, w.enabled ? "active" : "paused"),
      w.disabledReason ? el("div", { class: "muted small" }, w.disabledReason) : null),
    el("td", { class: "row-actions" },
      el("button", { class: "run-now", "data-id": w.id, onclick: () => runNow(w.kind, w.id) }, "Run now"),
      el("button", { class: "show-history", onclick: () => openHistory(w.kind, w.id) }, "History"),
      el("button", { class: "edit", onclick: () => openEditor(w.kind, w.id) }, "Edit"),
      el("button", { class: "toggle", onclick: () => setEnabled(w.kind, w.id, !w.enabled) }, w.enabled ? "Pause" : "Resume"),
      el("button", { class: "danger delete", onclick: () => remove(w.kind, w.id) }, "Delete")));
}

/** Reloads the list; only rows that show something new are drawn again. */
export async function loadWebhooks() {
  let body;
  try { body = await gql(LIST); } catch (err) { $("#list-error").textContent = err.message; return; }
  if (body.errors) { $("#list-error").textContent = body.errors[0].message; return; }
  $("#list-error").textContent = "";
  const all = [...body.data.cronWebhooks.map(w => ({ ...w, kind: "cron" })),
               ...body.data.changeWebhooks.map(w => ({ ...w, kind: "change" }))].sort((a, b) => a.id - b.id);
  patchKeyed($("#webhooks tbody"), all, {
    key: w => w.id,
    // the relative times are part of what a row shows
    signature: w => JSON.stringify([w, relative(w.nextRunAt), relative(w.lastDeliveryAt, { past: true })]),
    render,
  });
  $("#webhooks-empty").classList.toggle("hidden", all.length > 0);
}

async function setEnabled(kind, id, enabled) {
  const api = API[kind];
  const body = await gql(`mutation($input: Update${api.input}!) { ${api.update}(input: $input) { ${api.result} { id } } }`,
    { input: { id, enabled } });
  if (body.errors) $("#list-error").textContent = reason(body.errors[0]);
  await loadWebhooks();
}

async function remove(kind, id) {
  if (!confirm("Delete webhook " + id + "? Its history stays readable.")) return;
  const body = await gql(`mutation($id: Int!) { ${API[kind].remove}(id: $id) { id } }`, { id });
  if (body.errors) $("#list-error").textContent = reason(body.errors[0]);
  await loadWebhooks();
}
