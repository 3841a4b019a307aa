// The conversation list: one <li> per message, styled by type.
//
// Token streaming (STREAMING_CHUNK, t=12) is grouped by activity id `i`: the
// chunks of one activity grow a single "streaming" item; the final THOUGHT or
// ANSWER with the same `i` replaces it; a RESTARTING with that `i` (the step
// was retried) voids the chunks shown so far, so no garbled double answer.
//
// One answer is shown once (docs/streaming/web-page.md, Conversation page):
// - a workstream's messages, and the SYSTEM notice of its result (d.launch_id),
//   are folded under one card for the workstream (a <details>), in the place
//   where it first spoke;
// - an ANSWER repeating the previous ANSWER of its workstream (an output node
//   publishing the agent's answer) is not shown again;
// - the main COMPLETE shows the run's output (hooks.output) as Markdown or as
//   collapsible JSON, or only a note when the output is that same answer.
// Text only ever enters the page as text nodes or through renderMarkdown.

import { renderMarkdown } from "./markdown.js";
import {
  element,
  outputView,
  parseStructured,
  planList,
  questionView,
  sameText,
  statePill,
} from "./render_parts.js";
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
// Within this many pixels of the bottom, new messages keep the pane scrolled down.
const STICK_PX = 80;

function details(msg) {
  return msg.d && typeof msg.d === "object" ? msg.d : {};
}

/** The workstream a message belongs to (its `w`, or the launch id of a notice about it). */
function workstreamOf(msg) {
  if (msg.w && msg.w !== "main") return String(msg.w);
  const launch = details(msg).launch_id;
  return typeof launch === "string" && launch ? launch : null;
}

/** The parent's SYSTEM notice of a workstream's end (its state and summary). */
function isResultNotice(msg) {
  return msg.t === T.SYSTEM && !msg.w && Boolean(details(msg).launch_id) && typeof details(msg).state === "string";
}

function streamKey(msg) {
  return `${msg.w || "main"}\u0000${msg.i ?? ""}`;
}

// The calls of one agent turn finish in any order: one bar per turn.
function batchKey(msg) {
  const d = details(msg);
  return `${msg.w || "main"}\u0000${d.node_id ?? ""}\u0000${d.turn ?? msg.i ?? ""}`;
}

// update_plan posts the whole list each time: a node's newer plan replaces its older one.
function planKey(msg) {
  const d = details(msg);
  return d.source === "update_plan" ? `${msg.w || "main"}\u0000${d.node_id ?? ""}` : null;
}

function timeLabel(ts) {
  return typeof ts === "number" ? new Date(ts).toLocaleTimeString() : "";
}

export class ConversationView {
  /**
   * @param {HTMLOListElement} list the scrolling message pane
   * @param {{requestInput: (msg: object) => HTMLElement,
   *          answered: (msg: object) => void,
   *          output?: (msg: object) => Promise<unknown>}} hooks
   *   `output`: the run's output for the main COMPLETE (GET /runs/{id}); absent
   *   or failing, the COMPLETE's own text is shown.
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.streams = new Map(); // streamKey -> {item, text: Text}
    this.batches = new Map(); // batchKey -> {item: latest <li>, done: calls reported}
    this.plans = new Map(); // planKey -> latest plan <li>
    this.folds = new Map(); // launch id -> fold parts
    this.lastAnswer = new Map(); // "main" or launch id -> text of its last ANSWER
    this.filter = "all";
  }

  clear() {
    this.list.replaceChildren();
    for (const map of [this.streams, this.batches, this.plans, this.folds, this.lastAnswer]) {
      map.clear();
    }
  }

  setFilter(workstream) {
    this.filter = workstream;
    for (const item of this.list.children) this.applyFilter(item);
    const fold = this.folds.get(workstream);
    if (fold) fold.box.open = true;
  }

  applyFilter(item) {
    item.hidden = this.filter !== "all" && item.dataset.w !== this.filter;
  }

  /** States from the workstream list (GET …/workstreams) for the cards' pills. */
  setWorkstreams(list) {
    for (const ws of list) {
      const fold = this.folds.get(ws.launch_id);
      if (!fold) continue;
      if (ws.label) fold.title.textContent = `${ws.label} (${ws.launch_id})`;
      this.setFoldState(fold, ws.state);
    }
  }

