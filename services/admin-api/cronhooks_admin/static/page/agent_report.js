// What an agent reported with its answer (CONTRACT §16.1): costs ({unit, amount}) and logs
// ({ts, level, msg, data}). Both are the agent's words, so hostile input: every value is
// put in as text (el() makes text nodes), never as markup.
import { el } from "./dom.js";
import { inZone, when } from "./time.js";

const amounts = new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 });

/** 5186 → "5,186", 0.004 → "0.004". */
export function amount(value) { return amounts.format(value); }

/** "tokens 5,186 · usd 0.004" as nodes, or null for no costs. */
export function costsView(costs, label) {
  if (!costs || !costs.length) return null;
  const items = costs.map(c => el("span", { class: "cost", "data-unit": c.unit },
    el("span", { class: "cost-unit" }, c.unit), " ", el("strong", { class: "cost-amount" }, amount(c.amount))));
  const parts = items.flatMap((item, i) => i ? [el("span", { class: "muted" }, " · "), item] : [item]);
  return el("div", { class: "costs" }, el("span", { class: "muted" }, label + " "), ...parts);
}

// Agents say "warning", "fatal", "trace" too: each shown as the level it means. Levels we
// do not know stay neutral (like info).
const LEVELS = { error: "error", fatal: "error", critical: "error", warn: "warn", warning: "warn",
  info: "info", debug: "debug", trace: "debug" };

/** The CSS class of a log level: level-error, level-warn, level-info, level-debug or level-other. */
export function levelClass(level) {
  return "level-" + (LEVELS[String(level).toLowerCase()] || "other");
}

function dataView(data) {
  if (data === null || data === undefined) return null;
  let shown;
  try { shown = JSON.stringify(data, null, 2); } catch { shown = String(data); }
  const size = typeof data === "object" ? (Array.isArray(data) ? `[${data.length}]` : `{${Object.keys(data).length}}`) : "";
  return el("details", { class: "log-data" },
    el("summary", {}, "data ", el("span", { class: "muted" }, size)), el("pre", {}, shown));
}

function entryView(entry, zone) {
  const ts = entry.ts ? inZone(entry.ts, zone).time : "";
  return el("li", { class: "log-entry " + levelClass(entry.level) },
    el("span", { class: "log-ts", title: entry.ts ? when(entry.ts, zone) : "no time given" }, ts || "—"),
    el("span", { class: "log-level" }, entry.level),
    el("span", { class: "log-msg" }, entry.msg, dataView(entry.data)));
}

/** An attempt's agent logs as a list (in a box that scrolls: up to 500 entries), or null. */
export function agentLogsView(logs, zone) {
  if (!logs || !logs.length) return null;
  const counts = {};
  for (const entry of logs) { const c = levelClass(entry.level).slice(6); counts[c] = (counts[c] || 0) + 1; }
  const tally = ["error", "warn"].filter(l => counts[l]).map(l => `${counts[l]} ${l}`);
  return el("div", { class: "agent-logs" },
    el("div", { class: "muted small" }, `Agent logs (${logs.length} ${logs.length === 1 ? "entry" : "entries"}`,
      tally.length ? `: ${tally.join(", ")}` : "", `) · times in ${zone}`),
    el("ol", { class: "log-list" }, ...logs.map(entry => entryView(entry, zone))));
}
