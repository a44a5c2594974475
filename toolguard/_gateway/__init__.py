"""``toolguard mcp-proxy``: the MCP approval gateway.

From the ground up (a module imports only the ones before it):

* ``question``: the approval question, every invisible or look-alike character escaped;
* ``upstream``: the upstream MCP session: its tools listed, its answers as wire dicts, its
  resources and prompts forwarded as they are;
* ``relay``: what passes between client and upstream besides tool calls (sampling,
  elicitation, roots, subscriptions, ``list_changed``), and progress while a person decides;
* ``proxy``: :class:`~toolguard._gateway.proxy.MCPProxy`, the gateway's logic: one reviewed
  thread per guarded call, elicitation, deny rules, calls the client gives up on;
* ``routes``: the HTTP app (the approval page and API, plus ``GET /hitl/audit``);
* ``run``: the gateway as a process: the upstream, the HTTP app and the MCP server on stdio.

Its command line (options, usage errors) is :mod:`toolguard._cli.mcp_proxy`.
"""
