// The header the inbox and schedules pages share: the current page's link is
// marked (aria-current) and the API key form keeps the key in this tab's
// sessionStorage (api.js), as the conversation and runs pages do.

import { api, apiKey, setApiKey } from "./api.js";

const $ = (id) => document.getElementById(id);

/** Mark the link of the page shown (`aria-current="page"`). */
export function markCurrentPage() {
  for (const link of document.querySelectorAll(".page-links a")) {
    if (new URL(link.href).pathname === location.pathname) link.setAttribute("aria-current", "page");
  }
}

/**
 * Wire the key form; `onChange` runs after a key is set or forgotten.
 *
 * @param {() => Promise<void>|void} onChange
 * @returns {Promise<object>} the page config (`GET /ui/config.json`)
 */
export async function setupHeader(onChange) {
  markCurrentPage();
  const config = await api("GET", "/ui/config.json");
  const state = $("auth-state");
  const show = () => {
    if (config.auth_disabled) state.textContent = "Authentication is off on this gateway.";
    else state.textContent = apiKey() ? "Key set for this tab." : "No key set.";
  };
  if (config.auth_disabled) $("auth-form").classList.add("auth-off");
  $("auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    setApiKey($("api-key").value.trim());
    $("api-key").value = "";
    show();
    await onChange();
  });
  $("forget-key").addEventListener("click", async () => {
    setApiKey("");
    show();
    await onChange();
  });
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
