// Drives Spindle's AG-UI endpoint with the published @ag-ui/client (HttpAgent),
// unchanged: one run until the HITL interrupt, then a second run on the same
// thread whose `resume` answers it. Prints one JSON report line:
// {"runs": [{"events", "interrupts", "result"}, ...], "errors": [...]}.
import { HttpAgent, buildResumeArray } from '@ag-ui/client';

const { AGUI_URL, TOKEN } = process.env;
const TOPIC = process.env.TOPIC ?? 'durable agents';
const DECISION = process.env.DECISION ?? 'approve';
if (!AGUI_URL || !TOKEN) {
    console.error('AGUI_URL and TOKEN are required');
    process.exit(2);
}
console.log = (...args) => console.error(...args); // stdout is for the report

const agent = new HttpAgent({ url: AGUI_URL, headers: { Authorization: `Bearer ${TOKEN}` } });
agent.addMessage({ id: 'user-1', role: 'user', content: TOPIC });
const runs = [];
const errors = [];

async function run(parameters) {
    const seen = { events: [], interrupts: [], result: null };
    try {
        await agent.runAgent(parameters, {
            onEvent({ event }) { seen.events.push(event.type); },
            onRunFinishedEvent(params) {
                if (params.outcome === 'interrupt') seen.interrupts = params.interrupts;
                else seen.result = params.result ?? null;
            },
            onRunErrorEvent({ event }) { errors.push(event.message); },
        });
    } catch (err) {
        errors.push(String(err?.message ?? err));
    }
    runs.push(seen);
    return seen;
}

const first = await run({});
if (first.interrupts.length === 1) {
    const [interrupt] = first.interrupts;
    const resume = buildResumeArray(agent.pendingInterrupts, {
        [interrupt.id]: { status: 'resolved', payload: { decision: DECISION } },
    });
    await run({ resume });
}
process.stdout.write(`${JSON.stringify({ runs, errors })}\n`);
