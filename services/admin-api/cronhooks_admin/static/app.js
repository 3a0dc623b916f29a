// The admin page's script, served as a file: the page's CSP allows scripts from the
// same origin only, none inline.
"use strict";
const $ = (sel, root = document) => root.querySelector(sel);
let token = sessionStorage.getItem("cronhooks-token") || "";
let historyFor = null, historyKind = "cron", historyTimer = null;

async function gql(query, variables = {}) {
  const resp = await fetch("/graphql", {
    method: "POST",
    headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
    body: JSON.stringify({ query, variables }),
  });
  const body = await resp.json().catch(() => ({ errors: [{ message: "HTTP " + resp.status }] }));
  if (resp.status === 401) { signOut(); throw new Error("your token is not valid"); }
  return body;
}

function text(value) { return value === null || value === undefined ? "" : String(value); }
function when(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.addEventListener("click", v); else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : text(child));
  return node;
}

function signOut() {
  sessionStorage.removeItem("cronhooks-token"); token = "";
  $("#app").classList.add("hidden"); $("#login-panel").classList.remove("hidden"); $("#logout").classList.add("hidden");
}

async function signIn() {
  token = $("#token").value.trim();
  $("#login-error").textContent = "";
  try {
    const body = await gql("{ cronWebhooks { id } }");
    if (body.errors) throw new Error(body.errors[0].message);
    sessionStorage.setItem("cronhooks-token", token);
    $("#login-panel").classList.add("hidden"); $("#app").classList.remove("hidden"); $("#logout").classList.remove("hidden");
    await Promise.all([loadWebhooks(), loadApiKeys()]);
  } catch (err) { $("#login-error").textContent = err.message; }
}

// Cron and change webhooks share one id space and one list; `kind` picks the API.
const COMMON = `id url description enabled lastDeliveryStatus disabledReason
  stats { last7d { total successRate } }`;
const LIST = `{ cronWebhooks { ${COMMON} cronSchedule timezone nextRunAt }
  changeWebhooks { ${COMMON} includePatterns excludePatterns maxDepth } }`;
const API = {
  cron: { one: "cronWebhook", create: "createCronWebhook", update: "updateCronWebhook",
          remove: "deleteCronWebhook", input: "CronWebhookInput", result: "cronWebhook",
          deliveries: "cronWebhookDeliveries(cronWebhookId: $id, limit: 50)" },
  change: { one: "changeWebhook", create: "createChangeWebhook", update: "updateChangeWebhook",
            remove: "deleteChangeWebhook", input: "ChangeWebhookInput", result: "changeWebhook",
            deliveries: "changeWebhookDeliveries(changeWebhookId: $id, limit: 50)" },
};

function fires(w) {
  if (w.kind === "cron") return [w.cronSchedule, el("div", { class: "muted" }, w.timezone)];
  const except = w.excludePatterns.length ? " except " + w.excludePatterns.join(", ") : "";
  return ["on change of " + w.includePatterns.join(", ") + except,
    el("div", { class: "muted" }, "edits below depth " + w.maxDepth)];
}

async function loadWebhooks() {
  const body = await gql(LIST);
  if (body.errors) { $("#list-error").textContent = body.errors[0].message; return; }
  const all = [...body.data.cronWebhooks.map(w => ({ ...w, kind: "cron" })),
               ...body.data.changeWebhooks.map(w => ({ ...w, kind: "change" }))].sort((a, b) => a.id - b.id);
  const tbody = $("#webhooks tbody"); tbody.replaceChildren();
  for (const w of all) {
    const rate = w.stats.last7d.successRate;
    tbody.append(el("tr", { "data-id": w.id, "data-kind": w.kind },
      el("td", {}, w.id),
      el("td", {}, el("div", {}, w.url), el("div", { class: "muted" }, w.description)),
      el("td", {}, ...fires(w)),
      el("td", {}, w.kind === "cron" ? when(w.nextRunAt) : "on change"),
      el("td", { class: "status-" + (w.lastDeliveryStatus || "none") }, w.lastDeliveryStatus || "—"),
      el("td", {}, rate === null ? "—" : Math.round(rate * 100) + "% of " + w.stats.last7d.total),
      el("td", {}, w.enabled ? "active" : "paused", w.disabledReason ? el("div", { class: "muted" }, w.disabledReason) : ""),
      el("td", { class: "row-actions" },
        el("button", { class: "run-now", "data-id": w.id, onclick: () => runNow(w.kind, w.id) }, "Run now"),
        el("button", { class: "show-history", onclick: () => openHistory(w.kind, w.id) }, "History"),
        el("button", { class: "edit", onclick: () => openEditor(w.kind, w.id) }, "Edit"),
        el("button", { class: "toggle", onclick: () => setEnabled(w.kind, w.id, !w.enabled) }, w.enabled ? "Pause" : "Resume"),
        el("button", { class: "danger delete", onclick: () => remove(w.kind, w.id) }, "Delete"))));
  }
}

