// The run's workstreams: a card each (state, phase, deadline bar, latest model
// message) with steer and terminate controls, and tabs that filter the
// conversation by workstream. Fed by GET /runs/{id}/workstreams, refreshed when
// a message of a workstream arrives and every few seconds while one is live.

import { api, workflowPath } from "./api.js";

const POLL_MS = 3000;
const MIN_REFRESH_GAP_MS = 500;
const LIVE_STATES = new Set(["running", "canceling"]);
const STEER_COMMANDS = [
  ["add_instruction", "Add instruction", true],
  ["set_priority", "Set priority", true],
  ["add_constraint", "Add constraint", true],
  ["pause_requested", "Pause", false],
  ["resume_requested", "Resume", false],
];
// Interactive workstreams also take follow-up messages (POST …/messages).
const MESSAGE = "message";

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

export class WorkstreamPanel {
  /**
   * @param {HTMLElement} container the side panel
   * @param {HTMLElement} tabs the tab bar above the conversation
   * @param {(workstream: string) => void} onFilter
   * @param {{base?: string, key?: string}} [conn] another gateway (the component)
   * @param {(list: object[]) => void} [onList] each refreshed workstream list
   */
  constructor(container, tabs, onFilter, conn = {}, onList = () => {}) {
    this.conn = conn;
    this.onList = onList;
    this.container = container;
    this.tabs = tabs;
    this.onFilter = onFilter;
    this.workflowId = null;
    this.cards = new Map();
    this.selected = "all";
    this.timer = null;
    this.pending = null;
    this.lastRefresh = 0;
  }

  attach(workflowId) {
    this.detach();
    this.workflowId = workflowId;
    this.refresh();
  }

  detach() {
    clearTimeout(this.timer);
    clearTimeout(this.pending);
    this.workflowId = null;
    this.cards.clear();
    this.selected = "all";
    this.container.replaceChildren(element("p", "muted", "None yet."));
    this.tabs.replaceChildren();
    this.tabs.hidden = true;
  }

  /** A message arrived: refresh soon when it concerns a workstream. */
  noticed(msg) {
    if (!this.workflowId) return;
    const about = msg.w || msg.d?.launch_id || /workstream/i.test(String(msg.m ?? ""));
    if (!about) return;
    const wait = Math.max(0, this.lastRefresh + MIN_REFRESH_GAP_MS - Date.now());
    if (this.pending === null) {
      this.pending = setTimeout(() => {
        this.pending = null;
        this.refresh();
      }, wait);
    }
  }

  async refresh() {
    const workflowId = this.workflowId;
    if (!workflowId) return;
    clearTimeout(this.timer);
    this.lastRefresh = Date.now();
    let list = [];
    try {
      const reply = await api("GET", `${workflowPath(workflowId)}/workstreams`, this.conn);
      list = reply?.workstreams || [];
    } catch {
      list = null; // not known yet (run starting) or no worker: try again later
    }
    if (workflowId !== this.workflowId) return;
    if (list) {
      this.render(list);
      this.onList(list);
    }
    if (list === null || list.some((ws) => LIVE_STATES.has(ws.state))) {
      this.timer = setTimeout(() => this.refresh(), POLL_MS);
    }
  }

  render(list) {
    if (list.length === 0) return;
    if (this.cards.size === 0) this.container.replaceChildren();
    for (const ws of list) {
      let card = this.cards.get(ws.launch_id);
      if (!card) {
        card = this.createCard(ws.launch_id);
        this.cards.set(ws.launch_id, card);
        this.container.append(card.root);
      }
      this.updateCard(card, ws);
    }
    this.renderTabs(list);
  }

  renderTabs(list) {
    const ids = ["all", "main", ...list.map((ws) => ws.launch_id)];
    this.tabs.replaceChildren();
    for (const id of ids) {
      const label = id === "all" ? "All" : id;
      const tab = element("button", "tab", label);
      tab.type = "button";
      tab.dataset.workstream = id;
      tab.setAttribute("aria-pressed", String(id === this.selected));
      tab.addEventListener("click", () => {
        this.selected = id;
        this.onFilter(id);
        this.renderTabs(list);
      });
      this.tabs.append(tab);
    }
    this.tabs.hidden = false;
  }