  atBottom() {
    const pane = this.list;
    return pane.scrollHeight - pane.scrollTop - pane.clientHeight < STICK_PX;
  }

  follow(stick) {
    if (stick) this.list.scrollTop = this.list.scrollHeight;
  }

  add(msg) {
    const stick = this.atBottom();
    this.place(msg);
    this.follow(stick);
  }

  place(msg) {
    const key = streamKey(msg);
    if (msg.t === T.STREAMING_CHUNK) {
      this.chunk(msg, key);
      return;
    }
    const open = this.streams.get(key);
    if (msg.t === T.RESTARTING && msg.i !== undefined && open) {
      open.item.remove();
      this.streams.delete(key);
    }
    const owner = workstreamOf(msg) ?? "main";
    if (msg.t === T.ANSWER && sameText(msg.m, this.lastAnswer.get(owner))) {
      // The same answer again (the output node publishing the agent's answer).
      if (open) open.item.remove();
      this.streams.delete(key);
      return;
    }
    if (msg.t === T.ANSWER) this.lastAnswer.set(owner, String(msg.m ?? ""));
    if (isResultNotice(msg)) {
      this.noticeInFold(msg, owner); // shown as the fold's result line, not as a message
      return;
    }
    const item = this.render(msg, owner);
    const replaced = this.replaces(msg, key);
    if (replaced) replaced.replaceWith(item);
    else this.container(msg).append(item);
    this.remember(msg, item);
    if (msg.t === T.QUESTION) this.hooks.answered(msg);
    if (owner !== "main") this.noticeInFold(msg, owner);
  }

  /** The earlier item `msg` supersedes: its chunks, its batch's bar, its node's plan. */
  replaces(msg, key) {
    if (msg.t === T.THOUGHT || msg.t === T.ANSWER) {
      const open = this.streams.get(key);
      this.streams.delete(key);
      if (open) return open.item;
    }
    if (msg.t === T.BATCH_PROGRESS) return this.batches.get(batchKey(msg))?.item ?? null;
    if (msg.t === T.PLAN && planKey(msg)) return this.plans.get(planKey(msg)) ?? null;
    return null;
  }

  remember(msg, item) {
    if (msg.t === T.BATCH_PROGRESS) this.batches.get(batchKey(msg)).item = item;
    if (msg.t === T.PLAN && planKey(msg)) this.plans.set(planKey(msg), item);
  }

  /** Where a message goes: the main list, or its workstream's fold. */
  container(msg) {
    const launchId = workstreamOf(msg);
    return launchId ? this.fold(launchId).messages : this.list;
  }

  fold(launchId) {
    let fold = this.folds.get(launchId);
    if (fold) return fold;
    const item = element("li", "msg ws-fold");
    item.dataset.w = launchId;
    item.dataset.launchId = launchId;
    const box = element("details");
    const summary = element("summary");
    const title = element("span", "ws-fold-title", launchId);
    const pill = statePill("running");
    const count = element("span", "muted ws-fold-count", "");
    summary.append(element("span", "badge", "Workstream"), title, pill, count);
    const result = element("div", "ws-fold-result");
    const messages = element("ol", "ws-fold-messages");
    box.append(summary, messages, result);
    item.append(box);
    fold = { item, box, title, pill, count, result, messages, size: 0, state: "running" };
    this.folds.set(launchId, fold);
    this.list.append(item);
    this.applyFilter(item);
    return fold;
  }

  setFoldState(fold, state) {
    if (!state || fold.state === state) return;
    fold.state = state;
    fold.pill.textContent = state;
    fold.pill.dataset.state = state;
    fold.item.dataset.state = state;
  }

