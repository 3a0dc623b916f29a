// A webhook's last days as a chart, drawn by the vendored uPlot (../uplot/, loaded by
// index.html as the global `uPlot`): bars of succeeded (green) over failed (red)
// deliveries per day, and the p95 duration as a line on its own axis.
import { dayLabel } from "./time.js";

const COLORS = { ok: "#16a34a", bad: "#dc2626", p95: "#2563eb", grid: "#eef0f3", axis: "#6b7280" };
let chart = null, shown = "", resize = null;

export function clearChart() {
  if (chart) chart.destroy();
  if (resize) resize.disconnect();
  chart = null; shown = ""; resize = null;
}

function summary(days, zone) {
  const sum = k => days.reduce((n, d) => n + d[k], 0);
  const p95s = days.map(d => d.p95DurationMs).filter(v => v !== null);
  const worst = p95s.length ? ` · worst day's p95 ${Math.max(...p95s)} ms` : "";
  const total = sum("total");
  return `${total} ${total === 1 ? "delivery" : "deliveries"}: ${sum("succeeded")} succeeded, ${sum("failed")} failed${worst} · days in ${zone}`;
}

/** Draws `days` (dailyStats) into `box`, unless it shows them already. */
export function drawChart(box, days, zone, caption) {
  const signature = JSON.stringify([days, zone]);
  if (signature === shown) return;
  caption.textContent = summary(days, zone);
  if (typeof uPlot === "undefined") { box.textContent = "The chart library did not load."; shown = signature; return; }
  clearChart();
  shown = signature;
  box.replaceChildren();
  const x = days.map((_, i) => i);
  const failed = days.map(d => d.failed);
  const bars = uPlot.paths.bars({ size: [0.6, 56] });
  // Values at the cursor's day; with no cursor, the whole window's.
  const whole = k => String(days.reduce((n, d) => n + d[k], 0));
  const worst = () => { const v = days.map(d => d.p95DurationMs).filter(x => x !== null); return v.length ? `${Math.max(...v)} ms (worst day)` : "—"; };
  const opts = {
    width: Math.max(320, box.clientWidth), height: 220,
    cursor: { drag: { x: false, y: false }, points: { show: false } },
    legend: { live: true },
    scales: {
      x: { time: false, range: [-0.5, days.length - 0.5] },
      n: { range: (u, min, max) => [0, Math.max(4, Math.ceil(max * 1.1))] },
      ms: { range: (u, min, max) => [0, Math.max(10, Math.ceil((max || 0) * 1.15))] },
    },
    axes: [
      { stroke: COLORS.axis, grid: { show: false }, ticks: { show: false },
        splits: () => x, values: (u, splits) => splits.map(i => days[i] ? dayLabel(days[i].day) : "") },
      { scale: "n", stroke: COLORS.axis, label: "deliveries", labelSize: 18, size: 44,
        grid: { stroke: COLORS.grid }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 1e4, 2e4, 5e4, 1e5],
        values: (u, splits) => splits.map(v => String(v)) },
      { scale: "ms", side: 1, stroke: COLORS.p95, label: "p95 (ms)", labelSize: 18, size: 52, grid: { show: false } },
    ],
    series: [
      { label: "Day", value: (u, i) => i === null || !days[i] ? `${days.length} days` : dayLabel(days[i].day) },
      // drawn as the whole bar (succeeded + failed) in red; the green bar covers its lower part
      { label: "Failed", scale: "n", fill: COLORS.bad, stroke: COLORS.bad, width: 0, paths: bars, points: { show: false },
        value: (u, v, s, i) => i === null || i === undefined ? whole("failed") : String(failed[i]) },
      { label: "Succeeded", scale: "n", fill: COLORS.ok, stroke: COLORS.ok, width: 0, paths: bars, points: { show: false },
        value: (u, v, s, i) => i === null || i === undefined ? whole("succeeded") : String(v) },
      { label: "p95", scale: "ms", stroke: COLORS.p95, width: 2, points: { show: true, size: 6, fill: COLORS.p95 },
        value: (u, v, s, i) => i === null || i === undefined ? worst() : v === null ? "—" : `${v} ms` },
    ],
  };
  const data = [x, days.map(d => d.total), days.map(d => d.succeeded), days.map(d => d.p95DurationMs)];
  chart = new uPlot(opts, data, box);
  resize = new ResizeObserver(() => chart && chart.setSize({ width: Math.max(320, box.clientWidth), height: 220 }));
  resize.observe(box);
}
