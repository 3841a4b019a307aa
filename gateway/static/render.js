// The conversation list: one <li> per message, styled by type.
//
// Token streaming (STREAMING_CHUNK, t=12) is grouped by activity id `i`: the
// chunks of one activity grow a single "streaming" item; the final THOUGHT or
// ANSWER with the same `i` replaces it; a RESTARTING with that `i` (the step
// was retried) voids the chunks shown so far, so no garbled double answer.
// Text only ever enters the page as text nodes or through renderMarkdown.

import { renderMarkdown } from "./markdown.js";
import { MessageType as T } from "./stream.js";

const KINDS = {
  [T.SYSTEM]: ["system", "System"],
  [T.THOUGHT]: ["thought", "Thought"],
  [T.PLAN]: ["plan", "Plan"],
  [T.UPDATE]: ["update", "Update"],
  [T.COMPLETE]: ["complete", "Complete"],
  [T.WARNING]: ["warning", "Warning"],
  [T.ERROR]: ["error", "Error"],
  [T.ANSWER]: ["answer", "Answer"],
  [T.QUESTION]: ["question", "You"],
  [T.REQUEST_INPUT]: ["request-input", "Input needed"],
  [T.IDLE]: ["idle", "Idle"],
  [T.TERMINATED]: ["terminated", "Terminated"],
  [T.STREAMING_CHUNK]: ["chunk", "Writing…"],
  [T.BATCH_PROGRESS]: ["batch", "Progress"],
  [T.RESTARTING]: ["restarting", "Restarting"],
};
const MARKDOWN_TYPES = new Set([T.THOUGHT, T.ANSWER, T.PLAN, T.SYSTEM, T.WARNING, T.ERROR]);

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

function streamKey(msg) {
  return `${msg.w || "main"}\u0000${msg.i ?? ""}`;
}

// The calls of one agent turn finish in any order: one bar per turn.
function batchKey(msg) {
  const d = msg.d && typeof msg.d === "object" ? msg.d : {};
  return `${msg.w || "main"}\u0000${d.node_id ?? ""}\u0000${d.turn ?? msg.i ?? ""}`;
}

function timeLabel(ts) {
  return typeof ts === "number" ? new Date(ts).toLocaleTimeString() : "";
}

function planItems(details) {
  const items = details?.tasks ?? details?.plan ?? details?.steps;
  if (!Array.isArray(items)) return null;
  const list = element("ol", "plan-tasks");
  for (const item of items) {
    const text =
      typeof item === "string"
        ? item
        : String(item?.title ?? item?.description ?? item?.task ?? JSON.stringify(item));
    const li = element("li", "", text);
    if (item && typeof item === "object" && item.status) li.dataset.status = String(item.status);
    list.append(li);
  }
  return list;
}

export class ConversationView {
  /**
   * @param {HTMLOListElement} list
   * @param {{requestInput: (msg: object) => HTMLElement,
   *          answered: (msg: object) => void}} hooks
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.streams = new Map(); // streamKey -> {item, text: Text}
    this.batches = new Map(); // batchKey -> {item: latest <li>, done: calls reported}
    this.filter = "all";
  }

  clear() {
    this.list.replaceChildren();
    this.streams.clear();
    this.batches.clear();
  }

  setFilter(workstream) {
    this.filter = workstream;
    for (const item of this.list.children) this.applyFilter(item);
  }

  applyFilter(item) {
    item.hidden = this.filter !== "all" && item.dataset.w !== this.filter;
  }

  add(msg) {
    const key = streamKey(msg);
    if (msg.t === T.STREAMING_CHUNK) {
      this.chunk(msg, key);
      return;
    }
    if (msg.t === T.RESTARTING && msg.i !== undefined) {
      const open = this.streams.get(key);
      if (open) open.item.remove();
      this.streams.delete(key);
    }
    const previousBatch =
      msg.t === T.BATCH_PROGRESS ? this.batches.get(batchKey(msg))?.item : null;
    const item = this.render(msg);
    const open = this.streams.get(key);
    if ((msg.t === T.THOUGHT || msg.t === T.ANSWER) && open) {
      open.item.replaceWith(item); // the final message supersedes its chunks
      this.streams.delete(key);
    } else if (previousBatch) {
      previousBatch.replaceWith(item);
    } else {
      this.list.append(item);
    }
    if (msg.t === T.BATCH_PROGRESS) this.batches.get(batchKey(msg)).item = item;
    if (msg.t === T.QUESTION) this.hooks.answered(msg);
    item.scrollIntoView({ block: "end" });
  }

  chunk(msg, key) {
    let open = this.streams.get(key);
    if (!open) {
      const item = this.shell(msg);
      const body = element("div", "body streaming-text");
      const text = document.createTextNode("");
      body.append(text);
      item.append(body);
      this.list.append(item);
      open = { item, text };
      this.streams.set(key, open);
    }
    open.text.appendData(typeof msg.m === "string" ? msg.m : "");
    if (msg.f === 1) open.item.classList.add("chunk-final");
    open.item.scrollIntoView({ block: "end" });
  }

  shell(msg) {
    const [kind, label] = KINDS[msg.t] ?? ["other", `Type ${Number(msg.t)}`];
    const item = element("li", `msg msg-${kind}`);
    item.dataset.t = String(msg.t);
    item.dataset.w = msg.w || "main";
    if (msg.i !== undefined) item.dataset.i = String(msg.i);
    const head = element("div", "head");
    head.append(element("span", "badge", label));
    if (msg.w) head.append(element("span", "ws-tag", String(msg.w)));
    head.append(element("time", "muted", timeLabel(msg.ts)));
    item.append(head);
    this.applyFilter(item);
    return item;
  }

  render(msg) {
    const item = this.shell(msg);
    const text = typeof msg.m === "string" ? msg.m : "";
    const details = msg.d && typeof msg.d === "object" ? msg.d : {};
    const body = element("div", "body");
    if (MARKDOWN_TYPES.has(msg.t)) body.append(renderMarkdown(text));
    else body.append(element("p", "", text));
    item.append(body);

    if (msg.t === T.PLAN) {
      const tasks = planItems(details);
      if (tasks) item.append(tasks);
    } else if (msg.t === T.UPDATE && details.tool) {
      body.prepend(element("span", "tool-name", String(details.tool)));
    } else if (msg.t === T.BATCH_PROGRESS) {
      const key = batchKey(msg);
      const batch = this.batches.get(key) ?? { item: null, done: 0 };
      batch.done += 1;
      this.batches.set(key, batch);
      const size = Number(details.batch_size);
      if (size > 0) {
        const bar = element("progress");
        bar.max = size;
        bar.value = Math.min(size, batch.done);
        item.append(bar, element("span", "muted", ` ${Math.min(size, batch.done)} of ${size}`));
      }
    } else if (msg.t === T.COMPLETE) {
      item.dataset.status = String(details.status ?? "completed");
    } else if (msg.t === T.REQUEST_INPUT) {
      item.append(this.hooks.requestInput(msg));
    }
    return item;
  }
}