  createCard(launchId) {
    const root = element("div", "ws-card");
    root.dataset.launchId = launchId;
    const head = element("div", "ws-head");
    const title = element("strong", "ws-title");
    const state = element("span", "ws-state");
    head.append(title, state);
    const task = element("p", "ws-task");
    const phase = element("p", "ws-phase muted");
    const bar = element("progress", "ws-deadline");
    bar.max = 100;
    const deadline = element("small", "muted ws-deadline-text");
    const latest = element("p", "ws-latest");
    const error = element("p", "inline-error");
    error.hidden = true;

    const controls = element("form", "ws-controls");
    const command = element("select", "ws-command");
    const message = element("option", "", "Send message");
    message.value = MESSAGE;
    message.hidden = true;
    command.append(message);
    for (const [value, label] of STEER_COMMANDS) {
      const option = element("option", "", label);
      option.value = value;
      command.append(option);
    }
    command.setAttribute("aria-label", `Action for ${launchId}`);
    const text = element("input", "ws-text");
    text.placeholder = "Directive";
    text.setAttribute("aria-label", `Directive or message for ${launchId}`);
    const steer = element("button", "", "Steer");
    steer.type = "submit";
    const terminate = element("button", "danger", "Terminate");
    terminate.type = "button";
    controls.append(command, text, steer, terminate);
    command.addEventListener("change", () => {
      const needsText =
        command.value === MESSAGE || STEER_COMMANDS.find(([v]) => v === command.value)?.[2];
      text.hidden = !needsText;
      steer.textContent = command.value === MESSAGE ? "Send" : "Steer";
    });
    controls.addEventListener("submit", async (event) => {
      event.preventDefault();
      const typed = text.hidden ? "" : text.value.trim();
      const ok =
        command.value === MESSAGE
          ? await this.control(card, "messages", { message: typed })
          : await this.control(card, "steer", {
              command: command.value,
              ...(typed ? { text: typed } : {}),
            });
      if (ok) text.value = "";
    });
    terminate.addEventListener("click", () => this.control(card, "terminate", undefined));

    root.append(head, task, phase, bar, deadline, latest, controls, error);
    const card = {
      root, title, state, task, phase, bar, deadline, latest, controls, error, launchId, message,
    };
    return card;
  }

  async control(card, action, body) {
    card.error.hidden = true;
    const path = `${workflowPath(this.workflowId)}/workstreams/${encodeURIComponent(card.launchId)}/${action}`;
    try {
      await api("POST", path, body === undefined ? this.conn : { ...this.conn, json: body });
      this.refresh();
      return true;
    } catch (error) {
      card.error.textContent = error.message;
      card.error.hidden = false;
      return false;
    }
  }

  updateCard(card, ws) {
    card.root.dataset.state = ws.state;
    card.title.textContent = ws.label ? `${ws.label} (${ws.launch_id})` : ws.launch_id;
    card.state.textContent = ws.state;
    card.state.dataset.state = ws.state;
    card.task.textContent = ws.task ?? "";
    const phase = ws.tool ? `${ws.phase}: ${ws.tool}` : ws.phase;
    card.phase.textContent = `phase ${phase} · step ${ws.iteration ?? 0}${ws.interactive ? " · interactive" : ""}`;
    const pct = Math.max(0, Math.min(100, Number(ws.deadline_used_pct) || 0));
    card.bar.value = pct;
    card.bar.hidden = ws.interactive;
    card.deadline.textContent = ws.interactive
      ? "no deadline (interactive)"
      : `${Math.round(pct)} % of ${ws.deadline_seconds} s deadline used`;
    card.latest.textContent = ws.summary || ws.error || ws.latest_message || "";
    card.controls.hidden = !LIVE_STATES.has(ws.state);
    card.message.hidden = !ws.interactive;
  }
}
