// The runs page: past and running runs (filter by graph and status), the graph
// of the run opened (nodes with their live status, durations and map counts)
// and the node inspector (envelopes before and after, failed items, fork, and
// for an agent or workstream node the conversation its model is given).
// The run and node shown are kept in the URL (#run=<workflowId>&node=<nodeId>).
// Text from runs is only ever inserted as text, never as HTML.

import { api, apiKey, setApiKey, workflowPath } from "./api.js";
import { ConversationSection } from "./run_conversation.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const OPEN = new Set(["running", "paused"]);
const BATCH_PROGRESS = 13;
const POLL_MS = 1500;
const NODE_W = 170;
const NODE_H = 58;
const GAP_X = 24;
const GAP_Y = 44;

const page = {
  config: null,
  run: null, // {workflowId, detail, graph, batches}
  node: null,
  graphs: new Map(), // workflow id -> graph spec (a run's graph never changes)
  poll: null,
};
const conversation = new ConversationSection($("conversation"));

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function showError(target, error) {
  target.textContent = error ? (error instanceof Error ? error.message : String(error)) : "";
  target.hidden = !error;
}

function seconds(ms) {
  if (!ms) return "0 s";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function json(value) {
  return value === undefined || value === null ? "—" : JSON.stringify(value, null, 2);
}

// -- the URL --------------------------------------------------------------------

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { run: params.get("run"), node: params.get("node") };
}

function writeHash(run, node) {
  const params = new URLSearchParams();
  if (run) params.set("run", run);
  if (node) params.set("node", node);
  const hash = `#${params.toString()}`;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}

// -- the list -------------------------------------------------------------------

async function loadGraphFilter() {
  const select = $("filter-graph");
  const chosen = select.value;
  const { graphs } = await api("GET", "/graphs");
  select.replaceChildren(el("option", { value: "" }, "all"));
  for (const graph of graphs) select.append(el("option", { value: graph.name }, graph.name));
  select.value = chosen;
}

// Filters change one select at a time; only the latest request may fill the table
// (an earlier, slower answer would show the list of a filter no longer chosen).
let listRequest = 0;

async function loadRuns() {
  const mine = ++listRequest;
  const params = new URLSearchParams({ limit: "100" });
  if ($("filter-graph").value) params.set("graph", $("filter-graph").value);
  if ($("filter-status").value) params.set("status", $("filter-status").value);
  const body = $("run-table").tBodies[0];
  try {
    const list = await api("GET", `/runs?${params}`);
    if (mine !== listRequest) return;
    showError($("list-error"), null);
    $("run-count").textContent = `${list.total} run${list.total === 1 ? "" : "s"}`;
    body.replaceChildren(
      ...list.runs.map((run) => {
        const row = el("tr", { "data-workflow-id": run.workflow_id });
        if (page.run?.workflowId === run.workflow_id) row.classList.add("selected");
        row.append(
          el("td", { class: "run-id" }, run.workflow_id),
          el("td", {}, run.graph_name),
          el("td", {}, ""),
          el("td", {}, new Date(run.created_at).toLocaleString()),
        );
        row.cells[2].append(el("span", { class: "status-badge", "data-status": run.status }, run.status));
        row.addEventListener("click", () => openRun(run.workflow_id));
        return row;
      }),
    );
  } catch (error) {
    showError($("list-error"), error);
  }
}

// -- the run --------------------------------------------------------------------

// The latest BATCH_PROGRESS of each node: {done, failed, total}.
function batchCounts(messages) {
  const counts = new Map();
  for (const message of messages) {
    if (message.t !== BATCH_PROGRESS || !message.d || typeof message.d !== "object") continue;
    const d = message.d;
    const node = d.node_id ?? d.nodeId ?? d.node;
    if (node) counts.set(node, { done: d.done ?? 0, failed: d.failed ?? 0, total: d.total ?? 0 });
  }
  return counts;
}

