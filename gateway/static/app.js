// The conversation page: pick a graph, start a run from the message box, and
// follow it. The run being shown is kept in the URL (#run=<workflowId>/<runId>),
// so a reload or a shared link reattaches to it.

import { api, ApiError, apiKey, messageId, runPath, setApiKey, workflowPath } from "./api.js";
import { ConversationView } from "./render.js";
import { buildSchemaForm } from "./schema_form.js";
import { ConversationStream, MessageType } from "./stream.js";
import { Uploader } from "./upload.js";
import { WorkstreamPanel } from "./workstreams.js";

const $ = (id) => document.getElementById(id);

const STATE_LABELS = {
  idle: "no conversation",
  starting: "starting…",
  loading: "loading history…",
  live: "live",
  reconnecting: "reconnecting…",
  ended: "ended",
  failed: "disconnected",
};

const page = {
  config: null,
  graphs: new Map(), // name -> spec (fetched on demand)
  run: null, // {workflowId, runId}
  stream: null,
  forms: new Map(), // prompt node id -> close(note) of its open form
};
let uploader = null; // made once the page's config is known

function showError(target, error) {
  target.textContent = error ? (error instanceof Error ? error.message : String(error)) : "";
  target.hidden = !error;
}

function setRunState(state, detail) {
  const badge = $("run-state");
  badge.dataset.state = state;
  badge.textContent = STATE_LABELS[state] ?? state;
  badge.title = detail || "";
  if (state === "failed" && detail) showError($("page-error"), detail);
  if (state === "live") showError($("page-error"), null);
  const ended = state === "ended";
  $("send").disabled = ended;
  $("message-input").disabled = ended;
}

// The message that starts a run becomes the graph's input: a JSON object as
// typed, or else the text in the input's one required string (or first string)
// property, as the examples' input schemas expect.
function inputKey(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const strings = Object.keys(properties).filter(
    (name) => (properties[name]?.type ?? "string") === "string",
  );
  const required = Array.isArray(schema?.required) ? schema.required : [];
  return required.find((name) => strings.includes(name)) ?? strings[0] ?? null;
}

export function inputFor(schema, text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try {
      const value = JSON.parse(trimmed);
      if (value && typeof value === "object" && !Array.isArray(value)) return value;
    } catch {
      // not JSON after all: treat it as text
    }
  }
  const key = inputKey(schema);
  return { [key ?? "message"]: trimmed };
}

async function graphSpec(name) {
  if (!page.graphs.get(name)) page.graphs.set(name, await api("GET", `/graphs/${encodeURIComponent(name)}`));
  return page.graphs.get(name);
}

async function describeGraph() {
  const name = $("graph-select").value;
  const hint = $("graph-hint");
  if (!name) {
    hint.textContent = "";
    return;
  }
  try {
    const spec = await graphSpec(name);
    const key = inputKey(spec.input_schema);
    const where = key ? `input.${key}` : "input.message";
    hint.textContent = `${spec.description || name} — your message becomes ${where}; type a JSON object to give the whole input.`;
  } catch (error) {
    hint.textContent = error.message;
  }
}

async function loadGraphs() {
  const select = $("graph-select");
  try {
    const reply = await api("GET", "/graphs");
    const current = select.value;
    select.replaceChildren();
    for (const graph of reply.graphs || []) {
      const option = document.createElement("option");
      option.value = graph.name;
      option.textContent = graph.name;
      option.title = graph.description || "";
      select.append(option);
    }
    if (current && [...select.options].some((o) => o.value === current)) select.value = current;
    showError($("page-error"), null);
    await describeGraph();
  } catch (error) {
    showError($("page-error"), error.status === 401 ? "Enter an API key to use this gateway." : error);
  }
}

// -- the conversation ---------------------------------------------------------

const view = new ConversationView($("messages"), {
  requestInput: (msg) => promptForm(msg),
  answered: (msg) => {
    const node = msg.d?.node_id;
    const close = node ? page.forms.get(node) : null;
    if (close) {
      close("Answered.");
      page.forms.delete(node);
    }
  },
});

const panel = new WorkstreamPanel($("workstreams"), $("ws-tabs"), (workstream) =>
  view.setFilter(workstream),
);

function promptForm(msg) {
  const details = msg.d && typeof msg.d === "object" ? msg.d : {};
  const schema = details.ui_schema ?? details.uiSchema ?? null;
  const nodeId = details.node_id;
  const { form, close } = buildSchemaForm(schema, async (answer) => {
    const body = { ...answer, client_message_id: messageId() };
    if (nodeId) body.node_id = nodeId;
    const { workflowId, runId } = page.run;
    await api("POST", `${runPath(workflowId, runId)}/signal/UserInput`, { json: body });
  });
  if (nodeId) {
    page.forms.get(nodeId)?.("Superseded by a newer prompt.");
    page.forms.set(nodeId, close);
  }
  return form;
}

