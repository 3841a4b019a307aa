// The run graph of the runs page: nodes sized to their texts, laid out by dagre
// (vendor/dagre.esm.js, @dagrejs/dagre: see vendor/dagre.VERSION), which places
// edge labels as nodes of their own so that no two labels overlap and none sits on
// a node. Each node shows its id, type, status, time, visits and, when known, its
// tokens and cost or its map's item counts. Nodes are keyboard buttons (Tab, Enter
// or Space). Text from runs is only ever inserted as text.

import { graphlib, layout } from "./vendor/dagre.esm.js";

const SVG = "http://www.w3.org/2000/svg";
const PAD_X = 12;
const LINE_H = 16;
const PAD_Y = 10;
const MIN_NODE_W = 140;
const MAX_LABEL = 36; // characters of an edge condition shown (the whole one in a tooltip)
const OPEN = new Set(["running", "paused", "queued"]);

export function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function seconds(ms) {
  if (!ms) return "0 s";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return minutes < 60 ? `${minutes} min ${Math.round((ms % 60_000) / 1000)} s` : `${(minutes / 60).toFixed(1)} h`;
}

/** "1,234 tokens · $0.0012" of a usage (or "" when the node had no LLM turn). */
export function usageText(usage) {
  if (!usage || !usage.llm_turns) return "";
  const cost = usage.cost_usd ? ` · $${usage.cost_usd.toFixed(usage.cost_usd < 0.01 ? 4 : 2)}` : "";
  return `${usage.tokens.toLocaleString()} tokens${cost}`;
}

/** The launch id a workstream node's report names ("ws-1 completed"). */
export function launchOf(report) {
  if (report?.node_type !== "workstream") return null;
  const words = String(report.output_summary ?? "").split(" ");
  return words.length === 2 ? words[0] : null;
}

/**
 * Each node's state from the run's detail: status, total time, visits, the child
 * state of a workstream node and its launch id. A node with no report is "pending"
 * while the run is open and "not run" once it has closed.
 */
export function nodeStates(detail) {
  const states = new Map();
  for (const report of detail.node_reports ?? []) {
    const state = states.get(report.node_id) ?? { status: null, duration: 0, visits: 0 };
    state.status = report.status;
    state.duration += report.duration_ms ?? 0;
    state.visits = Math.max(state.visits, report.visit ?? 1);
    if (report.child_state) state.child = report.child_state;
    state.launch = launchOf(report) ?? state.launch;
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

/** The lines of text a node shows, first line its id. */
function nodeLines(node, state, status, usage, items) {
  const lines = [node.id, node.label ? `${node.type} · ${node.label}` : node.type];
  const facts = [status];
  if (state?.visits && status !== "SKIPPED") facts.push(seconds(state.duration));
  if (state?.visits > 1) facts.push(`${state.visits.toLocaleString()} visits`);
  lines.push(facts.join(" · "));
  if (state?.child) lines.push(`child ${state.child}`);
  const spent = usageText(usage);
  if (spent) lines.push(spent);
  if (items) lines.push(`items ${items.done}/${items.total}${items.failed ? ` · ${items.failed} failed` : ""}`);
  return lines;
}

function edgeLabel(edge) {
  const parts = [];
  if (edge.from_port) parts.push(edge.from_port);
  if (edge.when) parts.push(edge.when.length > MAX_LABEL ? `${edge.when.slice(0, MAX_LABEL - 1)}…` : edge.when);
  if (edge.max_iterations) parts.push(`≤ ${edge.max_iterations}×`);
  return parts.join(" · ");
}

// Text widths as the browser draws them, from a hidden text element in the canvas.
function measurer(canvas) {
  const probe = svg("text", { class: "measure", x: -1000, y: -1000 });
  canvas.append(probe);
  return {
    width(text, cls) {
      probe.setAttribute("class", `measure ${cls}`);
      probe.textContent = text;
      return probe.getComputedTextLength();
    },
    done: () => probe.remove(),
  };
}

function layoutGraph(graph, boxes, labels) {
  const g = new graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "TB", nodesep: 36, ranksep: 48, edgesep: 18, marginx: 16, marginy: 16 });
  for (const node of graph.nodes) g.setNode(node.id, { width: boxes.get(node.id).width, height: boxes.get(node.id).height });
  graph.edges.forEach((edge, i) => {
    const label = labels[i];
    const size = label ? { width: label.width, height: label.height, labelpos: "c" } : {};
    if (g.hasNode(edge.from) && g.hasNode(edge.to)) g.setEdge(edge.from, edge.to, { ...size }, `e${i}`);
  });
  layout(g);
  return g;
}