  noticeInFold(msg, launchId) {
    const fold = this.fold(launchId);
    const d = details(msg);
    if (isResultNotice(msg)) {
      this.setFoldState(fold, d.state);
      const summary = String(d.summary ?? d.error ?? msg.m ?? "");
      if (sameText(summary, this.lastAnswer.get(launchId))) {
        fold.result.replaceChildren(element("p", "muted", "Its answer above went to the parent."));
      } else {
        fold.result.replaceChildren(element("p", "muted", "Result given to the parent:"));
        fold.result.append(renderMarkdown(summary));
      }
      return;
    }
    fold.size += 1;
    fold.count.textContent = `${fold.size} message${fold.size === 1 ? "" : "s"}`;
    if (msg.t === T.COMPLETE && msg.w) this.setFoldState(fold, String(d.status ?? "completed"));
    if (msg.t === T.TERMINATED && msg.w) this.setFoldState(fold, "canceled");
  }

  chunk(msg, key) {
    const stick = this.atBottom();
    let open = this.streams.get(key);
    if (!open) {
      const item = this.shell(msg);
      const body = element("div", "body streaming-text");
      const text = document.createTextNode("");
      body.append(text);
      item.append(body);
      this.container(msg).append(item);
      open = { item, text };
      this.streams.set(key, open);
    }
    open.text.appendData(typeof msg.m === "string" ? msg.m : "");
    if (msg.f === 1) open.item.classList.add("chunk-final");
    this.follow(stick);
  }

  shell(msg) {
    const [kind, label] = KINDS[msg.t] ?? ["other", `Type ${Number(msg.t)}`];
    const item = element("li", `msg msg-${kind}`);
    item.dataset.t = String(msg.t);
    item.dataset.w = workstreamOf(msg) ?? "main";
    if (msg.i !== undefined) item.dataset.i = String(msg.i);
    const head = element("div", "head");
    head.append(element("span", "badge", label));
    if (msg.w) head.append(element("span", "ws-tag", String(msg.w)));
    head.append(element("time", "muted", timeLabel(msg.ts)));
    item.append(head);
    if (!workstreamOf(msg)) this.applyFilter(item);
    return item;
  }

  render(msg, owner) {
    const item = this.shell(msg);
    const text = typeof msg.m === "string" ? msg.m : "";
    const d = details(msg);
    const body = element("div", "body");
    item.append(body);
    if (msg.t === T.QUESTION) body.append(questionView(text));
    else if (msg.t === T.COMPLETE) this.complete(msg, body, owner);
    else if (MARKDOWN_TYPES.has(msg.t)) body.append(renderMarkdown(text));
    else body.append(element("p", "", text));

    if (msg.t === T.PLAN) {
      const tasks = planList(d);
      if (tasks) item.append(tasks);
    } else if (msg.t === T.UPDATE && d.tool) {
      body.prepend(element("span", "tool-name", String(d.tool)));
    } else if (msg.t === T.BATCH_PROGRESS) {
      this.batch(msg, item);
    } else if (msg.t === T.COMPLETE) {
      item.dataset.status = String(d.status ?? "completed");
    } else if (msg.t === T.REQUEST_INPUT) {
      item.append(this.hooks.requestInput(msg));
    }
    return item;
  }

  batch(msg, item) {
    const key = batchKey(msg);
    const batch = this.batches.get(key) ?? { item: null, done: 0 };
    batch.done += 1;
    this.batches.set(key, batch);
    const size = Number(details(msg).batch_size);
    if (size > 0) {
      const bar = element("progress");
      bar.max = size;
      bar.value = Math.min(size, batch.done);
      bar.setAttribute("aria-label", "calls done");
      item.append(bar, element("span", "muted", ` ${Math.min(size, batch.done)} of ${size}`));
    }
  }

  /** COMPLETE: the output once (not the answer again); the main one asks for the run's output. */
  complete(msg, body, owner) {
    const d = details(msg);
    const failed = d.status && d.status !== "completed";
    const last = this.lastAnswer.get(owner);
    const show = (value) => {
      const stick = this.atBottom();
      const view = failed ? element("p", "", String(msg.m ?? "")) : outputView(value, last);
      body.replaceChildren(...(view ? [view] : []));
      this.follow(stick);
    };
    const fallback = () => show(parseStructured(msg.m) ?? msg.m);
    if (owner !== "main" || failed || !this.hooks.output) {
      fallback();
      return;
    }
    body.append(element("p", "muted", "Completed."));
    this.hooks.output(msg).then(
      (value) => (value === undefined ? fallback() : show(value)),
      fallback,
    );
  }
}