// Each node's status, total duration and visits from the run's node reports.
function nodeStates(detail) {
  const states = new Map();
  for (const report of detail.node_reports ?? []) {
    const state = states.get(report.node_id) ?? { status: null, duration: 0, visits: 0 };
    state.status = report.status;
    state.duration += report.duration_ms ?? 0;
    state.visits += 1;
    states.set(report.node_id, state);
  }
  const live = OPEN.has(detail.status);
  for (const id of live ? detail.current_nodes ?? [] : []) {
    const state = states.get(id) ?? { duration: 0, visits: 0 };
    state.status = "running";
    states.set(id, state);
  }
  const waiting = live ? detail.pending_input?.node_id : null;
  if (waiting) states.set(waiting, { ...(states.get(waiting) ?? { duration: 0, visits: 0 }), status: "waiting" });
  return states;
}

// Layers top to bottom by the longest path from the entry over forward edges
// (a loop's edge back is drawn, not followed); side by side within a layer in
// the order nodes are declared.
function layout(graph) {
  const depth = new Map([[graph.entry, 0]]);
  const order = graph.nodes.map((n) => n.id);
  for (let pass = 0; pass < order.length; pass += 1) {
    let changed = false;
    for (const edge of graph.edges) {
      const from = depth.get(edge.from);
      if (from === undefined) continue;
      if (order.indexOf(edge.to) <= order.indexOf(edge.from) && depth.has(edge.to)) continue;
      if ((depth.get(edge.to) ?? -1) < from + 1 && from + 1 < order.length) {
        depth.set(edge.to, from + 1);
        changed = true;
      }
    }
    if (!changed) break;
  }
  const rows = new Map();
  const place = new Map();
  for (const id of order) {
    const layer = depth.get(id) ?? 0;
    const slot = rows.get(layer) ?? 0;
    rows.set(layer, slot + 1);
    place.set(id, { x: 20 + slot * (NODE_W + GAP_X), y: 20 + layer * (NODE_H + GAP_Y) });
  }
  return place;
}

function renderGraph() {
  const { graph, detail, batches } = page.run;
  const place = layout(graph);
  const states = nodeStates(detail);
  const canvas = $("run-graph");
  const width = Math.max(...[...place.values()].map((p) => p.x)) + NODE_W + 80;
  const height = Math.max(...[...place.values()].map((p) => p.y)) + NODE_H + 20;
  canvas.setAttribute("width", width);
  canvas.setAttribute("height", height);
  canvas.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#94a3b8" }));
  defs.append(marker);
  const parts = [defs];
  for (const edge of graph.edges) {
    const a = place.get(edge.from);
    const b = place.get(edge.to);
    if (!a || !b) continue;
    const forward = b.y > a.y;
    const [x1, y1] = forward ? [a.x + NODE_W / 2, a.y + NODE_H] : [a.x + NODE_W, a.y + NODE_H / 2];
    const [x2, y2] = forward ? [b.x + NODE_W / 2, b.y] : [b.x + NODE_W, b.y + NODE_H / 2];
    const bend = forward
      ? `C${x1},${y1 + GAP_Y / 2} ${x2},${y2 - GAP_Y / 2} ${x2},${y2}`
      : `C${x1 + 60},${y1} ${x2 + 60},${y2} ${x2},${y2}`;
    const group = svg("g", { class: "edge-group", "data-from": edge.from, "data-to": edge.to });
    group.append(svg("path", { class: "edge", d: `M${x1},${y1} ${bend}`, "marker-end": "url(#arrow)" }));
    const label = edge.from_port ?? edge.when;
    if (label) group.append(svg("text", { class: "edge-label", x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4 }, label.slice(0, 24)));
    parts.push(group);
  }
  for (const node of graph.nodes) {
    const p = place.get(node.id);
    const state = states.get(node.id);
    // A closed run's node with no report was never reached: not "pending".
    const status = state?.status ?? (OPEN.has(detail.status) ? "pending" : "not run");
    const group = svg("g", {
      class: `node${page.node === node.id ? " selected" : ""}`,
      "data-node-id": node.id,
      "data-status": status,
      transform: `translate(${p.x},${p.y})`,
      tabindex: 0,
      role: "button",
    });
    group.append(svg("rect", { width: NODE_W, height: NODE_H }));
    group.append(svg("text", { x: 10, y: 18, class: "node-name" }, `${node.id} · ${node.type}`));
    const parts2 = [status];
    if (state?.visits) parts2.push(seconds(state.duration));
    if (state?.visits > 1) parts2.push(`${state.visits} visits`);
    group.append(svg("text", { x: 10, y: 35, class: "node-detail node-status" }, parts2.join(" · ")));
    const batch = batches.get(node.id);
    if (batch) {
      const text = `items ${batch.done}/${batch.total}${batch.failed ? ` · ${batch.failed} failed` : ""}`;
      group.append(svg("text", { x: 10, y: 51, class: "node-detail node-items" }, text));
    }
    group.append(svg("title", {}, node.label ?? node.id));
    group.addEventListener("click", () => inspect(node.id));
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter") inspect(node.id);
    });
    parts.push(group);
  }
  canvas.replaceChildren(...parts);
}

