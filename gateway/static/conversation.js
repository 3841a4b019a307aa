// One conversation with a run, wired to its parts: the message pane, the
// workstream cards and tabs, the Files panel, uploads, the message box, the
// prompt forms and the Done button. The conversation page (app.js) and the
// embeddable <spindle-conversation> (spindle-conversation.js) both use it, each
// with its own root (the document, or the component's shadow root) holding the
// parts by id, and its own connection (`conn`: same origin and the tab's key, or
// another gateway's origin and key).

import { api, ApiError, messageId, runPath, workflowPath } from "./api.js";
import { FilesPanel } from "./files.js";
import { ConversationView } from "./render.js";
import { buildSchemaForm } from "./schema_form.js";
import { ConversationStream, MessageType } from "./stream.js";
import { Uploader } from "./upload.js";
import { WorkstreamPanel } from "./workstreams.js";

export const STATE_LABELS = {
  idle: "no conversation",
  starting: "starting…",
  loading: "loading history…",
  live: "live",
  reconnecting: "reconnecting…",
  ended: "ended",
  failed: "disconnected",
};

// The message that starts a run becomes the graph's input: a JSON object as
// typed, or else the text in the input's one required string (or first string)
// property, as the examples' input schemas expect.
export function inputKey(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const strings = Object.keys(properties).filter(
    (name) => (properties[name]?.type ?? "string") === "string",
  );
  const required = Array.isArray(schema?.required) ? schema.required : [];
  return required.find((name) => strings.includes(name)) ?? strings[0] ?? null;
}

export function inputFor(schema, text, base = {}) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try {
      const value = JSON.parse(trimmed);
      if (value && typeof value === "object" && !Array.isArray(value)) return { ...base, ...value };
    } catch {
      // not JSON after all: treat it as text
    }
  }
  const key = inputKey(schema);
  return { ...base, [key ?? "message"]: trimmed };
}

export function showError(target, error) {
  if (!target) return;
  target.textContent = error ? (error instanceof Error ? error.message : String(error)) : "";
  target.hidden = !error;
}

export class Conversation {
  /**
   * @param {Document|ShadowRoot} root holds the parts by id (index.html's ids)
   * @param {{conn?: {base?: string, key?: string}, config: object,
   *          metadata?: () => object|null,
   *          startRun: (text: string) => Promise<{workflowId: string, runId: string}>,
   *          onState?: (state: string) => void}} options
   *   `metadata`: added to each user message (UserInput.metadata, echoed in its QUESTION).
   */
  constructor(root, { conn = {}, config, metadata = () => null, startRun, onState = () => {} }) {
    const part = (id) => root.getElementById?.(id) ?? root.querySelector(`#${id}`);
    this.part = part;
    Object.assign(this, { conn, metadata, startRun, onState });
    this.run = null;
    this.stream = null;
    this.forms = new Map(); // prompt node id -> close(note) of its open form
    this.sending = false;
    this.view = new ConversationView(part("messages"), {
      requestInput: (msg) => this.promptForm(msg),
      answered: (msg) => this.answered(msg),
      output: () => this.output(),
    });
    this.panel = new WorkstreamPanel(
      part("workstreams"),
      part("ws-tabs"),
      (workstream) => this.view.setFilter(workstream),
      conn,
      (list) => this.view.setWorkstreams(list),
    );
    this.files = new FilesPanel(part("files"), { conn, error: part("files-error") });
    this.uploader = new Uploader({
      button: part("attach"),
      input: part("file-input"),
      zone: part("drop-zone"),
      status: part("upload-state"),
      error: part("composer-error"),
      config,
      conn,
      onUploaded: () => this.files.refresh(),
      onBusy: () => this.updateSend(),
    });
    this.files.render([]);
    this.wire();
  }

