// The conversation page: pick a graph, start a run from the message box, and
// follow it. The run being shown is kept in the URL (#run=<workflowId>/<runId>),
// so a reload or a shared link reattaches to it. The conversation itself (pane,
// workstreams, files, uploads, forms) is conversation.js, shared with the
// embeddable <spindle-conversation>.

import { api, ApiError } from "./api.js";
import { Conversation, inputFor, inputKey, showError } from "./conversation.js";
import { renderMarkdown } from "./markdown.js";
import { setupHeader } from "./nav.js";

const $ = (id) => document.getElementById(id);

const page = {
  config: null,
  graphs: new Map(), // name -> spec (fetched on demand)
  conversation: null,
};

async function graphSpec(name) {
  if (!page.graphs.get(name)) page.graphs.set(name, await api("GET", `/graphs/${encodeURIComponent(name)}`));
  return page.graphs.get(name);
}

// The graph's description is Markdown (the examples quote tool names in backticks).
async function describeGraph() {
  const name = $("graph-select").value;
  const hint = $("graph-hint");
  hint.replaceChildren();
  if (!name) return;
  try {
    const spec = await graphSpec(name);
    const key = inputKey(spec.input_schema);
    const where = key ? `input.${key}` : "input.message";
    const description = document.createElement("div");
    description.className = "graph-description";
    description.append(renderMarkdown(spec.description || name));
    const how = document.createElement("p");
    how.className = "muted";
    how.textContent = `Your message becomes ${where}; type a JSON object to give the whole input.`;
    hint.append(description, how);
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
      select.append(option);
    }
    if (current && [...select.options].some((o) => o.value === current)) select.value = current;
    showError($("page-error"), null);
    await describeGraph();
  } catch (error) {
    showError($("page-error"), error.status === 401 ? "Enter an API key to use this gateway." : error);
  }
}

async function startRun(text) {
  const graph = $("graph-select").value;
  if (!graph) throw new ApiError(0, "Choose a graph first.");
  const spec = await graphSpec(graph);
  const started = await api("POST", "/runs", { json: { graph, input: inputFor(spec.input_schema, text) } });
  location.hash = `run=${encodeURIComponent(started.workflow_id)}/${encodeURIComponent(started.run_id)}`;
  return { workflowId: started.workflow_id, runId: started.run_id };
}

function showRunControls(attached) {
  $("new-run").hidden = !attached;
  $("graph-select").disabled = attached;
  $("graph-hint").hidden = attached;
  $("send").textContent = attached ? "Send" : "Start";
}

function attach(workflowId, runId) {
  page.conversation.attach(workflowId, runId);
  window.spindleStream = page.conversation.stream; // for the browser tests and the curious
  showRunControls(true);
}

function detach() {
  page.conversation.detach();
  showRunControls(false);
}

function attachFromHash() {
  const match = /^#run=([^/]+)\/(.+)$/.exec(location.hash);
  const run = page.conversation.run;
  if (!match) {
    if (run) detach();
    return;
  }
  const [workflowId, runId] = [decodeURIComponent(match[1]), decodeURIComponent(match[2])];
  if (run?.workflowId === workflowId && run?.runId === runId) {
    window.spindleStream = page.conversation.stream;
    showRunControls(true);
    return;
  }
  attach(workflowId, runId);
}

$("new-run").addEventListener("click", () => {
  history.pushState(null, "", location.pathname);
  detach();
});
$("graph-select").addEventListener("change", describeGraph);
window.addEventListener("hashchange", attachFromHash);

// -- credentials --------------------------------------------------------------

// A new key reloads the graphs and reattaches the run shown; forgetting it leaves
// the page as it is until the next call needs a key.
async function keyChanged(key) {
  if (!key) return;
  await loadGraphs();
  const run = page.conversation?.run;
  if (run) attach(run.workflowId, run.runId);
}

// -- start-up -----------------------------------------------------------------

async function main() {
  page.config = await setupHeader(keyChanged);
  page.conversation = new Conversation(document, {
    config: page.config,
    startRun,
    onState: (state) => showRunControls(state === "starting" || Boolean(page.conversation?.run)),
  });
  await loadGraphs();
  attachFromHash();
  document.body.dataset.ready = "true";
}

main().catch((error) => showError($("page-error"), error));
