// Agents (managed one-shot triggers, CONTRACT §9) with the triggers they have armed.
import { gql } from "./api.js";
import { $, el, patchKeyed } from "./dom.js";
import { relative, when } from "./time.js";

const AGENTS = `{ agents { id instanceId callbackUrl description createdAt } }`;
const TRIGGERS = `{ jobId fireAt state dedupKey lastOutcome lastError }`;
const PER_REQUEST = 100; // agentTriggers per request: well inside the document limits

async function triggersOf(agents) {
  const out = new Map();
  for (let i = 0; i < agents.length; i += PER_REQUEST) {
    const chunk = agents.slice(i, i + PER_REQUEST);
    if (!chunk.length) break;
    const body = await gql(`{ ${chunk.map(a => `a${a.id}: agentTriggers(agentId: ${a.id}) ${TRIGGERS}`).join("\n")} }`);
    if (body.errors) throw new Error(body.errors[0].message);
    for (const a of chunk) out.set(a.id, body.data[`a${a.id}`]);
  }
  return out;
}

function armedList(triggers) {
  const armed = triggers.filter(t => t.state === "armed");
  const done = triggers.length - armed.length;
  const list = el("ul", { class: "triggers" }, ...armed.map(t => el("li", { "data-job": t.jobId },
    el("code", {}, t.jobId), " fires ", el("span", { class: "nowrap" }, when(t.fireAt)),
    el("span", { class: "muted" }, ` (${relative(t.fireAt)})`))));
  return [armed.length ? list : el("span", { class: "muted" }, "none armed"),
    done ? el("div", { class: "muted small" }, `${done} fired, failed or cancelled before`) : null];
}

function render(a) {
  return el("tr", { "data-id": a.id },
    el("td", { class: "muted" }, a.id),
    el("td", {}, el("div", {}, a.instanceId), a.description ? el("div", { class: "muted small" }, a.description) : null),
    el("td", { class: "url" }, a.callbackUrl),
    el("td", { class: "nowrap" }, when(a.createdAt)),
    el("td", {}, ...armedList(a.triggers)));
}

export async function loadAgents() {
  try {
    const body = await gql(AGENTS);
    if (body.errors) throw new Error(body.errors[0].message);
    const triggers = await triggersOf(body.data.agents);
    const agents = body.data.agents.map(a => ({ ...a, triggers: triggers.get(a.id) || [] }));
    patchKeyed($("#agents tbody"), agents, {
      key: a => a.id,
      signature: a => JSON.stringify([a, a.triggers.map(t => relative(t.fireAt))]),
      render,
    });
    $("#agents-empty").classList.toggle("hidden", agents.length > 0);
    $("#agents-error").textContent = "";
  } catch (err) { $("#agents-error").textContent = err.message; }
}
