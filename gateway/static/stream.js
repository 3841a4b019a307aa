// Seed 002's two-phase streaming, for a browser.
//
// Phase 1 fetches the stored history (GET …/updates, gzip). Phase 2 opens an
// EventSource on …/stream. EventSource cannot send headers, so each connection
// carries a stream token minted for this run (POST /runs/{id}/stream-token) in
// `access_token`. While the token is valid the browser reconnects by itself and
// resumes with Last-Event-ID. A refused reconnect (the token expired, the
// gateway restarted with other limits, …) closes the EventSource; then a new
// token is minted and a new EventSource resumes from the last sequence number
// (`lastEventId`), with exponential backoff: 1 s base, 30 s cap, 10 % jitter,
// at most 10 attempts in a row.
//
// Per-run timestamps strictly increase, so a message whose ts is not above the
// last one seen was already delivered: nothing is shown twice across phases.

import { api, runPath, workflowPath } from "./api.js";

const BASE_DELAY_MS = 1000;
const MAX_DELAY_MS = 30000;
const JITTER = 0.1;
const MAX_ATTEMPTS = 10;

export const MessageType = Object.freeze({
  SYSTEM: 0,
  THOUGHT: 1,
  PLAN: 2,
  UPDATE: 3,
  COMPLETE: 4,
  WARNING: 5,
  ERROR: 6,
  ANSWER: 7,
  QUESTION: 8,
  REQUEST_INPUT: 9,
  IDLE: 10,
  TERMINATED: 11,
  STREAMING_CHUNK: 12,
  BATCH_PROGRESS: 13,
  RESTARTING: 14,
});

/** The main workstream's COMPLETE or TERMINATED closes the conversation. */
export function endsConversation(msg) {
  return (msg.t === MessageType.COMPLETE || msg.t === MessageType.TERMINATED) && !msg.w;
}

export function backoffDelay(attempt) {
  const base = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** attempt);
  return Math.round(base * (1 + JITTER * (2 * Math.random() - 1)));
}

export class ConversationStream {
  /**
   * @param {{workflowId: string, runId: string,
   *          onMessage: (msg: object) => void,
   *          onState: (state: string, detail?: string) => void,
   *          conn?: {base?: string, key?: string}}} options
   *   `conn`: another gateway's origin and key (the embeddable component).
   */
  constructor({ workflowId, runId, onMessage, onState, conn = {} }) {
    this.conn = conn;
    this.workflowId = workflowId;
    this.runId = runId;
    this.onMessage = onMessage;
    this.onState = onState;
    this.lastTs = -1;
    this.lastSeq = null;
    this.attempts = 0;
    this.ended = false;
    this.closed = false;
    this.source = null;
    this.timer = null;
    this.tokens = 0; // stream tokens minted (one per connection we open)
  }

  async start() {
    this.onState("loading");
    try {
      const history = await api("GET", `${runPath(this.workflowId, this.runId)}/updates`, this.conn);
      for (const msg of history?.messages || []) this.deliver(msg, null);
    } catch (error) {
      this.onState("failed", error.message);
      return;
    }
    if (!this.ended) await this.connect();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
  }

  deliver(msg, seq) {
    if (this.ended || !msg || typeof msg !== "object") return;
    if (typeof msg.ts === "number") {
      if (msg.ts <= this.lastTs) return;
      this.lastTs = msg.ts;
    }
    if (seq !== null && Number.isFinite(seq)) this.lastSeq = seq;
    this.onMessage(msg);
    if (endsConversation(msg)) {
      this.ended = true;
      if (this.source) this.source.close();
      this.source = null;
      this.onState("ended");
    }
  }

  async connect() {
    if (this.closed || this.ended) return;
    let token;
    try {
      token = await api("POST", `${workflowPath(this.workflowId)}/stream-token`, this.conn);
    } catch (error) {
      // 4xx other than a transient one: retrying will not help.
      if (error.status >= 400 && error.status < 500 && error.status !== 429) {
        this.onState("failed", error.message);
        return;
      }
      this.retryLater(error.message);
      return;
    }
    if (this.closed || this.ended) return;
    this.tokens += 1;
    const params = new URLSearchParams({ access_token: token.access_token });
    if (this.lastSeq !== null) params.set("lastEventId", String(this.lastSeq));
    else if (this.lastTs >= 0) params.set("since", String(this.lastTs));
    const source = new EventSource(`${this.conn.base ?? ""}${runPath(this.workflowId, this.runId)}/stream?${params}`);
    this.source = source;
    source.onopen = () => {
      this.attempts = 0;
      this.onState("live");
    };
    source.onmessage = (event) => {
      let msg;
      try {
        msg = JSON.parse(event.data);
      } catch {
        return;
      }
      const seq = event.lastEventId ? Number(event.lastEventId) : null;
      this.deliver(msg, seq);
    };
    source.onerror = () => {
      if (this.source !== source) return;
      if (this.ended || this.closed) {
        source.close();
        return;
      }
      if (source.readyState === EventSource.CONNECTING) {
        // The browser retries by itself, with Last-Event-ID.
        this.onState("reconnecting");
        return;
      }
      // Refused (401 after the token expired, 429, 5xx …): mint a new token.
      source.close();
      this.source = null;
      this.retryLater("the stream was refused");
    };
  }

  retryLater(reason) {
    if (this.attempts >= MAX_ATTEMPTS) {
      this.onState("failed", `${reason}; gave up after ${MAX_ATTEMPTS} attempts`);
      return;
    }
    const delay = backoffDelay(this.attempts);
    this.attempts += 1;
    this.onState("reconnecting", reason);
    this.timer = setTimeout(() => this.connect(), delay);
  }
}
