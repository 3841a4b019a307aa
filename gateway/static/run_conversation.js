// The node inspector's Conversation section (the runs page): what an agent's
// model is given, from GET /runs/{workflowId}/conversation (docs/conversations.md,
// "See what the model is given"). Messages are shown in the order the model sees
// them: the system prompt, the summary of what was dropped (if any), then the
// messages still in its view; tool calls and tool results are folded. Pages of
// `data-page-size` messages (the section's attribute) are added by "Load more".
// Every text from the run is inserted as text, never as HTML.

import { api, ApiError, workflowPath } from "./api.js";

const DEFAULT_PAGE_SIZE = 50;

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A tool call as the API stores it: {id, name, arguments} (or OpenAI's
// {id, function: {name, arguments}}).
function callName(call) {
  return call?.name ?? call?.function?.name ?? "tool";
}

function callArguments(call) {
  const args = call?.arguments ?? call?.function?.arguments ?? {};
  if (typeof args === "string") {
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      return args;
    }
  }
  return JSON.stringify(args, null, 2);
}

function folded(cls, label, body, key) {
  const box = el("details", { class: cls, "data-key": key });
  box.append(el("summary", {}, label), body);
  return box;
}

export class ConversationSection {
  /** @param {HTMLElement} root the section (#conversation) with its children. */
  constructor(root) {
    this.root = root;
    this.list = root.querySelector(".conversation-messages");
    this.meta = root.querySelector(".conversation-meta");
    this.error = root.querySelector(".conversation-error");
    this.more = root.querySelector(".conversation-more");
    this.target = null; // {workflowId, node, workstream}
    this.calls = new Map(); // tool call id -> tool name, for the results' labels
    this.shown = 0;
    this.cursor = null;
    this.signature = "";
    this.request = 0;
    this.more.addEventListener("click", () => this.loadMore());
  }

  get pageSize() {
    const size = Number.parseInt(this.root.dataset.pageSize ?? "", 10);
    return Number.isInteger(size) && size > 0 ? Math.min(size, 500) : DEFAULT_PAGE_SIZE;
  }

  hide() {
    this.request += 1;
    this.target = null;
    this.root.hidden = true;
  }

  /**
   * Show the conversation of an agent node (`node`) or of a workstream's agent
   * (`workstream` = its launch id). `quiet` (the live poll) re-reads what is shown
   * and redraws only when it changed, keeping the pages loaded and the folds opened.
   */
  async show(workflowId, { node = null, workstream = "main" }, { quiet = false } = {}) {
    const same =
      this.target?.workflowId === workflowId &&
      this.target?.node === node &&
      this.target?.workstream === workstream;
    if (!same) quiet = false;
    this.target = { workflowId, node, workstream };
    this.root.hidden = false;
    const mine = ++this.request;
    const limit = quiet ? Math.min(Math.max(this.shown, this.pageSize), 500) : this.pageSize;
    let view;
    try {
      view = await this.fetch(0, limit);
    } catch (error) {
      if (mine !== this.request) return;
      this.showMissing(error);
      return;
    }
    if (mine !== this.request) return;
    const signature = JSON.stringify([view.total, view.dropped, view.tokens, view.summary, limit]);
    if (quiet && signature === this.signature) return;
    this.signature = signature;
    const open = new Set([...this.list.querySelectorAll("details[open]")].map((d) => d.dataset.key));
    this.calls.clear();
    this.shown = 0;
    this.list.replaceChildren();
    this.append(view, open);
  }

  async fetch(cursor, limit) {
    const { workflowId, node, workstream } = this.target;
    const params = new URLSearchParams({ workstream, cursor: String(cursor), limit: String(limit) });
    if (node) params.set("node", node);
    return api("GET", `${workflowPath(workflowId)}/conversation?${params}`);
  }

  async loadMore() {
    if (!this.target || this.cursor === null) return;
    const mine = ++this.request;
    this.more.disabled = true;
    try {
      const view = await this.fetch(Number(this.cursor), this.pageSize);
      if (mine !== this.request) return;
      this.append(view, new Set());
      // Keyboard users go on reading where the new page starts.
      this.list.children[this.shown - view.messages.length]?.focus();
    } catch (error) {
      if (mine === this.request) this.showError(error);
    } finally {
      this.more.disabled = false;
    }
  }

  showMissing(error) {
    this.list.replaceChildren();
    this.shown = 0;
    this.cursor = null;
    this.signature = "";
    this.more.hidden = true;
    if (error instanceof ApiError && error.status === 404) {
      // No turn has run yet (or the memory expired): not an error of the page.
      this.showError(null);
      this.root.dataset.state = "none";
      this.meta.textContent = "No conversation yet: the agent has not had an LLM turn.";
      return;
    }
    this.showError(error);
  }

  showError(error) {
    this.error.textContent = error ? (error instanceof Error ? error.message : String(error)) : "";
    this.error.hidden = !error;
  }

  append(view, open) {
    this.showError(null);
    const first = this.shown;
    view.messages.forEach((message, i) => {
      const item = this.messageView(message, first + i, view);
      for (const box of item.querySelectorAll("details")) box.open = open.has(box.dataset.key);
      this.list.append(item);
    });
    this.shown += view.messages.length;
    this.cursor = view.next_cursor ?? null;
    this.more.hidden = this.cursor === null;
    this.more.textContent = `Load more (${view.total - this.shown} more)`;
    this.root.dataset.state = "shown";
    this.root.dataset.total = String(view.total);
    const parts = [
      `${view.total} message${view.total === 1 ? "" : "s"} given to the model`,
      `${view.dropped} dropped`,
      `about ${view.tokens.toLocaleString()} tokens`,
      `memory: ${view.memory}`,
    ];
    if (view.workstream !== "main") parts.push(`workstream ${view.workstream}`);
    this.meta.textContent = `${parts.join(" · ")} (showing ${this.shown})`;
  }

  messageView(message, index, view) {
    // The first page opens with the system prompt, then the summary when there is one.
    const summary = message.seq === -1 && index === 1 && view.summary;
    const role = summary ? "summary" : message.role;
    const item = el("li", {
      class: "conv-msg",
      "data-role": role,
      "data-seq": String(message.seq),
      tabindex: "-1",
    });
    const label = message.name && message.role !== "tool" ? `${role} (${message.name})` : role;
    item.append(el("span", { class: "conv-role" }, label));
    const key = `${index}:${message.seq}`;
    if (message.role === "tool") {
      const name = message.name ?? this.calls.get(message.tool_call_id) ?? "tool";
      const body = el("pre", { class: "conv-content" }, message.content ?? "");
      const id = message.tool_call_id ? ` (${message.tool_call_id})` : "";
      item.append(folded("conv-tool-result", `Result of ${name}${id}`, body, `${key}:result`));
      return item;
    }
    if (message.content) item.append(el("pre", { class: "conv-content" }, message.content));
    const calls = message.tool_calls ?? [];
    calls.forEach((call, n) => {
      if (call?.id) this.calls.set(call.id, callName(call));
      const body = el("pre", { class: "conv-content" }, callArguments(call));
      const id = call?.id ? ` (${call.id})` : "";
      item.append(folded("conv-tool-call", `Tool call: ${callName(call)}${id}`, body, `${key}:call${n}`));
    });
    if (!message.content && !calls.length) item.append(el("p", { class: "muted" }, "(empty)"));
    return item;
  }
}
