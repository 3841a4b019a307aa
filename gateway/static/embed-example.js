// The embedding example page (embed-example.html): wires the two components'
// events. No inline script: the gateway's Content-Security-Policy forbids it.

import { renderHeader } from "./nav.js";

renderHeader();

const chat = document.getElementById("chat-box");
const watch = document.getElementById("watch-box");
const note = document.getElementById("close-note");

// The second box shows, read-only, the run the first one started.
chat.addEventListener("spindle-run", (event) => {
  watch.setAttribute("workflow-id", event.detail.workflowId);
  watch.setAttribute("run-id", event.detail.runId);
});

// A close button (the `closable` attribute): hide the box, say so.
chat.onclose = () => {
  chat.hidden = true;
  note.textContent = "The conversation was closed (spindle-close).";
};

// Metadata computed per message, merged over the `metadata` attribute.
chat.getMessageContext = () => ({ sent_from: location.pathname });
