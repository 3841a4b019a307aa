// The runs page (/ui/runs): the run list (run_list.js), then one run: its graph
// with every node's state, time, tokens and cost (graph_view.js) and the node
// inspector (inspector.js). The run and node shown are kept in the URL
// (#run=<workflowId>&node=<nodeId>); "All runs" goes back to the list. A run that
// has not ended is read again every POLL_MS. See docs/streaming/web-page.md, "Runs page".

import { api, workflowPath } from "./api.js";
import { setupHeader, showError, when } from "./nav.js";
import { launchOf, renderGraph, seconds } from "./graph_view.js";
import { Inspector } from "./inspector.js";
import { RunList } from "./run_list.js";

const $ = (id) => document.getElementById(id);
const OPEN = new Set(["running", "paused", "queued"]);
const POLL_MS = 1500;

const page = {
  run: null, // {workflowId, detail, graph, usage}
  graphs: new Map(), // workflow id -> graph spec (a run's graph never changes)
  poll: null,
};

const list = new RunList((workflowId) => openRun(workflowId));
const inspector = new Inspector({
  onClose: () => closeNode(),
  onForked: (workflowId) => {
    const source = page.run?.workflowId;
    const node = inspector.node;
    openRun(workflowId).then(() => {
      $("run-notice").textContent = `Forked from ${source} at node ${node}.`;
      $("run-notice").hidden = false;
    });
  },
});

// -- the URL ------------------------------------------------------------------------

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { run: params.get("run"), node: params.get("node") };
}

function writeHash(run, node) {
  const params = new URLSearchParams();
  if (run) params.set("run", run);
  if (node) params.set("node", node);
  const hash = params.toString() ? `#${params}` : "";
  if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname);
}

// -- the run ----------------------------------------------------------------------------

function renderHead() {
  const { detail, workflowId, usage } = page.run;
  const title = $("run-title");
  title.textContent = workflowId;
  title.title = workflowId;
  const badge = $("run-status");
  badge.textContent = detail.status;
  badge.dataset.status = detail.status;
  showError($("run-error"), detail.error || null);
  const started = Date.parse(detail.created_at);
  const ended = detail.closed_at ? Date.parse(detail.closed_at) : OPEN.has(detail.status) ? Date.now() : Date.parse(detail.updated_at);
  const facts = [
    ["Graph", detail.graph_name ?? "—"],
    ["Started", when(detail.created_at)],
    ["Duration", Number.isFinite(started) && Number.isFinite(ended) ? seconds(Math.max(0, ended - started)) : "—"],
    ["Tokens", usage?.total.llm_turns ? usage.total.tokens.toLocaleString() : "0"],
    ["Cost", `$${(usage?.total.cost_usd ?? 0).toFixed(4)}`],
    ["LLM turns", String(usage?.total.llm_turns ?? 0)],
  ];
  const counts = Object.entries(detail.node_counts ?? {}).map(([s, n]) => `${n} ${s.toLowerCase()}`);
  if (counts.length) facts.push(["Nodes", counts.join(", ")]);
  const history = detail.history;
  if (history?.events != null) {
    facts.push(["History", `${history.events.toLocaleString()} events, ${(history.bytes / 1024).toFixed(1)} KiB (${(history.used * 100).toFixed(2)} % of the limit)`]);
  }
  if (history?.generations > 1) facts.push(["Generations", String(history.generations)]);
  const dl = $("run-facts");
  dl.replaceChildren();
  for (const [term, value] of facts) {
    const item = document.createElement("div");
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = term;
    dd.textContent = value;
    dd.dataset.fact = term.toLowerCase().replace(/\s+/g, "-");
    item.append(dt, dd);
    dl.append(item);
  }
  $("run-conversation").href = detail.run_id ? `/ui/#run=${workflowId}/${detail.run_id}` : "/ui/";
  // A fork: a link to compare it with its source (compare.html; docs/replay-and-compare.md).
  const source = detail.forked_from?.workflow_id;
  if (source) {
    const item = document.createElement("div");
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    const link = document.createElement("a");
    dt.textContent = "Forked from";
    dd.dataset.fact = "forked-from";
    link.href = `/ui/compare?${new URLSearchParams({ a: source, b: workflowId })}`;
    link.textContent = `${source} (compare)`;
    dd.append(link);
    item.append(dt, dd);
    dl.append(item);
  }
}

