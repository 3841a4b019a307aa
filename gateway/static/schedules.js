// The schedules page: the tenant's schedules (GET /schedules) with what each
// runs and when, its next start times (none while paused), its recent runs
// (linked to the runs page), and pause/resume, trigger now and delete (after a
// confirmation); a form creates one from a registered graph with an interval or
// a cron (POST /schedules). A refusal shows the problem body's text (e.g. the
// 403 naming schedule_admin_roles). The list is polled every POLL_MS while the
// tab is visible; cards are updated in place, so an open confirmation stays.
// Text from the API is only ever inserted as text, never as HTML.

import { api } from "./api.js";
import { el, errorText, setupHeader, showError, when } from "./nav.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 3000;
const NEXT_SHOWN = 3;
const RECENT_SHOWN = 5;

// created: schedules made here that Temporal's (eventually consistent) list may
// not show yet; shown from their POST answer until a listing has them.
const state = { cards: new Map(), created: new Map(), timer: null, loading: null };
const seg = encodeURIComponent;

function notice(text) {
  $("list-notice").textContent = text;
}

function every(seconds) {
  for (const [unit, size] of [["day", 86400], ["hour", 3600], ["minute", 60]]) {
    if (seconds % size === 0) {
      const count = seconds / size;
      return `every ${count} ${unit}${count === 1 ? "" : "s"}`;
    }
  }
  return `every ${seconds} seconds`;
}

function timing(detail) {
  const zone = detail.time_zone && detail.time_zone !== "UTC" ? ` (${detail.time_zone})` : "";
  if (detail.cron) return `cron ${detail.cron}${zone}`;
  if (detail.interval_seconds) {
    const offset = detail.interval_offset_seconds ? `, offset ${detail.interval_offset_seconds} s` : "";
    return `${every(detail.interval_seconds)}${offset}`;
  }
  return "—";
}

function row(list, label, value) {
  list.append(el("dt", {}, label));
  const dd = el("dd");
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value;
  list.append(dd);
  return dd;
}

function specList(detail) {
  const list = el("dl", { class: "schedule-spec" });
  row(list, "Graph", detail.graph || "—");
  row(list, "When", timing(detail));
  row(list, "Overlap", detail.overlap);
  if (detail.note) row(list, "Note", detail.note);
  row(list, "Owner", detail.user_id || "—");
  if (detail.input !== null && detail.input !== undefined) {
    row(list, "Input", el("pre", {}, JSON.stringify(detail.input, null, 2)));
  }
  const next = (detail.next_runs || []).slice(0, NEXT_SHOWN);
  const nextDd = row(list, "Next runs", next.length ? "" : detail.paused ? "none while paused" : "none");
  nextDd.classList.add("next-runs");
  if (next.length) {
    const ul = el("ul");
    for (const time of next) ul.append(el("li", {}, when(time)));
    nextDd.append(ul);
  }
  const recent = (detail.recent_runs || []).slice(-RECENT_SHOWN).reverse();
  const recentDd = row(list, "Recent runs", recent.length ? "" : "none yet");
  recentDd.classList.add("recent-runs");
  if (recent.length) {
    const ul = el("ul");
    for (const run of recent) {
      const item = el("li");
      const link = el("a", { href: `/ui/runs#run=${seg(run.workflow_id)}` }, when(run.started_at));
      link.setAttribute("aria-label", `run started ${when(run.started_at)}: ${run.workflow_id}`);
      item.append(link);
      ul.append(item);
    }
    recentDd.append(ul);
  }
  row(list, "Runs started", String(detail.runs_started ?? 0));
  return list;
}

async function act(card, label, call) {
  showError(card.error, null);
  for (const button of card.actions.querySelectorAll("button")) button.disabled = true;
  try {
    const result = await call();
    notice(label);
    if (result && typeof result === "object" && result.id) {
      if (state.created.has(result.id)) state.created.set(result.id, result);
      card.update(result);
    }
    await load();
  } catch (error) {
    showError(card.error, error);
  } finally {
    for (const button of card.actions.querySelectorAll("button")) button.disabled = false;
  }
}

