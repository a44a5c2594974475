"""The demo chat: the workspace's guarded tools, a model and a store in a ReviewedChat.

:func:`build_demo_chat` uses a real OpenAI-compatible model when
``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL``) is set (see
:func:`uses_real_model`), else the offline :class:`~toolguard.demo.DemoModel`.
"""

from __future__ import annotations

import os
import sys

from toolguard._chat.chat import ReviewedChat
from toolguard._core.llm import ChatModel
from toolguard._stores.protocol import Store
from toolguard.demo.model import DemoModel
from toolguard.demo.workspace import DemoWorkspace, demo_system_prompt, demo_toolset

__all__ = ["build_demo_chat", "uses_real_model"]


def uses_real_model() -> bool:
    """Whether :func:`build_demo_chat` picks a real model: either variable of the client is set.

    ``OPENAI_API_KEY`` selects OpenAI (or the server in ``OPENAI_BASE_URL``);
    ``OPENAI_BASE_URL`` alone selects a local server that needs no key.
    """
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def _real_model() -> ChatModel | None:
    try:
        from toolguard.openai import OpenAIChatModel  # noqa: PLC0415 - the openai extra is optional
    except ImportError as exc:
        sys.stderr.write(
            "OPENAI_API_KEY or OPENAI_BASE_URL is set, but the openai package is not"
            f" installed ({exc}). Install it with: pip install 'toolguard-hitl[openai]'."
            " Using the built-in scripted demo model instead.\n"
        )
        return None
    return OpenAIChatModel.from_env()


def build_demo_chat(
    *,
    store: Store | None = None,
    model: ChatModel | None = None,
    workspace: DemoWorkspace | None = None,
) -> ReviewedChat:
    """The demo assistant: the workspace's guarded tools, a model and a store.

    Args:
        store: where threads live; a :class:`~toolguard.MemoryStore` by default.
        model: the model; by default ``OpenAIChatModel.from_env()`` when
            ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set (and the
            ``openai`` extra is installed), else a :class:`DemoModel`.
        workspace: the tools' backend; a fresh :class:`DemoWorkspace` by default.
    """
    workspace = workspace or DemoWorkspace()
    if model is None and uses_real_model():
        model = _real_model()
    if model is None:
        model = DemoModel(today=workspace.today, contacts=workspace.contacts)
    return ReviewedChat(
        model,
        demo_toolset(workspace),
        store=store,
        system_prompt=demo_system_prompt(workspace),
        # The workspace is in memory and instant: its tools run on the event loop, so the
        # parallel calls of one turn run in the model's order (worker threads would race
        # for the workspace's id counters: "sent-1" could go to the second email).
        sync_in_thread=False,
    )
