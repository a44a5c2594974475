// toolguard's chat page: a chat view plus approval cards for pending tool calls.
// Plain JavaScript, no build step, no network access beyond this server's API:
//   POST /hitl/chat, POST /hitl/review, GET /hitl/threads/{id}, GET /hitl/tools,
//   GET /hitl/events (live list of pending reviews; GET /hitl/reviews when that fails),
//   GET /hitl/threads/{id}/audit (who approved a call that ran without a review: a judge),
//   GET, POST and DELETE /hitl/session (who is signed in; sign-in with a token; sign-out),
//   GET /hitl/info (a chat, or an MCP gateway: then the page shows the waiting calls, with
//   their server and client, and their results as MCP content: gateway.js),
//   GET and DELETE /hitl/grants (a gateway's standing grants, listed and revoked: gateway.js).
"use strict";

(() => {
  const REJECT_PROMPT = "Why are you rejecting this tool?";
  const DECISION_LABELS = { approve: "Approve", edit: "Edit", reject: "Reject" };
  const ALL_DECISIONS = ["approve", "edit", "reject"];
  const LONG_LINES = 30; // longer arguments get a note: their box scrolls
  const LONG_CHARS = 3000;
  const SHORTCUTS = { a: "approve", e: "edit", r: "reject" };
  // The badge of a tool result whose call was reviewed: [label, CSS class].
  const OUTCOMES = {
    approved: ["running", "muted"], // decided; its call has not answered yet
    edited: ["running", "muted"],
    executed: ["executed", "success"],
    rejected: ["rejected", "rejected"],
    expired: ["expired", "muted"],
    cancelled: ["cancelled", "muted"],
    failed: ["failed", "error"],
  };
  const DECIDED_VERBS = { approve: "Approved", edit: "Edited", reject: "Rejected" };
  const RISKS = ["low", "medium", "high"]; // a judge's verdict (toolguard.Judge)
  // Standing grants: "approve, and stop asking for this tool in this conversation".
  const GRANT_DURATIONS = [
    ["", "until revoked"],
    ["900", "for 15 minutes"],
    ["3600", "for 1 hour"],
    ["28800", "for 8 hours"],
  ];

  // Invisible and look-alike characters are shown escaped (reveal.js, loaded first).
  const reveal = globalThis.toolguardReveal;
  // The gateway's parts (gateway.js, loaded first).
  const gateway = globalThis.toolguardGateway;

  const $ = (id) => document.getElementById(id);
  const dom = {
    app: $("app"),
    account: $("account"),
    signedIn: $("signed-in"),
    signOut: $("sign-out"),
    signIn: $("sign-in"),
    signInForm: $("sign-in-form"),
    signInToken: $("sign-in-token"),
    signInSubmit: $("sign-in-submit"),
    signInError: $("sign-in-error"),
    proxyNeeded: $("proxy-needed"),
    proxyDetail: $("proxy-detail"),
    linkNeeded: $("link-needed"),
    linkDetail: $("link-detail"),
    error: $("error"),
    errorText: $("error-text"),
    errorDismiss: $("error-dismiss"),
    empty: $("empty"),
    messages: $("messages"),
    review: $("review"),
    reviewTitle: $("review-title"),
    reviewHint: $("review-hint"),
    reviewDeadline: $("review-deadline"),
    cards: $("cards"),
    batch: $("batch"),
    submitDecisions: $("submit-decisions"),
    approveAll: $("approve-all"),
    rejectAll: $("reject-all"),
    status: $("status"),
    form: $("chat-form"),
    input: $("chat-input"),
    send: $("send"),
    chatHint: $("chat-hint"),
    newThread: $("new-thread"),
    subtitle: $("subtitle"),
    shadowBanner: $("shadow-banner"),
    conversation: $("conversation"),
    callResult: $("call-result"),
    callResultTitle: $("call-result-title"),
    callOutcome: $("call-outcome"),
    callResultBody: $("call-result-body"),
    queueTitle: $("queue-title"),
    queueCount: $("queue-count"),
    queueEmpty: $("queue-empty"),
    queueList: $("queue-list"),
    queueLive: $("queue-live"),
  };
  // A gateway's standing grants (shown only in gateway mode).
  const grants = gateway
    ? gateway.grantsPanel(
        {
          section: $("grants"),
          title: $("grants-title"),
          count: $("grants-count"),
          empty: $("grants-empty"),
          list: $("grants-list"),
          error: $("grants-error"),
          status: $("grants-status"),
          ended: $("grants-ended"),
          endedSummary: $("grants-ended-summary"),
          endedList: $("grants-ended-list"),
          live: $("grants-live"),
        },
        (method, path) => api(method, path),
      )
    : null;

  const state = {
    threadId: null,
    threadStatus: "idle",
    busy: false,
    pending: null, // the pending_review payload shown in the cards
    reviewKey: null, // identifies the review the cards were built for
    reviewId: null,
    actions: new Map(), // call_id -> the thread's action for that call (who decided, when)
    judged: new Map(), // call_id -> {judgement, at}: calls a judge let run without a review
    judgedLooked: new Set(), // call ids of unreviewed calls already looked up in the audit trail
    tools: null, // name -> JSON Schema of its arguments, from GET /hitl/tools
    reasons: new Map(), // name -> why the tool needs approval, from GET /hitl/tools
    toolsLoading: null,
    cards: [], // per action: {request, choice, root, buttons, editPanel, editArgs, editError, rejectPanel, rejectReason, choiceText}
    loads: 0, // counts thread loads: only the latest one is shown
    mode: null, // "chat" or "gateway" (GET /hitl/info); null until known
    calls: new Map(), // gateway: thread_id -> {server, client} of the call, from the live list
    callInfo: null, // gateway: the open card's details {node, tool, requestedAt}
    resultKey: null, // gateway: what the result area was built for
  };
  const inGateway = () => state.mode === "gateway";

  // The live list of pending reviews (every thread), from GET /hitl/events.
  const POLL_MS = 3000; // polling GET /hitl/reviews when the event stream cannot be used
  const live = {
    reviews: [],
    source: null,
    pollTimer: null,
    refreshing: false,
    again: false,
    reviewsKey: "", // the pending reviews last shown: a change may have made or spent a grant
  };

  // ------------------------------------------------------------------ small helpers

  // Builds an element: el("p", { className: "note", text: "..." }, child, ...); text as text.
  const el = gateway.el;

  // JSON as the page shows it: numbers exact, keys in their order (reveal.js).
  function pretty(value) {
    return reveal.revealJson(value);
  }

  // Untrusted text is drawn by reveal.js only, as DOM text nodes (never markup): each
  // escaped character in a <span class="reveal"> titled with what it is.
  const revealNodes = (segments) => reveal.nodes(segments);

  // Untrusted prose (model replies, tool results): invisible characters escaped,
  // right-to-left text in boxes of its own.
  const proseNodes = (text, options) => reveal.proseNodes(text, options);

  // A name (tool, reviewer, model): one line, every suspicious character escaped.
  const nameNodes = (text) => reveal.nameNodes(text);

  // A name inside a sentence: in a left-to-right box of its own.
  const nameBox = (text, attrs) => reveal.nameBox(text, attrs);

  // A developer's description in which pairs of `backticks` become <code> elements (built
  // with the DOM, text as text nodes); an unpaired backtick stays as it is. The tool's
  // name, when the description quotes it as `name` (toolguard's own "Tool `name` is
  // awaiting approval"), is found as that exact text and drawn as one <code> element:
  // backticks inside an untrusted name are never read as markup.
  function descriptionNodes(description, name) {
    const quoted = `\`${name}\``;
    const at = typeof name === "string" ? description.indexOf(quoted) : -1;
    const segments = (text) => reveal.textSegments(text, { singleLine: true });
    if (at === -1) return codeNodes(segments(description));
    return [
      ...codeNodes(segments(description.slice(0, at))),
      el("code", { className: "inline" }, ...nameNodes(name)),
      ...codeNodes(segments(description.slice(at + quoted.length))),
    ];
  }

  function codeNodes(segments) {
    let ticks = 0;
    for (const [text, what] of segments) {
      if (what === null) ticks += text.split("`").length - 1;
    }
    const pairs = ticks - (ticks % 2);
    const out = [];
    let code = null;
    let seen = 0;
    const put = (node) => (code ? code.append(node) : out.push(node));
    for (const [text, what] of segments) {
      if (what !== null) {
        put(el("span", { className: "reveal", title: what, text }));
        continue;
      }
      text.split("`").forEach((part, i) => {
        if (i > 0 && seen < pairs) {
          seen += 1;
          if (code) {
            out.push(code);
            code = null;
          } else {
            code = el("code", { className: "inline" });
          }
        } else if (i > 0) {
          put(document.createTextNode("`"));
        }
        if (part) put(document.createTextNode(part));
      });
    }
    return out;
  }

  const nameText = (name) => reveal.nameText(name);

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function describeFailure(response, data, text) {
    const prefix = `Error ${response.status}`;
    const detail = data && typeof data === "object" ? data.detail : undefined;
    if (typeof detail === "string") return `${prefix}: ${detail}`;
    if (Array.isArray(detail)) {
      const items = detail.map((item) => {
        if (item && typeof item === "object") {
          const loc = Array.isArray(item.loc) ? item.loc.join(".") : "";
          const msg = typeof item.msg === "string" ? item.msg : JSON.stringify(item);
          return loc ? `${loc}: ${msg}` : msg;
        }
        return String(item);
      });
      return `${prefix}: ${items.join("; ")}`;
    }
    const fallback = response.statusText || text.trim().slice(0, 300) || "the request failed";
    return `${prefix}: ${fallback}`;
  }

  async function api(method, path, body) {
    const init = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = reveal.stringifyJson(body); // exact numbers (an edit's arguments)
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, `Could not reach the server: ${err && err.message ? err.message : err}`);
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = reveal.parseJson(text); // numbers exact: 9007199254740993 stays itself
      } catch {
        data = null;
      }
    }
    if (!response.ok) {
      if (response.status === 401) sessionLost();
      throw new ApiError(response.status, describeFailure(response, data, text));
    }
    if (data === null || typeof data !== "object") {
      throw new ApiError(response.status, `Error ${response.status}: the server's answer is not JSON`);
    }
    return data;
  }

  const threadPath = (id) => `/hitl/threads/${encodeURIComponent(id)}`;

  // ------------------------------------------------------------------ error area and status

  function showError(err) {
    const text = err instanceof Error ? err.message : String(err);
    // An error may quote what the model sent: hidden characters stay visible here too.
    dom.errorText.replaceChildren(...(reveal ? proseNodes(text) : [text]));
    dom.error.hidden = false;
  }

  function clearError() {
    dom.error.hidden = true;
    dom.errorText.textContent = "";
  }

  function setBusy(busy, text = "") {
    state.busy = busy;
    dom.status.textContent = busy ? text : "";
    updateControls();
    if (!busy && live.again && !live.refreshing) {
      live.again = false; // the thread changed while the page was busy: show it as it is now
      setTimeout(refreshOpenThread, 0);
    }
  }

  function updateControls() {
    const pending = state.pending !== null;
    const running = state.threadStatus === "running";
    const blocked = state.busy || pending || running;
    dom.input.disabled = blocked;
    dom.send.disabled = blocked;
    dom.newThread.disabled = state.busy;
    if (pending) {
      dom.chatHint.textContent = "Answer the pending approval before sending a new message.";
      dom.input.placeholder = "Waiting for your decision…";
    } else if (running) {
      dom.chatHint.textContent =
        "The last decisions are still being applied. Reload the page to check again.";
      dom.input.placeholder = "Please wait…";
    } else {
      dom.chatHint.textContent = "";
      dom.input.placeholder = "Ask the agent…";
    }
    for (const card of state.cards) {
      for (const button of card.root.querySelectorAll("button")) button.disabled = state.busy;
      for (const control of card.grantControls ?? []) control.disabled = state.busy;
    }
    const undecided = state.cards.some((card) => card.choice === null);
    dom.submitDecisions.disabled = state.busy || undecided;
    dom.approveAll.disabled = state.busy;
    dom.rejectAll.disabled = state.busy;
  }

  // ------------------------------------------------------------------ thread id in the URL

  function setThread(id) {
    if (id !== state.threadId) {
      state.judged = new Map();
      state.judgedLooked = new Set();
    }
    state.threadId = id;
    const url = new URL(window.location.href);
    if (id) url.searchParams.set("thread", id);
    else url.searchParams.delete("thread");
    window.history.replaceState(null, "", url);
    renderQueue(); // marks the open thread in the list
  }

  // ------------------------------------------------------------------ messages

  function toolCallName(call) {
    return call && call.function && typeof call.function.name === "string"
      ? call.function.name
      : "unknown tool";
  }

  // The arguments of a call in the history, revealed like a card's.
  function toolCallArgs(call) {
    const raw = call && call.function ? call.function.arguments : undefined;
    if (typeof raw !== "string") return revealNodes(reveal.revealAction("", raw ?? {}, "").args);
    try {
      return revealNodes(reveal.revealAction("", reveal.parseJson(raw), "").args);
    } catch {
      return proseNodes(raw); // the model sent arguments that are not JSON: show them as they are
    }
  }

  function textOf(content) {
    if (content === null || content === undefined) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content
        .map((part) => (part && typeof part.text === "string" ? part.text : ""))
        .join("");
    }
    return pretty(content);
  }

  function renderMessage(message, toolNames, key) {
    const role = message.role;
    if (role === "user") {
      return el(
        "li",
        { className: "msg user", "data-testid": "message-user", "data-key": key },
        el("span", { className: "who", text: "You" }),
        el("div", { className: "text", "data-testid": "message-text" }, ...proseNodes(textOf(message.content))),
      );
    }
    if (role === "assistant") {
      const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
      const text = textOf(message.content);
      if (calls.length === 0) {
        return el(
          "li",
          { className: "msg assistant", "data-testid": "message-assistant", "data-key": key },
          el("span", { className: "who", text: "Assistant" }),
          el("div", { className: "text", "data-testid": "message-text" }, ...proseNodes(text)),
        );
      }
      const item = el("li", {
        className: "msg calls",
        "data-testid": "message-tool-calls",
        "data-key": key,
      });
      item.append(el("span", { className: "who", text: "Assistant" }));
      if (text) {
        item.append(el("div", { className: "text", "data-testid": "message-text" }, ...proseNodes(text)));
      }
      for (const call of calls) {
        item.append(
          el(
            "details",
            { className: "call", "data-testid": "tool-call" },
            el(
              "summary",
              {},
              "Requested ",
              el("code", {}, ...nameNodes(toolCallName(call))),
            ),
            el("pre", { className: "json" }, ...toolCallArgs(call)),
          ),
        );
      }
      return item;
    }
    if (role === "tool") {
      const status = message.status === "error" ? "error" : "success";
      const name = toolNames.get(message.tool_call_id) || "tool";
      const content = textOf(message.content);
      // A reviewed call shows its outcome: a rejection is not a crashed tool.
      const action = state.actions.get(message.tool_call_id);
      const judged = action ? undefined : state.judged.get(message.tool_call_id);
      const outcome = action ? OUTCOMES[action.status] : undefined;
      const [label, kind] = outcome ?? [status === "error" ? "error" : "ok", status];
      const head = [
        el("span", { className: "who", text: "Tool" }),
        el("code", { className: "tool-name" }, ...nameNodes(name)),
        el("span", { className: `badge ${kind}`, "data-testid": "tool-status", text: label }),
      ];
      const item = el("li", {
        className: `msg tool ${kind}`,
        "data-testid": "message-tool",
        "data-status": status,
        "data-outcome": outcome ? action.status : null,
        "data-key": key,
      });
      const long = content.length > 120 || content.includes("\n");
      if (long) {
        item.append(
          el(
            "details",
            {},
            el("summary", {}, ...head, el("span", { className: "preview" }, ...proseNodes(content))),
            el("pre", { className: "result", "data-testid": "tool-content" }, ...proseNodes(content)),
          ),
        );
      } else {
        item.append(
          el(
            "div",
            { className: "tool-line" },
            ...head,
            el("span", { className: "result", "data-testid": "tool-content" }, ...proseNodes(content)),
          ),
        );
      }
      if (outcome) item.append(decidedLine(action));
      else if (judged) item.append(...judgeApprovedLines(judged));
      return item;
    }
    return null; // system messages and anything unknown are not shown
  }

  // "Rejected by maria at <time>": who decided a reviewed call, and when.
  function decidedLine(action) {
    const line = el("p", { className: "decided", "data-testid": "decided-by" });
    const when = action.decided_at || action.finished_at;
    const type = action.decision && action.decision.type;
    let verb = DECIDED_VERBS[type] ?? "Decided";
    if (action.status === "expired") verb = "Expired without a decision";
    else if (action.status === "cancelled") verb = "Cancelled";
    line.append(verb);
    if (action.status !== "expired") {
      line.append(" by ");
      if (typeof action.reviewer === "string") {
        line.append(nameBox(action.reviewer, { className: "name reviewer" }));
      } else if (action.status === "cancelled" && inGateway()) {
        // Nobody decided: the MCP client gave up on the call, or the gateway ended it.
        line.append(el("span", { "data-testid": "cancelled-by", text: gateway.cancelledBy(action) }));
      } else {
        // Nobody signed in: say how reviewers get their names.
        line.append(
          el("a", {
            href: "/static/naming-reviewers.html",
            target: "_blank",
            rel: "noopener",
            "data-testid": "unnamed-reviewer",
            text: "an unnamed reviewer",
          }),
        );
      }
    }
    if (when) {
      line.append(" at ", el("time", { datetime: String(when), text: formatTime(when) }));
    }
    return line;
  }

  // ------------------------------------------------------------------ a judge's verdict
  // The verdict comes from a model: every text of it is shown as text, revealed
  // like the other untrusted text of the page (never markup).

  function judgementOf(value) {
    return value && typeof value === "object" && typeof value.rationale === "string" ? value : null;
  }

  // The one-line summary the server appends to the action's description
  // (toolguard.records.Judgement.summary): the card shows it on its own instead.
  function judgeSummary(judgement) {
    if (judgement.decided === false) {
      return `Judge (${judgement.model}) could not decide: ${judgement.rationale}`;
    }
    const asked = judgement.user_authorized ? "the user asked for it" : "the user did not ask for it";
    return `Judge (${judgement.model}): ${judgement.risk} risk, ${asked}. ${judgement.rationale}`;
  }

  function singleLineNodes(text) {
    return proseNodes(String(text ?? ""), { singleLine: true });
  }

  // The verdict on a waiting action's card: the risk as a badge, whether the user
  // asked for the call, the rationale and the model.
  function judgeNode(judgement, id) {
    const box = el("section", { className: "judge", "data-testid": "judge", "aria-labelledby": `${id}-judge` });
    const decided = judgement.decided !== false && RISKS.includes(judgement.risk);
    const head = el("p", { className: "judge-head" });
    head.append(
      el("span", { className: "judge-title", id: `${id}-judge`, text: "Judge" }),
      " ",
      el("code", { className: "judge-model", "data-testid": "judge-model" }, ...nameNodes(judgement.model)),
      " ",
      el("span", {
        className: `badge ${decided ? `risk-${judgement.risk}` : "muted"}`,
        "data-testid": "judge-risk",
        text: decided ? `${judgement.risk} risk` : "no verdict",
      }),
    );
    box.append(head);
    if (decided) {
      box.append(
        el("p", {
          className: "judge-asked",
          "data-testid": "judge-authorized",
          text: judgement.user_authorized === true ? "The user asked for it." : "The user did not ask for it.",
        }),
        el("p", { className: "judge-rationale", "data-testid": "judge-rationale" }, ...singleLineNodes(judgement.rationale)),
      );
    } else {
      box.append(
        el(
          "p",
          { className: "judge-rationale", "data-testid": "judge-rationale" },
          "could not decide: ",
          ...singleLineNodes(judgement.rationale),
        ),
      );
    }
    return box;
  }

  // "Approved by the judge (model) at <time>" and its rationale: a call that ran
  // without a review because the judge approved it.
  function judgeApprovedLines({ judgement, at }) {
    const line = el("p", { className: "decided", "data-testid": "decided-by" });
    line.append("Approved by the judge (", nameBox(judgement.model, { className: "name reviewer" }), ")");
    if (at) line.append(" at ", el("time", { datetime: String(at), text: formatTime(at) }));
    const why = el("p", { className: "decided judge-rationale", "data-testid": "judge-rationale" }, ...singleLineNodes(judgement.rationale));
    return [line, why];
  }

  // The `judged` audit events of calls that ran without a review (a judge approved
  // them), read once per new such call; a trail that cannot be read shows nothing.
  async function loadJudged(id, thread) {
    const unreviewed = (Array.isArray(thread.messages) ? thread.messages : [])
      .filter((m) => m && m.role === "tool" && typeof m.tool_call_id === "string")
      .map((m) => m.tool_call_id)
      .filter((callId) => !state.actions.has(callId) && !state.judgedLooked.has(callId));
    if (unreviewed.length === 0) return;
    let text;
    try {
      const response = await fetch(`${threadPath(id)}/audit`, { headers: { Accept: "application/x-ndjson" } });
      if (response.status === 401) sessionLost();
      if (!response.ok) return;
      text = await response.text();
    } catch {
      return;
    }
    if (id !== state.threadId) return;
    for (const line of text.split("\n")) {
      let event;
      try {
        event = line ? reveal.parseJson(line) : null;
      } catch {
        event = null;
      }
      const judgement = event && event.kind === "judged" ? judgementOf(event.judgement) : null;
      if (judgement && judgement.auto_approved === true && event.actor === "judge") {
        state.judged.set(judgement.call_id, { judgement, at: event.at });
      }
    }
    for (const callId of unreviewed) state.judgedLooked.add(callId);
  }

  // Renders the history, keeping the nodes of messages already shown so that
  // the aria-live list only announces what is new.
  function renderMessages(messages) {
    const toolNames = new Map();
    const items = [];
    for (const message of Array.isArray(messages) ? messages : []) {
      if (!message || typeof message !== "object") continue;
      if (message.role === "assistant" && Array.isArray(message.tool_calls)) {
        for (const call of message.tool_calls) toolNames.set(call.id, toolCallName(call));
      }
      if (!["user", "assistant", "tool"].includes(message.role)) continue;
      const action = message.role === "tool" ? state.actions.get(message.tool_call_id) : undefined;
      const judged = message.role === "tool" ? state.judged.get(message.tool_call_id) : undefined;
      items.push({ key: JSON.stringify([message, action ?? judged ?? null]), message });
    }
    const nodes = Array.from(dom.messages.children);
    let same = 0;
    while (
      same < items.length &&
      same < nodes.length &&
      nodes[same].dataset.key === items[same].key &&
      !nodes[same].classList.contains("sending")
    ) {
      same += 1;
    }
    for (const node of nodes.slice(same)) node.remove();
    for (const item of items.slice(same)) {
      const node = renderMessage(item.message, toolNames, item.key);
      if (node) dom.messages.append(node);
    }
    dom.empty.hidden = dom.messages.children.length > 0;
    dom.messages.lastElementChild?.scrollIntoView({ block: "nearest" });
  }

  function appendSending(text) {
    const node = renderMessage({ role: "user", content: text }, new Map(), "");
    node.classList.add("sending");
    dom.messages.append(node);
    dom.empty.hidden = true;
    return node;
  }

  // ------------------------------------------------------------------ approval cards

  // The edited arguments, read with their numbers exact (what is typed is what is sent).
  function parseArgs(text) {
    let value;
    try {
      value = reveal.parseJson(text);
    } catch (err) {
      return { error: `The arguments are not valid JSON: ${err.message}` };
    }
    if (value === null || typeof value !== "object" || Array.isArray(value) || reveal.isNumber(value)) {
      const kind =
        value === null ? "null" : Array.isArray(value) ? "an array" : reveal.isNumber(value) ? "a number" : `a ${typeof value}`;
      return { error: `The arguments must be a JSON object, not ${kind}.` };
    }
    // A number beyond a 64-bit float (1e400) is refused by the server: say so here.
    const beyond = reveal
      .revealAction("", value, "")
      .findings.find(({ what }) => what.includes(" is beyond a 64-bit float "));
    if (beyond) return { error: `The server cannot read a number: ${beyond.what} in ${beyond.where}.` };
    return { args: value };
  }

  function setEditError(card, message) {
    card.editError.textContent = message || "";
    card.editError.hidden = !message;
    card.editError.dataset.kind = "error";
    if (message) card.editArgs.setAttribute("aria-invalid", "true");
    else card.editArgs.removeAttribute("aria-invalid");
  }

  // Not an error: what the page could not do (check the arguments), shown in the same place.
  function setEditNote(card, message) {
    setEditError(card, "");
    card.editError.textContent = message;
    card.editError.hidden = false;
    card.editError.dataset.kind = "note";
  }

  // ------------------------------------------------------------------ checking an edit
  // An edit the tool's schema refuses would use up the review, so the page checks
  // it first against the schema from GET /hitl/tools. The JSON-Schema subset of
  // the schemas toolguard generates: type, required, properties,
  // additionalProperties (false or a schema), enum, const, items, anyOf/oneOf
  // (e.g. nullable), allOf, $ref to #/$defs, minimum, maximum, exclusiveMinimum,
  // exclusiveMaximum, minLength, maxLength, minItems, maxItems. Every other
  // keyword (format, pattern, ...) is ignored: the server validates again.
  // Numbers are compared exactly (9007199254740993 is above 9007199254740992).
  // The check has a work budget: past MAX_DEPTH nested schemas, MAX_STEPS schemas looked
  // at or MAX_CHECK_MS milliseconds (a hostile schema of nested anyOf grows exponentially),
  // the page says it cannot check the arguments and the server's own validation decides.

  const TYPE_NAMES = {
    string: "a string",
    integer: "an integer",
    number: "a number",
    boolean: "true or false",
    array: "a list",
    object: "an object",
    null: "null",
  };
  const MAX_PROBLEMS = 20;
  const MAX_DEPTH = 64;
  const MAX_STEPS = 100000;
  const MAX_CHECK_MS = 250;
  const UNCHECKED =
    "The page cannot check these arguments against the tool's parameters (their schema is too" +
    " deep or too complex to check here): the server checks them when they are sent.";
  const own = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
  const isObject = (value) =>
    value !== null && typeof value === "object" && !Array.isArray(value) && !reveal.isNumber(value);
  const typeOf = (value) =>
    value === null ? "null" : Array.isArray(value) ? "array" : reveal.isNumber(value) ? "number" : typeof value;
  const where = (path) => path || "the arguments";
  const member = (path, key) => (path ? `${path}.${nameText(key)}` : nameText(key));
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const shownJson = (value) => reveal.revealJson(value, null);

  // The same JSON value? Numbers by their exact value (1 and 1.0 alike), object keys in any order.
  function same(a, b) {
    if (reveal.isNumber(a) || reveal.isNumber(b)) {
      return reveal.isNumber(a) && reveal.isNumber(b) && compare(a, b) === 0;
    }
    if (Array.isArray(a) || Array.isArray(b)) {
      return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
    }
    if (isObject(a) || isObject(b)) {
      if (!isObject(a) || !isObject(b)) return false;
      const keys = Object.keys(a);
      return keys.length === Object.keys(b).length && keys.every((key) => own(b, key) && same(a[key], b[key]));
    }
    return a === b;
  }

  // -1, 0, 1 for two numbers, exactly; null when one of them is no finite number.
  function compare(a, b) {
    const x = reveal.decimal(a);
    const y = reveal.decimal(b);
    return x && y ? reveal.compareDecimals(x, y) : null;
  }

  function hasType(value, type) {
    if (type === "integer") return reveal.isNumber(value) && reveal.isInteger(value);
    return typeOf(value) === type;
  }

  class TooComplex extends Error {}

  // One schema looked at: counts against the budget, which throws TooComplex once spent.
  function spend(budget, depth) {
    budget.steps += 1;
    if (depth > MAX_DEPTH || budget.steps > MAX_STEPS) throw new TooComplex();
    if (budget.steps % 256 === 0 && performance.now() > budget.deadline) throw new TooComplex();
  }

  function checkSchema(schema, value, path, root, out, depth, budget) {
    if (!isObject(schema) || out.length >= MAX_PROBLEMS) return;
    spend(budget, depth);
    const at = where(path);
    const check = (part, item, itemPath, into = out) => checkSchema(part, item, itemPath, root, into, depth + 1, budget);
    if (typeof schema.$ref === "string") {
      const found = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(schema.$ref);
      const defs = found && isObject(root[found[1]]) ? root[found[1]] : null;
      if (defs && own(defs, found[2])) check(defs[found[2]], value, path);
    }
    if (Array.isArray(schema.allOf)) {
      for (const part of schema.allOf) check(part, value, path);
    }
    const branches = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : null;
    if (branches && branches.length > 0) {
      const results = [];
      for (const branch of branches) {
        const found = [];
        check(branch, value, path, found);
        results.push(found);
        if (found.length === 0) break; // one branch fits: the others need not be checked
      }
      if (!results.some((found) => found.length === 0)) {
        const notNull = branches.filter((branch) => !(isObject(branch) && branch.type === "null"));
        if (notNull.length === 1) out.push(...results[branches.indexOf(notNull[0])]);
        else out.push(`${at}: does not match any allowed form`);
        return;
      }
    }
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some((type) => hasType(value, type))) {
        out.push(`${at}: expected ${types.map((type) => TYPE_NAMES[type] ?? String(type)).join(" or ")}`);
        return;
      }
    }
    if (own(schema, "const") && !same(value, schema.const)) {
      out.push(`${at}: must be ${shownJson(schema.const)}`);
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((choice) => same(value, choice))) {
      out.push(`${at}: must be one of ${schema.enum.map(shownJson).join(", ")}`);
    }
    if (reveal.isNumber(value)) {
      const bound = (key, fails, text) => {
        if (reveal.isNumber(schema[key]) && fails(compare(value, schema[key]))) {
          out.push(`${at}: ${text} ${shownJson(schema[key])}`);
        }
      };
      bound("minimum", (c) => c === -1, "must be at least");
      bound("maximum", (c) => c === 1, "must be at most");
      bound("exclusiveMinimum", (c) => c !== null && c <= 0, "must be greater than");
      bound("exclusiveMaximum", (c) => c !== null && c >= 0, "must be less than");
    }
    if (typeof value === "string") {
      const length = Array.from(value).length; // code points, as Python counts
      if (typeof schema.minLength === "number" && length < schema.minLength) {
        out.push(`${at}: must be at least ${plural(schema.minLength, "character")} long`);
      }
      if (typeof schema.maxLength === "number" && length > schema.maxLength) {
        out.push(`${at}: must be at most ${plural(schema.maxLength, "character")} long`);
      }
    }
    if (Array.isArray(value)) {
      if (typeof schema.minItems === "number" && value.length < schema.minItems) {
        out.push(`${at}: must have at least ${plural(schema.minItems, "item")}`);
      }
      if (typeof schema.maxItems === "number" && value.length > schema.maxItems) {
        out.push(`${at}: must have at most ${plural(schema.maxItems, "item")}`);
      }
      if (isObject(schema.items)) {
        value.forEach((item, i) => check(schema.items, item, `${path}[${i}]`));
      }
    }
    if (isObject(value)) {
      const properties = isObject(schema.properties) ? schema.properties : {};
      for (const name of Array.isArray(schema.required) ? schema.required : []) {
        if (typeof name === "string" && !own(value, name)) out.push(`${member(path, name)}: missing (required)`);
      }
      for (const key of reveal.keysOf(value)) {
        const item = value[key];
        if (own(properties, key)) check(properties[key], item, member(path, key));
        else if (schema.additionalProperties === false) out.push(`${member(path, key)}: unknown field`);
        else if (isObject(schema.additionalProperties)) check(schema.additionalProperties, item, member(path, key));
      }
    }
  }

  // What ``schema`` refuses in ``value`` (at most MAX_PROBLEMS texts), or null when the
  // page cannot check it within its budget.
  function problemsOf(schema, value) {
    const out = [];
    const budget = { steps: 0, deadline: performance.now() + MAX_CHECK_MS };
    try {
      checkSchema(schema, value, "", schema, out, 0, budget);
    } catch (err) {
      if (err instanceof TooComplex || err instanceof RangeError) return null; // RangeError: the stack
      throw err;
    }
    return [...new Set(out)].slice(0, MAX_PROBLEMS);
  }

  // What the tool's schema refuses in these arguments (none when the schema is unknown;
  // null when the page cannot check them).
  function schemaProblems(name, args) {
    const schema = state.tools ? state.tools.get(name) : undefined;
    return schema ? problemsOf(schema, args) : [];
  }

  // For tests and embedding pages: what a schema refuses in a value (the texts above), or
  // null when the page cannot check it (past its work budget).
  globalThis.toolguardSchemaProblems = problemsOf;

  // The tools' schemas, fetched once; without them (an older server) the
  // server's own check is the only one.
  async function loadTools() {
    if (state.tools) return state.tools;
    if (!state.toolsLoading) {
      state.toolsLoading = api("GET", "/hitl/tools")
        .then((data) => {
          const tools = new Map();
          for (const tool of Array.isArray(data.tools) ? data.tools : []) {
            if (tool && typeof tool.name === "string" && isObject(tool.parameters)) {
              tools.set(tool.name, tool.parameters);
            }
            const approval = tool && isObject(tool.approval) ? tool.approval : null;
            if (approval && approval.needs_approval === true && typeof approval.reason === "string") {
              state.reasons.set(tool.name, approval.reason);
            }
          }
          state.tools = tools;
        })
        .catch(() => {})
        .finally(() => {
          state.toolsLoading = null;
        });
    }
    await state.toolsLoading;
    return state.tools;
  }

  // The decision of one card, or null after showing why it cannot be sent.
  function decisionOf(card, kind) {
    if (kind === "approve") return { type: "approve" };
    if (kind === "reject") {
      const reason = card.rejectReason.value.trim();
      return reason ? { type: "reject", message: reason } : { type: "reject" };
    }
    const parsed = parseArgs(card.editArgs.value);
    if (parsed.error) {
      setEditError(card, parsed.error);
      return null;
    }
    const problems = schemaProblems(card.request.name, parsed.args);
    if (problems === null && card.unchecked !== card.editArgs.value) {
      // Said once; pressed again with the same text, the edit goes to the server's check.
      card.unchecked = card.editArgs.value;
      setEditNote(card, `${UNCHECKED} Press the button again to send them.`);
      return null;
    }
    if (problems !== null && problems.length > 0) {
      setEditError(card, ["The arguments do not fit the tool's parameters:", ...problems].join("\n"));
      return null;
    }
    setEditError(card, "");
    return { type: "edit", edited_action: { name: card.request.name, args: parsed.args } };
  }

  function openPanel(card, kind) {
    const editOpen = kind === "edit";
    const rejectOpen = kind === "reject";
    if (editOpen && !card.editArgs.dataset.filled) {
      // The escaped JSON: invisible characters stay visible, and it parses back exactly.
      card.editArgs.value = reveal.revealJson(card.request.args ?? {});
      card.editArgs.dataset.filled = "1";
    }
    card.editPanel.hidden = !editOpen;
    card.rejectPanel.hidden = !rejectOpen;
    card.buttons.edit?.setAttribute("aria-expanded", String(editOpen));
    card.buttons.reject?.setAttribute("aria-expanded", String(rejectOpen));
    if (editOpen) card.editArgs.focus();
    if (rejectOpen) card.rejectReason.focus();
  }

  function choose(card, kind) {
    card.choice = card.choice === kind ? null : kind;
    for (const [name, button] of Object.entries(card.buttons)) {
      button.setAttribute("aria-pressed", String(card.choice === name));
    }
    card.root.dataset.choice = card.choice ?? "";
    card.choiceText.textContent = card.choice
      ? `Your decision: ${DECISION_LABELS[card.choice]}`
      : "No decision yet";
    openPanel(card, card.choice);
    updateControls();
  }

  // a / e / r on a focused card (or a button in it) press its decision button;
  // never while typing in a text field, never with a modifier key.
  function onCardKey(card, event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const target = event.target;
    if (target instanceof HTMLElement && target.closest("textarea, input, select, [contenteditable]")) return;
    const kind = SHORTCUTS[event.key];
    const button = kind ? card.buttons[kind] : undefined;
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();
  }

  // A quorum (requires_approval(approvals=N), N > 1): "1 of 2 approvals (approved by alice)".
  // Only review configs with an "approvals" object carry one; others show nothing.
  function quorumNode(config) {
    const quorum = config && typeof config.approvals === "object" ? config.approvals : null;
    if (!quorum || !Number.isInteger(quorum.required) || quorum.required < 2) return null;
    const given = Number.isInteger(quorum.given) ? quorum.given : 0;
    const by = Array.isArray(quorum.by) ? quorum.by.filter((b) => typeof b === "string") : [];
    const line = el("p", { className: "quorum", "data-testid": "approvals" }, `${given} of ${quorum.required} approvals`);
    if (by.length > 0) {
      line.append(" (approved by ");
      by.forEach((name, i) => line.append(...(i > 0 ? [", "] : []), nameBox(name)));
      line.append(")");
    }
    return line;
  }

  function buildCard(request, config, index, total, action) {
    const single = total === 1;
    const id = `card-${index}`;
    const allowed =
      config && Array.isArray(config.allowed_decisions) ? config.allowed_decisions : ALL_DECISIONS;
    const root = el("article", {
      className: "card",
      "data-testid": "approval-card",
      "data-index": index,
      "aria-labelledby": `${id}-title`,
      "aria-describedby": `${id}-keys`,
      tabindex: "0",
    });
    const card = { request, choice: null, root, buttons: {} };
    const judgement = action ? judgementOf(action.judgement) : null;
    let description = request.description;
    if (judgement && typeof description === "string") {
      const summary = ` | ${judgeSummary(judgement)}`; // JUDGEMENT_SEPARATOR
      if (description.endsWith(summary)) description = description.slice(0, -summary.length);
    }
    const shown = reveal.revealAction(request.name, request.args ?? {}, description);
    const warning = reveal.warningLines(shown.findings);

    const title = el("h3", { id: `${id}-title`, className: "tool-name" });
    title.append(el("code", { "data-testid": "tool-name" }, ...revealNodes(shown.name)));
    if (!single) title.append(el("span", { className: "count", text: ` (${index + 1} of ${total})` }));
    root.append(
      el("header", {}, title, el("span", { className: "badge pending", text: "Awaiting approval" })),
      el(
        "p",
        { className: "description", "data-testid": "action-description" },
        ...descriptionNodes(String(description ?? ""), request.name),
      ),
    );
    if (inGateway()) {
      // Which server, which client, since when: what a gateway's reviewer needs to know.
      const requestedAt = action && typeof action.requested_at === "string" ? action.requested_at : null;
      const node = gateway.callDetails(id, state.calls.get(state.threadId), request.name, requestedAt);
      state.callInfo = { node, tool: request.name, requestedAt };
      root.append(node);
    }
    // Why this tool asks (the classifier's reason), once the tools are known.
    const why = el("p", { className: "why", "data-testid": "action-why", hidden: true });
    root.append(why);
    const showWhy = () => {
      const reason = state.reasons.get(request.name);
      if (reason) {
        // The reason quotes the tool's name, from the server that lists the tool: a name.
        why.replaceChildren("Why it asks: ", nameBox(reason, { className: "name reason" }));
        why.hidden = false;
      }
    };
    showWhy();
    if (why.hidden) loadTools().then(showWhy);
    const quorum = quorumNode(config);
    if (quorum) root.append(quorum);
    if (judgement) root.append(judgeNode(judgement, id));
    if (warning.length > 0) {
      root.classList.add("deceptive");
      root.append(
        el(
          "div",
          { className: "reveal-warning", id: `${id}-warning`, "data-testid": "reveal-warning" },
          el("p", { "data-testid": "reveal-header", text: warning[0] }),
          el(
            "ul",
            {},
            ...warning.slice(1).map((line) => el("li", { "data-testid": "reveal-item", text: line })),
          ),
        ),
      );
    }
    const argsText = reveal.joined(shown.args);
    const lines = argsText.split("\n").length;
    root.append(
      el("p", { className: "label", id: `${id}-args-label`, text: "Arguments" }),
      el("pre", {
        className: "json args",
        "data-testid": "action-args",
        "aria-labelledby": `${id}-args-label`,
        tabindex: "0",
      }, ...revealNodes(shown.args)),
    );
    if (lines > LONG_LINES || argsText.length > LONG_CHARS) {
      root.append(
        el("p", {
          className: "long-note",
          "data-testid": "long-args",
          text: `Long arguments (${lines} lines, ${argsText.length} characters): scroll inside the box to read all of them.`,
        }),
      );
    }

    const group = el("div", {
      className: "decisions",
      role: "group",
      "aria-label": `Decision for ${nameText(request.name)}`,
      "aria-describedby": warning.length > 0 ? `${id}-warning` : null,
    });
    for (const kind of ALL_DECISIONS) {
      if (!allowed.includes(kind)) continue;
      const key = Object.keys(SHORTCUTS).find((k) => SHORTCUTS[k] === kind);
      const button = el("button", {
        type: "button",
        className: kind,
        "data-testid": kind,
        "aria-label": `${DECISION_LABELS[kind]} ${nameText(request.name)}${single ? "" : ` (${index + 1} of ${total})`}`,
        "aria-keyshortcuts": key,
        text: DECISION_LABELS[kind],
      });
      if (!single) button.setAttribute("aria-pressed", "false");
      else if (kind !== "approve") button.setAttribute("aria-expanded", "false");
      card.buttons[kind] = button;
      group.append(button);
    }
    root.append(group);
    const keys = Object.entries(SHORTCUTS)
      .filter(([, kind]) => card.buttons[kind])
      .map(([key, kind]) => `${key}: ${DECISION_LABELS[kind].toLowerCase()}`);
    root.append(
      el("p", {
        className: "keys",
        id: `${id}-keys`,
        "data-testid": "card-keys",
        text: `Keyboard, on this card: ${keys.join(", ")}.`,
      }),
    );
    root.addEventListener("keydown", (event) => onCardKey(card, event));

    // Edit: the JSON arguments, checked before anything is sent.
    card.editArgs = el("textarea", {
      id: `${id}-edit-args`,
      "data-testid": "edit-args",
      rows: "8",
      spellcheck: "false",
      "aria-describedby": `${id}-edit-error`,
    });
    card.editError = el("p", {
      id: `${id}-edit-error`,
      className: "inline-error",
      "data-testid": "edit-error",
      role: "alert",
      hidden: true,
    });
    card.editPanel = el(
      "div",
      { className: "panel edit-panel", "data-testid": "edit-panel", hidden: true },
      el("label", { for: `${id}-edit-args`, text: "Arguments to run (a JSON object)" }),
      card.editArgs,
      card.editError,
    );
    card.editArgs.addEventListener("input", () => setEditError(card, ""));

    // Reject: the reason goes to the model.
    card.rejectReason = el("textarea", {
      id: `${id}-reject-reason`,
      "data-testid": "reject-reason",
      rows: "3",
      placeholder: REJECT_PROMPT,
    });
    card.rejectPanel = el(
      "div",
      { className: "panel reject-panel", "data-testid": "reject-panel", hidden: true },
      el("label", { for: `${id}-reject-reason`, text: REJECT_PROMPT }),
      card.rejectReason,
    );

    if (single) {
      const confirmEdit = el("button", {
        type: "button",
        className: "primary",
        "data-testid": "confirm-edit",
        text: "Run with these arguments",
      });
      const confirmReject = el("button", {
        type: "button",
        className: "reject",
        "data-testid": "confirm-reject",
        text: "Send rejection",
      });
      const cancel = () => {
        openPanel(card, null);
        card.buttons.approve?.focus();
      };
      card.editPanel.append(
        el(
          "div",
          { className: "row" },
          confirmEdit,
          el("button", { type: "button", "data-testid": "cancel-edit", text: "Cancel" }),
        ),
      );
      card.rejectPanel.append(
        el(
          "div",
          { className: "row" },
          confirmReject,
          el("button", { type: "button", "data-testid": "cancel-reject", text: "Cancel" }),
        ),
      );
      card.editPanel.querySelector("[data-testid=cancel-edit]").addEventListener("click", cancel);
      card.rejectPanel.querySelector("[data-testid=cancel-reject]").addEventListener("click", cancel);
      confirmEdit.addEventListener("click", async () => {
        await loadTools();
        const decision = decisionOf(card, "edit");
        if (decision) submitReview([decision]);
        else card.editArgs.focus();
      });
      confirmReject.addEventListener("click", () => submitReview([decisionOf(card, "reject")]));
      card.buttons.approve?.addEventListener("click", () => submitReview([{ type: "approve" }]));
      if (card.buttons.approve && inGateway()) {
        const { row, controls } = gateway.grantRow(id, request.name, (decision) => submitReview([decision]));
        card.grantControls = controls;
        card.grantRow = row;
      } else if (card.buttons.approve) {
        card.grantRow = grantRow(card, id, request);
      }
      if (card.grantRow) {
        card.grantRow.hidden = true; // until the server says a grant may be made (showGrantRows)
        root.append(card.grantRow);
      }
      card.buttons.edit?.addEventListener("click", () =>
        openPanel(card, card.editPanel.hidden ? "edit" : null),
      );
      card.buttons.reject?.addEventListener("click", () =>
        openPanel(card, card.rejectPanel.hidden ? "reject" : null),
      );
      card.choiceText = el("p", { hidden: true });
    } else {
      for (const [kind, button] of Object.entries(card.buttons)) {
        button.addEventListener("click", () => choose(card, kind));
      }
      card.choiceText = el("p", {
        className: "choice",
        "data-testid": "card-choice",
        "aria-live": "polite",
        text: "No decision yet",
      });
    }
    root.append(card.editPanel, card.rejectPanel, card.choiceText);
    return card;
  }

  // "Approve and allow in this conversation": an approve carrying a standing grant for
  // later calls of the same tool in this thread, optionally for a limited time.
  function grantDecision(seconds) {
    const grant = { scope: "thread", match: "tool" };
    if (seconds) grant.ttl = Number(seconds);
    return { type: "approve", grant };
  }

  function grantRow(card, id, request) {
    const duration = el(
      "select",
      { id: `${id}-grant-ttl`, "data-testid": "grant-ttl", "aria-label": "How long to allow it" },
      ...GRANT_DURATIONS.map(([value, label]) => el("option", { value, text: label })),
    );
    const allow = el("button", {
      type: "button",
      className: "approve grant",
      "data-testid": "approve-grant",
      "aria-describedby": `${id}-grant-hint`,
      text: "Approve and allow in this conversation",
    });
    allow.addEventListener("click", () => submitReview([grantDecision(duration.value)]));
    card.grantControls = [duration];
    return el(
      "div",
      { className: "row grant-row", "data-testid": "grant-row" },
      allow,
      duration,
      el(
        "p",
        { id: `${id}-grant-hint`, className: "hint", "data-testid": "grant-hint" },
        "Later calls of ",
        nameBox(request.name),
        " in this conversation run without asking.",
      ),
    );
  }

  // Grant choices only where an approve may grant: each pending review of the live list
  // says so per action (``grantable``: false for a tool that needs a quorum or a call an
  // ask rule covers). Until the list says, none is offered.
  function showGrantRows() {
    const review = live.reviews.find((r) => r.thread_id === state.threadId && r.review_id === state.reviewId);
    const allowed = review && Array.isArray(review.grantable) ? review.grantable : [];
    state.cards.forEach((card, index) => {
      if (card.grantRow) card.grantRow.hidden = allowed[index] !== true;
    });
  }

  function formatTime(iso) {
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  }

  function renderDeadline(expiresAt) {
    const text = expiresAt
      ? `Decide before ${formatTime(expiresAt)}. After that the actions expire and do not run.`
      : "";
    dom.reviewDeadline.textContent = text;
    dom.reviewDeadline.hidden = !text;
  }

  // The thread's actions behind the review's requests (same order, same tool and
  // description), or none when they do not line up.
  function waitingActions(requests) {
    const waiting = Array.from(state.actions.values()).filter((a) => a.status === "requested");
    const match =
      waiting.length === requests.length &&
      waiting.every((a, i) => a.name === requests[i].name && a.description === requests[i].description);
    return match ? waiting : [];
  }

  function renderReview(pending, reviewId, expiresAt = null) {
    const requests = pending && Array.isArray(pending.action_requests) ? pending.action_requests : [];
    if (requests.length === 0) {
      state.pending = null;
      state.reviewKey = null;
      state.reviewId = null;
      state.cards = [];
      state.callInfo = null;
      renderDeadline(null);
      dom.cards.replaceChildren();
      dom.review.hidden = true;
      dom.batch.hidden = true;
      updateControls();
      return;
    }
    renderDeadline(expiresAt);
    const key = `${reviewId ?? ""}|${JSON.stringify(pending)}`;
    if (key === state.reviewKey) return; // same review: keep what the user typed
    const configs = Array.isArray(pending.review_configs) ? pending.review_configs : [];
    state.pending = pending;
    state.reviewKey = key;
    state.reviewId = reviewId ?? null;
    const waiting = waitingActions(requests);
    state.cards = requests.map((request, index) =>
      buildCard(request, configs[index], index, requests.length, waiting[index]),
    );
    dom.cards.replaceChildren(...state.cards.map((card) => card.root));
    const several = requests.length > 1;
    dom.batch.hidden = !several;
    dom.reviewTitle.textContent = several
      ? `${requests.length} actions are waiting for your approval`
      : "An action is waiting for your approval";
    dom.reviewHint.textContent = several
      ? "Choose a decision for each action, then submit them — or approve or reject them all."
      : "Check the arguments, then approve, edit or reject the action.";
    dom.review.hidden = false;
    showGrantRows();
    updateControls();
    dom.reviewTitle.focus();
    loadTools(); // ready before the reviewer edits anything
  }

  // ------------------------------------------------------------------ talking to the API

  function renderThread(thread) {
    state.threadStatus = typeof thread.status === "string" ? thread.status : "idle";
    state.actions = new Map(
      (Array.isArray(thread.actions) ? thread.actions : [])
        .filter((action) => action && typeof action.call_id === "string")
        .map((action) => [action.call_id, action]),
    );
    if (inGateway()) renderCallResult();
    else renderMessages(thread.messages);
    renderReview(thread.pending_review, thread.review_id, thread.expires_at);
  }

  // ------------------------------------------------------------------ a gateway's call

  // The outcome of the open call (a gateway's thread holds one call): the tool's result as
  // MCP content, or why it did not run; nothing while it waits.
  function renderCallResult() {
    const actions = Array.from(state.actions.values());
    const action = actions[actions.length - 1];
    const done = action && action.status !== "requested" ? action : null;
    const key = done ? JSON.stringify([state.threadId, done]) : null;
    if (key === state.resultKey) return;
    state.resultKey = key;
    dom.callResult.hidden = done === null;
    dom.callOutcome.replaceChildren();
    dom.callResultBody.replaceChildren();
    if (!done) return;
    const [label, kind] = OUTCOMES[done.status] ?? [String(done.status), "muted"];
    const result = done.result && typeof done.result === "object" ? done.result : null;
    const ran = done.status === "executed" && result && result.value !== null && result.value !== undefined;
    dom.callOutcome.append(
      el("span", { className: `badge ${kind}`, "data-testid": "call-status", text: label }),
      " ",
      ...decidedLine(done).childNodes,
    );
    if (ran) dom.callResultBody.append(gateway.resultNode(result.value));
    else if (result && typeof result.content === "string") {
      dom.callResultBody.append(el("pre", { className: "mcp-text", "data-testid": "call-why" }, ...proseNodes(result.content)));
    }
  }

  // The details of the open card once the live list names the call's server and client.
  function refreshCallInfo() {
    const shown = state.callInfo;
    if (!shown || !shown.node.isConnected) return;
    gateway.fillCallDetails(shown.node, state.calls.get(state.threadId), shown.tool, shown.requestedAt);
  }

  async function loadThread(id) {
    const load = ++state.loads;
    const thread = await api("GET", threadPath(id));
    // A slower, older load (e.g. a live refresh) never overwrites a newer one.
    if (load !== state.loads || id !== state.threadId) return;
    renderThread(thread);
    if (inGateway()) return; // no conversation: the call's result is shown
    await loadJudged(id, thread);
    if (load !== state.loads || id !== state.threadId) return;
    renderMessages(thread.messages);
  }

  // After a chat or review call: show the whole thread (tool results included).
  async function applyTurn(turn) {
    try {
      await loadThread(turn.thread_id);
    } catch (err) {
      showError(err);
      if (typeof turn.reply === "string" && !inGateway()) {
        const message = { role: "assistant", content: turn.reply };
        dom.messages.append(renderMessage(message, new Map(), JSON.stringify(message)));
        dom.empty.hidden = true;
      }
      renderReview(turn.pending_review, turn.review_id);
    }
  }

  // After a failed call: show the thread as the server has it now (not after a
  // 422, which never changes anything). The cards of an unchanged review stay.
  async function resync(err) {
    if (!state.threadId || err.status === 422 || err.status === 0) return;
    try {
      await loadThread(state.threadId);
    } catch {
      // the first error is the one shown
    }
  }

  async function sendMessage(text) {
    if (state.busy || state.pending) return;
    clearError();
    const sending = appendSending(text);
    setBusy(true, "The agent is working…");
    try {
      const turn = await api("POST", "/hitl/chat", { message: text, thread_id: state.threadId });
      dom.input.value = "";
      setThread(turn.thread_id);
      await applyTurn(turn);
      sending.classList.remove("sending"); // still shown only if the thread could not be read
    } catch (err) {
      sending.remove();
      dom.empty.hidden = dom.messages.children.length > 0;
      showError(err);
      await resync(err);
    } finally {
      setBusy(false);
    }
    if (!state.pending) dom.input.focus();
  }

  async function submitReview(decisions) {
    if (state.busy || !state.pending) return;
    clearError();
    setBusy(true, "Applying your decisions…");
    try {
      const turn = await api("POST", "/hitl/review", {
        thread_id: state.threadId,
        decisions,
        review_id: state.reviewId,
      });
      await applyTurn(turn);
    } catch (err) {
      showError(err);
      await resync(err);
    } finally {
      setBusy(false);
    }
    if (inGateway()) grants.refresh(); // an approve may have granted
    if (state.pending) return;
    if (inGateway()) {
      if (!dom.callResult.hidden) dom.callResultTitle.focus();
    } else {
      dom.input.focus();
    }
  }

  // ------------------------------------------------------------------ pending reviews, live

  function waitingText(iso) {
    const since = typeof iso === "string" ? Date.parse(iso) : Number.NaN;
    if (Number.isNaN(since)) return "";
    const minutes = Math.floor(Math.max(0, Date.now() - since) / 60000);
    if (minutes < 1) return "waiting less than a minute";
    if (minutes < 60) return `waiting ${minutes} min`;
    const hours = Math.floor(minutes / 60);
    return hours < 48 ? `waiting ${hours} h ${minutes % 60} min` : `waiting ${Math.floor(hours / 24)} days`;
  }

  function queueItem(review) {
    const requests =
      review.pending_review && Array.isArray(review.pending_review.action_requests)
        ? review.pending_review.action_requests
        : [];
    // The tools' names, each drawn as a name, separated by commas.
    const names = [];
    requests.forEach((request, i) => {
      if (i > 0) names.push(", ");
      names.push(nameBox(request && typeof request.name === "string" ? request.name : "?"));
    });
    const id = review.thread_id;
    if (inGateway()) return gatewayQueueItem(review, names);
    const short = nameText(id.length > 12 ? `${id.slice(0, 8)}…` : id);
    const button = el(
      "button",
      {
        type: "button",
        className: "queue-item",
        "data-testid": "queue-item",
        "data-thread": id,
        "aria-current": id === state.threadId ? "true" : null,
      },
      el("span", { className: "queue-tools", "data-testid": "queue-tools" }, ...names),
      el("span", { className: "queue-thread", "data-testid": "queue-thread", text: `thread ${short}` }),
      el("span", { className: "queue-age", "data-testid": "queue-age", text: waitingText(review.requested_at) }),
    );
    button.addEventListener("click", () => openThread(id));
    return el("li", {}, button);
  }

  // A waiting call of a gateway: its tool, server, client and how long it has waited.
  function gatewayQueueItem(review, names) {
    const id = review.thread_id;
    const call = review.call && typeof review.call === "object" ? review.call : {};
    const age = waitingText(review.requested_at);
    const button = el(
      "button",
      {
        type: "button",
        className: "queue-item",
        "data-testid": "queue-item",
        "data-thread": id,
        "aria-current": id === state.threadId ? "true" : null,
      },
      el("code", { className: "queue-tools", "data-testid": "queue-tools" }, ...names),
      el("span", { className: "queue-thread", "data-testid": "queue-server" }, "on ", ...gateway.serverNodes(call.server)),
      el("span", { className: "queue-thread", "data-testid": "queue-client" }, "from ", ...gateway.clientNodes(call.client)),
      age ? el("span", { className: "queue-age", "data-testid": "queue-age", text: age }) : null,
    );
    button.addEventListener("click", () => openThread(id));
    return el("li", {}, button);
  }

  function renderQueue() {
    const reviews = live.reviews;
    dom.queueList.replaceChildren(...reviews.map(queueItem));
    dom.queueEmpty.hidden = reviews.length > 0;
    dom.queueCount.textContent = reviews.length ? `(${reviews.length})` : "";
  }

  async function openThread(id) {
    if (state.busy || id === state.threadId) return;
    clearError();
    setThread(id);
    setBusy(true, "Loading the conversation…");
    try {
      await loadThread(id);
    } catch (err) {
      showError(err);
    } finally {
      setBusy(false);
    }
  }

  // Show the open thread as the server has it now: a review decided elsewhere
  // (another tab, another process) shows its outcome; cards being filled in stay.
  async function refreshOpenThread() {
    if (!state.threadId) return;
    if (state.busy || live.refreshing) {
      live.again = true;
      return;
    }
    live.refreshing = true;
    const hadReview = state.reviewId;
    try {
      await loadThread(state.threadId);
      if (hadReview && state.reviewId !== hadReview && !state.busy) {
        dom.status.textContent = "This review was decided elsewhere; the conversation shows the outcome.";
      }
    } catch {
      // a live refresh that fails leaves the page as it is; the next event retries
    } finally {
      live.refreshing = false;
    }
    if (live.again) {
      live.again = false;
      setTimeout(refreshOpenThread, 0);
    }
  }

  function onReviews(data) {
    if (!data || !Array.isArray(data.reviews)) return;
    live.reviews = data.reviews.filter(
      (review) => review && typeof review.thread_id === "string" && typeof review.review_id === "string",
    );
    for (const review of live.reviews) {
      if (review.call && typeof review.call === "object") state.calls.set(review.thread_id, review.call);
    }
    renderQueue();
    showGrantRows();
    if (inGateway()) {
      refreshCallInfo();
      const key = live.reviews.map((review) => `${review.thread_id} ${review.review_id}`).join("\n");
      if (key !== live.reviewsKey) grants.refresh(); // a decided review may have granted
      live.reviewsKey = key;
    }
    if (!state.threadId) return;
    const open = live.reviews.find((review) => review.thread_id === state.threadId);
    const shown = open ? open.review_id : null;
    if (shown !== state.reviewId || state.threadStatus === "running") refreshOpenThread();
  }

  function onThreadEvent(data) {
    if (inGateway()) grants.refresh(); // a call that ran may have spent a grant's use
    if (data && data.thread_id === state.threadId) refreshOpenThread();
  }

  function parseEvent(event) {
    try {
      return reveal.parseJson(event.data);
    } catch {
      return null;
    }
  }

  async function pollReviews() {
    try {
      onReviews(await api("GET", "/hitl/reviews"));
      dom.queueLive.textContent = "Updated every few seconds.";
    } catch {
      dom.queueLive.textContent = "Could not update the list; trying again.";
    }
  }

  function startPolling() {
    if (live.pollTimer !== null || !session.open) return;
    pollReviews();
    live.pollTimer = setInterval(pollReviews, POLL_MS);
  }

  function startLive() {
    if (typeof EventSource !== "function") {
      startPolling();
      return;
    }
    const source = new EventSource("/hitl/events");
    live.source = source;
    source.addEventListener("reviews", (event) => onReviews(parseEvent(event)));
    source.addEventListener("thread", (event) => onThreadEvent(parseEvent(event)));
    source.addEventListener("open", () => {
      dom.queueLive.textContent = "Live: updates as reviews arrive.";
    });
    source.addEventListener("error", () => {
      // CONNECTING: EventSource reconnects by itself. CLOSED: it gave up; poll instead.
      if (source.readyState === EventSource.CLOSED) {
        live.source = null;
        startPolling();
      } else {
        dom.queueLive.textContent = "Reconnecting…";
      }
    });
  }

  // Stops the live list (after sign-out): the stream and the polling end.
  function stopLive() {
    if (live.source) {
      live.source.close();
      live.source = null;
    }
    if (live.pollTimer !== null) {
      clearInterval(live.pollTimer);
      live.pollTimer = null;
    }
    dom.queueLive.textContent = "";
  }

  // ------------------------------------------------------------------ sign-in

  // With sign-in on, every /hitl route but /hitl/session answers 401 to a request
  // without a reviewer. GET /hitl/session says which case the page is in: 200 with
  // {"reviewer": null}, no sign-in; 200, who is signed in; 401 with a Bearer challenge, sign in with a
  // token here; 401 with a SignInLink challenge, open the server's sign-in link
  // (the person at its machine has it); 401 with another challenge, only the
  // sign-in proxy can name you.
  // The token goes to POST /hitl/session once and is kept nowhere: the server
  // answers with an HttpOnly session cookie that this script cannot read.
  const session = {
    open: false, // the page's own parts are shown and talk to the API
    started: false, // the first answer of GET /hitl/session was applied
    checking: null, // the GET /hitl/session in flight
    changes: 0, // counts sign-ins and sign-outs: an answer asked before one is not applied
  };

  const bearerChallenge = (response) =>
    /^bearer(\s|$)/i.test((response.headers.get("WWW-Authenticate") || "").trim());
  const linkChallenge = (response) =>
    /^signinlink(\s|$)/i.test((response.headers.get("WWW-Authenticate") || "").trim());

  async function jsonOf(response) {
    try {
      return await response.json();
    } catch {
      return null;
    }
  }

  const unreachable = (err) =>
    new ApiError(0, `Could not reach the server: ${err && err.message ? err.message : err}`);

  // Whether the server signs reviewers in with tokens: asked without the cookie,
  // it answers 401 with a Bearer challenge. (A sign-in proxy names the reviewer
  // whatever the page sends, and has nothing to sign out of here.)
  async function tokenSignIn() {
    try {
      const response = await fetch("/hitl/session", {
        credentials: "omit",
        headers: { Accept: "application/json" },
      });
      return response.status === 401 && bearerChallenge(response);
    } catch {
      return false;
    }
  }

  // What GET /hitl/session says: {kind: "none" | "signed-in" | "token" | "link" | "proxy" | "unknown"}.
  async function askSession() {
    let response;
    try {
      response = await fetch("/hitl/session", { headers: { Accept: "application/json" } });
    } catch (err) {
      return { kind: "unknown", error: unreachable(err) };
    }
    const data = await jsonOf(response);
    const detail = data && typeof data.detail === "string" ? data.detail : "";
    // Without sign-in the server answers {"reviewer": null} (an older one: 404).
    if (response.status === 404 || (response.ok && data && data.reviewer === null)) {
      return { kind: "none" };
    }
    if (response.status === 401) {
      const kind = bearerChallenge(response) ? "token" : linkChallenge(response) ? "link" : "proxy";
      return { kind, detail };
    }
    if (response.ok && data && typeof data.reviewer === "string") {
      return { kind: "signed-in", reviewer: data.reviewer, signOut: await tokenSignIn() };
    }
    return { kind: "unknown", error: new ApiError(response.status, describeFailure(response, data, "")) };
  }

  function applySession(found) {
    const wasOpen = session.open;
    if (found.kind === "none") {
      showAccount(null);
      openApp();
    } else if (found.kind === "signed-in") {
      showAccount(found.reviewer, found.signOut);
      openApp();
    } else if (found.kind === "token") {
      closeApp();
      // A session that ended while the page was in use says so; a first visit needs no text.
      if (wasOpen) setSignInError(found.detail);
      showSignIn();
    } else if (found.kind === "link") {
      closeApp();
      // As with tokens: a session that ended while the page was in use says so.
      showLink(wasOpen ? found.detail : "");
    } else if (found.kind === "proxy") {
      closeApp();
      showProxy(found.detail);
    } else if (!session.started) {
      openApp(); // the server enforces sign-in; the page shows why it cannot be used
      showError(found.error);
    }
    session.started = true;
  }

  // Asks GET /hitl/session again (one request at a time) and shows what it says.
  function checkSession() {
    if (!session.checking) {
      const changes = session.changes;
      session.checking = askSession()
        .then(async (found) => {
          // What the page is for is known before it shows anything of the app.
          if (found.kind === "none" || found.kind === "signed-in") await loadMode();
          if (changes === session.changes) applySession(found);
        })
        .finally(() => {
          session.checking = null;
        });
    }
    return session.checking;
  }

  // A /hitl call answered 401: the session may have ended (expired, signed out elsewhere).
  function sessionLost() {
    checkSession();
  }

  function showAccount(reviewer, signOut = false) {
    if (reviewer === null) {
      dom.account.hidden = true;
      dom.signedIn.replaceChildren();
      dom.signOut.hidden = true;
      return;
    }
    dom.signedIn.replaceChildren("Signed in as ", nameBox(reviewer, { testid: "reviewer-name" }));
    dom.signOut.hidden = !signOut;
    dom.account.hidden = false;
  }

  // Shows the page's own parts: the live list starts and the open thread is read again.
  function openApp() {
    dom.signIn.hidden = true;
    dom.proxyNeeded.hidden = true;
    dom.linkNeeded.hidden = true;
    dom.app.hidden = false;
    dom.newThread.hidden = state.mode !== "chat";
    if (session.open) return;
    session.open = true;
    loadMode().then(() => {
      if (!session.open) return;
      if (inGateway()) grants.start();
      startLive();
      if (state.threadId) reopenThread(state.threadId);
    });
  }

  // What serves the page (GET /hitl/info), asked once: a gateway gets the page made for it.
  // A server without the route (an older one, or a router mounted elsewhere) is a chat.
  async function loadMode() {
    if (state.mode !== null) return;
    let info = null;
    try {
      info = await api("GET", "/hitl/info");
    } catch (err) {
      if (err.status === 401) return; // signed out meanwhile: asked again after sign-in
      info = null;
    }
    if (state.mode !== null) return;
    if (info && info.shadow) showShadow(info.shadow);
    if (info && info.mode === "gateway" && gateway) showGateway(info);
    else showChat();
  }

  // Shadow mode (toolguard serve --shadow): nothing waits here, so the page says so loudly.
  function showShadow(shadow) {
    dom.shadowBanner.textContent = shadow === "all"
      ? "Shadow mode (all): nothing waits for approval and deny rules do not refuse. Every call runs at once; what would have happened is recorded in the audit trail."
      : "Shadow mode: nothing waits for approval. Calls that would ask run at once; what would have happened is recorded in the audit trail. Deny rules still refuse.";
    dom.shadowBanner.hidden = false;
  }

  function showChat() {
    state.mode = "chat";
    dom.form.hidden = false;
    dom.newThread.hidden = !session.open;
    updateControls();
  }

  // The page of an MCP gateway: the waiting calls, no conversation and no chat box.
  function showGateway(info) {
    state.mode = "gateway";
    document.title = "toolguard gateway — MCP tool calls waiting for approval";
    dom.subtitle.replaceChildren(
      "MCP gateway for ",
      ...gateway.serverNodes(info.server),
      ": tool calls from its clients wait here for your approval.",
    );
    dom.queueTitle.firstChild.textContent = "Waiting calls ";
    dom.queueEmpty.textContent = "No call is waiting.";
    dom.conversation.hidden = true;
    dom.form.hidden = true;
    dom.newThread.hidden = true;
    dom.messages.replaceChildren();
  }

  function closeApp() {
    dom.app.hidden = true;
    dom.newThread.hidden = true;
    showAccount(null);
    if (!session.open) return;
    session.open = false;
    stopLive();
    if (grants) grants.stop();
  }

  async function reopenThread(id) {
    setBusy(true, "Loading the conversation…");
    try {
      await loadThread(id);
    } catch (err) {
      showError(err);
      if (err.status === 404 && id === state.threadId) setThread(null);
    } finally {
      setBusy(false);
    }
  }

  // After sign-out nothing of the reviewer's conversations stays on the page.
  function forgetView() {
    clearError();
    state.loads += 1; // a load still in flight is not shown
    state.threadStatus = "idle";
    state.actions = new Map();
    state.judged = new Map();
    state.judgedLooked = new Set();
    dom.messages.replaceChildren();
    dom.empty.hidden = false;
    renderReview(null, null);
    state.calls = new Map();
    state.resultKey = null;
    dom.callResult.hidden = true;
    dom.callOutcome.replaceChildren();
    dom.callResultBody.replaceChildren();
    live.reviews = [];
    live.reviewsKey = "";
    renderQueue();
  }

  function setSignInError(text) {
    dom.signInError.textContent = text;
    if (text) dom.signInToken.setAttribute("aria-invalid", "true");
    else dom.signInToken.removeAttribute("aria-invalid");
  }

  function showSignIn() {
    dom.proxyNeeded.hidden = true;
    dom.linkNeeded.hidden = true;
    if (!dom.signIn.hidden) return; // already shown: keep what is typed
    dom.signIn.hidden = false;
    dom.signInToken.focus();
  }

  function showProxy(detail) {
    dom.signIn.hidden = true;
    dom.linkNeeded.hidden = true;
    dom.proxyDetail.textContent = detail;
    dom.proxyNeeded.hidden = false;
  }

  // The server signs in the person at its machine with a one-time link: nothing to type here.
  function showLink(detail) {
    dom.signIn.hidden = true;
    dom.proxyNeeded.hidden = true;
    dom.linkDetail.textContent = detail;
    dom.linkNeeded.hidden = false;
  }

  async function signIn() {
    const token = dom.signInToken.value.trim();
    dom.signInToken.value = ""; // the token stays nowhere on the page
    if (!token) {
      setSignInError("Enter your token.");
      dom.signInToken.focus();
      return;
    }
    setSignInError("");
    dom.signInSubmit.disabled = true;
    let response;
    try {
      response = await fetch("/hitl/session", {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify({ token }),
      });
    } catch (err) {
      response = null;
      setSignInError(unreachable(err).message);
    }
    dom.signInSubmit.disabled = false;
    if (response === null) {
      dom.signInToken.focus();
      return;
    }
    const data = await jsonOf(response);
    if (response.ok && data && typeof data.reviewer === "string") {
      session.changes += 1;
      await loadMode(); // before the page shows the reviewer in: no chat box flashes by
      clearError();
      showAccount(data.reviewer, true);
      openApp();
      if (!state.threadId) dom.input.focus();
      return;
    }
    const detail = data && typeof data.detail === "string" ? data.detail : "";
    setSignInError(detail || describeFailure(response, data, ""));
    dom.signInToken.focus();
  }

  async function signOut() {
    dom.signOut.disabled = true;
    let failure = null;
    try {
      const response = await fetch("/hitl/session", { method: "DELETE", headers: { Accept: "application/json" } });
      if (!response.ok) failure = new ApiError(response.status, describeFailure(response, await jsonOf(response), ""));
    } catch (err) {
      failure = unreachable(err);
    }
    dom.signOut.disabled = false;
    if (failure) {
      showError(failure);
      return;
    }
    session.changes += 1;
    forgetView();
    closeApp();
    setSignInError("");
    showSignIn();
  }

  // ------------------------------------------------------------------ wiring

  dom.signInForm.addEventListener("submit", (event) => {
    event.preventDefault();
    signIn();
  });

  dom.signOut.addEventListener("click", signOut);

  dom.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = dom.input.value.trim();
    if (text) sendMessage(text);
  });

  dom.errorDismiss.addEventListener("click", clearError);

  dom.submitDecisions.addEventListener("click", async () => {
    if (state.cards.some((card) => card.choice === "edit")) await loadTools();
    const decisions = state.cards.map((card) => (card.choice ? decisionOf(card, card.choice) : null));
    const bad = decisions.findIndex((decision) => decision === null);
    if (bad !== -1) {
      const card = state.cards[bad];
      (card.choice === "edit" ? card.editArgs : card.buttons.approve || card.root).focus();
      return;
    }
    submitReview(decisions);
  });

  dom.approveAll.addEventListener("click", () => {
    submitReview(state.cards.map(() => ({ type: "approve" })));
  });

  dom.rejectAll.addEventListener("click", () => {
    submitReview(state.cards.map((card) => decisionOf(card, "reject")));
  });

  dom.newThread.addEventListener("click", () => {
    if (state.busy) return;
    setThread(null);
    clearError();
    state.threadStatus = "idle";
    state.actions = new Map();
    dom.messages.replaceChildren();
    dom.empty.hidden = false;
    renderReview(null, null);
    dom.input.focus();
  });

  async function start() {
    if (!reveal) {
      // Fail closed: without reveal.js no card can be shown safely.
      dom.app.hidden = false;
      showError(new Error("The page could not load reveal.js: reload the page."));
      state.busy = true;
      updateControls();
      return;
    }
    const id = new URLSearchParams(window.location.search).get("thread");
    if (id) state.threadId = id;
    updateControls();
    setInterval(renderQueue, 30000); // keeps "waiting N min" current
    await checkSession(); // shows the page, the sign-in form, or the proxy notice
  }

  start();
})();
