"""The demo behind ``toolguard demo`` and ``toolguard serve``: a small workspace (mail,
calendar, tasks), its tools, and an offline scripted stand-in for an LLM.

Use it to try toolguard without an API key::

    from toolguard.demo import DemoModel, build_demo_chat
"""

from __future__ import annotations

from toolguard.demo.workspace import (
    DemoModel,
    DemoWorkspace,
    build_demo_chat,
    demo_system_prompt,
    demo_toolset,
    uses_real_model,
)

__all__ = [
    "DemoModel",
    "DemoWorkspace",
    "build_demo_chat",
    "demo_system_prompt",
    "demo_toolset",
    "uses_real_model",
]
