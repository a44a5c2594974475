"""How the classifier reads a tool name: its words, its action, and the words that decide.

:func:`split_words` cuts a name into lowercase words (:data:`find_words` finds
them, before lowercasing). A name that would run is read two more ways
(:data:`OTHER_READINGS`), so that case cannot hide a word a person reads;
:func:`unglued` cuts a joiner glued to an approval verb off it,
:func:`digits_set_aside` reads ``delete2`` as ``delete``, and
:func:`action_start` finds where the action starts after the namespaces.
:func:`credentials_reason` says which words name credentials and
:func:`unreadable_reason` why a name that is not printable ASCII cannot be read.
:class:`toolguard.Classifier` decides with these; nothing here decides anything.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

from toolguard._tools.verbs import CREDENTIALS, JOINERS

__all__ = [
    "OTHER_READINGS",
    "action_start",
    "credentials_reason",
    "digits_set_aside",
    "find_words",
    "has_digit",
    "maybe_glued",
    "split_words",
    "unglued",
    "unreadable_reason",
]

# Only ASCII letters and digits form words; every other character separates
# words. Tool names in the common LLM APIs are ASCII, and splitting more rather
# than less errs towards finding a verb, that is, towards asking for approval.
# The alternatives are ordered so that the common lowercase word is tried first
# and an uppercase letter is looked at once; the order is part of the meaning.
_WORD_RE: Final = re.compile(
    r"""
      [a-z]+[0-9]*                  # lowercase word, digits attached: send, s3, base64
    | [A-Z] (?:
          [a-z]+[0-9]*              # capitalised word: Send, Upload, Auth2
        | [A-Z]+[0-9]*s(?![a-z])    # plural acronym: URLs, IDs, EC2s
        | [A-Z]*[0-9]*(?=[A-Z][a-z])  # acronym before a capitalised word: HTTP|Request
        | [A-Z]*[0-9]*              # acronym or shouted word: URL, SEND, V2
      )
    | [0-9]+                        # digits with no letter right before them
    """,
    re.VERBOSE,
)

find_words: Final = _WORD_RE.findall
"""The words of a name as they are written (the first reading), not yet lowercased."""

# Two more readings of a name that would run, so that case cannot hide a word
# that a person reads. A name needs approval when any reading finds an approval
# verb, a destructive or joined verb, or credentials in it (a word that only one
# reading finds and that is no known word, such as ``httpg`` in ``HTTPGet``,
# does not make it unknown).
#
# Uppercase runs whole: in a name where an uppercase run runs into lowercase
# letters, the whole run is a word and so are the lowercase letters after it.
# ``listANDpurge`` reads ``list``, ``an``, ``dpurge`` (as ``HTTPRequest`` reads
# ``http``, ``request``), and also ``list``, ``and``, ``purge``.
_RUN_WORD_RE: Final = re.compile(
    r"""
      [a-z]+[0-9]*                  # lowercase word, digits attached
    | [A-Z] (?:
          [a-z]+[0-9]*              # capitalised word
        | [A-Z]+[0-9]*s(?![a-z])    # plural acronym: URLs, PRs
        | [A-Z]*[0-9]*              # the whole uppercase run: AND in listANDpurge
      )
    | [0-9]+                        # digits with no letter right before them
    """,
    re.VERBOSE,
)

# Case ignored: every run of letters and digits is one word, so that
# ``get_dElEtE`` reads ``get``, ``delete``.
_CASELESS_WORD_RE: Final = re.compile(r"[A-Za-z0-9]+")

OTHER_READINGS: Final = (
    # (how the reading finds words, where it differs from the first reading)
    (_RUN_WORD_RE.findall, re.compile(r"[A-Z]{2}[a-z]").search),
    (_CASELESS_WORD_RE.findall, re.compile(r"[a-z][A-Z]").search),
)
"""The other readings of a name: how each finds words, and when it differs from the first."""

# Namespaces end at these separators: ``mcp__github__merge_pull_request``,
# ``github/create_issue``, ``fs:write``, ``slack.chat.postMessage``. The part
# after the last one is the action; the words before it name a server or an API.
_NAMESPACE_RE: Final = re.compile(r"__|[/:.]")

# A name must be printable ASCII for its words to be what a person reads.
_UNREADABLE_RE: Final = re.compile(r"[^\x20-\x7e]")

has_digit: Final = re.compile(r"[0-9]").search
"""Finds a digit in a name; most names have none."""

_DIGITS: Final = "0123456789"

# Longest first, so that a word is cut after the longest joiner it starts with.
_JOINER_PREFIXES: Final = tuple(sorted(JOINERS, key=len, reverse=True))

maybe_glued: Final = re.compile("|".join(f"{joiner}[a-z]" for joiner in JOINERS), re.I).search
"""Finds where a joiner may be glued to the word after it; most names have none."""

_CREDENTIAL_NOUNS: Final = frozenset(CREDENTIALS.nouns)
_CREDENTIAL_PAIRS: Final = frozenset(CREDENTIALS.pairs)
_CREDENTIAL_WORDS: Final = _CREDENTIAL_NOUNS | {first for first, _ in CREDENTIALS.pairs}


def split_words(name: str) -> tuple[str, ...]:
    """Split a tool name into lowercase words.

    Handles camelCase and PascalCase (an acronym is one word:
    ``sendHTTPRequest`` gives ``send``, ``http``, ``request``; ``getURLs``
    gives ``get``, ``urls``), snake_case, SCREAMING_SNAKE_CASE, kebab-case and
    names with dots, slashes, colons, double underscores or spaces between
    parts (``gmail__send_message``, ``github/create_issue``, ``fs:write``).

    Digits stay with the letters right before them (``s3Upload`` gives ``s3``,
    ``upload``; ``base64Encode`` gives ``base64``, ``encode``); a run of digits
    with no letter before it is a word of its own. Only ASCII letters and
    digits form words; any other character separates them.

    Args:
        name: The tool name. Any string is accepted.

    Returns:
        The words in the order they appear; empty when the name has no ASCII
        letters or digits.

    Examples:
        >>> split_words("findCalendarEvents")
        ('find', 'calendar', 'events')
        >>> split_words("MCP_server__write_file")
        ('mcp', 'server', 'write', 'file')
    """
    try:
        words = find_words(name)
    except TypeError:
        msg = f"split_words() takes a tool name (str), got {type(name).__name__} {name!r}"
        raise TypeError(msg) from None
    if name.islower():  # no uppercase letter anywhere: the words are lowercase already
        return tuple(words)
    # The words hold no whitespace, so one join, lower and split lowercases them
    # all in three C calls instead of one method call per word.
    return tuple(" ".join(words).lower().split())


def unreadable_reason(name: str) -> str | None:
    """Why a name cannot be read, or ``None`` when it is printable ASCII."""
    if name.isascii() and name.isprintable():
        return None
    found = _UNREADABLE_RE.search(name)
    char = found.group() if found is not None else name[0]
    what = unicodedata.name(char, "") or (
        "(a control character)" if unicodedata.category(char) == "Cc" else "(a nameless character)"
    )
    return (
        f"the name holds U+{ord(char):04X} {what}, which is not printable ASCII: "
        "its words cannot be read, so it needs approval"
    )


def digits_set_aside(words: list[str], verbs: frozenset[str]) -> list[str]:
    """The words with a verb followed by digits read as the verb: ``delete2`` is ``delete``."""
    result = []
    for word in words:
        letters = word.rstrip(_DIGITS) if word[-1] in _DIGITS else word
        result.append(letters if letters in verbs else word)
    return result


def action_start(name: str, count: int, findall: Callable[[str], list[str]]) -> int:
    """Where the action starts among the ``count`` words of ``name``: after the last namespace.

    The action is the words after the last namespace separator that has words
    after it; a name without a separator is all action (0).
    """
    if _NAMESPACE_RE.search(name) is None:
        return 0
    for part in reversed(_NAMESPACE_RE.split(name)):
        found = findall(part)
        if found:
            return count - len(found)
    return 0


def unglued(
    words: list[str], start: int, verbs: frozenset[str], reads: frozenset[str]
) -> tuple[list[str], int]:
    """The words with a joiner glued to an approval verb cut in two: ``andpurge`` is ``and purge``.

    Returns the words and where the action starts among them (``start`` moves
    with the words before it). A word that is itself a verb is kept whole;
    digits after the verb stay for :func:`digits_set_aside`.
    """
    result: list[str] = []
    moved = start
    for index, word in enumerate(words):
        if word.startswith(_JOINER_PREFIXES) and word not in verbs and word not in reads:
            joiner = next(joiner for joiner in _JOINER_PREFIXES if word.startswith(joiner))
            rest = word[len(joiner) :]
            if rest in verbs or (rest[-1:] in _DIGITS and rest.rstrip(_DIGITS) in verbs):
                result += (joiner, rest)
                if index < start:
                    moved += 1
                continue
        result.append(word)
    return result, moved


def credentials_reason(words: list[str], *, digits: bool) -> str | None:
    """Why a name whose words name credentials (``secret``, ``api key``) needs approval.

    ``None`` when they name none. With ``digits``, digits right after a word are
    set aside, as after a verb: ``secret2`` is ``secret``.
    """
    if digits:
        words = [word.rstrip(_DIGITS) if word[-1] in _DIGITS else word for word in words]
    if _CREDENTIAL_WORDS.isdisjoint(words):
        return None
    found = None
    for index, word in enumerate(words):
        if word in _CREDENTIAL_NOUNS:
            found = f"the word '{word}' names"
        elif index + 1 < len(words) and (word, words[index + 1]) in _CREDENTIAL_PAIRS:
            found = f"the words '{word} {words[index + 1]}' name"
        if found is not None:
            return f"{found} {CREDENTIALS.name}: {CREDENTIALS.why}, so it needs approval"
    return None
