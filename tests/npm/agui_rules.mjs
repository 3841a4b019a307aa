// Drives Spindle's AG-UI endpoint with the published @ag-ui/client (HttpAgent),
// unchanged, through AG-UI's interrupt rules (docs.ag-ui.com, concepts: Interrupts):
// 1. a run until the HITL interrupt;
// 2. a run without `resume` although the interrupt is pending (the client itself
//    refuses that, so its record of pending interrupts is cleared first): RUN_ERROR;
// 3. a resume naming an interrupt that was never raised: RUN_ERROR;
// 4. a resume abandoning the interrupt (status `cancelled`): the run is cancelled.
// Prints one JSON report line: {"runs": [{"events", "interrupts", "outcome", "errors"}, ...]}.
import { HttpAgent, buildResumeArray } from '@ag-ui/client';

const { AGUI_URL, TOKEN } = process.env;
if (!AGUI_URL || !TOKEN) {
    console.error('AGUI_URL and TOKEN are required');
    process.exit(2);
}
console.log = (...args) => console.error(...args); // stdout is for the report

const agent = new HttpAgent({ url: AGUI_URL, headers: { Authorization: `Bearer ${TOKEN}` } });
agent.addMessage({ id: 'user-1', role: 'user', content: 'the interrupt rules' });
const runs = [];

async function run(parameters) {
    const seen = { events: [], interrupts: [], outcome: null, errors: [] };
    try {
        await agent.runAgent(parameters, {
            onEvent({ event }) { seen.events.push(event.type); },
            onRunFinishedEvent(params) {
                seen.outcome = params.outcome;
                if (params.outcome === 'interrupt') seen.interrupts = params.interrupts;
            },
            onRunErrorEvent({ event }) {
                seen.errors.push({ code: event.code ?? null, message: event.message });
            },
        });
    } catch (err) {
        seen.errors.push({ code: 'CLIENT', message: String(err?.message ?? err) });
    }
    runs.push(seen);
    return seen;
}

const first = await run({});
if (first.interrupts.length === 1) {
    const [interrupt] = first.interrupts;
    agent.pendingInterrupts = []; // a non-conforming client: new input on a pending interrupt
    agent.addMessage({ id: 'user-2', role: 'user', content: 'something else' });
    await run({});
    await run({ resume: [{ interruptId: 'prompt-999999', status: 'resolved', payload: {} }] });
    agent.pendingInterrupts = [interrupt];
    const resume = buildResumeArray(agent.pendingInterrupts, {
        [interrupt.id]: { status: 'cancelled' },
    });
    await run({ resume });
}
process.stdout.write(`${JSON.stringify({ runs })}\n`);