function renderRunHead() {
  const { detail, workflowId } = page.run;
  $("run-title").textContent = workflowId;
  const badge = $("run-status");
  badge.textContent = detail.status;
  badge.dataset.status = detail.status;
  showError($("run-error"), detail.error || null);
  const history = detail.history;
  const generations = history?.generations > 1 ? `, ${history.generations} generations` : "";
  const counts = Object.entries(detail.node_counts ?? {}).map(([s, n]) => `${n} ${s.toLowerCase()}`);
  const nodes = counts.length ? ` · nodes: ${counts.join(", ")}` : "";
  $("run-history").textContent = history?.events != null
    ? `Temporal history: ${history.events.toLocaleString()} events, ` +
      `${(history.bytes / 1024).toFixed(1)} KiB (${(history.used * 100).toFixed(2)} % of the limit)` +
      generations + nodes
    : `${history?.generations ? `${history.generations} generation(s)` : ""}${nodes}`;
  $("run-conversation").href = detail.run_id ? `/ui/#run=${workflowId}/${detail.run_id}` : "/ui/";
}

async function refreshRun() {
  const run = page.run;
  if (!run) return;
  const detail = await api("GET", workflowPath(run.workflowId));
  let messages = [];
  if (detail.run_id) {
    const updates = await api("GET", `${workflowPath(run.workflowId)}/${encodeURIComponent(detail.run_id)}/updates`);
    messages = updates.messages ?? [];
  }
  if (page.run !== run) return; // another run was opened meanwhile
  run.detail = detail;
  run.batches = batchCounts(messages);
  renderRunHead();
  renderGraph();
  document.body.dataset.runStatus = detail.status;
  if (!OPEN.has(detail.status)) stopPolling();
}

function stopPolling() {
  if (page.poll) clearInterval(page.poll);
  page.poll = null;
}

async function openRun(workflowId, node = null) {
  stopPolling();
  page.run = { workflowId, detail: null, graph: null, batches: new Map() };
  page.node = null;
  writeHash(workflowId, null);
  for (const row of $("run-table").tBodies[0].rows) {
    row.classList.toggle("selected", row.dataset.workflowId === workflowId);
  }
  $("run-view").hidden = false;
  $("inspector").hidden = true;
  conversation.hide();
  try {
    if (!page.graphs.has(workflowId)) {
      const { graph } = await api("GET", `${workflowPath(workflowId)}/graph`);
      page.graphs.set(workflowId, graph);
    }
    page.run.graph = page.graphs.get(workflowId);
    await refreshRun();
    if (node) await inspect(node);
    if (OPEN.has(page.run.detail.status)) {
      const run = page.run;
      page.poll = setInterval(() => {
        if (page.run !== run) return;
        refreshRun().catch((error) => showError($("run-error"), error));
        if (page.node) inspect(page.node, { quiet: true }).catch(() => {});
      }, POLL_MS);
    }
  } catch (error) {
    showError($("run-error"), error);
  }
}

// -- the inspector ----------------------------------------------------------------