// An interactive agent that waits for the user (IDLE of the main workstream, not
// waiting for children) may be ended with Done: POST /runs/{id}/complete
// (docs/conversations.md, Interactive agents). Any later main message hides it.
function noticeIdle(msg) {
  if (msg.w && msg.w !== "main") return;
  if (msg.t === MessageType.STREAMING_CHUNK) return;
  const waiting = msg.d && Array.isArray(msg.d.waiting_for) ? msg.d.waiting_for : [];
  $("complete-agent").hidden = !(msg.t === MessageType.IDLE && waiting.length === 0);
}

$("complete-agent").addEventListener("click", async () => {
  if (!page.run) return;
  const button = $("complete-agent");
  showError($("composer-error"), null);
  button.disabled = true;
  try {
    await api("POST", `${workflowPath(page.run.workflowId)}/complete`);
    button.hidden = true;
  } catch (error) {
    showError($("composer-error"), error);
  } finally {
    button.disabled = false;
  }
});

function detach() {
  $("complete-agent").hidden = true;
  page.stream?.close();
  page.stream = null;
  page.run = null;
  page.forms.clear();
  view.clear();
  view.setFilter("all");
  panel.detach();
  uploader?.setRun(null);
  $("new-run").hidden = true;
  $("graph-select").disabled = false;
  $("send").textContent = "Start";
  setRunState("idle");
}

function attach(workflowId, runId) {
  detach();
  page.run = { workflowId, runId };
  $("new-run").hidden = false;
  $("graph-select").disabled = true;
  $("send").textContent = "Send";
  uploader?.setRun(page.run);
  panel.attach(workflowId);
  page.stream = new ConversationStream({
    workflowId,
    runId,
    onMessage: (msg) => {
      view.add(msg);
      panel.noticed(msg);
      noticeIdle(msg);
      if (msg.t === MessageType.COMPLETE && !msg.w) panel.refresh();
    },
    onState: setRunState,
  });
  window.spindleStream = page.stream; // for the browser tests and the curious
  page.stream.start();
}

function attachFromHash() {
  const match = /^#run=([^/]+)\/(.+)$/.exec(location.hash);
  if (!match) {
    if (page.run) detach();
    return;
  }
  const [workflowId, runId] = [decodeURIComponent(match[1]), decodeURIComponent(match[2])];
  if (page.run?.workflowId === workflowId && page.run?.runId === runId) return;
  attach(workflowId, runId);
}

async function startRun(text) {
  const graph = $("graph-select").value;
  if (!graph) throw new ApiError(0, "Choose a graph first.");
  const spec = await graphSpec(graph);
  setRunState("starting");
  try {
    const started = await api("POST", "/runs", { json: { graph, input: inputFor(spec.input_schema, text) } });
    location.hash = `run=${encodeURIComponent(started.workflow_id)}/${encodeURIComponent(started.run_id)}`;
  } catch (error) {
    setRunState("idle");
    throw error;
  }
}

async function sendMessage(text) {
  const { workflowId, runId } = page.run;
  await api("POST", `${runPath(workflowId, runId)}/signal/UserInput`, {
    json: { message: text, client_message_id: messageId() },
  });
}

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("message-input");
  const text = input.value;
  showError($("composer-error"), null);
  if (!text.trim()) return;
  $("send").disabled = true;
  try {
    if (page.run) await sendMessage(text);
    else await startRun(text);
    input.value = "";
  } catch (error) {
    showError($("composer-error"), error);
  } finally {
    $("send").disabled = $("run-state").dataset.state === "ended";
  }
});

$("message-input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
});

$("new-run").addEventListener("click", () => {
  history.pushState(null, "", location.pathname);
  detach();
});

$("graph-select").addEventListener("change", describeGraph);
window.addEventListener("hashchange", attachFromHash);

// -- credentials --------------------------------------------------------------

function showAuthState() {
  const state = $("auth-state");
  if (page.config?.auth_disabled) state.textContent = "Authentication is off on this gateway.";
  else state.textContent = apiKey() ? "Key set for this tab." : "No key set.";
}

$("auth-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  setApiKey($("api-key").value.trim());
  $("api-key").value = "";
  showAuthState();
  await loadGraphs();
  if (page.run) attach(page.run.workflowId, page.run.runId);
});

$("forget-key").addEventListener("click", () => {
  setApiKey("");
  showAuthState();
});

// -- start-up -----------------------------------------------------------------

async function main() {
  page.config = await api("GET", "/ui/config.json");
  if (page.config.auth_disabled) $("auth-form").classList.add("auth-off");
  uploader = new Uploader({
    button: $("attach"),
    input: $("file-input"),
    zone: $("drop-zone"),
    status: $("upload-state"),
    error: $("composer-error"),
    list: $("files"),
    config: page.config,
  });
  showAuthState();
  await loadGraphs();
  attachFromHash();
  document.body.dataset.ready = "true";
}

main().catch((error) => showError($("page-error"), error));
