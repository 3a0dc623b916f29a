// Times shown plainly, always with their zone: in the webhook's IANA zone when it has
// one (cron webhooks), else in UTC. Never browser-local without saying so.
const formats = new Map();

function format(zone) {
  if (!formats.has(zone)) {
    formats.set(zone, new Intl.DateTimeFormat("en-GB", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    }));
  }
  return formats.get(zone);
}

function parts(iso, zone) {
  const out = {};
  for (const p of format(zone).formatToParts(new Date(iso))) out[p.type] = p.value;
  return out;
}

/** "2026-12-02 09:00:00" in `zone`, and the zone's short name there ("CET", "UTC"). */
export function inZone(iso, zone = "UTC") {
  const p = parts(iso, zone);
  return { date: `${p.year}-${p.month}-${p.day}`, time: `${p.hour}:${p.minute}:${p.second}`, abbr: p.timeZoneName };
}

/** "2026-12-02 09:00:00 CET", or "—" for no time. */
export function when(iso, zone = "UTC") {
  if (!iso) return "—";
  const t = inZone(iso, zone);
  return `${t.date} ${t.time} ${t.abbr}`;
}

/** "in 4 min", "3 h ago", … from now. `past`: a time that has happened (a browser clock
 * behind the server's says "just now", not "in 1 min"). */
export function relative(iso, { past = false, now = Date.now() } = {}) {
  if (!iso) return "";
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  if (past && seconds > -5) return "just now";
  const size = Math.abs(seconds);
  const [n, unit] = size < 60 ? [size, "s"] : size < 3600 ? [Math.round(size / 60), "min"]
    : size < 172800 ? [Math.round(size / 3600), "h"] : [Math.round(size / 86400), "d"];
  if (size < 1) return "now";
  return seconds > 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}

/** "Mon 30 Nov" for a "2026-11-30" calendar day. */
export function dayLabel(day) {
  const d = new Date(day + "T12:00:00Z");
  return new Intl.DateTimeFormat("en-GB", { timeZone: "UTC", weekday: "short", day: "numeric", month: "short" }).format(d);
}
