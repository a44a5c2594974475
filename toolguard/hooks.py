"""The types of what you plug into a :class:`~toolguard.Runner` or a ``ReviewedChat``.

Use these names to annotate your own hooks; each may be a plain function or
a coroutine function.

- :data:`Authorizer` (``ReviewedChat(authorize=...)``): may this reviewer
  decide on these actions of this thread?
- :data:`AccessHook` (``ReviewedChat(access=...)``): may this actor read a
  thread, read its audit trail or post a message (the :data:`AccessOperation`)?
- :class:`Claims` (``Runner(claims=...)``): claims a key once across
  processes, so a paused turn is resumed once even when two processes share
  the store. Every toolguard store has it.
- :data:`EditPolicy` (``edit_policy=``): ``"run"`` runs an edited call as
  the reviewer wrote it; ``"recheck"`` first checks it against the policy
  again, as a new proposal.

For example, a hook that lets only the thread's owner read it::

    from toolguard import ThreadState
    from toolguard.hooks import AccessOperation

    def owner_only(actor: str | None, thread: ThreadState, operation: AccessOperation) -> bool:
        return actor is not None and thread.thread_id.startswith(f"{actor}:")
"""

from __future__ import annotations

from toolguard._chat.access import AccessHook, AccessOperation, Authorizer
from toolguard._enforce.once import Claims
from toolguard._enforce.runner import EditPolicy

__all__ = [
    "AccessHook",
    "AccessOperation",
    "Authorizer",
    "Claims",
    "EditPolicy",
]