function edgePath(points) {
  const [first, ...rest] = points;
  if (rest.length < 2) return `M${first.x},${first.y} ${rest.map((p) => `L${p.x},${p.y}`).join(" ")}`;
  // A smooth curve through the points dagre routed (midpoints as anchors).
  let d = `M${first.x},${first.y}`;
  for (let i = 0; i < rest.length - 1; i += 1) {
    const mid = { x: (rest[i].x + rest[i + 1].x) / 2, y: (rest[i].y + rest[i + 1].y) / 2 };
    d += ` Q${rest[i].x},${rest[i].y} ${mid.x},${mid.y}`;
  }
  const last = rest.at(-1);
  return `${d} L${last.x},${last.y}`;
}

function drawEdge(edge, i, g, label) {
  const laid = g.edge(edge.from, edge.to, `e${i}`);
  const group = svg("g", { class: "edge-group", "data-from": edge.from, "data-to": edge.to });
  if (!laid) return group;
  group.append(svg("path", { class: "edge", d: edgePath(laid.points), "marker-end": "url(#arrow)" }));
  if (label) {
    const box = svg("g", { class: "edge-label", transform: `translate(${laid.x - label.width / 2},${laid.y - label.height / 2})` });
    box.append(svg("rect", { width: label.width, height: label.height, rx: 4 }));
    box.append(svg("text", { x: label.width / 2, y: label.height / 2 + 4, "text-anchor": "middle" }, label.text));
    const full = [edge.from_port && `port ${edge.from_port}`, edge.when && `when ${edge.when}`].filter(Boolean);
    box.append(svg("title", {}, `${edge.from} → ${edge.to}: ${full.join(", ")}`));
    group.append(box);
  }
  return group;
}

function drawNode(node, place, box, status, selected) {
  const group = svg("g", {
    class: `node${selected ? " selected" : ""}`,
    "data-node-id": node.id,
    "data-status": status,
    transform: `translate(${place.x - box.width / 2},${place.y - box.height / 2})`,
    tabindex: 0,
    role: "button",
    "aria-label": `Node ${node.id}, ${node.type}, ${status}. ${box.lines.slice(2).join(". ")}`,
  });
  group.append(svg("rect", { width: box.width, height: box.height, rx: 8 }));
  const classes = ["node-name", "node-type", "node-detail node-status", "node-detail"];
  box.lines.forEach((line, n) => {
    let cls = classes[Math.min(n, 3)];
    if (line.startsWith("items ")) cls = "node-detail node-items";
    else if (line.includes("tokens")) cls = "node-detail node-usage";
    else if (line.startsWith("child ")) cls = "node-detail node-child";
    group.append(svg("text", { x: PAD_X, y: PAD_Y + LINE_H * n + 12, class: cls }, line));
  });
  group.append(svg("title", {}, node.label ? `${node.id}: ${node.label}` : node.id));
  return group;
}

/**
 * Draw `graph` with the run's state into `canvas` (an <svg>).
 *
 * @param {SVGSVGElement} canvas
 * @param {{graph, detail, usage, selected, onSelect}} view usage: GET /runs/{id}/usage
 */
export function renderGraph(canvas, { graph, detail, usage, selected, onSelect }) {
  const states = nodeStates(detail);
  const open = OPEN.has(detail.status);
  const measure = measurer(canvas);
  const boxes = new Map();
  for (const node of graph.nodes) {
    const state = states.get(node.id);
    const status = state?.status ?? (open ? "pending" : "not run");
    const spent = state?.launch ? usage?.workstreams?.[state.launch] : usage?.nodes?.[node.id];
    const lines = nodeLines(node, state, status, spent, usage?.items?.[node.id]);
    const widths = lines.map((line, n) => measure.width(line, n === 0 ? "node-name" : "node-detail"));
    const width = Math.max(MIN_NODE_W, Math.ceil(Math.max(...widths)) + 2 * PAD_X);
    boxes.set(node.id, { width, height: lines.length * LINE_H + 2 * PAD_Y, lines, status });
  }
  const labels = graph.edges.map((edge) => {
    const text = edgeLabel(edge);
    return text ? { text, width: Math.ceil(measure.width(text, "edge-label-text")) + 12, height: 18 } : null;
  });
  measure.done();
  const g = layoutGraph(graph, boxes, labels);
  const { width = 200, height = 100 } = g.graph();
  canvas.setAttribute("width", Math.ceil(width));
  canvas.setAttribute("height", Math.ceil(height));
  canvas.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`);
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }));
  defs.append(marker);
  const parts = [defs];
  graph.edges.forEach((edge, i) => parts.push(drawEdge(edge, i, g, labels[i])));
  for (const node of graph.nodes) {
    const box = boxes.get(node.id);
    const group = drawNode(node, g.node(node.id), box, box.status, selected === node.id);
    group.addEventListener("click", () => onSelect(node.id));
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        onSelect(node.id);
      }
    });
    parts.push(group);
  }
  const focused = document.activeElement?.closest?.("g.node")?.dataset.nodeId;
  canvas.replaceChildren(...parts);
  // A redraw (the live poll) keeps the keyboard where it was.
  if (focused) canvas.querySelector(`g.node[data-node-id="${CSS.escape(focused)}"]`)?.focus();
}