function executionView(execution) {
  const box = el("section", { class: "execution", "data-visit": String(execution.visit) });
  const head = `visit ${execution.visit} · attempt ${execution.attempt} · ${execution.status} · ${seconds(execution.duration_ms)}`;
  box.append(el("h3", {}, head));
  if (execution.error) box.append(el("p", { class: "inline-error execution-error" }, execution.error));
  if (execution.failed_items.length) {
    box.append(el("h4", {}, `Failed items (${execution.failed_items.length})`));
    const list = el("ul", { class: "failed-items" });
    for (const item of execution.failed_items) {
      const error = item.error;
      const text = typeof error === "object" ? error.message ?? JSON.stringify(error) : String(error);
      list.append(el("li", {}, `${JSON.stringify(item.json ?? item.value ?? item).slice(0, 80)} — ${text}`));
    }
    box.append(list);
  }
  box.append(el("h4", {}, "Envelope before"), el("pre", { class: "envelope-before" }, json(execution.input)));
  box.append(el("h4", {}, "Envelope after"), el("pre", { class: "envelope-after" }, json(execution.output)));
  return box;
}

// Whose conversation the inspector shows: an agent node's own, or the agent of
// the workstream a workstream node launched (its launch id, in its output).
function conversationTarget(spec, nodeId, executions) {
  if (spec?.type === "agent") return { node: nodeId, workstream: "main" };
  if (spec?.type !== "workstream") return null;
  const launch = executions.at(-1)?.output?.payload?.launch_id;
  return typeof launch === "string" && launch ? { node: null, workstream: launch } : null;
}

async function inspect(nodeId, { quiet = false } = {}) {
  const run = page.run;
  if (!run?.graph) return;
  page.node = nodeId;
  writeHash(run.workflowId, nodeId);
  for (const group of $("run-graph").querySelectorAll("g.node")) {
    group.classList.toggle("selected", group.dataset.nodeId === nodeId);
  }
  const spec = run.graph.nodes.find((n) => n.id === nodeId);
  $("inspector").hidden = false;
  $("inspector-title").textContent = `Node ${nodeId}`;
  $("inspector-meta").textContent = spec ? `${spec.type}${spec.label ? ` — ${spec.label}` : ""}` : "";
  if (!quiet) $("fork-result").textContent = "";
  try {
    const found = await api("GET", `${workflowPath(run.workflowId)}/nodes/${encodeURIComponent(nodeId)}`);
    if (page.node !== nodeId || page.run !== run) return;
    showError($("inspector-error"), null);
    const views = found.executions.map(executionView);
    if (!views.length) views.push(el("p", { class: "muted" }, "Not executed (yet)."));
    $("executions").replaceChildren(...views);
    const target = conversationTarget(spec, nodeId, found.executions);
    if (target) await conversation.show(run.workflowId, target, { quiet });
    else conversation.hide();
  } catch (error) {
    showError($("inspector-error"), error);
  }
}

$("fork-here").addEventListener("click", async () => {
  const run = page.run;
  if (!run || !page.node) return;
  $("fork-result").textContent = "forking…";
  try {
    const started = await api("POST", `${workflowPath(run.workflowId)}/fork`, { json: { from_node: page.node } });
    $("fork-result").textContent = `started ${started.workflow_id}`;
    await loadRuns();
    await openRun(started.workflow_id);
  } catch (error) {
    $("fork-result").textContent = "";
    showError($("inspector-error"), error);
  }
});

// -- credentials and start-up ------------------------------------------------------

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
  await loadGraphFilter().catch((error) => showError($("list-error"), error));
  await loadRuns();
});

$("forget-key").addEventListener("click", () => {
  setApiKey("");
  showAuthState();
});

$("filter-graph").addEventListener("change", loadRuns);
$("filter-status").addEventListener("change", loadRuns);
$("refresh-runs").addEventListener("click", loadRuns);
window.addEventListener("hashchange", () => {
  const { run, node } = readHash();
  if (run && run !== page.run?.workflowId) openRun(run, node);
  else if (node && node !== page.node) inspect(node);
});

async function main() {
  page.config = await api("GET", "/ui/config.json");
  if (page.config.auth_disabled) $("auth-form").classList.add("auth-off");
  showAuthState();
  await loadGraphFilter().catch((error) => showError($("list-error"), error));
  await loadRuns();
  const { run, node } = readHash();
  if (run) await openRun(run, node);
  document.body.dataset.ready = "true";
}

main().catch((error) => showError($("list-error"), error));
