// File uploads to the current run, by button or drag-and-drop
// (POST /runs/{workflowId}/{runId}/files, multipart field `file`).
// The accepted types and the number of files per pick come from the gateway's
// settings (SPINDLE_UI_UPLOAD_ACCEPT, SPINDLE_UI_UPLOAD_MAX_FILES); the size
// limit is the gateway's own (SPINDLE_MAX_UPLOAD_BYTES), checked here first to
// spare a doomed upload. What was stored is listed by the Files panel (files.js):
// `onUploaded` tells it; `onBusy` lets the page disable Send while a file is on
// its way (seed 002: isUploading disables the send/start buttons).

import { api, runPath } from "./api.js";

function accepts(file, accept) {
  if (accept.length === 0) return true;
  const name = file.name.toLowerCase();
  const type = (file.type || "").toLowerCase();
  return accept.some((raw) => {
    const rule = raw.toLowerCase();
    if (rule.startsWith(".")) return name.endsWith(rule);
    if (rule.endsWith("/*")) return type.startsWith(rule.slice(0, -1));
    return type === rule;
  });
}

export function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

export class Uploader {
  /**
   * @param {{button: HTMLButtonElement, input: HTMLInputElement, zone: HTMLElement,
   *          status: HTMLElement, error: HTMLElement,
   *          config: {upload_accept: string[], upload_max_files: number,
   *                   max_upload_bytes: number},
   *          conn?: {base?: string, key?: string},
   *          onUploaded?: (stored: object) => void,
   *          onBusy?: (busy: boolean) => void}} parts
   */
  constructor({ button, input, zone, status, error, config, conn = {}, onUploaded, onBusy }) {
    Object.assign(this, { button, input, zone, status, error, config, conn });
    this.onUploaded = onUploaded ?? (() => {});
    this.onBusy = onBusy ?? (() => {});
    this.busy = false;
    this.run = null;
    if (config.upload_accept.length) input.accept = config.upload_accept.join(",");
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.upload([...input.files]);
      input.value = "";
    });
    zone.addEventListener("dragover", (event) => {
      if (!event.dataTransfer?.types?.includes("Files")) return;
      event.preventDefault();
      zone.classList.add("dragging");
    });
    zone.addEventListener("dragleave", (event) => {
      if (event.target === zone) zone.classList.remove("dragging");
    });
    zone.addEventListener("drop", (event) => {
      if (!event.dataTransfer?.files?.length) return;
      event.preventDefault();
      zone.classList.remove("dragging");
      this.upload([...event.dataTransfer.files]);
    });
  }

  setRun(run) {
    this.run = run;
    this.button.disabled = run === null || this.busy;
    this.status.textContent = "";
  }

  fail(text) {
    this.error.textContent = text;
    this.error.hidden = false;
  }

  async upload(files) {
    this.error.hidden = true;
    if (files.length === 0) return;
    if (this.run === null) return this.fail("Start a conversation before uploading files.");
    const { upload_accept: accept, upload_max_files: max, max_upload_bytes: limit } = this.config;
    if (files.length > max) return this.fail(`At most ${max} files at a time (got ${files.length}).`);
    const refused = files.find((file) => !accepts(file, accept));
    if (refused) return this.fail(`${refused.name}: not an accepted type (${accept.join(", ")}).`);
    const tooBig = files.find((file) => file.size > limit);
    if (tooBig) return this.fail(`${tooBig.name} is larger than ${size(limit)}.`);

    this.setBusy(true);
    try {
      await this.send(files);
    } finally {
      this.setBusy(false);
    }
  }

  setBusy(busy) {
    this.busy = busy;
    this.button.disabled = busy || this.run === null;
    this.zone.setAttribute("aria-busy", String(busy));
    this.onBusy(busy);
  }

  async send(files) {
    const { workflowId, runId } = this.run;
    let done = 0;
    for (const file of files) {
      this.status.textContent = `Uploading ${file.name} (${done + 1} of ${files.length})…`;
      const form = new FormData();
      form.append("file", file, file.name);
      try {
        const stored = await api("POST", `${runPath(workflowId, runId)}/files`, {
          ...this.conn,
          form,
        });
        done += 1;
        this.onUploaded(stored);
      } catch (error) {
        this.fail(`${file.name}: ${error.message}`);
        break;
      }
    }
    this.status.textContent = done ? `${done} file${done > 1 ? "s" : ""} uploaded.` : "";
  }
}
