// The admin token and POST /graphql with it. The token is kept in localStorage (this
// origin only, never in a URL) so that GraphiQL, opened from the page in a new tab, and
// other tabs of the page are signed in too; signing out forgets it in every tab.
const KEY = "cronhooks-token";
sessionStorage.removeItem(KEY);  // where earlier versions kept it
let token = localStorage.getItem(KEY) || "";
const signedOut = new Set();

export function currentToken() { return token; }
export function setToken(value) { token = value; localStorage.setItem(KEY, value); }
export function clearToken() { token = ""; localStorage.removeItem(KEY); }
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
