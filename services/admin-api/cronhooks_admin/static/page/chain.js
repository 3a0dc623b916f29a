// A delivery's chain (CONTRACT §16.3): its trace and parent, the deliveries it caused, and
// the whole chain in request order (deliveryChain), each a link that opens that delivery in
// its own webhook's history (a chain crosses webhooks, cron and change alike).
import { gql } from "./api.js";
import { el } from "./dom.js";
import { when } from "./time.js";

const FIELDS = "id cronWebhookId status trigger createdAt trace parent";
const chains = new Map();    // trace → its deliveries, as last fetched

/** A ref's kind and id: "change:14" → {kind: "change", id: 14}; null if not one. */
export function parseRef(ref) {
  const m = /^(cron|change):(\d+)$/.exec(ref || "");
  return m ? { kind: m[1], id: Number(m[2]) } : null;
}

/** The kind of a chain's delivery: known from the refs the chain names (its trace, the
 * parents), else from the webhook list (cron and change webhooks share one id space). */
function kindOf(d, list) {
  for (const kind of ["cron", "change"]) {
    const ref = `${kind}:${d.id}`;
    if (d.trace === ref || list.some(o => o.parent === ref)) return kind;
  }
  const row = document.querySelector(`#webhooks tr[data-id="${d.cronWebhookId}"][data-kind]`);
  return row ? row.dataset.kind : null;
}

/** The kind of webhook `id`, from the list or, if it is not listed yet, by asking. */
async function webhookKind(id) {
  const row = document.querySelector(`#webhooks tr[data-id="${id}"][data-kind]`);
  if (row) return row.dataset.kind;
  const body = await gql(`query($id: Int!) { c: cronWebhook(id: $id) { id } h: changeWebhook(id: $id) { id } }`, { id });
  return body.data && body.data.c ? "cron" : body.data && body.data.h ? "change" : null;
}

function link(d, list, zone, here, open) {
  const kind = kindOf(d, list);
  const name = `${kind || "delivery"}:${d.id}`;
  const facts = el("span", { class: "muted small" },
    ` · webhook ${d.cronWebhookId} · ${d.trigger.toLowerCase()} · ${when(d.createdAt, zone)}`);
  const badge = el("span", { class: "badge status-" + d.status }, d.status);
  if (d.id === here) return el("span", { class: "chain-item here", "data-id": d.id }, el("strong", {}, name), " ", badge, facts, el("span", { class: "muted small" }, " (this delivery)"));
  const button = el("button", { type: "button", class: "link chain-link", "data-id": d.id, "data-webhook": d.cronWebhookId, title: "Open this delivery",
    onclick: async () => open(kind || await webhookKind(d.cronWebhookId), d.cronWebhookId, d.id) }, name);
  return el("span", { class: "chain-item", "data-id": d.id }, button, " ", badge, facts);
}

function fill(box, list, zone, open) {
  const here = Number(box.dataset.id), ref = box.dataset.ref, parent = box.dataset.parent || null;
  const signature = JSON.stringify([list, zone]);
  if (box.dataset.sig === signature) return;
  box.dataset.sig = signature;
  const byRef = new Map(list.map(d => [`${kindOf(d, list)}:${d.id}`, d]));
  const parentOf = parent && byRef.get(parent);
  const children = list.filter(d => d.parent === ref);
  const lines = [
    el("div", { class: "chain-parent" }, el("span", { class: "muted" }, "Parent: "),
      parent ? (parentOf ? link(parentOf, list, zone, here, open) : parent) : "none (this delivery is its chain's root)"),
    el("div", { class: "chain-children" }, el("span", { class: "muted" }, "Caused: "),
      ...(children.length ? children.map(d => link(d, list, zone, here, open)) : ["nothing (yet)"])),
  ];
  if (list.length > 1) {
    lines.push(el("details", { class: "chain-all", open: list.length <= 8 },
      el("summary", {}, `Whole chain, in request order (${list.length} deliveries)`),
      el("ol", {}, ...list.map(d => el("li", { class: d.parent ? null : "root" }, link(d, list, zone, here, open))))));
  }
  box.querySelector(".chain-body").replaceChildren(...lines);
}

/** The chain box of delivery `d` of a `kind` webhook, filled from what was last fetched. */
export function chainBox(d, kind, zone, open) {
  const box = el("div", { class: "chain", "data-id": d.id, "data-ref": `${kind}:${d.id}`, "data-trace": d.trace, "data-parent": d.parent },
    el("div", { class: "chain-head" }, el("strong", {}, "Chain"), " ",
      el("span", { class: "muted" }, "trace "), el("code", { class: "chain-trace" }, d.trace),
      ...(d.parent ? [el("span", { class: "muted" }, " · parent "), el("code", { class: "chain-parent-ref" }, d.parent)] : [])),
    el("div", { class: "chain-body muted small" }, "Loading the chain…"));
  if (chains.has(d.trace)) fill(box, chains.get(d.trace), zone, open);
  return box;
}

/** Fetches the chains of the boxes shown under `root` (opened deliveries), in one request,
 * and fills the boxes whose chain changed. */
export async function refreshChains(root, zone, open) {
  const boxes = [...root.querySelectorAll("tr.attempt-details:not(.hidden) .chain")];
  const traces = [...new Set(boxes.map(b => b.dataset.trace))];
  if (!traces.length) return;
  const vars = traces.map((_, i) => `$t${i}: String!`).join(", ");
  const fields = traces.map((_, i) => `c${i}: deliveryChain(trace: $t${i}) { ${FIELDS} }`).join("\n");
  const body = await gql(`query(${vars}) { ${fields} }`, Object.fromEntries(traces.map((t, i) => [`t${i}`, t])));
  if (body.errors || !body.data) return;
  traces.forEach((t, i) => chains.set(t, body.data[`c${i}`]));
  for (const box of boxes) if (box.isConnected) fill(box, chains.get(box.dataset.trace), zone, open);
}
