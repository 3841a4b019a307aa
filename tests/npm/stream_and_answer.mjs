// Drives a Spindle run with the published @vertesia/client, unchanged:
// two-phase streaming (gzip history, then SSE with since/skipHistory), automatic
// reconnection, and a UserInput signal sent when the run asks for input.
// Prints one JSON line per received message, then {"done": true}.
import { VertesiaClient } from '@vertesia/client';

const { BASE_URL, WORKFLOW_ID, RUN_ID } = process.env;
const ANSWER = process.env.ANSWER ?? 'approve';
const TOKEN = process.env.TOKEN ?? 'dev-token'; // not pk-/sk-: no token exchange
if (!BASE_URL || !WORKFLOW_ID || !RUN_ID) {
    console.error('BASE_URL, WORKFLOW_ID and RUN_ID are required');
    process.exit(2);
}
// The library logs diagnostics with console.log; keep stdout for JSON lines.
console.log = (...args) => console.error(...args);
const emit = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

const client = new VertesiaClient({ serverUrl: BASE_URL, storeUrl: BASE_URL, apikey: TOKEN });
// With WAIT_FOR_GO=1 the answer waits for a line on stdin, so a test can
// choose the moment (e.g. after it has cut and seen a reconnect).
const goSignal = process.env.WAIT_FOR_GO === '1'
    ? new Promise((resolve) => process.stdin.once('data', () => { process.stdin.pause(); resolve(); }))
    : Promise.resolve();
let answered = false;
await client.workflows.streamMessages(WORKFLOW_ID, RUN_ID, (msg) => {
    emit({ message: msg });
    if (msg.type === 9 && !answered) { // REQUEST_INPUT
        answered = true;
        goSignal
            .then(() => client.workflows.sendSignal(WORKFLOW_ID, RUN_ID, 'UserInput', { message: ANSWER }))
            .then((res) => emit({ signal_response: res }))
            .catch((err) => emit({ signal_error: String(err) }));
    }
});
// stdin may still be open (WAIT_FOR_GO): exit once the last line is flushed.
process.stdout.write(`${JSON.stringify({ done: true })}\n`, () => process.exit(0));