const FIELDS = {
  cron: ["url", "cronSchedule", "timezone", "description", "timeoutSeconds", "maxRetries", "maxDepth",
    "misfireGraceSeconds", "readPatterns", "writePatterns", "concurrencyPolicy", "catchUpPolicy", "passApiKey",
    "secret", "instruction"],
  change: ["url", "includePatterns", "excludePatterns", "onCreate", "onUpdate", "onRemove", "includeContent",
    "description", "timeoutSeconds", "maxRetries", "maxDepth", "readPatterns", "writePatterns", "passApiKey",
    "secret", "instruction"],
};
const NUMBERS = new Set(["timeoutSeconds", "maxRetries", "maxDepth", "misfireGraceSeconds"]);
const LISTS = new Set(["readPatterns", "writePatterns", "includePatterns", "excludePatterns"]);

function clearErrors() {
  for (const node of document.querySelectorAll("[data-error-for]")) node.textContent = "";
  $("#form-error").textContent = "";
}

async function openEditor(kind, id) {
  const form = $("#webhook-form"); form.reset(); clearErrors(); form.classList.remove("hidden");
  $("#secret-notice").classList.add("hidden");
  form.id.value = id || "";
  form.kind.value = kind; form.dataset.kind = kind;
  const noun = kind === "change" ? "change webhook" : "webhook";
  $("#editor-title").textContent = id ? `Edit ${noun} ${id}` : `New ${noun}`;
  $("#secret-field").classList.toggle("hidden", Boolean(id));
  if (id) {
    const api = API[kind];
    const body = await gql(`query($id: Int!) { ${api.one}(id: $id) { ${FIELDS[kind].filter(f => f !== "secret").join(" ")} } }`, { id });
    const w = body.data[api.one];
    for (const f of FIELDS[kind]) {
      if (f === "secret" || !(f in w)) continue;
      const input = form.elements[f];
      if (input.type === "checkbox") input.checked = w[f];
      else input.value = LISTS.has(f) ? w[f].join(", ") : text(w[f]);
    }
  }
  $("#editor").classList.remove("hidden");
  form.url.focus();
}

function formInput() {
  const form = $("#webhook-form"), input = {};
  for (const f of FIELDS[form.kind.value]) {
    const node = form.elements[f];
    if (node.type === "checkbox") { input[f] = node.checked; continue; }
    const value = node.value.trim();
    if (value === "" && (f === "secret" || f === "timezone")) continue;
    if (NUMBERS.has(f)) input[f] = value === "" ? null : Number(value);
    else if (LISTS.has(f)) input[f] = value === "" ? [] : value.split(",").map(s => s.trim()).filter(Boolean);
    else input[f] = value;
  }
  return input;
}

async function save(event) {
  event.preventDefault(); clearErrors();
  const form = $("#webhook-form"), id = form.id.value, input = formInput();
  const api = API[form.kind.value];
  let body;
  if (id) {
    delete input.secret;
    body = await gql(`mutation($input: Update${api.input}!) { ${api.update}(input: $input) { ${api.result} { id } } }`,
      { input: { id: Number(id), ...input } });
  } else {
    body = await gql(`mutation($input: Create${api.input}!) { ${api.create}(input: $input) { ${api.result} { id } secret } }`,
      { input });
  }
  if (body.errors) {
    for (const err of body.errors) {
      const field = err.extensions && err.extensions.field;
      const slot = field && document.querySelector(`[data-error-for="${field}"]`);
      (slot || $("#form-error")).textContent = err.message.replace(/^\w+: /, "");
    }
    return;
  }
  if (!id) {
    const secret = body.data[api.create].secret;
    const notice = $("#secret-notice");
    notice.replaceChildren(el("strong", {}, "Webhook created. Its signing secret, shown only now: "),
      el("code", { id: "new-secret" }, secret), " ",
      el("button", { onclick: () => $("#editor").classList.add("hidden") }, "Done"));
    notice.classList.remove("hidden");
    form.classList.add("hidden");
  } else {
    $("#editor").classList.add("hidden");
  }
  await loadWebhooks();
}

async function setEnabled(kind, id, enabled) {
  const api = API[kind];
  await gql(`mutation($input: Update${api.input}!) { ${api.update}(input: $input) { ${api.result} { id } } }`,
    { input: { id, enabled } });
  await loadWebhooks();
}

async function remove(kind, id) {
  if (!confirm("Delete webhook " + id + "? Its history stays readable.")) return;
  await gql(`mutation($id: Int!) { ${API[kind].remove}(id: $id) { id } }`, { id });
  await loadWebhooks();
}

async function runNow(kind, id) {
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
  if (body.errors) { alert(body.errors[0].message.replace(/^\w+: /, "")); return; }
  await openHistory(kind, id);
}

function historyQuery(kind) {
  return `query($id: Int!) { ${API[kind].deliveries} {
  id status trigger scheduledFor attempt durationMs error
  attempts { attempt requestBody responseStatus responseBody errorMessage durationMs startedAt } } }`;
}

async function openHistory(kind, id) {
  historyFor = id; historyKind = kind;
  $("#history-title").textContent = "Deliveries of webhook " + id;
  $("#history-run").dataset.id = id;
  $("#history").classList.remove("hidden");
  $("#history").scrollIntoView();
  await loadHistory();
  clearInterval(historyTimer);
  historyTimer = setInterval(loadHistory, 2000);
}

