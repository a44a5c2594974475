"""The demo behind ``toolguard demo`` and ``toolguard serve``: a small workspace (mail,
calendar, tasks), its tools, and an offline scripted stand-in for an LLM.

Use it to try toolguard without an API key::

    from toolguard.demo import DemoModel, build_demo_chat

The whole review loop (approve, edit, reject with a reason, the model
proposing again) works without a network:

* :mod:`toolguard.demo.workspace`: :class:`DemoWorkspace` (a mailbox, a
  calendar and a task list in memory, whose methods are the tools),
  :func:`demo_toolset` and :func:`demo_system_prompt`;
* :mod:`toolguard.demo.model`: :class:`DemoModel`, a deterministic,
  rule-based stand-in for an LLM;
* :mod:`toolguard.demo.chat`: :func:`build_demo_chat`, which puts them in a
  :class:`~toolguard.ReviewedChat` (with a real OpenAI-compatible model when
  :func:`uses_real_model` says one is configured).
"""

from __future__ import annotations

from toolguard.demo.chat import build_demo_chat, uses_real_model
from toolguard.demo.model import DemoModel
from toolguard.demo.workspace import DemoWorkspace, demo_system_prompt, demo_toolset

__all__ = [
    "DemoModel",
    "DemoWorkspace",
    "build_demo_chat",
    "demo_system_prompt",
    "demo_toolset",
    "uses_real_model",
]
