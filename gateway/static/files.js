// The Files panel: every file of the run (GET /runs/{wf}/{run}/files): uploads,
// the run's artifacts and every workstream's merged ones (files/ws-1/result.md),
// each with a download link. Uploads (single names: what REST uploads take;
// artifacts are paths) also get a Remove button (DELETE /runs/{wf}/files/{name}).
// The list is read again when a message may have added a file (an upload notice,
// a workstream's result, a COMPLETE naming artifacts), at most every REFRESH_GAP_MS.
//
// A link cannot carry the API key, so a click downloads through fetch with the
// key and saves the blob; the link's href still names the file's URL.

import { api, apiKey, ApiError, runPath, workflowPath } from "./api.js";
import { size } from "./upload.js";

const REFRESH_GAP_MS = 300;

function segments(name) {
  return name.split("/").map(encodeURIComponent).join("/");
}

/** True when a message may have added or changed a file of the run. */
export function mentionsFiles(msg) {
  const d = msg?.d && typeof msg.d === "object" ? msg.d : {};
  if (Array.isArray(d.artifacts) && d.artifacts.length) return true;
  if (typeof d.path === "string" && typeof d.name === "string") return true; // upload notice
  return msg?.t === 4 && !msg.w; // the run's COMPLETE: its last artifacts are stored
}

export class FilesPanel {
  /**
   * @param {HTMLUListElement} list
   * @param {{conn?: {base?: string, key?: string}, error?: HTMLElement}} options
   */
  constructor(list, { conn = {}, error = null } = {}) {
    this.list = list;
    this.conn = conn;
    this.error = error;
    this.run = null;
    this.timer = null;
    this.request = 0;
  }

  setRun(run) {
    clearTimeout(this.timer);
    this.timer = null;
    this.run = run;
    this.request += 1;
    this.render([]);
    if (run) this.refresh();
  }

  /** A message arrived: read the list again soon if it may have added a file. */
  noticed(msg) {
    if (!this.run || !mentionsFiles(msg) || this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.refresh();
    }, REFRESH_GAP_MS);
  }

  async refresh() {
    const run = this.run;
    if (!run) return;
    const mine = ++this.request;
    try {
      const reply = await api("GET", `${runPath(run.workflowId, run.runId)}/files`, this.conn);
      if (mine === this.request) this.render(reply?.files ?? []);
    } catch (error) {
      // A run that is still starting has no record yet: the next message tries again.
      if (mine === this.request && !(error instanceof ApiError && error.status === 404)) {
        this.fail(error);
      }
    }
  }

  fail(error) {
    if (!this.error) return;
    this.error.textContent = error ? error.message : "";
    this.error.hidden = !error;
  }

  render(files) {
    this.list.dataset.count = String(files.length);
    if (!files.length) {
      const empty = document.createElement("li");
      empty.className = "muted files-empty";
      empty.textContent = this.run ? "No files yet." : "Start a conversation to see its files.";
      this.list.replaceChildren(empty);
      return;
    }
    this.list.replaceChildren(...files.map((file) => this.item(file)));
  }

  item(file) {
    const { workflowId, runId } = this.run;
    const li = document.createElement("li");
    li.className = "file";
    li.dataset.name = file.name;
    const link = document.createElement("a");
    link.href = `${this.conn.base ?? ""}${runPath(workflowId, runId)}/files/${segments(file.name)}`;
    link.download = file.name.split("/").pop();
    link.textContent = file.name;
    link.addEventListener("click", (event) => {
      event.preventDefault();
      this.download(file, link);
    });
    const meta = document.createElement("span");
    meta.className = "muted file-size";
    meta.textContent = size(file.size ?? 0);
    li.append(link, meta);
    if (!file.name.includes("/")) {
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "file-remove";
      remove.textContent = "Remove";
      remove.setAttribute("aria-label", `Remove ${file.name}`);
      remove.addEventListener("click", () => this.remove(file, remove));
      li.append(remove);
    }
    return li;
  }

  async download(file, link) {
    this.fail(null);
    const key = this.conn.key ?? apiKey();
    try {
      const response = await fetch(link.href, {
        cache: "no-store",
        headers: key ? { Authorization: `Bearer ${key}` } : {},
      });
      if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
      const url = URL.createObjectURL(await response.blob());
      const save = document.createElement("a");
      save.href = url;
      save.download = link.download;
      save.hidden = true;
      this.list.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (error) {
      this.fail(new Error(`${file.name}: ${error.message}`));
    }
  }

  async remove(file, button) {
    this.fail(null);
    button.disabled = true;
    try {
      const path = `${workflowPath(this.run.workflowId)}/files/${segments(file.name)}`;
      await api("DELETE", path, this.conn);
      await this.refresh();
    } catch (error) {
      button.disabled = false;
      this.fail(new Error(`${file.name}: ${error.message}`));
    }
  }
}
