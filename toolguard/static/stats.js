// The approval statistics panel: GET /hitl/stats (the numbers of `toolguard stats`), read when
// the panel is opened and on "Refresh". Per tool: calls, asks, how people decided, the calls that
// ran without a person, the median and 90th percentile time to decide, who decided; then what
// the numbers suggest. Tool and reviewer names come from other programs: they are drawn by
// reveal.js (escaped, never parsed as HTML), every number is set as text.
"use strict";

(() => {
  const reveal = globalThis.toolguardReveal;
  // [key, heading, what the heading means]
  const COLUMNS = [
    ["calls", "Calls", "Calls recorded"],
    ["asked", "Asked", "Calls that asked a person"],
    ["approved", "Approved", "Approved unedited"],
    ["edited", "Edited", "Approved with edits"],
    ["rejected", "Rejected", "Rejected by a person"],
    ["expired", "Expired", "Asked, and nobody decided in time"],
    ["cancelled", "Cancelled", "Asked, then cancelled"],
    ["denied", "Denied", "Refused by a deny rule; nobody was asked"],
    ["auto", "Auto", "Ran without a person: by a standing grant, the judge or shadow mode"],
    ["median_decision_s", "Median", "Median time from the request to the decision"],
    ["p90_decision_s", "p90", "90% of the decisions were made within this time"],
  ];

  function seconds(value) {
    if (value === null || value === undefined) return "–";
    if (value < 120) return `${Number(value.toFixed(1))} s`;
    if (value < 7200) return `${Number((value / 60).toFixed(1))} min`;
    return `${Number((value / 3600).toFixed(1))} h`;
  }

  function cell(tag, text) {
    const node = document.createElement(tag);
    node.textContent = text;
    return node;
  }

  function listed(counts) {
    return Object.entries(counts || {})
      .filter(([, n]) => n > 0)
      .map(([who, n]) => `${reveal.nameText(who)} ${n}`)
      .join(", ");
  }

  // How the calls ran without a person: "grant 2", "shadow 3 (would ask 2, deny 1)".
  function ranBy(row) {
    const by = listed(row.auto_by);
    const would = listed(row.shadow_would);
    return would ? `${by} (shadow mode: would ${would})` : by;
  }

  function render(panel, data) {
    const table = panel.querySelector("#stats-table");
    const body = table.querySelector("tbody");
    const status = panel.querySelector("#stats-status");
    const hints = panel.querySelector("#stats-suggestions");
    body.replaceChildren();
    hints.replaceChildren();
    const tools = Object.entries(data.tools || {});
    const since = data.since ? `from ${data.since} ` : "";
    if (!tools.length) {
      table.hidden = true;
      status.textContent = `No call recorded ${since}up to ${data.until}.`;
      return;
    }
    for (const [name, row] of tools) {
      const tr = document.createElement("tr");
      tr.setAttribute("data-testid", "stats-row");
      const th = document.createElement("th");
      th.scope = "row";
      th.append(reveal.nameBox(name, { testid: "stats-tool" }));
      tr.append(th);
      for (const [key] of COLUMNS) {
        const value = row[key];
        const td = cell("td", key.endsWith("_s") ? seconds(value) : String(value));
        td.setAttribute("data-testid", `stats-${key}`);
        if (key === "auto" && value > 0) td.title = ranBy(row);
        tr.append(td);
      }
      const deciders = cell("td", listed(row.deciders) || "–");
      deciders.setAttribute("data-testid", "stats-deciders");
      tr.append(deciders);
      body.append(tr);
    }
    table.hidden = false;
    for (const text of data.suggestions || []) {
      const li = document.createElement("li");
      li.setAttribute("data-testid", "stats-suggestion");
      li.append(...reveal.proseNodes(text, { singleLine: true }));
      hints.append(li);
    }
    status.textContent = `Calls recorded ${since}up to ${data.until}.`;
  }

  async function load(panel) {
    const status = panel.querySelector("#stats-status");
    status.textContent = "Loading…";
    let response;
    try {
      response = await fetch("/hitl/stats", { headers: { Accept: "application/json" } });
    } catch (err) {
      status.textContent = `Could not reach the server: ${err && err.message ? err.message : err}`;
      return;
    }
    if (!response.ok) {
      status.textContent =
        response.status === 401
          ? "Sign in to see the statistics."
          : `The statistics could not be read (error ${response.status}).`;
      return;
    }
    render(panel, await response.json());
  }

  function setUp() {
    const panel = document.getElementById("stats");
    if (!panel) return;
    const head = panel.querySelector("thead tr");
    for (const [, heading, meaning] of COLUMNS) {
      const th = cell("th", heading);
      th.scope = "col";
      th.title = meaning;
      head.append(th);
    }
    const who = cell("th", "Decided by");
    who.scope = "col";
    head.append(who);
    panel.addEventListener("toggle", () => {
      if (panel.open) load(panel);
    });
    panel.querySelector("#stats-refresh").addEventListener("click", () => load(panel));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