async function loadHistory() {
  if (historyFor === null) return;
  const body = await gql(historyQuery(historyKind), { id: historyFor });
  if (body.errors) return;
  const tbody = $("#deliveries tbody"); tbody.replaceChildren();
  const key = historyKind === "change" ? "changeWebhookDeliveries" : "cronWebhookDeliveries";
  for (const d of body.data[key]) {
    const details = el("tr", { class: "hidden attempt-details" }, el("td", { colspan: 7 },
      ...d.attempts.map(a => el("div", {},
        el("strong", {}, `Attempt ${a.attempt} · ${when(a.startedAt)} · ${a.durationMs} ms · HTTP ${text(a.responseStatus) || "—"}`),
        a.errorMessage ? el("div", { class: "status-failed" }, a.errorMessage) : "",
        el("div", { class: "muted" }, "Request"), el("pre", {}, a.requestBody),
        el("div", { class: "muted" }, "Response"), el("pre", {}, text(a.responseBody))))));
    tbody.append(
      el("tr", { class: "delivery", "data-id": d.id, "data-status": d.status,
                 onclick: () => details.classList.toggle("hidden") },
        el("td", {}, d.id), el("td", { class: "status-" + d.status }, d.status), el("td", {}, d.trigger.toLowerCase()),
        el("td", {}, when(d.scheduledFor)), el("td", {}, d.attempts.length),
        el("td", {}, d.durationMs === null ? "—" : d.durationMs + " ms"), el("td", {}, text(d.error))),
      details);
  }
}

// --- API keys (direct note edits at depth 0; the key is shown once) ---------------------

const API_KEYS = `{ apiKeys { id name skipWebhooks createdAt createdBy revokedAt } }`;

async function loadApiKeys() {
  const body = await gql(API_KEYS);
  if (body.errors) { $("#api-key-error").textContent = body.errors[0].message; return; }
  const tbody = $("#api-keys tbody"); tbody.replaceChildren();
  for (const k of body.data.apiKeys) {
    tbody.append(el("tr", { "data-id": k.id, "data-state": k.revokedAt ? "revoked" : "active" },
      el("td", {}, k.id),
      el("td", {}, k.name),
      el("td", {}, k.skipWebhooks ? "its writes fire none" : "its writes fire them"),
      el("td", {}, when(k.createdAt), el("div", { class: "muted" }, text(k.createdBy))),
      el("td", { class: k.revokedAt ? "status-failed" : "status-success" },
        k.revokedAt ? "revoked " + when(k.revokedAt) : "active"),
      el("td", { class: "row-actions" }, k.revokedAt ? "" :
        el("button", { class: "danger revoke", onclick: () => revokeApiKey(k.id, k.name) }, "Revoke"))));
  }
}

async function createApiKey(event) {
  event.preventDefault();
  const form = $("#api-key-form");
  $("#api-key-error").textContent = "";
  const input = { name: form.elements.name.value, skipWebhooks: form.elements.skipWebhooks.checked };
  const body = await gql(`mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) {
    key apiKey { id name } } }`, { input });
  if (body.errors) { $("#api-key-error").textContent = body.errors[0].message.replace(/^\w+: /, ""); return; }
  const created = body.data.createApiKey;
  $("#api-key-notice").replaceChildren(
    el("strong", {}, `Key "${created.apiKey.name}" created. Copy it now: it is shown only once. `),
    el("code", { id: "new-api-key" }, created.key), " ",
    el("button", { onclick: () => $("#api-key-notice").classList.add("hidden") }, "Done"));
  $("#api-key-notice").classList.remove("hidden");
  form.reset();
  await loadApiKeys();
}

async function revokeApiKey(id, name) {
  if (!confirm(`Revoke API key "${name}"? Requests with it are refused from now on.`)) return;
  const body = await gql(`mutation($id: Int!) { revokeApiKey(id: $id) { apiKey { id } } }`, { id });
  if (body.errors) { $("#api-key-error").textContent = body.errors[0].message; return; }
  await loadApiKeys();
}

$("#api-key-form").addEventListener("submit", createApiKey);
$("#login").addEventListener("click", signIn);
$("#token").addEventListener("keydown", e => { if (e.key === "Enter") signIn(); });
$("#logout").addEventListener("click", signOut);
$("#refresh").addEventListener("click", loadWebhooks);
$("#new-webhook").addEventListener("click", () => openEditor("cron", null));
$("#new-change-webhook").addEventListener("click", () => openEditor("change", null));
$("#cancel").addEventListener("click", () => $("#editor").classList.add("hidden"));
$("#webhook-form").addEventListener("submit", save);
$("#history-close").addEventListener("click", () => { historyFor = null; clearInterval(historyTimer); $("#history").classList.add("hidden"); });
$("#history-run").addEventListener("click", () => runNow(historyKind, Number($("#history-run").dataset.id)));
if (token) { $("#token").value = token; signIn(); }
