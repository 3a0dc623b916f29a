// What a webhook's agents reported they cost per day (costTotals, CONTRACT §16.1/§16.4),
// beside the success chart, drawn by the same vendored uPlot.
//
// One small bar chart per unit, each on its own y scale, stacked one under another (small
// multiples) and sharing the days of the success chart. Units differ by orders of magnitude
// (200,000 tokens next to 0.40 usd): on one shared scale the small ones are flat lines, and
// a second or third y axis on one plot cannot be told apart past two units. A chart per unit
// reads at a glance whatever the mix, and the unit's 7-day total stands in its title.
import { el } from "./dom.js";
import { dayLabel } from "./time.js";
import { amount } from "./agent_report.js";

const COLORS = ["#7c3aed", "#0891b2", "#ea580c", "#0d9488", "#db2777", "#4f46e5"];
const AXIS = "#6b7280", GRID = "#eef0f3";
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });
let charts = [], shown = "", resize = null;

export function clearCostChart() {
  for (const c of charts) c.destroy();
  if (resize) resize.disconnect();
  charts = []; shown = ""; resize = null;
}

/** Per unit (sorted), the amount on each of `days` (0 where nothing was reported). */
export function costSeries(rows, days) {
  const index = new Map(days.map((d, i) => [d, i]));
  const byUnit = new Map();
  for (const r of rows) {
    if (!index.has(r.day)) continue;
    if (!byUnit.has(r.unit)) byUnit.set(r.unit, days.map(() => 0));
    byUnit.get(r.unit)[index.get(r.day)] += r.amount;
  }
  return [...byUnit.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([unit, values]) => ({ unit, values, total: values.reduce((n, v) => n + v, 0) }));
}

function height(units) { return units === 1 ? 200 : units === 2 ? 112 : 78; }

// "Mon 7 Dec" where a day has room for it, else "Mon 7".
function dayName(day, width, count) {
  const label = dayLabel(day);
  return width / count >= 78 ? label : label.split(" ").slice(0, 2).join(" ");
}

function unitChart(box, s, i, days, h) {
  const x = days.map((_, k) => k);
  const color = COLORS[i % COLORS.length];
  const top = Math.max(...s.values);
  const total = `${amount(s.total)} in ${days.length} days`;
  // No legend under each small chart: the head says the unit's total, or the day's amount
  // under the cursor.
  const value = el("span", { class: "muted small cost-value" }, " " + total);
  const opts = {
    width: Math.max(240, box.clientWidth), height: h,
    cursor: { drag: { x: false, y: false }, points: { show: false } },
    legend: { show: false },
    scales: { x: { time: false, range: [-0.5, days.length - 0.5] },
      y: { range: () => [0, top > 0 ? top * 1.15 : 1] } },
    axes: [
      { stroke: AXIS, grid: { show: false }, ticks: { show: false }, size: 24,
        splits: () => x, values: (u, splits) => splits.map(k => days[k] ? dayName(days[k], u.width - 58, days.length) : "") },
      // Two ticks only, 0 and the highest day: small charts stay quiet, and the top is exact.
      { stroke: AXIS, size: 58, grid: { stroke: GRID }, splits: () => (top > 0 ? [0, top] : [0]),
        values: (u, splits) => splits.map(v => compact.format(v)) },
    ],
    series: [
      {},
      { label: s.unit, fill: color + "cc", stroke: color, width: 0, points: { show: false },
        paths: uPlot.paths.bars({ size: [0.6, 40] }) },
    ],
    hooks: { setCursor: [u => {
      const k = u.cursor.idx;
      value.textContent = " " + (k === null || k === undefined || !days[k] ? total : `${amount(s.values[k])} on ${dayLabel(days[k])}`);
    }] },
  };
  const holder = el("div", { class: "cost-unit-chart", "data-unit": s.unit },
    el("div", { class: "cost-unit-head" }, el("strong", {}, s.unit), value));
  box.append(holder);
  return new uPlot(opts, [x, s.values], holder);
}

/** Draws `rows` (costTotals) over `days` (the success chart's days) into `box`, unless it
 * shows them already; `caption` sums them up. */
export function drawCostChart(box, rows, days, zone, caption) {
  const signature = JSON.stringify([rows, days, zone]);
  if (signature === shown) return;
  const series = costSeries(rows, days);
  caption.textContent = series.length ? `${series.length} ${series.length === 1 ? "unit" : "units"} · days in ${zone}` : "";
  if (typeof uPlot === "undefined") { box.textContent = "The chart library did not load."; shown = signature; return; }
  clearCostChart();
  shown = signature;
  box.replaceChildren();
  if (!series.length) {
    box.append(el("p", { class: "muted cost-empty" }, `No costs reported in the last ${days.length} days.`));
    return;
  }
  const h = height(series.length);
  charts = series.map((s, i) => unitChart(box, s, i, days, h));
  resize = new ResizeObserver(() => charts.forEach(c => c.setSize({ width: Math.max(240, box.clientWidth), height: h })));
  resize.observe(box);
}
