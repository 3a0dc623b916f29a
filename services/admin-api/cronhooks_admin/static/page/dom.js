// Small DOM helpers: $, el, and keyed updates that leave unchanged rows alone.
export const $ = (sel, root = document) => root.querySelector(sel);

export function text(value) { return value === null || value === undefined ? "" : String(value); }

/** el("td", {class: "x", onclick: f}, child, "text", …); null/undefined children are skipped. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "onclick") node.addEventListener("click", v); else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === "") continue;
    node.append(child instanceof Node ? child : text(child));
  }
  return node;
}

/**
 * Makes `parent`'s keyed children show `items`, in order, touching only what changed:
 * an item whose signature (a string of everything it shows) is unchanged keeps its node,
 * and so its open details, selection and focus. `render(item)` makes a new node.
 * Returns the number of nodes made anew.
 */
export function patchKeyed(parent, items, { key, signature, render, selector = ":scope > [data-key]" }) {
  const old = new Map([...parent.querySelectorAll(selector)].map(n => [n.dataset.key, n]));
  let made = 0, previous = null;
  for (const item of items) {
    const k = String(key(item)), sig = signature(item);
    let node = old.get(k);
    old.delete(k);
    if (!node || node.dataset.sig !== sig) {
      const fresh = render(item);
      fresh.dataset.key = k; fresh.dataset.sig = sig;
      if (node) node.replaceWith(fresh);
      node = fresh; made++;
    }
    const expected = previous ? previous.nextElementSibling : firstKeyed(parent, selector);
    if (expected !== node) {
      if (previous) previous.after(node); else placeFirst(parent, node, selector);
    }
    previous = node;
  }
  for (const gone of old.values()) gone.remove();
  return made;
}

function firstKeyed(parent, selector) { return parent.querySelector(selector); }
function placeFirst(parent, node, selector) {
  const first = firstKeyed(parent, selector);
  if (first) first.before(node); else parent.append(node);
}
