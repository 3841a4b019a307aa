// HTTP calls to the gateway, with the user's API key (sessionStorage) when set.
// Every refusal becomes an ApiError carrying the RFC 9457 problem body.

const KEY_STORAGE = "spindle.apiKey";

export class ApiError extends Error {
  constructor(status, problem) {
    const detail =
      problem && typeof problem === "object"
        ? problem.detail || problem.title
        : typeof problem === "string" && problem
          ? problem
          : "";
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem && typeof problem === "object" ? problem : null;
    this.errors = Array.isArray(this.problem?.errors) ? this.problem.errors : [];
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

function headers(extra, key) {
  const out = { Accept: "application/json", ...extra };
  const used = key ?? apiKey();
  if (used) out.Authorization = `Bearer ${used}`;
  return out;
}

/**
 * Call the gateway; resolves with the parsed JSON body, rejects with ApiError.
 * `base` (a gateway's origin, e.g. "https://spindle.example.com") and `key` are
 * for the embeddable component (spindle-conversation.js); pages leave them out:
 * same origin, the tab's key.
 */
export async function api(method, path, { json, form, base = "", key } = {}) {
  const init = { method, cache: "no-store", headers: headers({}, key) };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form !== undefined) {
    init.body = form; // the browser sets the multipart boundary
  }
  let response;
  try {
    response = await fetch(base + path, init);
  } catch (error) {
    throw new ApiError(0, `the gateway cannot be reached (${error.message})`);
  }
  const text = await response.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

const seg = encodeURIComponent;

/** The per-run prefix `/runs/{workflowId}/{runId}`. */
export function runPath(workflowId, runId) {
  return `/runs/${seg(workflowId)}/${seg(runId)}`;
}

export function workflowPath(workflowId) {
  return `/runs/${seg(workflowId)}`;
}

/** A client message id, so a retried answer is not delivered twice. */
export function messageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return `m-${Date.now()}-${Math.random().toString(16).slice(2)}`;
}
