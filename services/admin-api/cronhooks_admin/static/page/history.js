// A webhook's deliveries and its 7-day charts (deliveries, costs). Reloaded every 2 s while
// shown: only the deliveries that changed are drawn again, and the attempts a user opened
// stay open. A delivery opened shows its costs, its chain and its attempts.
import { gql, reason } from "./api.js";
import { $, el, patchKeyed, text } from "./dom.js";
import { when } from "./time.js";
import { API } from "./kinds.js";
import { drawChart, clearChart } from "./chart.js";
import { drawCostChart, clearCostChart } from "./cost_chart.js";
import { attemptViews, duration } from "./attempts.js";
import { costsView } from "./agent_report.js";
import { chainBox, refreshChains } from "./chain.js";
import { RUN_FIELDS, runView } from "./run.js";
import { NEXT_RUNS, clearSchedule, showSchedule } from "./schedule.js";

const REFRESH_MS = 2000;
let current = null;          // { kind, id, zone }
const opened = new Set();    // ids of deliveries whose attempts are shown
let timer = null, loading = false;

function query(kind) {
  const api = API[kind];
  return `query($id: Int!) {
  webhook: ${api.one}(id: $id) { id url ${kind === "cron" ? `timezone cronSchedule scheduleDescription nextRuns(count: ${NEXT_RUNS})` : ""}
    dailyStats(days: 7) { day total succeeded failed p95DurationMs }
    costTotals(days: 7) { day unit amount } }
  deliveries: ${api.deliveries} { ${RUN_FIELDS}
    id status trigger scheduledFor attempt durationMs error createdAt completedAt nextAttemptAt
    trace parent costs { unit amount }
    attempts { attempt requestBody requestBodyTruncated responseStatus responseBody errorMessage durationMs startedAt logsExpired
      costs { unit amount } agentLogs { ts level msg data } } } }`;
}

/** Shows webhook `id`'s history; `focus`: a delivery id to show opened. */
export async function openHistory(kind, id, focus = null) {
  const same = current && current.kind === kind && current.id === id;
  if (!same) { opened.clear(); $("#deliveries").querySelectorAll("tbody").forEach(n => n.remove()); clearChart(); clearCostChart(); clearSchedule($("#schedule")); }
  if (focus !== null) setOpen(focus, true);
  current = { kind, id, zone: "UTC" };
  $("#history-title").textContent = `Deliveries of webhook ${id}`;
  $("#history-run").dataset.id = id;
  $("#history").classList.remove("hidden");
  if (!same) $("#history").scrollIntoView({ block: "start" });
  await loadHistory();
  clearInterval(timer);
  timer = setInterval(loadHistory, REFRESH_MS);
}

/** Opens delivery `deliveryId` of webhook `webhookId` (a `kind` webhook) in its history,
 * and scrolls to it: how a chain's links go to another delivery. */
export async function openDelivery(kind, webhookId, deliveryId) {
  await openHistory(kind, webhookId, deliveryId);
  const css = `#deliveries tr.delivery[data-id="${deliveryId}"]`;
  // A load already under way for the webhook shown before is dropped: wait for ours.
  for (let i = 0; i < 20 && !$(css); i++) { await new Promise(r => setTimeout(r, 150)); await loadHistory(); }
  const row = $(css);
  $("#history-note").textContent = row ? "" : `Delivery ${deliveryId} is older than the deliveries listed here.`;
  if (row) row.scrollIntoView({ block: "start" });
}

function setOpen(id, open) {
  if (open) opened.add(id); else opened.delete(id);
  const body = $(`#deliveries tbody[data-id="${id}"]`);
  if (!body) return;
  body.querySelector("tr.delivery").classList.toggle("open", open);
  body.querySelector("tr.attempt-details").classList.toggle("hidden", !open);
  if (open && current) refreshChains($("#deliveries"), current.zone, openDelivery);
}

/** The webhook whose history is shown ({kind, id, zone}), or null. */
export function historyWebhook() { return current; }

