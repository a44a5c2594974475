"""The classifier's parts you look at less often.

:class:`~toolguard.Classifier`, ``DEFAULT_VERBS`` and ``SEED_VERBS`` are
importable from ``toolguard`` itself. This module holds what comes with them:

- :class:`Classification`, the answer of ``Classifier.classify``: whether a
  tool needs approval and why.
- ``READ_VERBS``, the verbs that, coming first in a name, say the tool only
  reads (``get_order_details``: ``order`` names a thing, not an action).
- :func:`split_words`, how a tool name (camelCase, snake_case, kebab-case,
  dotted or namespaced) is cut into the words the classifier matches::

      from toolguard.classify import split_words

      split_words("mail.sendEmail_v2")  # ('mail', 'send', 'email', 'v2')
"""

from __future__ import annotations

from toolguard._tools.classify import READ_VERBS, Classification, split_words

__all__ = [
    "READ_VERBS",
    "Classification",
    "split_words",
]
