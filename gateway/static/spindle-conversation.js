// <spindle-conversation>: the conversation page's view as an embeddable web
// component (seed 002's ModernAgentConversation; docs/streaming/embedding.md).
//
//   <script type="module" src="https://gateway.example/ui/spindle-conversation.js"></script>
//   <spindle-conversation graph="chat" heading="Ask the assistant"></spindle-conversation>
//
// It reuses the page's modules (conversation.js: stream, rendering, workstream
// folds, files, uploads, prompt forms) inside its own shadow root, styled by the
// page's style.css. Attributes (and same-named camelCase properties):
//   workflow-id, run-id   the run to show (both, or workflow-id alone: its latest run)
//   graph, input          start a new run of `graph`; the first message fills the input
//                         (`input`: a JSON object the message is merged into)
//   interactive           "false": no message box once the run shows (prompts still do)
//   heading (or title)    the header's text (default: the run's workflow id)
//   initial-message       a note shown above the start view
//   placeholder           the message box's placeholder
//   start-button-text, send-button-text   the button labels
//   full-width            no centred max-width
//   hide-input            never show the message box
//   closable              show a close button: fires `spindle-close` and calls `onclose`
//   metadata              a JSON object added to each user message (UserInput.metadata)
//   api-base, api-key     another gateway's origin and an API key (default: this origin,
//                         the key the gateway's own pages keep for this tab)
// Properties only: `startWorkflow(message)` (resolves {workflow_id, run_id}: start the
// run yourself), `getMessageContext()` (metadata computed per message), `onclose`.
// Events (bubbling, composed): spindle-run {workflowId, runId}, spindle-state {state},
// spindle-close.

import { api, ApiError } from "./api.js";
import { Conversation, inputFor, showError } from "./conversation.js";

const STYLE_URL = new URL("./style.css", import.meta.url).href;

const TEMPLATE = `
<link rel="stylesheet" href="${STYLE_URL}">
<section class="embed" id="drop-zone" part="container" aria-label="Conversation">
  <header class="embed-head">
    <h2 id="heading" class="embed-title"></h2>
    <span id="run-state" class="run-state" data-state="idle" role="status">no conversation</span>
    <button id="close" type="button" class="embed-close" aria-label="Close" hidden>×</button>
  </header>
  <p id="initial-message" class="embed-intro" hidden></p>
  <p id="page-error" class="inline-error" role="alert" hidden></p>
  <nav id="ws-tabs" class="tabs" hidden aria-label="Workstreams"></nav>
  <ol id="messages" class="messages" aria-live="polite" aria-label="Messages" tabindex="0"></ol>
  <details class="embed-side" id="side">
    <summary>Workstreams and files</summary>
    <div id="workstreams"></div>
    <ul id="files" class="files" aria-label="The run's files"></ul>
    <p id="files-error" class="inline-error" role="alert" hidden></p>
  </details>
  <form id="composer" class="composer">
    <label for="message-input" class="visually-hidden">Message</label>
    <textarea id="message-input" rows="2"></textarea>
    <div class="composer-actions">
      <input id="file-input" type="file" multiple hidden>
      <button id="attach" type="button" disabled>Attach files</button>
      <span id="upload-state" class="muted" role="status"></span>
      <span class="spacer"></span>
      <button id="complete-agent" type="button" hidden>Done</button>
      <button id="send" type="submit"></button>
    </div>
    <p id="composer-error" class="inline-error" role="alert" hidden></p>
  </form>
</section>`;

const OBSERVED = [
  "workflow-id", "run-id", "graph", "input", "interactive", "heading", "title",
  "initial-message", "placeholder", "start-button-text", "send-button-text",
  "full-width", "hide-input", "closable", "metadata", "api-base", "api-key",
];

function camel(name) {
  return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}

function jsonObject(text, what) {
  if (!text) return null;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not JSON: ${error.message}`);
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object`);
  }
  return value;
}

export class SpindleConversation extends HTMLElement {
  static get observedAttributes() {
    return OBSERVED;
  }

  constructor() {
    super();
    this.startWorkflow = null;
    this.getMessageContext = null;
    this.onclose = null;
    this.conversation = null;
    this.ready = null;
    this.shadow = this.attachShadow({ mode: "open" });
    this.shadow.innerHTML = TEMPLATE;
    this.part("close").addEventListener("click", () => this.close());
  }

  part(id) {
    return this.shadow.getElementById(id);
  }

  /** The gateway connection: `api-base` and `api-key` (else same origin, the tab's key). */
  get conn() {
    const base = (this.getAttribute("api-base") ?? "").replace(/\/+$/, "");
    const key = this.getAttribute("api-key");
    return key === null ? { base } : { base, key };
  }

  connectedCallback() {
    if (!this.ready) this.ready = this.setup();
    this.ready.catch((error) => showError(this.part("page-error"), error));
  }

  disconnectedCallback() {
    this.conversation?.stream?.close();
  }