export function closeHistory() {
  current = null; clearInterval(timer); opened.clear();
  $("#history").classList.add("hidden");
}

export async function runNow(kind, id) {
  let body;
  if (kind === "change") {
    // A change webhook is run with notes the admin names: sent as they are now, as updates.
    const answer = prompt("Send which notes? Paths, comma-separated:");
    if (answer === null) return;
    const paths = answer.split(",").map(s => s.trim()).filter(Boolean);
    body = await gql(`mutation($id: Int!, $paths: [String!]!) { triggerChangeWebhook(id: $id, paths: $paths) { deliveryId } }`,
      { id, paths });
  } else {
    body = await gql(`mutation($id: Int!) { triggerCronWebhook(webhookId: $id) { deliveryId } }`, { id });
  }
  if (body.errors) { alert(reason(body.errors[0])); return; }
  await openHistory(kind, id);
}

export async function loadHistory() {
  if (!current || loading) return;
  const asked = current;
  loading = true;
  let body;
  try { body = await gql(query(asked.kind), { id: asked.id }); } finally { loading = false; }
  if (current !== asked || body.errors || !body.data.webhook) return;
  const hook = body.data.webhook;
  asked.zone = hook.timezone || "UTC";
  $("#history-title").textContent = `Deliveries of webhook ${hook.id}`;
  $("#history-zone").textContent = `${hook.url} · times in ${asked.zone}`;
  showSchedule($("#schedule"), hook);
  drawChart($("#chart"), hook.dailyStats, asked.zone, $("#chart-summary"));
  drawCostChart($("#cost-chart"), hook.costTotals, hook.dailyStats.map(d => d.day), asked.zone, $("#cost-chart-summary"));
  const deliveries = body.data.deliveries;
  patchKeyed($("#deliveries"), deliveries, {
    key: d => d.id,
    signature: d => JSON.stringify([d, asked.zone]),
    render: d => renderDelivery(d, asked.kind, asked.zone),
    selector: ":scope > tbody[data-key]",
  });
  $("#deliveries-empty").classList.toggle("hidden", deliveries.length > 0);
  await refreshChains($("#deliveries"), asked.zone, openDelivery);
}

function stamp(iso, zone) {
  const [date, time, abbr] = when(iso, zone).split(" ");
  return iso ? [el("span", { class: "nowrap" }, time, " ", el("span", { class: "muted" }, abbr)), el("div", { class: "muted small" }, date)] : ["—"];
}

function attemptsCell(d) {
  if (d.status === "skipped") return el("span", { class: "muted" }, "none");
  const n = Math.max(d.attempt, d.attempts.length);
  return el("span", {}, String(n), n > 1 ? el("span", { class: "muted" }, ` (${n - 1} ${n === 2 ? "retry" : "retries"})`) : null);
}

function renderDelivery(d, kind, zone) {
  const details = el("tr", { class: "attempt-details" + (opened.has(d.id) ? "" : " hidden") },
    el("td", { colspan: 8 }, costsView(d.costs, "Costs of this delivery:"), chainBox(d, kind, zone, openDelivery), ...attemptViews(d, zone), runView(d, zone)));
  const summary = el("tr", {
    class: "delivery", "data-id": d.id, "data-status": d.status, title: "Show the attempts",
    onclick: () => setOpen(d.id, !opened.has(d.id)),
  },
    el("td", { class: "muted" }, d.id),
    el("td", { class: "time" }, ...stamp(d.createdAt, zone)),
    el("td", {}, el("span", { class: "badge status-" + d.status }, d.status)),
    el("td", { class: "trigger" }, d.trigger.toLowerCase()),
    el("td", { class: "slot" }, ...(d.scheduledFor ? stamp(d.scheduledFor, zone) : [el("span", { class: "muted" }, "—")])),
    el("td", {}, attemptsCell(d)),
    el("td", { class: "nowrap" }, duration(d.durationMs)),
    el("td", { class: "error-cell" }, text(d.error)));
  if (opened.has(d.id)) summary.classList.add("open");
  return el("tbody", { "data-id": d.id }, summary, details);
}

