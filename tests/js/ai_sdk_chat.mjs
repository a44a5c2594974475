// Drives toolguard's POST /hitl/ai-sdk/chat with the Vercel AI SDK's own chat client: the
// AbstractChat of `ai` (what useChat wraps) over a DefaultChatTransport, approvals answered
// with addToolApprovalResponse and sent by sendAutomaticallyWhen, as a useChat page does.
//
// node ai_sdk_chat.mjs URL PLAN
//   PLAN: JSON list of steps: {"send": "text"} | {"answer": {"approved": bool, "reason"?: str}}
//         | {"replay": true} (post again the messages of the first answered approval)
// Prints one JSON object: {"steps": [{"status", "error", "messages"}...], "replay": {...}}.

import {
  AbstractChat,
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
} from 'ai';

class State {
  constructor() {
    this.status = 'ready';
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
let finished;
const transport = new DefaultChatTransport({ api: url });
const chat = new Chat({
  id: 'chat-1',
  transport,
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onFinish: () => finished?.(),
  onError: () => finished?.(),
});

function nextFinish() {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no response within 10 s: ${chat.status} ${chat.error?.message}`)),
      10000,
    );
    finished = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}

const out = { steps: [] };
let answered;
for (const step of plan) {
  if (step.send !== undefined) {
    const done = nextFinish();
    await chat.sendMessage({ text: step.send });
    await done;
  } else if (step.answer !== undefined) {
    const last = chat.messages[chat.messages.length - 1];
    const waiting = last.parts.filter(
      part => isToolUIPart(part) && part.state === 'approval-requested',
    );
    const done = nextFinish();
    for (const part of waiting) {
      await chat.addToolApprovalResponse({ id: part.approval.id, ...step.answer });
    }
    answered ??= structuredClone(chat.messages);
    await done;
  } else if (step.replay) {
    // The same request again, as a page that replays it would send it: its approval is spent.
    const stream = await transport.sendMessages({
      chatId: 'chat-1',
      messages: answered,
      trigger: 'submit-message',
      messageId: answered[answered.length - 1].id,
      abortSignal: undefined,
    });
    const replay = { error: null, messages: [] };
    const start = structuredClone(answered[answered.length - 1]);
    for await (const message of readUIMessageStream({
      message: start,
      stream,
      onError: error => {
        replay.error = error.message;
      },
    })) {
      replay.messages.push(message);
    }
    out.replay = replay;
    continue;
  }
  out.steps.push({
    status: chat.status,
    error: chat.error?.message ?? null,
    messages: chat.messages,
  });
}
process.stdout.write(JSON.stringify(out));
