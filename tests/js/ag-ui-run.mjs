// Drives toolguard's POST /hitl/ag-ui with the official AG-UI client (@ag-ui/client's
// HttpAgent), as a front end does: a user message, then a run whose `resume` answers the
// interrupts the paused run ended with (built with the client's own buildResumeArray).
//
// node ag-ui-run.mjs URL PLAN
//   PLAN: JSON list of steps, each run on one HttpAgent (one conversation):
//     {"send": "text"}                            a user message
//     {"answer": [{"status", "payload"?}, ...]}   one answer per pending interrupt, in order
//     {"replay": N}                               send again the resume of step N
//     {"look": true}                              drop the pending interrupts, run with nothing new
//     {"agent": "new"}                            later steps run on a fresh agent (a new thread)
// Prints one JSON object: {"steps": [{"events", "error", "newMessages", "state",
//   "pendingInterrupts"}...], "messages": the last agent's messages}.

import { HttpAgent, buildResumeArray } from '@ag-ui/client';

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);

function newAgent() {
  return new HttpAgent({ url });
}

let agent = newAgent();
const resumes = [];
const steps = [];
let count = 0;

for (const [index, step] of plan.entries()) {
  if (step.agent === 'new') {
    agent = newAgent();
    resumes.push(undefined);
    continue;
  }
  const events = [];
  let resume;
  if (step.send !== undefined) {
    count += 1;
    agent.addMessage({ id: `user-${count}`, role: 'user', content: step.send });
  } else if (step.answer !== undefined) {
    const responses = {};
    agent.pendingInterrupts.forEach((interrupt, i) => {
      responses[interrupt.id] = step.answer[i];
    });
    resume = buildResumeArray(agent.pendingInterrupts, responses);
  } else if (step.replay !== undefined) {
    resume = resumes[step.replay];
  } else if (step.look) {
    agent.pendingInterrupts = [];
  }
  resumes[index] = resume;
  let error = null;
  let result;
  try {
    result = await agent.runAgent(resume === undefined ? {} : { resume }, {
      onEvent: ({ event }) => {
        events.push(event);
      },
    });
  } catch (caught) {
    error = String(caught?.message ?? caught);
  }
  steps.push({
    events,
    error,
    newMessages: result?.newMessages ?? null,
    state: structuredClone(agent.state),
    pendingInterrupts: structuredClone(agent.pendingInterrupts),
  });
}

process.stdout.write(JSON.stringify({ steps, messages: agent.messages }));
