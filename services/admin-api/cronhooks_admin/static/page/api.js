// The admin token (kept for this tab only) and POST /graphql with it.
const KEY = "cronhooks-token";
let token = sessionStorage.getItem(KEY) || "";
const signedOut = new Set();

export function currentToken() { return token; }
export function setToken(value) { token = value; sessionStorage.setItem(KEY, value); }
export function clearToken() { token = ""; sessionStorage.removeItem(KEY); }
/** `callback` runs when the server refuses the token (401). */
export function onSignedOut(callback) { signedOut.add(callback); }

/** The answer's body ({data, errors}); a 401 signs out and throws. */
export async function gql(query, variables = {}) {
  const resp = await fetch("/graphql", {
    method: "POST",
    headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
    body: JSON.stringify({ query, variables }),
  });
  const body = await resp.json().catch(() => ({ errors: [{ message: "HTTP " + resp.status }] }));
  if (resp.status === 401) {
    clearToken();
    for (const callback of signedOut) callback();
    throw new Error("your token is not valid");
  }
  return body;
}

/** An error's message without the "field: " prefix (the field is shown beside it). */
export function reason(error) { return error.message.replace(/^\w+: /, ""); }