  wire() {
    const { part } = this;
    part("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    part("message-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) part("composer").requestSubmit();
    });
    part("complete-agent").addEventListener("click", () => this.completeAgent());
  }

  get state() {
    return this.part("run-state").dataset.state;
  }

  setRunState(state, detail) {
    const badge = this.part("run-state");
    badge.dataset.state = state;
    badge.textContent = STATE_LABELS[state] ?? state;
    badge.title = detail || "";
    if (state === "failed" && detail) showError(this.part("page-error"), detail);
    if (state === "live") showError(this.part("page-error"), null);
    this.part("message-input").disabled = state === "ended";
    this.updateSend();
    this.onState(state);
  }

  /** Send is off while the run has ended, a file uploads, or a message is on its way. */
  updateSend() {
    const send = this.part("send");
    send.disabled = this.state === "ended" || this.uploader.busy || this.sending;
    send.title = this.uploader.busy ? "Wait for the upload to finish" : "";
  }

  attach(workflowId, runId) {
    this.detach();
    this.run = { workflowId, runId };
    this.uploader.setRun(this.run);
    this.files.setRun(this.run);
    this.panel.attach(workflowId);
    this.stream = new ConversationStream({
      workflowId,
      runId,
      conn: this.conn,
      onMessage: (msg) => this.onMessage(msg),
      onState: (state, detail) => this.setRunState(state, detail),
    });
    this.stream.start();
  }

  detach() {
    this.part("complete-agent").hidden = true;
    this.stream?.close();
    this.stream = null;
    this.run = null;
    this.forms.clear();
    this.view.clear();
    this.view.setFilter("all");
    this.panel.detach();
    this.uploader.setRun(null);
    this.files.setRun(null);
    this.setRunState("idle");
  }

  onMessage(msg) {
    this.view.add(msg);
    this.panel.noticed(msg);
    this.files.noticed(msg);
    this.noticeIdle(msg);
    if (msg.t === MessageType.COMPLETE && !msg.w) this.panel.refresh();
  }

  // An interactive agent that waits for the user (IDLE of the main workstream, not
  // waiting for children) may be ended with Done: POST /runs/{id}/complete
  // (docs/conversations.md, Interactive agents). Any later main message hides it.
  noticeIdle(msg) {
    if (msg.w && msg.w !== "main") return;
    if (msg.t === MessageType.STREAMING_CHUNK) return;
    const waiting = msg.d && Array.isArray(msg.d.waiting_for) ? msg.d.waiting_for : [];
    this.part("complete-agent").hidden = !(msg.t === MessageType.IDLE && waiting.length === 0);
  }

  async completeAgent() {
    if (!this.run) return;
    const button = this.part("complete-agent");
    showError(this.part("composer-error"), null);
    button.disabled = true;
    try {
      await api("POST", `${workflowPath(this.run.workflowId)}/complete`, this.conn);
      button.hidden = true;
    } catch (error) {
      showError(this.part("composer-error"), error);
    } finally {
      button.disabled = false;
    }
  }

  /** The run's output, for its COMPLETE (undefined when it cannot be read). */
  async output() {
    if (!this.run) return undefined;
    const described = await api("GET", workflowPath(this.run.workflowId), this.conn);
    return described?.output ?? undefined;
  }

  promptForm(msg) {
    const details = msg.d && typeof msg.d === "object" ? msg.d : {};
    const schema = details.ui_schema ?? details.uiSchema ?? null;
    const nodeId = details.node_id;
    const run = this.run;
    const { form, close } = buildSchemaForm(schema, async (answer) => {
      const body = { ...answer, client_message_id: messageId() };
      if (nodeId) body.node_id = nodeId;
      const metadata = this.metadata();
      if (metadata) body.metadata = metadata;
      await api("POST", `${runPath(run.workflowId, run.runId)}/signal/UserInput`, {
        ...this.conn,
        json: body,
      });
    });
    if (nodeId) {
      this.forms.get(nodeId)?.("Superseded by a newer prompt.");
      this.forms.set(nodeId, close);
    }
    return form;
  }

  answered(msg) {
    const node = msg.d?.node_id;
    const close = node ? this.forms.get(node) : null;
    if (close) {
      close("Answered.");
      this.forms.delete(node);
    }
  }

  async sendMessage(text) {
    const { workflowId, runId } = this.run;
    const body = { message: text, client_message_id: messageId() };
    const metadata = this.metadata();
    if (metadata) body.metadata = metadata;
    await api("POST", `${runPath(workflowId, runId)}/signal/UserInput`, {
      ...this.conn,
      json: body,
    });
  }

  /** Send the message box's text to the run, or start a run with it. */
  async submit() {
    const input = this.part("message-input");
    const text = input.value;
    showError(this.part("composer-error"), null);
    if (!text.trim() || this.uploader.busy) return;
    this.sending = true;
    this.updateSend();
    try {
      if (this.run) {
        await this.sendMessage(text);
      } else {
        this.setRunState("starting");
        let started;
        try {
          started = await this.startRun(text);
        } catch (error) {
          this.setRunState("idle");
          throw error;
        }
        if (this.run?.workflowId !== started.workflowId) {
          this.attach(started.workflowId, started.runId);
        }
      }
      input.value = "";
    } catch (error) {
      showError(this.part("composer-error"), error);
    } finally {
      this.sending = false;
      this.updateSend();
    }
  }
}

export { ApiError };
