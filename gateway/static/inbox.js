// The inbox page: every open prompt the signed-in user may answer, across runs
// (GET /inbox), oldest first, each with its run, graph, node and question and
// answered in place with the prompt's form (schema_form.js). The list is polled
// every POLL_MS while the tab is visible; entries are matched by key, so a form
// being filled in is never rebuilt. An accepted answer removes its entry at once
// (and keeps it out of later polls until the worker has recorded the answer).
// Text from runs is only ever inserted as text, never as HTML.

import { api, messageId, workflowPath } from "./api.js";
import { el, errorText, setupHeader, showError, when } from "./nav.js";
import { buildSchemaForm } from "./schema_form.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 3000;
const PAGE = 200; // GET /inbox's largest page

const state = {
  items: new Map(), // key -> <li>
  answered: new Set(), // keys answered here, hidden until GET /inbox drops them
  timer: null,
  loading: null,
};

const keyOf = (item) => `${item.workflow_id}\u0000${item.node_id}\u0000${item.requested_at}`;

function meta(label, value) {
  const row = el("div");
  row.append(el("dt", {}, label));
  const dd = el("dd");
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value;
  row.append(dd);
  return row;
}

function notice(text) {
  $("inbox-notice").textContent = text;
}

function removeEntry(key) {
  const entry = state.items.get(key);
  if (!entry) return;
  // Keep keyboard users in the list: focus moves to the next entry (or the heading).
  const hadFocus = entry.contains(document.activeElement);
  const next = entry.nextElementSibling || entry.previousElementSibling;
  entry.remove();
  state.items.delete(key);
  if (hadFocus) (next?.querySelector("h3") || $("inbox-title")).focus();
  updateCount();
}

function updateCount() {
  const count = state.items.size;
  $("inbox-count").textContent = count ? `${count} waiting` : "";
  $("inbox-empty").hidden = count !== 0;
}

function entryFor(item) {
  const key = keyOf(item);
  const titleId = `prompt-${state.items.size}-${Math.random().toString(36).slice(2, 8)}`;
  const li = el("li", { class: "inbox-item", "aria-labelledby": titleId });
  li.dataset.workflowId = item.workflow_id;
  li.dataset.nodeId = item.node_id;
  const heading = el("h3", { id: titleId, tabindex: "-1" }, item.title || item.prompt);
  const run = el("a", { href: `/ui/runs#run=${encodeURIComponent(item.workflow_id)}` });
  run.append(el("code", {}, item.workflow_id));
  const list = el("dl", { class: "inbox-meta" });
  list.append(
    meta("Run", run),
    meta("Graph", item.graph_name || "—"),
    meta("Node", el("code", {}, item.node_id)),
    meta("Asked", when(item.requested_at)),
  );
  if (item.expires_at) {
    const row = meta("Answer by", when(item.expires_at));
    row.classList.add("expires");
    list.append(row);
  }
  li.append(heading, list);
  if (item.title) li.append(el("p", { class: "prompt-text" }, item.prompt));

  const { form } = buildSchemaForm(item.ui_schema, async (answer) => {
    const body = { ...answer, node_id: item.node_id, client_message_id: messageId() };
    try {
      await api("POST", `${workflowPath(item.workflow_id)}/signal/UserInput`, { json: body });
    } catch (error) {
      // Answered or expired meanwhile (409): nothing left to answer here.
      if (error.status !== 409) throw error;
      state.answered.add(key);
      removeEntry(key);
      notice(`No longer open: ${errorText(error)}`);
      return;
    }
    state.answered.add(key);
    removeEntry(key);
    notice(`Answer sent to run ${item.workflow_id} (${item.node_id}); the run goes on.`);
  });
  form.setAttribute("aria-label", `Answer: ${item.title || item.prompt}`);
  li.append(form);
  return li;
}

function render(items) {
  const open = new Set();
  const list = $("inbox-items");
  let previous = null;
  for (const item of items) {
    const key = keyOf(item);
    if (state.answered.has(key)) continue;
    open.add(key);
    let entry = state.items.get(key);
    if (!entry) {
      entry = entryFor(item);
      state.items.set(key, entry);
    }
    // Oldest first, as GET /inbox answers; moving an entry keeps what was typed.
    const wanted = previous ? previous.nextElementSibling : list.firstElementChild;
    if (wanted !== entry) list.insertBefore(entry, wanted);
    previous = entry;
  }
  for (const key of [...state.items.keys()]) {
    if (!open.has(key)) removeEntry(key);
  }
  // Forget answered keys GET /inbox no longer lists: the worker recorded them.
  const listed = new Set(items.map(keyOf));
  for (const key of [...state.answered]) if (!listed.has(key)) state.answered.delete(key);
  updateCount();
}

async function load() {
  if (state.loading) return state.loading;
  state.loading = (async () => {
    try {
      const page = await api("GET", `/inbox?limit=${PAGE}`);
      render(page.items);
      const more = $("inbox-more");
      more.hidden = !page.next;
      more.textContent = page.next ? `Showing the oldest ${PAGE}; answer some to see the rest.` : "";
      showError($("inbox-error"), null);
    } catch (error) {
      showError($("inbox-error"), error);
      if (error.status === 401) render([]);
    } finally {
      state.loading = null;
      document.body.dataset.ready = "true";
    }
  })();
  return state.loading;
}

function schedulePoll() {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => {
    if (document.visibilityState === "visible") await load();
    schedulePoll();
  }, POLL_MS);
}

$("inbox-refresh").addEventListener("click", load);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") load();
});

async function main() {
  await setupHeader(async () => {
    state.answered.clear();
    render([]);
    await load();
  });
  await load();
  schedulePoll();
}

main().catch((error) => showError($("inbox-error"), error));
