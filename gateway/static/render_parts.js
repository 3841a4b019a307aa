// Pieces of a message's body (render.js): run outputs as Markdown or as pretty,
// collapsible JSON, a form answer's fields, a plan's task list. Everything from
// a run enters the page as text nodes or through renderMarkdown, never as HTML.

import { renderMarkdown } from "./markdown.js";

// Structured output longer than this many lines starts folded.
const OPEN_JSON_LINES = 30;
const STATUS_LABELS = { pending: "to do", in_progress: "in progress", done: "done" };

export function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Text compared for "the same answer again": trimmed, whitespace collapsed. */
export function sameText(a, b) {
  const norm = (s) => String(s ?? "").replace(/\s+/g, " ").trim();
  return norm(a) !== "" && norm(a) === norm(b);
}

/** `text` parsed as a JSON object or array, else null. */
export function parseStructured(text) {
  const trimmed = String(text ?? "").trim();
  if (!/^[[{]/.test(trimmed)) return null;
  try {
    const value = JSON.parse(trimmed);
    return value && typeof value === "object" ? value : null;
  } catch {
    return null;
  }
}

/** Pretty JSON in a <details> (open when short), labelled for what it is. */
export function jsonView(value, label = "Output") {
  const pretty = JSON.stringify(value, null, 2);
  const box = element("details", "json-view");
  const keys = Array.isArray(value) ? `${value.length} items` : `${Object.keys(value).length} fields`;
  box.append(element("summary", "", `${label} (JSON, ${keys})`));
  const pre = element("pre");
  pre.append(element("code", "", pretty));
  box.append(pre);
  box.open = pretty.split("\n").length <= OPEN_JSON_LINES;
  return box;
}

/**
 * A run's (or a workstream's) output: Markdown when it is text, JSON when it is
 * structured; nothing but a note when it only repeats the answer shown above.
 */
export function outputView(value, lastAnswer) {
  if (value === undefined || value === null || value === "") return null;
  const repeats =
    sameText(value, lastAnswer) ||
    (typeof value === "object" &&
      !Array.isArray(value) &&
      Object.values(value).length === 1 &&
      sameText(Object.values(value)[0], lastAnswer));
  if (repeats) return element("p", "muted output-same", "The answer above is the result.");
  if (typeof value === "string") {
    const structured = parseStructured(value);
    if (structured) return jsonView(structured);
    const body = element("div", "output-text");
    body.append(renderMarkdown(value));
    return body;
  }
  if (typeof value === "object") return jsonView(value);
  return element("p", "", String(value));
}

/** The user's message: their text, or a form answer's fields as a list. */
export function questionView(text) {
  const value = parseStructured(text);
  if (!value || Array.isArray(value)) return element("p", "user-text", String(text ?? ""));
  const list = element("dl", "answer-fields");
  for (const [key, field] of Object.entries(value)) {
    list.append(element("dt", "", key));
    list.append(element("dd", "", typeof field === "string" ? field : JSON.stringify(field)));
  }
  return list;
}

function taskTitle(item) {
  if (typeof item === "string") return item;
  return String(item?.title ?? item?.name ?? item?.description ?? item?.task ?? JSON.stringify(item));
}

/**
 * A PLAN's tasks (d.tasks, or d.plan / d.steps from other posters). Tasks with a
 * status (update_plan: pending, in_progress, done) become a checklist of
 * read-only checkboxes, so assistive technology says "checked" / "mixed".
 */
export function planList(details) {
  const items = details?.tasks ?? details?.plan ?? details?.steps;
  if (!Array.isArray(items)) return null;
  const checklist = items.some((item) => item && typeof item === "object" && item.status);
  const list = element("ol", checklist ? "plan-tasks checklist" : "plan-tasks");
  for (const item of items) {
    const li = element("li");
    const status = item && typeof item === "object" && item.status ? String(item.status) : "";
    if (checklist) {
      const box = element("input");
      box.type = "checkbox";
      box.disabled = true;
      box.checked = status === "done";
      box.indeterminate = status === "in_progress";
      box.setAttribute("aria-label", STATUS_LABELS[status] ?? (status || "to do"));
      li.append(box);
    }
    li.append(document.createTextNode(taskTitle(item)));
    if (status) li.dataset.status = status;
    list.append(li);
  }
  return list;
}

/** A workstream state as a small pill. */
export function statePill(state) {
  const pill = element("span", "pill", state);
  pill.dataset.state = state;
  return pill;
}