  attributeChangedCallback(name) {
    if (!this.conversation) return;
    if (name === "workflow-id" || name === "run-id") this.showRun();
    else this.applyOptions();
  }

  async setup() {
    const config = await api("GET", "/ui/config.json", this.conn);
    this.conversation = new Conversation(this.shadow, {
      conn: this.conn,
      config,
      metadata: () => this.messageMetadata(),
      startRun: (text) => this.startRun(text),
      onState: (state) => this.stateChanged(state),
    });
    this.applyOptions();
    this.showRun();
  }

  flag(name) {
    return this.hasAttribute(name) && this.getAttribute(name) !== "false";
  }

  /** Read every option into the view (called again when one changes). */
  applyOptions() {
    const run = this.conversation?.run;
    const heading = this.getAttribute("heading") ?? this.getAttribute("title");
    this.part("heading").textContent = heading || run?.workflowId || "Conversation";
    const intro = this.getAttribute("initial-message");
    this.part("initial-message").textContent = intro ?? "";
    this.part("initial-message").hidden = !intro || Boolean(run);
    this.part("message-input").placeholder =
      this.getAttribute("placeholder") ?? "Type your message…";
    this.part("send").textContent = run
      ? (this.getAttribute("send-button-text") ?? "Send")
      : (this.getAttribute("start-button-text") ?? "Start");
    this.part("drop-zone").classList.toggle("full-width", this.flag("full-width"));
    this.part("close").hidden = !(this.flag("closable") || typeof this.onclose === "function");
    const interactive = this.getAttribute("interactive") !== "false";
    const canStart = Boolean(this.getAttribute("graph") || this.startWorkflow);
    this.part("composer").hidden =
      this.flag("hide-input") || (run ? !interactive : !canStart);
  }

  showRun() {
    const workflowId = this.getAttribute("workflow-id");
    if (!workflowId) {
      if (this.conversation.run) this.conversation.detach();
      this.applyOptions();
      return;
    }
    const runId = this.getAttribute("run-id") || "latest";
    const current = this.conversation.run;
    if (current?.workflowId !== workflowId || current?.runId !== runId) {
      this.conversation.attach(workflowId, runId);
    }
    this.applyOptions();
  }

  messageMetadata() {
    const fixed = jsonObject(this.getAttribute("metadata"), "the metadata attribute");
    const computed = typeof this.getMessageContext === "function" ? this.getMessageContext() : null;
    const merged = { ...(this.metadataValue ?? {}), ...(fixed ?? {}), ...(computed ?? {}) };
    return Object.keys(merged).length ? merged : null;
  }

  /** `metadata` as a property: an object (the attribute, if set, is merged over it). */
  get metadata() {
    return this.messageMetadata();
  }

  set metadata(value) {
    this.metadataValue = value && typeof value === "object" ? value : null;
  }

  async startRun(text) {
    let started;
    if (typeof this.startWorkflow === "function") {
      started = await this.startWorkflow(text);
    } else {
      const graph = this.getAttribute("graph");
      if (!graph) throw new ApiError(0, "This conversation has no graph to start.");
      const spec = await api("GET", `/graphs/${encodeURIComponent(graph)}`, this.conn);
      const base = jsonObject(this.getAttribute("input"), "the input attribute") ?? {};
      started = await api("POST", "/runs", {
        ...this.conn,
        json: { graph, input: inputFor(spec.input_schema, text, base) },
      });
    }
    const ids = {
      workflowId: started.workflow_id ?? started.workflowId,
      runId: started.run_id ?? started.runId,
    };
    // Reflected, so the element shows this run from now on (and says which).
    this.conversation.attach(ids.workflowId, ids.runId);
    this.setAttribute("workflow-id", ids.workflowId);
    this.setAttribute("run-id", ids.runId);
    this.dispatchEvent(new CustomEvent("spindle-run", { detail: ids, bubbles: true, composed: true }));
    return ids;
  }

  stateChanged(state) {
    this.applyOptions();
    this.dispatchEvent(new CustomEvent("spindle-state", { detail: { state }, bubbles: true, composed: true }));
  }

  close() {
    const event = new CustomEvent("spindle-close", { bubbles: true, composed: true, cancelable: true });
    this.dispatchEvent(event);
    if (typeof this.onclose === "function") this.onclose(event);
  }
}

// Properties mirroring attributes (el.graph = "chat", el.hideInput = true, …).
for (const name of OBSERVED) {
  const prop = camel(name);
  if (prop in SpindleConversation.prototype || prop === "title" || prop === "metadata") continue;
  Object.defineProperty(SpindleConversation.prototype, prop, {
    get() {
      return this.getAttribute(name);
    },
    set(value) {
      if (value === null || value === undefined || value === false) this.removeAttribute(name);
      else this.setAttribute(name, value === true ? "" : String(value));
    },
  });
}

if (!customElements.get("spindle-conversation")) {
  customElements.define("spindle-conversation", SpindleConversation);
}
