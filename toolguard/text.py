"""The words toolguard writes: their language, a model's result texts, reviews as plain text.

- :func:`set_language` and :func:`get_language` choose the language of error
  texts and review descriptions: English (the default) or Indonesian. The
  ``TOOLGUARD_LANG`` environment variable applies when no language was set in
  code. The texts a *model* reads (``REJECTED_BY_USER_MESSAGE``,
  ``NO_DECISION``) are constants of the wire format and never change.
- :class:`ResultTemplates` holds the text a model reads for each tool result
  that is not a plain success (rejected, expired, failed...); pass your own
  to ``Runner(result_templates=...)`` or ``ReviewedChat(result_templates=...)``.
- :func:`describe_request`, :func:`describe_decision`, :func:`describe_result`,
  :func:`render_action` and :func:`render_history` write each step of a
  review as a sentence, for agent loops that keep a text transcript::

      from toolguard.text import describe_request

      describe_request("findCalendarEvents", {"day": "monday"})
      # 'The assistant requested to run findCalendarEvents with input: {"day": "monday"}'
"""

from __future__ import annotations

from toolguard._core.catalog import get_language, set_language
from toolguard._core.results import ResultTemplates
from toolguard._core.transcript import (
    describe_decision,
    describe_request,
    describe_result,
    render_action,
    render_history,
)

__all__ = [
    "ResultTemplates",
    "describe_decision",
    "describe_request",
    "describe_result",
    "get_language",
    "render_action",
    "render_history",
    "set_language",
]
