// The evaluations page (/ui/evaluations, /ui/evaluations#id=<evaluation>): the tenant's
// evaluations (GET /evaluations) and one evaluation's summary and per-run table
// (GET /evaluations/{id}), refreshed while it runs; docs/replay-and-compare.md.
// Text from runs is only ever inserted as text, never as HTML.

import { api } from "./api.js";
import { el, setupHeader, showError, when } from "./nav.js";

const $ = (id) => document.getElementById(id);
let shown = null;
let timer = null;

function selectedId() {
  const match = /(?:^|[#&])id=([^&]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function runLink(workflowId) {
  if (!workflowId) return el("span", { class: "muted" }, "—");
  const link = el("a", { href: `/ui/runs#run=${encodeURIComponent(workflowId)}` });
  link.append(el("code", {}, workflowId));
  return link;
}

async function loadList() {
  try {
    const body = await api("GET", "/evaluations?limit=100");
    const tbody = $("eval-list").querySelector("tbody");
    tbody.replaceChildren();
    for (const item of body.evaluations) {
      const row = el("tr", { class: item.evaluation_id === shown ? "selected" : null });
      const link = el("a", { href: `#id=${encodeURIComponent(item.evaluation_id)}` });
      link.append(el("code", {}, item.evaluation_id));
      row.append(
        el("td"), el("td", {}, item.status), el("td", {}, item.graph || "—"),
        el("td", {}, `${item.done} / ${item.runs}`), el("td", {}, when(item.created_at)),
      );
      row.firstChild.append(link);
      tbody.append(row);
    }
    $("eval-list").hidden = body.evaluations.length === 0;
    $("eval-empty").hidden = body.evaluations.length > 0;
    showError($("eval-error"), null);
  } catch (error) {
    showError($("eval-error"), error);
  }
}

function figure(list, name, value) {
  const item = el("div");
  item.append(el("dt", {}, name), el("dd", {}, value));
  list.append(item);
}

function spend(totals) {
  const cost = totals.cost ? ` · $${totals.cost.toFixed(4)}` : "";
  return `${totals.tokens.toLocaleString()} tokens${cost} · ${Math.round(totals.duration_ms)} ms`;
}

function signed(value, digits = 0) {
  const text = digits ? value.toFixed(digits) : Math.round(value).toLocaleString();
  return value > 0 ? `+${text}` : text;
}

function renderSummary(evaluation) {
  const s = evaluation.summary;
  const list = $("eval-summary");
  list.replaceChildren();
  figure(list, "Runs", String(s.runs));
  figure(list, "Same", String(s.same));
  figure(list, "Changed", String(s.changed));
  figure(list, "Failed", String(s.failed));
  if (s.pending) figure(list, "Pending", String(s.pending));
  figure(list, "Sources", spend(s.source));
  figure(list, "Candidates", spend(s.candidate));
  figure(
    list, "Delta",
    `${signed(s.delta.tokens)} tokens · $${signed(s.delta.cost, 4)} · ${signed(s.delta.duration_ms)} ms`,
  );
  const checks = $("eval-checks").querySelector("tbody");
  checks.replaceChildren();
  for (const [name, counts] of Object.entries(s.checks)) {
    const row = el("tr");
    row.append(el("td", {}, name), el("td", {}, String(counts.passed)), el("td", {}, String(counts.failed)));
    checks.append(row);
  }
  $("eval-checks").hidden = Object.keys(s.checks).length === 0;
}

function renderRuns(evaluation) {
  const tbody = $("eval-runs").querySelector("tbody");
  tbody.replaceChildren();
  for (const run of evaluation.runs) {
    const row = el("tr");
    const outcome = el("td", { class: `outcome-${run.outcome}` }, run.outcome);
    if (run.error) outcome.title = run.error;
    const nodes = [...run.changed_nodes];
    for (const id of run.only_source) nodes.push(`−${id}`);
    for (const id of run.only_candidate) nodes.push(`+${id}`);
    const checks = el("td");
    for (const [name, result] of Object.entries(run.checks)) {
      const mark = el("span", { class: result.passed ? "check-pass" : "check-fail" },
        `${result.passed ? "✓" : "✗"} ${name} `);
      if (result.error) mark.title = result.error;
      checks.append(mark);
    }
    const compare = el("td");
    if (run.fork_id) {
      compare.append(el("a", {
        href: `/ui/compare?a=${encodeURIComponent(run.source_id)}&b=${encodeURIComponent(run.fork_id)}`,
      }, "compare"));
    }
    row.append(el("td"), el("td"), outcome, el("td", {}, nodes.join(", ") || "—"), checks, compare);
    row.children[0].append(runLink(run.source_id));
    row.children[1].append(runLink(run.fork_id));
    tbody.append(row);
  }
}

async function loadDetail() {
  clearTimeout(timer);
  shown = selectedId();
  $("eval-detail").hidden = !shown;
  if (!shown) return;
  try {
    const evaluation = await api("GET", `/evaluations/${encodeURIComponent(shown)}`);
    $("eval-detail-title").textContent = `Evaluation ${evaluation.evaluation_id}`;
    $("eval-status").textContent = evaluation.status;
    const s = evaluation.summary;
    $("eval-progress").textContent =
      `${s.runs - s.pending} of ${s.runs} runs done` + (evaluation.error ? ` · ${evaluation.error}` : "");
    $("eval-cancel").hidden = evaluation.status !== "running";
    renderSummary(evaluation);
    renderRuns(evaluation);
    showError($("eval-error"), null);
    if (evaluation.status === "running") timer = setTimeout(refresh, 2000);
  } catch (error) {
    showError($("eval-error"), error);
  }
}

async function refresh() {
  await loadList();
  await loadDetail();
}

async function cancel() {
  if (!shown) return;
  try {
    await api("POST", `/evaluations/${encodeURIComponent(shown)}/cancel`);
    await refresh();
  } catch (error) {
    showError($("eval-error"), error);
  }
}

async function main() {
  await setupHeader(refresh);
  $("eval-refresh").addEventListener("click", refresh);
  $("eval-cancel").addEventListener("click", cancel);
  window.addEventListener("hashchange", refresh);
  document.body.dataset.ready = "true";
  await refresh();
}

main();
