// The compare page (/ui/compare?a=<run>&b=<run>): two related runs side by side from
// GET /runs/{a}/compare/{b} (docs/replay-and-compare.md). Per node both sides'
// status, duration, tokens, cost and tool calls, a differing output highlighted, the
// nodes only one side executed, the final outputs with their diff, and the totals.
// Text from runs is only ever inserted as text, never as HTML.

import { api, workflowPath } from "./api.js";
import { el, setupHeader, showError } from "./nav.js";

const $ = (id) => document.getElementById(id);

function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

function runLink(workflowId) {
  return el("a", { href: `/ui/runs#run=${encodeURIComponent(workflowId)}` }, workflowId);
}

function figures(side) {
  const box = el("div", { class: "figures" });
  if (!side) {
    box.append(el("span", { class: "muted" }, "did not run"));
    return box;
  }
  box.append(el("span", { class: "status" }, side.status));
  const parts = [`${Math.round(side.duration_ms)} ms`];
  if (side.tokens) parts.push(`${side.tokens.toLocaleString()} tokens`);
  if (side.cost) parts.push(`$${side.cost.toFixed(4)}`);
  if (side.tool_calls) parts.push(`${side.tool_calls} tool call${side.tool_calls === 1 ? "" : "s"}`);
  if (side.visits > 1) parts.push(`visit ${side.visits}`);
  box.append(el("span", { class: "muted" }, parts.join(" · ")));
  return box;
}

function outputCell(a, b, same) {
  const cell = el("td");
  if (same) {
    cell.append(el("span", { class: "same" }, "same"));
    cell.append(el("pre", {}, pretty(a?.output)));
    return cell;
  }
  cell.append(el("span", { class: "differs-label" }, a && b ? "differs" : "only one side"));
  if (a) cell.append(el("pre", { "data-side": "a" }, `A: ${pretty(a.output)}`));
  if (b) cell.append(el("pre", { "data-side": "b" }, `B: ${pretty(b.output)}`));
  return cell;
}

function nodeRow(nodeId, a, b, same, kind) {
  const row = el("tr", { "data-node": nodeId, class: kind });
  row.append(el("th", { scope: "row" }, nodeId));
  for (const side of [a, b]) {
    const cell = el("td");
    cell.append(figures(side));
    row.append(cell);
  }
  row.append(outputCell(a, b, same));
  return row;
}

function renderNodes(result) {
  const body = $("nodes").querySelector("tbody");
  body.replaceChildren();
  for (const node of result.nodes) {
    body.append(nodeRow(node.node_id, node.a, node.b, node.same_output, node.same_output ? "" : "differs"));
  }
  for (const only of result.only_a) body.append(nodeRow(only.node_id, only.figures, null, false, "only-one"));
  for (const only of result.only_b) body.append(nodeRow(only.node_id, null, only.figures, false, "only-one"));
}

function renderTotals(totals) {
  const body = $("totals").querySelector("tbody");
  body.replaceChildren();
  const rows = [
    ["Tokens", (t) => t.tokens.toLocaleString()],
    ["Cost", (t) => `$${t.cost.toFixed(4)}`],
    ["Tool calls", (t) => String(t.tool_calls)],
    ["Duration", (t) => `${(t.duration_ms / 1000).toFixed(2)} s`],
    ["Nodes run", (t) => String(t.nodes)],
  ];
  for (const [label, show] of rows) {
    const row = el("tr", { "data-total": label.toLowerCase().replace(/\s+/g, "-") });
    row.append(el("th", { scope: "row" }, label));
    for (const side of ["a", "b", "delta"]) row.append(el("td", {}, show(totals[side])));
    body.append(row);
  }
}

function renderOutput(output) {
  $("output-same").textContent = output.same ? "The final outputs are the same." : "The final outputs differ.";
  $("output-same").className = `verdict ${output.same ? "same" : "differs-label"}`;
  $("output-a").textContent = pretty(output.a);
  $("output-b").textContent = pretty(output.b);
  const body = $("output-diff").querySelector("tbody");
  body.replaceChildren();
  for (const entry of output.diff) {
    const row = el("tr", { class: "differs" });
    row.append(el("th", { scope: "row" }, entry.path), el("td", {}, entry.op));
    for (const value of [entry.a, entry.b]) {
      const cell = el("td");
      cell.append(el("pre", {}, pretty(value)));
      row.append(cell);
    }
    body.append(row);
  }
  $("output-diff").hidden = output.diff.length === 0;
  $("diff-truncated").hidden = !output.diff_truncated;
}

function renderSides(result) {
  const dl = $("sides");
  dl.replaceChildren();
  for (const [label, side] of [["A", result.a], ["B", result.b]]) {
    const dd = el("dd");
    dd.append(runLink(side.workflow_id), ` — graph ${side.graph_name ?? "?"}, ${side.status ?? "?"}`);
    dl.append(el("dt", {}, label), dd);
  }
}

async function compare(a, b) {
  showError($("compare-error"), null);
  $("compare-result").hidden = true;
  if (!a || !b) return;
  try {
    const result = await api("GET", `${workflowPath(a)}/compare/${encodeURIComponent(b)}`);
    $("relation").textContent = `Related: ${result.relation}.`;
    renderSides(result);
    renderTotals(result.totals);
    renderOutput(result.output);
    renderNodes(result);
    $("compare-result").hidden = false;
    document.body.dataset.compared = `${a}\u0000${b}`;
  } catch (error) {
    showError($("compare-error"), error);
  }
}

function fromUrl() {
  const params = new URLSearchParams(location.search);
  return { a: params.get("a") || "", b: params.get("b") || "" };
}

async function main() {
  const { a, b } = fromUrl();
  $("run-a").value = a;
  $("run-b").value = b;
  $("compare-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const next = { a: $("run-a").value.trim(), b: $("run-b").value.trim() };
    history.replaceState(null, "", `?${new URLSearchParams(next)}`);
    await compare(next.a, next.b);
  });
  await setupHeader(async () => compare($("run-a").value.trim(), $("run-b").value.trim()));
  document.body.dataset.ready = "true";
  await compare(a, b);
}

main();
