// The admin page's entry (a module from this origin: the CSP allows no inline script).
// Signs in with an admin token, then keeps the lists fresh by themselves.
import { clearToken, currentToken, gql, onSignedOut, setToken } from "./api.js";
import { $ } from "./dom.js";
import { loadWebhooks } from "./webhooks.js";
import { closeEditor, openEditor, save } from "./editor.js";
import { closeHistory, historyWebhook, runNow } from "./history.js";
import { createApiKey, loadApiKeys } from "./api_keys.js";
import { loadAgents } from "./agents.js";
import { loadAlerts, openLinkedWebhook } from "./alerts.js";
import { loadPause, pauseDeliveries, resumeDeliveries } from "./pause.js";
import { loadDestinations } from "./destinations.js";

const LIST_REFRESH_MS = 5000;
let listTimer = null;

async function refreshLists() {
  if (document.hidden || !currentToken()) return;
  await Promise.all([loadPause(), loadWebhooks(), loadAgents(), loadApiKeys(), loadAlerts(), loadDestinations()]);
}

function showSignedOut() {
  clearInterval(listTimer); closeHistory();
  $("#app").classList.add("hidden"); $("#login-panel").classList.remove("hidden"); $("#logout").classList.add("hidden");
}

async function signIn() {
  const token = $("#token").value.trim();
  $("#login-error").textContent = "";
  try {
    setToken(token);
    const body = await gql("{ cronWebhooks { id } }");
    if (body.errors) throw new Error(body.errors[0].message);
    $("#login-panel").classList.add("hidden"); $("#app").classList.remove("hidden"); $("#logout").classList.remove("hidden");
    await refreshLists();
    await openLinkedWebhook();
    clearInterval(listTimer);
    listTimer = setInterval(refreshLists, LIST_REFRESH_MS);
  } catch (err) { clearToken(); $("#login-error").textContent = err.message; }
}

onSignedOut(showSignedOut);
document.addEventListener("webhooks-changed", () => loadWebhooks());
window.addEventListener("hashchange", () => openLinkedWebhook());
document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshLists(); });
$("#api-key-form").addEventListener("submit", createApiKey);
$("#pause-form").addEventListener("submit", pauseDeliveries);
$("#resume-deliveries").addEventListener("click", resumeDeliveries);
$("#login").addEventListener("click", signIn);
$("#token").addEventListener("keydown", e => { if (e.key === "Enter") signIn(); });
$("#logout").addEventListener("click", () => { clearToken(); showSignedOut(); });
$("#refresh").addEventListener("click", () => refreshLists());
$("#new-webhook").addEventListener("click", () => openEditor("cron", null));
$("#new-change-webhook").addEventListener("click", () => openEditor("change", null));
$("#cancel").addEventListener("click", closeEditor);
$("#webhook-form").addEventListener("submit", save);
$("#history-close").addEventListener("click", closeHistory);
$("#history-run").addEventListener("click", () => {
  const shown = historyWebhook();
  if (shown) runNow(shown.kind, shown.id);
});
if (currentToken()) { $("#token").value = currentToken(); signIn(); }
