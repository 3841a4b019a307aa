// The runs page's run list: every run of the tenant, newest first, a page at a
// time (GET /runs with limit and offset), searched by id, graph, status,
// conversation and creation time. The list stays live: while a row shows a run
// that has not ended, the page reads it again every few seconds, and the run view
// tells the list each status it reads, so a row never says "running" for a run
// the view shows completed. Text from runs is only ever inserted as text.

import { api } from "./api.js";
import { el, showError, when } from "./nav.js";
import { seconds } from "./graph_view.js";

const $ = (id) => document.getElementById(id);
const OPEN = new Set(["running", "paused", "queued"]);
const LIVE_MS = 3000;
const TYPE_DELAY_MS = 300;

/** A run id cell: the id on one line (cut with an ellipsis), its whole in a tooltip, a copy button. */
export function idCell(workflowId, href) {
  const cell = el("td", { class: "run-id-cell" });
  const box = el("span", { class: "id-box" });
  const link = el("a", { class: "run-id", href, title: workflowId }, workflowId);
  const copy = el("button", { type: "button", class: "copy-id", "aria-label": `Copy run id ${workflowId}`, title: "Copy the run id" }, "Copy");
  copy.addEventListener("click", async (event) => {
    event.stopPropagation();
    try {
      await navigator.clipboard.writeText(workflowId);
      copy.textContent = "Copied";
    } catch {
      // No clipboard (plain http, a denied permission): select the id to copy by hand.
      getSelection()?.selectAllChildren(link);
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  box.append(link, copy);
  cell.append(box);
  return cell;
}

function duration(run) {
  const start = Date.parse(run.created_at);
  const end = OPEN.has(run.status) ? Date.now() : Date.parse(run.updated_at);
  return Number.isFinite(start) && Number.isFinite(end) && end >= start ? seconds(end - start) : "—";
}

export class RunList {
  /** @param {(workflowId: string) => void} onOpen */
  constructor(onOpen) {
    this.onOpen = onOpen;
    this.offset = 0;
    this.request = 0;
    this.timer = null;
    this.typing = null;
    this.page = null; // the last answer
    this.picked = []; // up to two workflow ids to compare, oldest pick first
    const form = $("run-filters");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.reload();
    });
    for (const id of ["filter-graph", "filter-status", "filter-after", "filter-before", "page-size"]) {
      $(id).addEventListener("change", () => this.reload());
    }
    for (const id of ["filter-id", "filter-conversation"]) {
      $(id).addEventListener("input", () => {
        clearTimeout(this.typing);
        this.typing = setTimeout(() => this.reload(), TYPE_DELAY_MS);
      });
    }
    $("filter-reset").addEventListener("click", () => {
      form.reset();
      this.reload();
    });
    $("page-prev").addEventListener("click", () => this.turn(-1));
    $("page-next").addEventListener("click", () => this.turn(1));
  }

  get limit() {
    return Number.parseInt($("page-size").value, 10) || 25;
  }

  async loadGraphs() {
    const select = $("filter-graph");
    const chosen = select.value;
    const { graphs } = await api("GET", "/graphs");
    select.replaceChildren(el("option", { value: "" }, "all graphs"));
    for (const graph of graphs) select.append(el("option", { value: graph.name }, graph.name));
    select.value = chosen;
  }

  params() {
    const params = new URLSearchParams({ limit: String(this.limit), offset: String(this.offset) });
    const text = { id: $("filter-id").value.trim(), conversation: $("filter-conversation").value.trim() };
    for (const [key, value] of Object.entries(text)) if (value) params.set(key, value);
    if ($("filter-graph").value) params.set("graph", $("filter-graph").value);
    if ($("filter-status").value) params.set("status", $("filter-status").value);
    // datetime-local is the user's local time: sent with its offset (ISO 8601, UTC).
    for (const [id, key] of [["filter-after", "created_after"], ["filter-before", "created_before"]]) {
      const value = $(id).value;
      if (value) params.set(key, new Date(value).toISOString());
    }
    return params;
  }

  reload() {
    this.offset = 0;
    return this.load();
  }

  turn(step) {
    this.offset = Math.max(0, this.offset + step * this.limit);
    return this.load();
  }

  // Filters change one at a time; only the latest request may fill the table (an
  // earlier, slower answer would show the list of a filter no longer chosen).
  async load({ quiet = false } = {}) {
    const mine = ++this.request;
    clearTimeout(this.timer);
    try {
      const page = await api("GET", `/runs?${this.params()}`);
      if (mine !== this.request) return;
      showError($("list-error"), null);
      this.page = page;
      this.render(page);
    } catch (error) {
      if (mine !== this.request) return;
      if (!quiet) showError($("list-error"), error);
    }
    if (mine === this.request && this.page?.runs.some((run) => OPEN.has(run.status))) {
      this.timer = setTimeout(() => this.load({ quiet: true }), LIVE_MS);
    }
  }

  render(page) {
    const { runs, total, offset } = page;
    const first = total ? offset + 1 : 0;
    $("run-count").textContent = `${first.toLocaleString()}–${(offset + runs.length).toLocaleString()} of ${total.toLocaleString()} run${total === 1 ? "" : "s"}`;
    $("page-prev").disabled = offset === 0;
    $("page-next").disabled = offset + runs.length >= total;
    $("page-number").textContent = `page ${Math.floor(offset / this.limit) + 1} of ${Math.max(1, Math.ceil(total / this.limit))}`;
    const body = $("run-table").tBodies[0];
    body.replaceChildren(...runs.map((run) => this.row(run)));
    $("run-empty").hidden = runs.length > 0;
  }

  row(run) {
    const href = `#run=${encodeURIComponent(run.workflow_id)}`;
    const row = el("tr", { "data-workflow-id": run.workflow_id });
    const status = el("td", { class: "status-cell" });
    status.append(el("span", { class: "status-badge", "data-status": run.status }, run.status));
    const conversation = el("td", { class: "col-conversation" });
    if (run.conversation_id) {
      const pick = el("button", { type: "button", class: "link-button", title: "Show this conversation's runs" }, run.conversation_id);
      pick.addEventListener("click", (event) => {
        event.stopPropagation();
        $("filter-conversation").value = run.conversation_id;
        this.reload();
      });
      conversation.append(pick);
    } else conversation.textContent = "—";
    row.append(
      this.pickCell(run.workflow_id),
      idCell(run.workflow_id, href),
      el("td", { class: "col-graph" }, run.graph_name),
      status,
      conversation,
      el("td", { class: "col-started" }, when(run.created_at)),
      el("td", { class: "col-duration" }, duration(run)),
    );
    // The whole row opens the run; its id link is the keyboard's way in.
    row.addEventListener("click", (event) => {
      if (event.target.closest("a, button")) return;
      this.onOpen(run.workflow_id);
    });
    return row;
  }

  /** A checkbox that picks the run for the side-by-side compare (two at most). */
  pickCell(workflowId) {
    const cell = el("td", { class: "col-pick" });
    const box = el("input", { type: "checkbox", "aria-label": `Pick ${workflowId} to compare` });
    box.checked = this.picked.includes(workflowId);
    box.addEventListener("click", (event) => event.stopPropagation());
    box.addEventListener("change", () => {
      this.picked = this.picked.filter((id) => id !== workflowId);
      if (box.checked) this.picked.push(workflowId);
      // A third pick replaces the oldest one: a compare has two sides.
      while (this.picked.length > 2) this.picked.shift();
      for (const other of $("run-table").querySelectorAll("tr[data-workflow-id]")) {
        const input = other.querySelector(".col-pick input");
        if (input) input.checked = this.picked.includes(other.dataset.workflowId);
      }
      this.showCompare();
    });
    cell.append(box);
    return cell;
  }

  showCompare() {
    const link = $("compare-picked");
    const ready = this.picked.length === 2;
    link.textContent = ready ? "Compare the two picked runs" : `Compare ${this.picked.length} of 2`;
    link.setAttribute("aria-disabled", String(!ready));
    if (ready) {
      const [a, b] = this.picked;
      link.href = `/ui/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
    } else link.removeAttribute("href");
  }

  /** The run view read this status: the row says the same. */
  sawStatus(workflowId, status) {
    const run = this.page?.runs.find((r) => r.workflow_id === workflowId);
    if (!run || run.status === status) return;
    run.status = status;
    const badge = $("run-table").querySelector(`tr[data-workflow-id="${CSS.escape(workflowId)}"] .status-badge`);
    if (badge) {
      badge.textContent = status;
      badge.dataset.status = status;
    }
  }

  stop() {
    clearTimeout(this.timer);
    this.request += 1;
  }
}
