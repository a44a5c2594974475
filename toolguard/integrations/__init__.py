"""Ready-made glue between toolguard and agent frameworks, one module per framework.

Each module turns a toolguard :class:`~toolguard.Toolset` (or a list of
functions and tools) into the framework's own tools, so a guarded call becomes
the framework's own pause and a reviewer's decisions resume it with
toolguard's guarantees:

* ``toolguard.integrations.openai_agents`` — the OpenAI Agents SDK;
* ``toolguard.integrations.pydantic_ai`` — Pydantic AI;
* ``toolguard.integrations.langchain`` — LangChain ``create_agent`` and LangGraph, and
  ``HumanInTheLoopMiddleware``, a drop-in for LangChain's own (change its import only);
* ``toolguard.integrations.mcp`` — the tools of any MCP server.

For chat front ends, the other way round: ``toolguard.integrations.ag_ui`` serves a
:class:`~toolguard.ReviewedChat` as an AG-UI agent (CopilotKit, ``@ag-ui/client``), its
reviews as the protocol's interrupts.

Each module needs its framework (an optional extra, e.g.
``pip install "toolguard-hitl[langchain]"``); importing it without that extra
fails with an ``ImportError`` that names the extra to install.
"""
