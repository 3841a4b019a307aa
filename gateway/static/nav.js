// The header every page shares, rendered here from one list so that a page is
// added to the links in one place: each page's HTML keeps only an empty
// <nav class="page-links"> and, where it takes a key, an empty <form id="auth-form">.
// The current page's link is marked (aria-current) and the key form keeps the key
// in this tab's sessionStorage (api.js), so a key given on one page holds for the
// others opened in the tab.

import { api, apiKey, setApiKey } from "./api.js";

const $ = (id) => document.getElementById(id);

/** The pages the header links to, in order. */
export const PAGES = [
  { path: "/ui/", label: "Conversation" },
  { path: "/ui/runs", label: "Runs" },
  { path: "/ui/inbox", label: "Inbox" },
  { path: "/ui/schedules", label: "Schedules" },
  { path: "/ui/evaluations", label: "Evaluations" },
];

/** Fill the header's empty `.page-links` nav and `#auth-form` (where the page has them). */
export function renderHeader() {
  const links = document.querySelector(".page-links");
  if (links && !links.childElementCount) {
    links.append(...PAGES.map(({ path, label }) => el("a", { href: path }, label)));
  }
  const form = $("auth-form");
  if (form && !form.childElementCount) {
    const field = el("label", {}, "API key ");
    field.append(el("input", { id: "api-key", type: "password", placeholder: "spk_…", spellcheck: "false" }));
    form.append(
      field,
      el("button", { type: "submit" }, "Use key"),
      el("button", { id: "forget-key", type: "button" }, "Forget"),
      el("span", { id: "auth-state", class: "muted", role: "status" }),
    );
  }
  markCurrentPage();
}

/** Mark the link of the page shown (`aria-current="page"`). */
function markCurrentPage() {
  for (const link of document.querySelectorAll(".page-links a")) {
    if (new URL(link.href).pathname === location.pathname) link.setAttribute("aria-current", "page");
  }
}

/**
 * Render the header and wire its key form. `onChange(key)` runs after a key is set
 * or forgotten (`key` is then ""). The form is wired before the page config is
 * fetched, so a key typed as soon as the page shows is not lost to a plain submit.
 *
 * @param {(key: string) => Promise<void>|void} onChange
 * @returns {Promise<object>} the page config (`GET /ui/config.json`)
 */
export async function setupHeader(onChange) {
  renderHeader();
  let config = null;
  const state = $("auth-state");
  const show = () => {
    if (config?.auth_disabled) state.textContent = "Authentication is off on this gateway.";
    else state.textContent = apiKey() ? "Key set for this tab." : "No key set.";
  };
  const use = async (key) => {
    setApiKey(key);
    show();
    await onChange(key);
  };
  $("auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    $("api-key").value = "";
    await use(key);
  });
  $("forget-key").addEventListener("click", () => use(""));
  show();
  config = await api("GET", "/ui/config.json");
  if (config.auth_disabled) $("auth-form").classList.add("auth-off");
  show();
  return config;
}

/** A message for a failed call: the problem body's text, or a hint to enter a key. */
export function errorText(error) {
  if (error?.status === 401) return "Enter an API key to use this page.";
  return error instanceof Error ? error.message : String(error);
}

/** Show `error` (or hide the element when null). */
export function showError(target, error) {
  target.textContent = error ? errorText(error) : "";
  target.hidden = !error;
}

/** A short local date and time for an ISO timestamp. */
export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

/** Create an element with attributes and text (text is never parsed as HTML). */
export function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(key, String(value));
  }
  if (text !== undefined) node.textContent = text;
  return node;
}
