// A cron webhook's schedule in words and its next runs, each in the webhook's zone and in
// UTC; where the zone's UTC offset changes between two runs (a DST shift), the later run
// is marked "DST: UTC+1 → UTC+2". Built with el() only (no innerHTML: strict CSP).
import { el } from "./dom.js";
import { inZone } from "./time.js";

export const NEXT_RUNS = 6;

const offsetFormats = new Map();

/** The zone's UTC offset at `iso`: "UTC", "UTC+1", "UTC-4", "UTC+5:30". */
export function utcOffset(iso, zone) {
  if (!offsetFormats.has(zone)) {
    offsetFormats.set(zone, new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" }));
  }
  const name = offsetFormats.get(zone).formatToParts(new Date(iso)).find(p => p.type === "timeZoneName").value;
  const m = /^GMT([+-])(\d\d):(\d\d)$/.exec(name);  // "GMT" alone is UTC itself
  if (!m) return "UTC";
  return `UTC${m[1]}${Number(m[2])}${m[3] === "00" ? "" : ":" + m[3]}`;
}

/** The runs with their offsets and, where the offset differs from the run before, the shift. */
export function runsWithShifts(runs, zone) {
  let previous = null;
  return runs.map(iso => {
    const offset = utcOffset(iso, zone);
    const shift = previous !== null && previous !== offset ? `DST: ${previous} → ${offset}` : null;
    previous = offset;
    return { iso, offset, shift };
  });
}

function runRow({ iso, offset, shift }, zone) {
  const local = inZone(iso, zone), utc = inZone(iso, "UTC");
  return el("tr", { class: shift ? "run dst-shift" : "run" },
    el("td", { class: "nowrap" }, local.date, " ", el("strong", {}, local.time.slice(0, 5)), " ",
      el("span", { class: "muted" }, local.abbr)),
    el("td", { class: "nowrap muted" }, offset),
    el("td", { class: "nowrap" }, utc.date, " ", utc.time.slice(0, 5), " ", el("span", { class: "muted" }, "UTC")),
    el("td", {}, shift ? el("span", { class: "badge dst-marker" }, shift) : null));
}

/** Fills `box` with webhook `hook`'s schedule ({cronSchedule, timezone,
 * scheduleDescription, nextRuns}); hides it for anything else (change webhooks). */
export function showSchedule(box, hook) {
  if (!hook || !hook.cronSchedule) { clearSchedule(box); return; }
  const zone = hook.timezone || "UTC";
  const rows = runsWithShifts(hook.nextRuns, zone).map(r => runRow(r, zone));
  const runs = rows.length
    ? el("table", { class: "next-runs" },
        el("thead", {}, el("tr", {}, el("th", {}, `Next runs (${zone})`), el("th", {}, "Offset"),
          el("th", {}, "UTC"), el("th", {}, ""))),
        el("tbody", {}, ...rows))
    : el("p", { class: "muted small" }, "No next runs: the webhook is paused or disabled.");
  box.replaceChildren(
    el("div", { class: "schedule-head" },
      el("span", { class: "schedule-words" }, hook.scheduleDescription),
      el("code", {}, hook.cronSchedule), el("span", { class: "muted small" }, zone)),
    runs);
  box.classList.remove("hidden");
}

export function clearSchedule(box) {
  box.replaceChildren();
  box.classList.add("hidden");
}