function draw() {
  const run = page.run;
  renderGraph($("run-graph"), {
    graph: run.graph,
    detail: run.detail,
    usage: run.usage,
    selected: inspector.node,
    onSelect: (nodeId) => inspect(nodeId),
  });
}

async function refreshRun() {
  const run = page.run;
  if (!run) return;
  const [detail, usage] = await Promise.all([
    api("GET", workflowPath(run.workflowId)),
    api("GET", `${workflowPath(run.workflowId)}/usage`).catch(() => null),
  ]);
  if (page.run !== run) return; // another run was opened meanwhile
  run.detail = detail;
  run.usage = usage;
  list.sawStatus(run.workflowId, detail.status);
  renderHead();
  draw();
  document.body.dataset.runStatus = detail.status;
  if (!OPEN.has(detail.status)) stopPolling();
}

function stopPolling() {
  if (page.poll) clearInterval(page.poll);
  page.poll = null;
}

function showList() {
  stopPolling();
  page.run = null;
  inspector.hide();
  writeHash(null, null);
  $("run-view").hidden = true;
  $("list-view").hidden = false;
  document.title = "Spindle — runs";
  list.load();
}

async function openRun(workflowId, node = null) {
  stopPolling();
  list.stop();
  page.run = { workflowId, detail: null, graph: null, usage: null };
  inspector.hide();
  writeHash(workflowId, null);
  $("list-view").hidden = true;
  $("run-view").hidden = false;
  $("run-notice").hidden = true;
  $("run-title").textContent = workflowId;
  document.title = `Spindle — run ${workflowId}`;
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
        if (inspector.node) inspect(inspector.node, { quiet: true }).catch(() => {});
      }, POLL_MS);
    }
  } catch (error) {
    showError($("run-error"), error);
  }
}

// -- the inspector ------------------------------------------------------------------------

function nodeUsage(nodeId) {
  const { usage, detail } = page.run;
  const report = (detail.node_reports ?? []).findLast((r) => r.node_id === nodeId);
  const launch = launchOf(report);
  return launch ? usage?.workstreams?.[launch] : usage?.nodes?.[nodeId];
}

async function inspect(nodeId, { quiet = false } = {}) {
  const run = page.run;
  if (!run?.graph) return;
  writeHash(run.workflowId, nodeId);
  const changed = inspector.node !== nodeId;
  const shown = inspector.show(run, nodeId, { quiet, usage: nodeUsage(nodeId) });
  if (changed) {
    draw(); // the selection
    // Stacked under the graph (narrow screens): bring the inspector into view.
    if (!quiet && matchMedia("(max-width: 1100px)").matches) $("inspector").scrollIntoView({ block: "start" });
  }
  await shown;
}

function closeNode() {
  const node = inspector.node;
  inspector.hide();
  if (page.run) {
    writeHash(page.run.workflowId, null);
    draw();
    $("run-graph").querySelector(`g.node[data-node-id="${CSS.escape(node ?? "")}"]`)?.focus();
  }
}

// -- start-up ------------------------------------------------------------------------------

$("back-to-list").addEventListener("click", () => showList());
$("copy-run-id").addEventListener("click", () => navigator.clipboard?.writeText(page.run?.workflowId ?? "").catch(() => {}));
document.addEventListener("keydown", (event) => {
  // Esc in the fork editor (or any field) is the field's, not the inspector's.
  if (event.key === "Escape" && inspector.node && !event.target.closest?.("textarea, input, select")) closeNode();
});
window.addEventListener("hashchange", () => {
  const { run, node } = readHash();
  if (!run) showList();
  else if (run !== page.run?.workflowId) openRun(run, node);
  else if (node && node !== inspector.node) inspect(node);
});

async function refreshAll() {
  await list.loadGraphs().catch((error) => showError($("list-error"), error));
  if (page.run) await openRun(page.run.workflowId, inspector.node);
  else await list.reload();
}

async function main() {
  await setupHeader(refreshAll);
  const { run, node } = readHash();
  await list.loadGraphs().catch((error) => showError($("list-error"), error));
  if (run) await openRun(run, node);
  else await list.reload();
  document.body.dataset.ready = "true";
}

main().catch((error) => showError($("list-error"), error));

