// The runs page's node inspector: one node's executions (status, time, tokens and
// cost, the envelope it received and the one it produced, the items that failed),
// the conversation its agent's model was given (run_conversation.js), and "fork
// from here" with the state edits the fork starts with (a JSON object: node id →
// output, or "context"), checked before it is sent. Text from runs is only ever
// inserted as text.

import { api, workflowPath } from "./api.js";
import { el, showError } from "./nav.js";
import { ConversationSection } from "./run_conversation.js";
import { seconds, usageText } from "./graph_view.js";

const $ = (id) => document.getElementById(id);

function json(value) {
  return value === undefined || value === null ? "—" : JSON.stringify(value, null, 2);
}

function executionView(execution) {
  const box = el("section", { class: "execution", "data-visit": String(execution.visit) });
  const head = `visit ${execution.visit} · attempt ${execution.attempt} · ${execution.status} · ${seconds(execution.duration_ms)}`;
  box.append(el("h3", {}, head));
  if (execution.error) box.append(el("p", { class: "inline-error execution-error" }, execution.error));
  if (execution.output_summary && !execution.output) {
    box.append(el("p", { class: "execution-summary" }, execution.output_summary));
  }
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
  // Shared state and context the node wrote (docs/graphs/index.md#shared-state).
  for (const [label, cls, value] of [["State written", "state-updates", execution.state_updates], ["Context written", "context-updates", execution.context_updates]]) {
    if (!value) continue;
    box.append(el("h4", {}, label), el("pre", { class: cls, tabindex: "0" }, json(value)));
  }
  for (const [label, cls, value] of [["Envelope before", "envelope-before", execution.input], ["Envelope after", "envelope-after", execution.output]]) {
    const fold = el("details", { class: "envelope", open: "" });
    fold.append(el("summary", {}, label), el("pre", { class: cls, tabindex: "0" }, json(value)));
    box.append(fold);
  }
  return box;
}

// Whose conversation the inspector shows: an agent node's own, or the agent of
// the workstream a workstream node launched.
function conversationTarget(spec, nodeId, executions) {
  if (spec?.type === "agent") return { node: nodeId, workstream: "main" };
  if (spec?.type !== "workstream") return null;
  const last = executions.at(-1);
  const launch = last?.launch_id ?? last?.output?.payload?.launch_id;
  return typeof launch === "string" && launch ? { node: null, workstream: launch } : null;
}

/** The state edits a fork from `nodeId` starts with: its inputs' recorded outputs. */
async function forkDraft(workflowId, graph, nodeId) {
  const draft = {};
  const sources = [...new Set(graph.edges.filter((e) => e.to === nodeId).map((e) => e.from))];
  await Promise.all(
    sources.map(async (source) => {
      try {
        const found = await api("GET", `${workflowPath(workflowId)}/nodes/${encodeURIComponent(source)}`);
        const payload = found.executions.at(-1)?.output?.payload;
        if (payload !== undefined) draft[source] = payload;
      } catch {
        // A source never recorded (skipped, not run): nothing to edit.
      }
    }),
  );
  return draft;
}

/** The state edits typed, or an error message saying what is wrong with them. */
export function parseState(text) {
  if (!text.trim()) return { state: {} };
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { error: `The state is not valid JSON: ${error.message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { error: "The state must be a JSON object: node id → output, or \"context\"." };
  }
  return { state: value };
}

export class Inspector {
  /** @param {{onClose: () => void, onForked: (workflowId: string) => void}} hooks */
  constructor(hooks) {
    this.hooks = hooks;
    this.conversation = new ConversationSection($("conversation"));
    this.run = null; // {workflowId, graph}
    this.node = null;
    $("inspector-close").addEventListener("click", () => this.hooks.onClose());
    $("fork-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.fork();
    });
    $("fork-state").addEventListener("input", () => this.checkState());
    $("fork-open").addEventListener("toggle", () => {
      if ($("fork-open").open && !$("fork-state").dataset.node) this.fillDraft();
    });
  }

  hide() {
    this.node = null;
    $("inspector").hidden = true;
    $("graph-hint").hidden = false;
    this.conversation.hide();
  }

  /** Show node `nodeId` of `run`; `quiet` (the live poll) keeps what the user typed. */
  async show(run, nodeId, { quiet = false, usage = null } = {}) {
    const changed = this.node !== nodeId || this.run?.workflowId !== run.workflowId;
    this.run = run;
    this.node = nodeId;
    const spec = run.graph.nodes.find((n) => n.id === nodeId);
    $("inspector").hidden = false;
    $("graph-hint").hidden = true;
    $("inspector-title").textContent = `Node ${nodeId}`;
    $("inspector-meta").textContent = spec ? `${spec.type}${spec.label ? ` — ${spec.label}` : ""}` : "";
    if (changed) this.resetFork();
    this.showUsage(usage);
    try {
      const found = await api("GET", `${workflowPath(run.workflowId)}/nodes/${encodeURIComponent(nodeId)}`);
      if (this.node !== nodeId || this.run !== run) return;
      showError($("inspector-error"), null);
      const views = found.executions.map(executionView);
      if (!views.length) views.push(el("p", { class: "muted" }, "Not executed (yet)."));
      $("executions").replaceChildren(...views);
      const target = conversationTarget(spec, nodeId, found.executions);
      if (target) await this.conversation.show(run.workflowId, target, { quiet: quiet && !changed });
      else this.conversation.hide();
    } catch (error) {
      showError($("inspector-error"), error);
    }
  }

  showUsage(usage) {
    const text = usageText(usage);
    const line = $("inspector-usage");
    line.textContent = text ? `${text} · ${usage.llm_turns} LLM turn${usage.llm_turns === 1 ? "" : "s"} · model time ${seconds(usage.llm_ms)}` : "";
    line.hidden = !text;
  }

  resetFork() {
    $("fork-open").open = false;
    $("fork-state").value = "";
    delete $("fork-state").dataset.node;
    $("fork-result").textContent = "";
    showError($("fork-error"), null);
    $("fork-state").removeAttribute("aria-invalid");
  }

  async fillDraft() {
    const { workflowId, graph } = this.run;
    const nodeId = this.node;
    $("fork-state").dataset.node = nodeId;
    const draft = await forkDraft(workflowId, graph, nodeId);
    if (this.node !== nodeId || $("fork-state").value.trim()) return; // typed meanwhile
    $("fork-state").value = JSON.stringify(draft, null, 2);
    this.checkState();
  }

  checkState() {
    const { error } = parseState($("fork-state").value);
    showError($("fork-error"), error ?? null);
    if (error) $("fork-state").setAttribute("aria-invalid", "true");
    else $("fork-state").removeAttribute("aria-invalid");
    $("fork-submit").disabled = Boolean(error);
    return !error;
  }

  async fork() {
    const run = this.run;
    if (!run || !this.node || !this.checkState()) return;
    const { state } = parseState($("fork-state").value);
    $("fork-result").textContent = "forking…";
    try {
      const body = { from_node: this.node, state };
      const started = await api("POST", `${workflowPath(run.workflowId)}/fork`, { json: body });
      $("fork-result").textContent = `started ${started.workflow_id}`;
      this.hooks.onForked(started.workflow_id);
    } catch (error) {
      $("fork-result").textContent = "";
      showError($("fork-error"), error);
    }
  }
}
