// API keys for direct note edits at depth 0: create (the key is shown once), list, revoke.
import { gql, reason } from "./api.js";
import { $, el, patchKeyed, text } from "./dom.js";
import { when } from "./time.js";

const API_KEYS = `{ apiKeys { id name skipWebhooks createdAt createdBy revokedAt } }`;

function render(k) {
  return el("tr", { "data-id": k.id, "data-state": k.revokedAt ? "revoked" : "active" },
    el("td", { class: "muted" }, k.id),
    el("td", {}, k.name),
    el("td", {}, k.skipWebhooks ? "its writes fire none" : "its writes fire them"),
    el("td", {}, when(k.createdAt), el("div", { class: "muted small" }, text(k.createdBy))),
    el("td", {}, el("span", { class: "badge " + (k.revokedAt ? "status-failed" : "status-success") },
      k.revokedAt ? "revoked" : "active"), k.revokedAt ? el("div", { class: "muted small" }, when(k.revokedAt)) : null),
    el("td", { class: "row-actions" }, k.revokedAt ? null :
      el("button", { class: "danger revoke", onclick: () => revokeApiKey(k.id, k.name) }, "Revoke")));
}

export async function loadApiKeys() {
  const body = await gql(API_KEYS);
  if (body.errors) { $("#api-key-error").textContent = body.errors[0].message; return; }
  patchKeyed($("#api-keys tbody"), body.data.apiKeys, { key: k => k.id, signature: k => JSON.stringify(k), render });
}

export async function createApiKey(event) {
  event.preventDefault();
  const form = $("#api-key-form");
  $("#api-key-error").textContent = "";
  const input = { name: form.elements.name.value, skipWebhooks: form.elements.skipWebhooks.checked };
  const body = await gql(`mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) {
    key apiKey { id name } } }`, { input });
  if (body.errors) { $("#api-key-error").textContent = reason(body.errors[0]); return; }
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