function buildCard(detail) {
  const id = detail.id;
  const path = `/schedules/${seg(id)}`;
  const li = el("li", { class: "schedule", "aria-labelledby": `sch-${id}` });
  li.dataset.id = id;
  const head = el("div", { class: "schedule-head" });
  const title = el("h3", { id: `sch-${id}`, tabindex: "-1" }, id);
  const badge = el("span", { class: "state-badge" });
  head.append(title, badge);
  const spec = el("div");
  const actions = el("div", { class: "schedule-actions", role: "group", "aria-label": `Actions for ${id}` });
  const pause = el("button", { type: "button", class: "pause" });
  const trigger = el("button", { type: "button", class: "trigger" }, "Trigger now");
  const remove = el("button", { type: "button", class: "danger delete" }, "Delete…");
  actions.append(pause, trigger, remove);
  const confirm = el("div", { class: "confirm", role: "group", "aria-label": `Confirm deleting ${id}` });
  confirm.hidden = true;
  const yes = el("button", { type: "button", class: "danger-filled confirm-delete" }, "Delete");
  const no = el("button", { type: "button", class: "cancel-delete" }, "Cancel");
  confirm.append(el("p", {}, `Delete schedule ${id}? Runs it started keep running.`), yes, no);
  const error = el("p", { class: "inline-error", role: "alert", hidden: "" });
  li.append(head, spec, actions, confirm, error);

  const card = {
    li,
    actions,
    error,
    paused: detail.paused,
    update(next) {
      card.paused = next.paused;
      card.note = next.note;
      li.dataset.paused = String(next.paused);
      badge.dataset.paused = String(next.paused);
      badge.textContent = next.paused ? "paused" : "active";
      pause.textContent = next.paused ? "Resume" : "Pause";
      pause.setAttribute("aria-label", `${next.paused ? "Resume" : "Pause"} ${id}`);
      spec.replaceChildren(specList(next));
    },
  };
  trigger.setAttribute("aria-label", `Trigger ${id} now`);
  remove.setAttribute("aria-label", `Delete ${id}`);
  pause.addEventListener("click", () => {
    const verb = card.paused ? "unpause" : "pause";
    // Temporal replaces the note on pause and unpause: keep the one the schedule has.
    const body = card.note ? { note: card.note } : {};
    act(card, `${id} ${card.paused ? "resumed" : "paused"}.`, () => api("POST", `${path}/${verb}`, { json: body }));
  });
  trigger.addEventListener("click", () =>
    act(card, `${id}: a run is being started.`, () => api("POST", `${path}/trigger`, { json: {} })),
  );
  remove.addEventListener("click", () => {
    confirm.hidden = false;
    no.focus();
  });
  no.addEventListener("click", () => {
    confirm.hidden = true;
    remove.focus();
  });
  yes.addEventListener("click", async () => {
    showError(error, null);
    try {
      await api("DELETE", path);
    } catch (failure) {
      showError(error, failure);
      return;
    }
    state.created.delete(id);
    dropCard(id);
    notice(`Schedule ${id} deleted.`);
    $("list-title").focus();
  });
  card.update(detail);
  return card;
}

function dropCard(id) {
  state.cards.get(id)?.li.remove();
  state.cards.delete(id);
  updateCount();
}

function updateCount() {
  const count = state.cards.size;
  $("schedule-count").textContent = count ? `${count} schedule${count === 1 ? "" : "s"}` : "";
  $("list-empty").hidden = count !== 0;
}

