"""The ``toolguard`` command line.

* ``main``: the parser and :func:`~toolguard._cli.main.main` (``serve`` and ``tools`` too);
* ``options``: argument types the commands share;
* ``judge``: the judge options of ``serve`` and ``mcp-proxy`` (``--judge-model``, ...);
* ``terminal``: the review on a terminal (cards, questions, decisions);
* ``demo``: ``toolguard demo``, a terminal assistant over the demo workspace;
* ``serve``: ``toolguard serve``, the reviewed chat over HTTP (needs the ``http`` extra);
* ``startup``: the checks of ``serve`` and ``mcp-proxy`` before their first line;
* ``running``: runs uvicorn for ``serve`` (exit code 130 after Ctrl-C);
* ``mcp_proxy``: ``toolguard mcp-proxy``'s options, checked before the gateway
  (:mod:`toolguard._gateway`) runs.
"""
