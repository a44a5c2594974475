// The approval page of an MCP gateway (toolguard mcp-proxy): each waiting call's server and
// client, the gateway-wide grants, and a tool's result shown as MCP content. Loaded before
// app.js, which uses it when GET /hitl/info answers {"mode": "gateway"}.
//
// Everything shown here comes from other programs (the upstream server, the MCP client, the
// tool): text is only ever set as text, drawn by reveal.js like the rest of the page (names
// with every suspicious character escaped, prose with its right-to-left text in boxes of
// its own, JSON with its numbers exact), never parsed as HTML; an image is shown only when it is PNG, JPEG, GIF or WebP data whose
// first bytes say so, within a size cap (never SVG, which can carry script).
"use strict";

(() => {
  const reveal = globalThis.toolguardReveal;

  const MAX_TEXT_CHARS = 100000; // a text block longer than this shows its start and a note
  const MAX_IMAGE_BYTES = 2 * 1024 * 1024; // a larger image is described, not shown
  // The image types shown, each with the first bytes its data must start with.
  const IMAGE_MAGIC = {
    "image/png": [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
    "image/jpeg": [[0xff, 0xd8, 0xff]],
    "image/gif": [
      [0x47, 0x49, 0x46, 0x38, 0x37, 0x61],
      [0x47, 0x49, 0x46, 0x38, 0x39, 0x61],
    ],
    "image/webp": [[0x52, 0x49, 0x46, 0x46, null, null, null, null, 0x57, 0x45, 0x42, 0x50]],
  };
  const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

  // Standing grants a gateway offers: every client of the gateway, never one conversation.
  const GRANT_MATCHES = [
    ["tool", "this tool, any arguments"],
    ["args", "only these exact arguments"],
  ];
  const GRANT_LIMITS = [
    ["ttl:900", "for 15 minutes", "for 15 minutes"],
    ["ttl:3600", "for 1 hour", "for the next hour"],
    ["ttl:28800", "for 8 hours", "for 8 hours"],
    ["uses:1", "for 1 more call", "for 1 more call"],
    ["uses:10", "for the next 10 calls", "for the next 10 calls"],
  ];
  const DEFAULT_LIMIT = "ttl:3600";

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
  const textOr = (value, fallback = "") => (typeof value === "string" ? value : fallback);

  // Untrusted text as DOM nodes (reveal.js): prose, or a name (one line, look-alikes found).
  const textNodes = (text, singleLine = false) => reveal.proseNodes(String(text), { singleLine });
  const nameNodes = (text) => reveal.nameNodes(String(text));
  const jsonNodes = (value) => reveal.jsonNodes(value ?? null);

  // ------------------------------------------------------------------ server and client
  // An MCP Implementation (clientInfo / serverInfo) is identified by its name and version
  // (and the upstream by its command or URL); a title is only what it calls itself, shown
  // beside them, never instead.

  // "probe-client 2.5.0": the name and version, or "" when it has no name.
  function implementationName(found) {
    if (!isObject(found) || typeof found.name !== "string") return "";
    return typeof found.version === "string" && found.version ? `${found.name} ${found.version}` : found.name;
  }

  const titleOf = (found) => (isObject(found) ? textOr(found.title) : "");

  // "toolguard-proxy-upstream 1.0 (python -m upstream)": the upstream's name and command or URL.
  function serverName(server) {
    if (!isObject(server)) return "unknown";
    const name = implementationName(server);
    const target = textOr(server.target);
    if (name && target) return `${name} (${target})`;
    return name || target || "unknown";
  }

  const CLIENT_UNKNOWN = "unknown (the MCP client did not name itself)";
  const clientName = (client) => implementationName(client) || CLIENT_UNKNOWN;

  // The whole line as text (a title after the name: ', titled “Title”').
  const titled = (name, title) => (title ? `${name}, titled “${title}”` : name);
  const serverText = (server) => titled(serverName(server), titleOf(server));
  const clientText = (client) => titled(clientName(client), implementationName(client) ? titleOf(client) : "");

  // The same as nodes: the name and the title each in a left-to-right box of its own.
  function titledNodes(name, title, known = true) {
    const parts = [known ? reveal.nameBox(name) : document.createTextNode(name)];
    if (title) parts.push(", titled “", reveal.nameBox(title, { className: "name title" }), "”");
    return parts;
  }

  const serverNodes = (server) => titledNodes(serverName(server), titleOf(server));

  function clientNodes(client) {
    const name = implementationName(client);
    return name ? titledNodes(name, titleOf(client)) : titledNodes(CLIENT_UNKNOWN, "", false);
  }

  // Who cancelled a call nobody named: the MCP client (it gave up on the call: cancelled it,
  // timed out or disconnected) or the gateway (it stopped, or a rule denied the call).
  function cancelledBy(action) {
    const result = isObject(action.result) ? textOr(action.result.content) : "";
    return result.startsWith("The review of this action was cancelled: the MCP client gave up")
      ? "the MCP client"
      : "the gateway";
  }

  // "3 min ago": how long ago an ISO 8601 time was.
  function agoText(iso, now = Date.now()) {
    const since = typeof iso === "string" ? Date.parse(iso) : Number.NaN;
    if (Number.isNaN(since)) return "";
    const minutes = Math.floor(Math.max(0, now - since) / 60000);
    if (minutes < 1) return "less than a minute ago";
    if (minutes < 60) return `${minutes} min ago`;
    const hours = Math.floor(minutes / 60);
    return hours < 48 ? `${hours} h ${minutes % 60} min ago` : `${Math.floor(hours / 24)} days ago`;
  }

  // "in 59 min": how long until an ISO 8601 time.
  function untilText(iso, now = Date.now()) {
    const until = typeof iso === "string" ? Date.parse(iso) : Number.NaN;
    if (Number.isNaN(until)) return "";
    const minutes = Math.floor(Math.max(0, until - now) / 60000);
    if (minutes < 1) return "in less than a minute";
    if (minutes < 60) return `in ${minutes} min`;
    const hours = Math.floor(minutes / 60);
    return hours < 48 ? `in ${hours} h ${minutes % 60} min` : `in ${Math.floor(hours / 24)} days`;
  }

  // "less than a minute ago (1/2/2030, 12:00:00 PM)", in a <time> element.
  function sinceNode(iso, relative = agoText) {
    const date = new Date(iso);
    if (typeof iso !== "string" || Number.isNaN(date.getTime())) return document.createTextNode("unknown");
    return el("time", { datetime: iso, text: `${relative(iso)} (${date.toLocaleString()})` });
  }

  // The details of a waiting call: server, tool, client, since when.
  function callDetails(id, call, tool, requestedAt) {
    const list = el("dl", { className: "call-info", "data-testid": "call-info", "aria-label": "The call" });
    fillCallDetails(list, call, tool, requestedAt);
    return list;
  }

  function fillCallDetails(list, call, tool, requestedAt) {
    const info = isObject(call) ? call : {};
    const row = (label, testid, ...value) => [
      el("dt", { text: label }),
      el("dd", { "data-testid": testid }, ...value),
    ];
    list.replaceChildren(
      ...row("Server", "call-server", ...serverNodes(info.server)),
      ...row("Tool", "call-tool", el("code", {}, ...nameNodes(tool))),
      ...row("Client", "call-client", ...clientNodes(info.client)),
      ...row("Waiting since", "call-since", sinceNode(requestedAt)),
    );
  }

  // ------------------------------------------------------------------ grants for every client

  function grantLimit(value) {
    const [kind, number] = value.split(":");
    return kind === "uses" ? { uses: Number(number) } : { ttl: Number(number) };
  }

  // The approve that grants: every later call of the tool (or with these arguments), from
  // any client of the gateway, runs without asking, for a time or a number of calls.
  function grantDecision(match, limit) {
    return { type: "approve", grant: { scope: "server", match, ...grantLimit(limit) } };
  }

  function grantHint(tool, match, limit) {
    const how = (GRANT_LIMITS.find(([value]) => value === limit) ?? GRANT_LIMITS[1])[2];
    return [
      "Later calls of ",
      reveal.nameBox(tool),
      match === "args" ? " with these exact arguments" : "",
      ` from every client of this gateway run without asking, ${how}.`,
    ];
  }

  // The row under a gateway card's buttons: what to allow, for how long, and the button.
  // ``submit(decision)`` sends the decision; returns the row and its form controls.
  // ``tool`` is the tool's name as it is (drawn by reveal.js).
  function grantRow(id, tool, submit) {
    const match = el(
      "select",
      { id: `${id}-grant-match`, "data-testid": "grant-match", "aria-label": "What to allow" },
      ...GRANT_MATCHES.map(([value, label]) => el("option", { value, text: label })),
    );
    const limit = el(
      "select",
      { id: `${id}-grant-ttl`, "data-testid": "grant-ttl", "aria-label": "For how long" },
      ...GRANT_LIMITS.map(([value, label]) => el("option", { value, text: label, selected: value === DEFAULT_LIMIT })),
    );
    limit.value = DEFAULT_LIMIT;
    const hint = el("p", { id: `${id}-grant-hint`, className: "hint", "data-testid": "grant-hint" });
    const allow = el("button", {
      type: "button",
      className: "approve grant",
      "data-testid": "approve-grant",
      "aria-describedby": `${id}-grant-hint`,
      text: "Approve and allow for every client",
    });
    const update = () => {
      hint.replaceChildren(...grantHint(tool, match.value, limit.value));
    };
    match.addEventListener("change", update);
    limit.addEventListener("change", update);
    update();
    allow.addEventListener("click", () => submit(grantDecision(match.value, limit.value)));
    const row = el("div", { className: "row grant-row", "data-testid": "grant-row" }, allow, match, limit, hint);
    return { row, controls: [match, limit] };
  }

  // ------------------------------------------------------------------ the gateway's grants

  const ENDED = { used_up: "used up", expired: "expired", revoked: "revoked" };
  const GRANTS_REFRESH_MS = 15000; // besides the live events, focus and visibility
  const RERENDER_MS = 30000; // an unchanged list is drawn again after this ("in 59 min")

  function reviewerNodes(name) {
    return typeof name === "string" && name ? [reveal.nameBox(name)] : [document.createTextNode("an unnamed reviewer")];
  }

  // "revoked by maria, 2 min ago (1/2/2030, 12:02:00 PM)": how a grant ended.
  function endedNodes(grant) {
    const parts = [ENDED[grant.status] ?? textOr(grant.status, "ended")];
    if (typeof grant.ended_by === "string" && grant.ended_by) parts.push(" by ", reveal.nameBox(grant.ended_by));
    const at = textOr(grant.ended_at) || (grant.status === "expired" ? textOr(grant.expires_at) : "");
    if (at) parts.push(", ", sinceNode(at));
    return parts;
  }

  // One grant as a list item: its tool and match, its arguments (as the API lists them:
  // secrets already replaced), who granted it; when active its uses left, its expiry and
  // "Revoke", else how it ended.
  function grantItem(grant, key, revoke) {
    const active = grant.status === "active";
    const tool = textOr(grant.tool, "?");
    const titleId = `grant-${key}-title`;
    const row = (label, testid, ...value) => [el("dt", { text: label }), el("dd", { "data-testid": testid }, ...value)];
    const rows = [];
    if (grant.match === "args") {
      rows.push(
        ...row(
          "Arguments",
          "grant-args",
          el("pre", { className: "json grant-args", tabindex: "0" }, ...jsonNodes(grant.args)),
        ),
      );
    }
    if (active) {
      const uses = grant.uses_left === null || grant.uses_left === undefined ? "no limit" : `${String(grant.uses_left)} of ${String(grant.uses)}`;
      rows.push(...row("Uses left", "grant-uses", uses));
      const expires = typeof grant.expires_at === "string" ? sinceNode(grant.expires_at, untilText) : "never (until revoked)";
      rows.push(...row("Expires", "grant-expires", expires));
    }
    rows.push(...row("Granted by", "grant-by", ...reviewerNodes(grant.granted_by)));
    if (!active) rows.push(...row("Status", "grant-status", ...endedNodes(grant)));
    const item = el(
      "li",
      { className: `grant-item${active ? "" : " ended"}`, "data-testid": "grant-item", "data-grant": textOr(grant.id), "data-status": textOr(grant.status) },
      el(
        "h3",
        { id: titleId, className: "grant-title", "data-testid": "grant-title" },
        el("code", { "data-testid": "grant-tool" }, ...nameNodes(tool)),
        grant.match === "args" ? ", these exact arguments" : ", any arguments",
      ),
      el("dl", { className: "call-info" }, ...rows),
    );
    if (active) {
      const button = el("button", {
        type: "button",
        className: "reject",
        "data-testid": "grant-revoke",
        "aria-describedby": titleId,
        text: "Revoke",
      });
      button.addEventListener("click", () => revoke(grant, tool));
      item.append(el("div", { className: "row" }, button));
    }
    return item;
  }

  // The list of the gateway's grants (GET /hitl/grants) and their "Revoke" (DELETE
  // /hitl/grants/{id}). ``parts`` are the page's elements, ``api(method, path)`` the page's
  // request helper (it throws an Error whose message is the server's answer).
  function grantsPanel(parts, api) {
    let running = false; // shown and refreshing (gateway mode, signed in)
    let loading = false;
    let again = false;
    let revoking = false;
    let loads = 0;
    let timer = null;
    let shownText = null; // the grants last shown, and when: an unchanged list is kept as it
    let shownAt = 0; // is (a button is not replaced under the pointer) until its times age

    // The element with the focus inside the list, to give it back after a new render.
    function focusedKey() {
      const active = document.activeElement;
      const item = active && active.closest ? active.closest("[data-grant]") : null;
      if (!item || !parts.section.contains(item)) return null;
      return [item.getAttribute("data-grant"), active.getAttribute("data-testid"), active.tagName];
    }

    function restoreFocus(key) {
      if (!key) return;
      const [id, testid, tag] = key;
      const item = [...parts.section.querySelectorAll("[data-grant]")].find((node) => node.getAttribute("data-grant") === id);
      const target = item ? [...item.querySelectorAll(tag)].find((node) => node.getAttribute("data-testid") === testid) ?? item.querySelector(tag) : null;
      if (target) target.focus();
    }

    function render(grants) {
      const list = grants.filter(isObject);
      const text = JSON.stringify(list);
      if (text === shownText && Date.now() - shownAt < RERENDER_MS) return;
      shownText = text;
      shownAt = Date.now();
      const key = focusedKey();
      const active = list.filter((grant) => grant.status === "active");
      const ended = list.filter((grant) => grant.status !== "active").reverse(); // latest first
      parts.list.replaceChildren(...active.map((grant, i) => grantItem(grant, `active-${i}`, revoke)));
      parts.endedList.replaceChildren(...ended.map((grant, i) => grantItem(grant, `ended-${i}`, revoke)));
      parts.empty.hidden = active.length > 0;
      parts.count.textContent = active.length ? `(${active.length})` : "";
      parts.ended.hidden = ended.length === 0;
      parts.endedSummary.textContent = `Ended grants (${ended.length})`;
      restoreFocus(key);
    }

    async function refresh() {
      if (!running) return;
      if (loading) {
        again = true;
        return;
      }
      loading = true;
      const load = ++loads;
      try {
        const data = await api("GET", "/hitl/grants");
        if (running && load === loads) {
          render(Array.isArray(data.grants) ? data.grants : []);
          parts.live.textContent = "";
        }
      } catch (err) {
        if (running && load === loads) parts.live.textContent = `Could not update the grants (${err.message}); trying again.`;
      } finally {
        loading = false;
      }
      if (again) {
        again = false;
        refresh();
      }
    }

    async function revoke(grant, tool) {
      if (revoking) return;
      revoking = true;
      parts.error.textContent = "";
      parts.status.textContent = "";
      try {
        await api("DELETE", `/hitl/grants/${encodeURIComponent(textOr(grant.id))}`);
        parts.status.replaceChildren("Revoked the grant for ", reveal.nameBox(tool), ": its next calls wait for a review again.");
      } catch (err) {
        parts.error.replaceChildren(...textNodes(err instanceof Error ? err.message : String(err)));
      } finally {
        revoking = false;
      }
      parts.title.focus(); // the button is gone once the list is read again
      await refresh();
    }

    const onVisible = () => {
      if (document.visibilityState === "visible") refresh();
    };

    function start() {
      parts.section.hidden = false;
      if (running) return;
      running = true;
      timer = setInterval(() => {
        if (document.visibilityState !== "hidden") refresh();
      }, GRANTS_REFRESH_MS);
      window.addEventListener("focus", refresh);
      document.addEventListener("visibilitychange", onVisible);
      refresh();
    }

    // Signed out: nothing of the grants stays on the page, and nothing is asked.
    function stop() {
      running = false;
      loads += 1;
      if (timer !== null) clearInterval(timer);
      timer = null;
      window.removeEventListener("focus", refresh);
      document.removeEventListener("visibilitychange", onVisible);
      render([]);
      shownText = null;
      parts.error.textContent = "";
      parts.status.textContent = "";
      parts.live.textContent = "";
    }

    return { refresh, start, stop };
  }

  // ------------------------------------------------------------------ results as MCP content

  function base64Bytes(data, count) {
    try {
      return Array.from(atob(data.slice(0, 24)).slice(0, count), (c) => c.charCodeAt(0));
    } catch {
      return [];
    }
  }

  // Why an image block is not shown as an image, or "" when it may be.
  function imageProblem(block) {
    const mime = textOr(block.mimeType).toLowerCase();
    const data = textOr(block.data);
    if (!Object.hasOwn(IMAGE_MAGIC, mime)) return "the page shows only PNG, JPEG, GIF and WebP images";
    if (data.length === 0 || data.length % 4 !== 0 || !BASE64.test(data)) return "its data is not base64";
    if ((data.length / 4) * 3 > MAX_IMAGE_BYTES) return `it is larger than ${MAX_IMAGE_BYTES / (1024 * 1024)} MB`;
    const head = base64Bytes(data, 12);
    const fits = IMAGE_MAGIC[mime].some((magic) => magic.every((byte, i) => byte === null || head[i] === byte));
    return fits ? "" : `its data is not ${mime}`;
  }

  function sizeText(base64) {
    const padding = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0;
    const bytes = Math.max(0, Math.floor((base64.length * 3) / 4) - padding);
    return bytes < 1024 ? `${bytes} bytes` : `${Math.round(bytes / 1024)} KB`;
  }

  function textBlock(text, testid = "mcp-text") {
    const box = el("div", { className: "mcp-block" });
    if (text.length > MAX_TEXT_CHARS) {
      box.append(
        el("p", {
          className: "long-note",
          "data-testid": "mcp-text-cut",
          text: `A long text: showing its first ${MAX_TEXT_CHARS.toLocaleString("en")} of ${text.length.toLocaleString("en")} characters.`,
        }),
      );
    }
    box.append(el("pre", { className: "mcp-text", "data-testid": testid, tabindex: "0" }, ...textNodes(text.slice(0, MAX_TEXT_CHARS))));
    return box;
  }

  // JSON as the page shows arguments: numbers exact, suspicious characters escaped.
  function jsonBlock(value, testid) {
    return el("div", { className: "mcp-block" }, el("pre", { className: "mcp-text json", "data-testid": testid, tabindex: "0" }, ...jsonNodes(value)));
  }

  function noteBlock(testid, ...parts) {
    return el("p", { className: "mcp-note", "data-testid": testid }, ...parts);
  }

  function imageBlock(block, index) {
    const mime = textOr(block.mimeType, "no type");
    const problem = imageProblem(block);
    if (problem) {
      return noteBlock("mcp-image-refused", ...textNodes(`An image not shown (${mime}): ${problem}.`, true));
    }
    const data = block.data;
    return el(
      "figure",
      { className: "mcp-block mcp-image" },
      el("img", {
        src: `data:${mime.toLowerCase()};base64,${data}`,
        alt: `Image ${index + 1} of the result (${mime}, ${sizeText(data)})`,
        "data-testid": "mcp-image",
        decoding: "async",
      }),
    );
  }

  function resourceNodes(resource) {
    const parts = [el("code", { className: "mcp-uri", "data-testid": "mcp-uri" }, ...nameNodes(textOr(resource.uri, "(no uri)")))];
    const mime = textOr(resource.mimeType);
    if (mime) parts.push(` (${mime})`);
    return parts;
  }

  function contentBlock(block, index) {
    if (!isObject(block)) return jsonBlock(block, "mcp-other");
    switch (block.type) {
      case "text":
        return textBlock(textOr(block.text));
      case "image":
        return imageBlock(block, index);
      case "audio":
        return noteBlock("mcp-audio", ...textNodes(`Audio (${textOr(block.mimeType, "no type")}, ${sizeText(textOr(block.data))}): not played here.`, true));
      case "resource_link": {
        const name = textOr(block.title) || textOr(block.name);
        const note = noteBlock("mcp-resource-link", "Resource link: ", ...resourceNodes(block));
        if (name) note.append(" ", ...textNodes(`“${name}”`, true));
        if (textOr(block.description)) note.append(" — ", ...textNodes(block.description, true));
        return note;
      }
      case "resource": {
        const resource = isObject(block.resource) ? block.resource : {};
        const box = el("div", { className: "mcp-block", "data-testid": "mcp-resource" });
        box.append(noteBlock("mcp-resource-uri", "Resource: ", ...resourceNodes(resource)));
        if (typeof resource.text === "string") box.append(textBlock(resource.text, "mcp-resource-text"));
        else if (typeof resource.blob === "string") {
          box.append(noteBlock("mcp-resource-blob", `Binary content, ${sizeText(resource.blob)}: not shown.`));
        }
        return box;
      }
      default:
        return jsonBlock(block, "mcp-other");
    }
  }

  // A tool's CallToolResult as MCP content: its blocks, its structured content, its error mark.
  function resultNode(value) {
    const result = isObject(value) ? value : { content: [{ type: "text", text: reveal.revealJson(value ?? null, null) }] };
    const failed = result.isError === true;
    const box = el("div", {
      className: `mcp-result${failed ? " error" : ""}`,
      "data-testid": "mcp-result",
      "data-error": failed ? "true" : "false",
    });
    if (failed) {
      box.append(el("p", { className: "mcp-error", "data-testid": "mcp-error" }, el("span", { className: "badge error", text: "error" }), " The tool answered with an error."));
    }
    const blocks = Array.isArray(result.content) ? result.content : [];
    blocks.forEach((block, index) => box.append(contentBlock(block, index)));
    if (result.structuredContent !== undefined && result.structuredContent !== null) {
      box.append(
        el("p", { className: "label", text: "Structured content" }),
        el("pre", { className: "json", "data-testid": "mcp-structured", tabindex: "0" }, ...jsonNodes(result.structuredContent)),
      );
    }
    if (blocks.length === 0 && result.structuredContent == null) {
      box.append(noteBlock("mcp-empty", "The tool answered with no content."));
    }
    return box;
  }

  globalThis.toolguardGateway = {
    agoText,
    callDetails,
    cancelledBy,
    clientNodes,
    clientText,
    el,
    fillCallDetails,
    grantDecision,
    grantRow,
    grantsPanel,
    imageProblem,
    resultNode,
    serverNodes,
    serverText,
    untilText,
  };
})();