function render(schedules) {
  const list = $("schedules");
  const seen = new Set();
  let previous = null;
  for (const detail of schedules) {
    seen.add(detail.id);
    let card = state.cards.get(detail.id);
    if (card) card.update(detail);
    else {
      card = buildCard(detail);
      state.cards.set(detail.id, card);
    }
    const wanted = previous ? previous.nextElementSibling : list.firstElementChild;
    if (wanted !== card.li) list.insertBefore(card.li, wanted);
    previous = card.li;
  }
  for (const id of [...state.cards.keys()]) if (!seen.has(id)) dropCard(id);
  updateCount();
}

async function load() {
  if (state.loading) return state.loading;
  state.loading = (async () => {
    try {
      const { schedules } = await api("GET", "/schedules");
      for (const detail of schedules) state.created.delete(detail.id);
      const shown = [...schedules, ...state.created.values()];
      shown.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      render(shown);
      showError($("list-error"), null);
    } catch (error) {
      showError($("list-error"), error);
      if (error.status === 401) render([]);
    } finally {
      state.loading = null;
      document.body.dataset.ready = "true";
    }
  })();
  return state.loading;
}

async function loadGraphs() {
  const select = $("new-graph");
  const chosen = select.value;
  try {
    const { graphs } = await api("GET", "/graphs");
    select.replaceChildren(el("option", { value: "" }, "— choose a graph —"));
    for (const graph of graphs) select.append(el("option", { value: graph.name }, graph.name));
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
    $("new-graph-hint").textContent = "";
  } catch (error) {
    $("new-graph-hint").textContent = errorText(error);
  }
}

// -- the create form ------------------------------------------------------------

function timingKind() {
  return document.querySelector("input[name=timing]:checked").value;
}

function syncTiming() {
  const cron = timingKind() === "cron";
  $("new-cron").disabled = !cron;
  $("new-every").disabled = cron;
  $("new-unit").disabled = cron;
}

function readForm() {
  const body = {
    graph: $("new-graph").value,
    time_zone: $("new-zone").value.trim() || "UTC",
    overlap: $("new-overlap").value,
    paused: $("new-paused").checked,
  };
  const id = $("new-id").value.trim();
  if (id) body.id = id;
  const note = $("new-note").value.trim();
  if (note) body.note = note;
  if (timingKind() === "cron") body.cron = $("new-cron").value.trim();
  else body.interval_seconds = Math.round(Number($("new-every").value) * Number($("new-unit").value));
  const raw = $("new-input").value.trim();
  if (raw) {
    try {
      body.input = JSON.parse(raw);
    } catch (error) {
      throw new Error(`Input is not JSON: ${error.message}`);
    }
  }
  return body;
}

function showCreateErrors(error) {
  showError($("create-error"), error);
  const list = $("create-errors");
  list.replaceChildren();
  for (const item of error?.errors || []) {
    const field = item.field ?? item.loc ?? "";
    list.append(el("li", {}, `${field}: ${item.message ?? item.rule ?? "invalid"}`));
  }
  list.hidden = !list.children.length;
}

$("create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  showCreateErrors(null);
  let body;
  try {
    body = readForm();
  } catch (error) {
    showCreateErrors(error);
    return;
  }
  const button = $("create-schedule");
  button.disabled = true;
  try {
    const created = await api("POST", "/schedules", { json: body });
    state.created.set(created.id, created);
    await load();
    notice(`Schedule ${created.id} created.`);
    $("new-id").value = "";
    state.cards.get(created.id)?.li.querySelector("h3").focus();
  } catch (error) {
    showCreateErrors(error);
  } finally {
    button.disabled = false;
  }
});

for (const radio of document.querySelectorAll("input[name=timing]")) radio.addEventListener("change", syncTiming);
$("refresh-schedules").addEventListener("click", load);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") load();
});

function schedulePoll() {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => {
    if (document.visibilityState === "visible") await load();
    schedulePoll();
  }, POLL_MS);
}

async function main() {
  syncTiming();
  await setupHeader(async () => {
    render([]);
    await Promise.all([loadGraphs(), load()]);
  });
  await Promise.all([loadGraphs(), load()]);
  schedulePoll();
}

main().catch((error) => showError($("list-error"), error));
