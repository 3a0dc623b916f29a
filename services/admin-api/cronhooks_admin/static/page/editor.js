// Creating and editing a webhook (either kind); a bad field's error shows beside it. The
// list's refresh does not touch this form, so what is typed here stays.
import { gql, reason } from "./api.js";
import { $, el, text } from "./dom.js";
import { API } from "./kinds.js";
import { when } from "./time.js";

const FIELDS = {
  cron: ["url", "cronSchedule", "timezone", "description", "timeoutSeconds", "maxRetries", "maxDepth",
    "misfireGraceSeconds", "readPatterns", "writePatterns", "concurrencyPolicy", "catchUpPolicy", "passApiKey",
    "secret", "instruction"],
  change: ["url", "includePatterns", "excludePatterns", "onCreate", "onUpdate", "onRemove", "includeContent",
    "description", "timeoutSeconds", "maxRetries", "maxDepth", "readPatterns", "writePatterns", "passApiKey",
    "secret", "instruction"],
};
// CONTRACT §13: the execution group ("" = none; concurrencyPolicy DELAY is an option of its select).
FIELDS.cron.push("executionGroup");
// CONTRACT §13: the globs of the notes each delivery carries (a list like readPatterns).
FIELDS.cron.push("attachNotes");
// CONTRACT §13: jitter and the daily budget (an empty budget is null: no limit, also on edit).
FIELDS.cron.push("jitterSeconds", "maxDeliveriesPerDay");
// CONTRACT §16.2: how long a run may go without a report (both kinds).
FIELDS.cron.push("runTimeoutSeconds"); FIELDS.change.push("runTimeoutSeconds");
// CONTRACT §17: the overall retry deadline, beside the retry settings (0: none).
FIELDS.cron.push("retryDeadlineSeconds"); FIELDS.change.push("retryDeadlineSeconds");
const NUMBERS = new Set(["timeoutSeconds", "maxRetries", "maxDepth", "misfireGraceSeconds", "jitterSeconds",
  "maxDeliveriesPerDay", "runTimeoutSeconds", "retryDeadlineSeconds"]);
const LISTS = new Set(["readPatterns", "writePatterns", "includePatterns", "excludePatterns", "attachNotes"]);
// CONTRACT §16.4: daily cost limits, typed as "usd=1.5, tokens=200000" (empty: no limit).
FIELDS.cron.push("maxCostPerDay");
const SELECT = { maxCostPerDay: "maxCostPerDay { unit amount }" };
// CONTRACT §17, both kinds: the signature scheme is edited; the public key (ED25519) and
// until when a rotation's previous secret still signs are shown, never a secret.
FIELDS.cron.push("signatureScheme");
FIELDS.change.push("signatureScheme");
const SIGNING = "publicKey previousSecretExpiresAt";
const costsText = (limits) => limits.map(c => `${c.unit}=${c.amount}`).join(", ");
// A piece without "=" or a number is sent as it is, for the API to name what is wrong.
const costsInput = (value) => value.split(",").map(s => s.trim()).filter(Boolean).map(piece => {
  const [unit, amount = ""] = piece.split("=").map(s => s.trim());
  return { unit, amount: amount === "" || isNaN(Number(amount)) ? -1 : Number(amount) };
});

/** Says the list should be reloaded (main.js listens). */
function changed() { document.dispatchEvent(new Event("webhooks-changed")); }

function clearErrors() {
  for (const node of document.querySelectorAll("[data-error-for]")) node.textContent = "";
  $("#form-error").textContent = "";
}

export function closeEditor() { $("#editor").classList.add("hidden"); }

export async function openEditor(kind, id) {
  const form = $("#webhook-form"); form.reset(); clearErrors(); form.classList.remove("hidden");
  $("#secret-notice").classList.add("hidden");
  form.id.value = id || "";
  form.kind.value = kind; form.dataset.kind = kind;
  const noun = kind === "change" ? "change webhook" : "webhook";
  $("#editor-title").textContent = id ? `Edit ${noun} ${id}` : `New ${noun}`;
  $("#secret-field").classList.toggle("hidden", Boolean(id));
  showSigning(null);
  if (id) {
    const api = API[kind];
    const body = await gql(`query($id: Int!) { ${api.one}(id: $id) { ${FIELDS[kind].filter(f => f !== "secret").map(f => SELECT[f] || f).join(" ")} ${SIGNING} } }`, { id });
    const w = body.data[api.one];
    showSigning(w);
    for (const f of FIELDS[kind]) {
      if (f === "secret" || !(f in w)) continue;
      const input = form.elements[f];
      if (input.type === "checkbox") input.checked = w[f];
      else if (f === "maxCostPerDay") input.value = costsText(w[f]);
      else input.value = LISTS.has(f) ? w[f].join(", ") : text(w[f]);
    }
  }
  $("#editor").classList.remove("hidden");
  $("#editor").scrollIntoView({ block: "nearest" });
  form.url.focus();
}

function showSigning(w) {
  const parts = [];
  if (w && w.publicKey) {
    parts.push(el("div", {}, "Public key (receivers verify v1a with it): ", el("code", { id: "public-key" }, w.publicKey)));
  }
  if (w && w.previousSecretExpiresAt) {
    parts.push(el("div", { id: "previous-secret" }, `The previous secret also signs until ${when(w.previousSecretExpiresAt)}.`));
  }
  $("#signing-info").replaceChildren(...parts);
  $("#signing-info").classList.toggle("hidden", parts.length === 0);
}

function formInput() {
  const form = $("#webhook-form"), input = {};
  for (const f of FIELDS[form.kind.value]) {
    const node = form.elements[f];
    if (node.type === "checkbox") { input[f] = node.checked; continue; }
    const value = node.value.trim();
    if (value === "" && (f === "secret" || f === "timezone")) continue;
    if (f === "maxCostPerDay") input[f] = costsInput(value);
    else if (NUMBERS.has(f)) input[f] = value === "" ? null : Number(value);
    else if (LISTS.has(f)) input[f] = value === "" ? [] : value.split(",").map(s => s.trim()).filter(Boolean);
    else input[f] = value;
  }
  return input;
}

export async function save(event) {
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
      (slot || $("#form-error")).textContent = reason(err);
    }
    return;
  }
  if (!id) {
    const secret = body.data[api.create].secret;
    $("#secret-notice").replaceChildren(el("strong", {}, "Webhook created. Its signing secret, shown only now: "),
      el("code", { id: "new-secret" }, secret), " ",
      el("button", { onclick: closeEditor }, "Done"));
    $("#secret-notice").classList.remove("hidden");
    form.classList.add("hidden");
  } else {
    closeEditor();
  }
  changed();
}
