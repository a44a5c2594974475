"""Decide which tools need human approval, and say why.

A :class:`Classifier` answers one question for a tool name: must a human approve
a call to this tool before it runs? It answers in two layers.

1. **Explicit lists.** A name listed in ``always`` needs approval; a name listed
   in ``never`` is exempt. The lists hold exact tool names and win over the
   pattern layer, because they are how you correct it: the pattern cannot know
   that ``findCalendarEvents`` leaks private data, or that ``send_heartbeat`` is
   harmless.
2. **Verb pattern.** Any other name is split into words (:func:`split_words`)
   and needs approval when one of its words is an approval verb such as
   ``send`` or ``delete`` (:data:`DEFAULT_VERBS`). This covers tools nobody
   listed by hand, such as the ones a new MCP server brings along.

Words are matched whole, never as substrings: ``sender_stats``,
``address_lookup`` and ``bookmarks_list`` need no approval although they
contain ``send``, ``add`` and ``book``. Inflections do not match either:
``sends``, ``created`` and ``deleting`` are different words from ``send``,
``create`` and ``delete``; add them to ``verbs`` if your tools use them. The
flip side of whole words is that ``addressBook`` splits into ``address`` and
``book``, and ``book`` is a verb, so it needs approval; put such names in
``never`` when that is wrong.

Every decision comes with a :class:`Classification` that records which layer
decided and why, so that an approval prompt or a log line can explain it, and
:func:`format_table` prints a list of them for review.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "DEFAULT_VERBS",
    "Classification",
    "Classifier",
    "Rule",
    "format_table",
    "split_words",
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

_findall: Final = _WORD_RE.findall

# Explanations are cached per classifier; past this many names the cache is
# emptied and starts over, so a stream of distinct names cannot grow it without
# bound.
_CACHE_MAX: Final = 65_536

Rule = Literal["always", "never", "verb", "default", "decorator", "annotation"]
"""Which layer decided a :class:`Classification`."""

DEFAULT_VERBS: tuple[str, ...] = (
    "create",
    "update",
    "delete",
    "edit",
    "add",
    "book",
    "move",
    "reschedule",
    "cancel",
    "complete",
    "remove",
    "write",
    "send",
)
"""Verbs that make a tool need approval unless it is listed in ``never``.

They name actions with effects outside the conversation: changing data,
spending money or time, or talking to other people.
"""


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
        words = _findall(name)
    except TypeError:
        msg = f"split_words() takes a tool name (str), got {type(name).__name__} {name!r}"
        raise TypeError(msg) from None
    if name.islower():  # no uppercase letter anywhere: the words are lowercase already
        return tuple(words)
    # The words hold no whitespace, so one join, lower and split lowercases them
    # all in three C calls instead of one method call per word.
    return tuple(" ".join(words).lower().split())


@dataclass(frozen=True, slots=True, kw_only=True)
class Classification:
    """Whether one tool needs approval, and why.

    Attributes:
        name: The tool name, as given.
        needs_approval: Whether a human must approve calls to the tool.
        rule: The layer that decided: ``"always"`` or ``"never"`` for the
            explicit lists, ``"verb"`` when a word of the name is an approval
            verb, ``"default"`` when nothing matched, ``"decorator"`` when the
            tool was guarded explicitly with ``@requires_approval`` (set by
            :func:`~toolguard.guard`, never by the classifier itself),
            ``"annotation"`` when a tool's MCP annotations decided (see
            :meth:`Classifier.explain`).
        matched_word: The word of the name that matched a verb, when ``rule``
            is ``"verb"``; otherwise ``None``.
        matched_verb: The verb it matched, when ``rule`` is ``"verb"``;
            otherwise ``None``. Matching is by exact word, so this equals
            ``matched_word``.
        reason: A short English explanation, one of:
            ``"listed in always"``,
            ``"listed in never (exempt)"``,
            ``"the word 'send' is an approval verb"``,
            ``"no approval verb among the words ['sender', 'stats']"``,
            or, for a tool with MCP annotations (rule ``"annotation"``),
            ``"the server marks it destructiveHint: true"``,
            ``"the server does not mark it readOnlyHint: true (MCP tools are
            destructive by default)"``, ``"the server marks it readOnlyHint:
            true and no approval verb among the words ['list']"``.
    """

    name: str
    needs_approval: bool
    rule: Rule
    matched_word: str | None
    matched_verb: str | None
    reason: str


# Building a frozen dataclass through its __init__ costs one object.__setattr__
# call per field on top of the keyword call; filling the slots directly is about
# three times faster, which matters when a registry of thousands of tools is
# classified. The result is identical to Classification(...).
_new_object: Final = object.__new__
_set_name: Final = Classification.__dict__["name"].__set__
_set_needs_approval: Final = Classification.__dict__["needs_approval"].__set__
_set_rule: Final = Classification.__dict__["rule"].__set__
_set_matched_word: Final = Classification.__dict__["matched_word"].__set__
_set_matched_verb: Final = Classification.__dict__["matched_verb"].__set__
_set_reason: Final = Classification.__dict__["reason"].__set__
_APPROVING_RULES: Final = frozenset({"always", "verb"})


def _make(name: str, rule: Rule, word: str | None, reason: str) -> Classification:
    """Build a Classification quickly; it needs approval for ``always`` and ``verb``."""
    result = _new_object(Classification)
    _set_name(result, name)
    _set_needs_approval(result, rule in _APPROVING_RULES)
    _set_rule(result, rule)
    _set_matched_word(result, word)
    _set_matched_verb(result, word)
    _set_reason(result, reason)
    return result


def _names(value: Iterable[str], what: str) -> frozenset[str]:
    """Freeze a collection of strings, refusing a bare string and non-strings."""
    if isinstance(value, str):
        msg = (
            f"{what} must be a collection of strings, not a single string; write {what}=[{value!r}]"
        )
        raise TypeError(msg)
    given: object = value  # checked at run time for untyped callers
    if not isinstance(given, Iterable):
        msg = f"{what} must be a collection of strings, got {type(given).__name__} {given!r}"
        raise TypeError(msg)
    items: list[object] = list(value)
    for item in items:
        if not isinstance(item, str):
            msg = f"{what} must contain only strings, got {type(item).__name__} {item!r}"
            raise TypeError(msg)
    return frozenset(item for item in items if isinstance(item, str))


def _verb(value: str) -> str:
    """Normalise one verb to its single lowercase word, or explain why it is not one."""
    words = split_words(value)
    if len(words) == 1:
        return words[0]
    if not words:
        msg = f"verb {value!r} contains no word; remove it from verbs"
    else:
        msg = (
            f"verb {value!r} is not a single word (it splits into {list(words)!r}); "
            "list each word as its own verb, or put the exact tool name in always"
        )
    raise ValueError(msg)


class Classifier:
    """Decides which tools need human approval: explicit lists first, then verbs.

    The rules, in order:

    1. A name exactly in ``always`` needs approval.
    2. A name exactly in ``never`` is exempt.
    3. A name with a word (see :func:`split_words`) equal to one of ``verbs``
       needs approval; the first such word in the name is reported.
    4. Any other name needs no approval.

    List entries are exact, case-sensitive tool names. Verbs are
    case-insensitive single words. A classifier is immutable; it caches
    explanations per name, which makes repeated names cheap.

    Combine two classifiers with ``a | b`` to get one that requires approval
    exactly when ``a`` or ``b`` does (see :meth:`__or__`).

    Args:
        verbs: Approval verbs. Each must be a single word per
            :func:`split_words`, such as ``"send"`` or ``"Send"``.
        always: Tool names that always need approval.
        never: Tool names that never need approval, even with a verb in them.

    Raises:
        ValueError: If a verb is not a single word, or a name is in both
            ``always`` and ``never``.
        TypeError: If ``verbs``, ``always`` or ``never`` is a bare string or
            holds something other than strings.

    Examples:
        >>> guard = Classifier(always=["findCalendarEvents"], never=["send_heartbeat"])
        >>> guard.requires_approval("gmail__send_message")
        True
        >>> guard.requires_approval("sender_stats")
        False
        >>> guard.explain("findCalendarEvents").reason
        'listed in always'
    """

    __slots__ = ("_always", "_cache", "_never", "_verbs")

    _verbs: frozenset[str]
    _always: frozenset[str]
    _never: frozenset[str]
    _cache: dict[str, Classification]

    def __init__(
        self,
        *,
        verbs: Iterable[str] = DEFAULT_VERBS,
        always: Iterable[str] = (),
        never: Iterable[str] = (),
    ) -> None:
        raw_verbs = _names(verbs, "verbs")
        self._verbs = frozenset(_verb(verb) for verb in raw_verbs)
        self._always = _names(always, "always")
        self._never = _names(never, "never")
        both = self._always & self._never
        if both:
            msg = (
                f"names in both always and never: {sorted(both)!r}; "
                "keep each name in only one of the two lists"
            )
            raise ValueError(msg)
        self._cache = {}

    @property
    def verbs(self) -> frozenset[str]:
        """The approval verbs, lowercase."""
        return self._verbs

    @property
    def always(self) -> frozenset[str]:
        """The tool names that always need approval."""
        return self._always

    @property
    def never(self) -> frozenset[str]:
        """The tool names that never need approval."""
        return self._never

    def requires_approval(self, name: str, *, annotations: Mapping[str, Any] | None = None) -> bool:
        """Say whether calls to a tool need human approval.

        Args:
            name: The tool name.
            annotations: The tool's MCP annotations, if it has any (see
                :meth:`explain`).

        Returns:
            ``True`` if a human must approve calls to the tool.
        """
        return self.explain(name, annotations=annotations).needs_approval

    def explain(self, name: str, *, annotations: Mapping[str, Any] | None = None) -> Classification:
        """Classify one tool and say which rule decided and why.

        With ``annotations`` (an MCP tool's annotations in the wire format,
        ``{"readOnlyHint": true, "destructiveHint": false, ...}``; an empty
        mapping for an MCP tool that has none), the rules are, in order:
        ``always``; ``never`` (the operator's list wins over the server's
        hints); an approval verb in the name (hints cannot exempt it);
        ``destructiveHint: true`` needs approval; a tool without
        ``readOnlyHint: true`` needs approval (MCP's defaults are destructive);
        a tool marked ``readOnlyHint: true`` runs at once. Only the JSON value
        ``true`` counts as true.

        Args:
            name: The tool name.
            annotations: The tool's MCP annotations, or ``None`` for a tool
                that is not described by them (the two-layer rules above).

        Returns:
            The classification, with ``reason`` in plain English.
        """
        if annotations is not None:
            return self._decide_annotated(name, annotations)
        cache = self._cache
        found = cache.get(name)
        if found is not None:
            return found
        result = self._decide(name)
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[name] = result
        return result

    def classify(self, names: Iterable[str]) -> list[Classification]:
        """Classify many tools.

        Args:
            names: Tool names; repeats are allowed.

        Returns:
            One classification per name, in the same order.
        """
        # explain() inlined: this is the path that classifies whole registries.
        cache = self._cache
        decide = self._decide
        results = []
        for name in names:
            found = cache.get(name)
            if found is None:
                found = decide(name)
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                cache[name] = found
            results.append(found)
        return results

    def _decide(self, name: str) -> Classification:
        if name in self._always:
            return _make(name, "always", None, "listed in always")
        if name in self._never:
            return _make(name, "never", None, "listed in never (exempt)")
        # split_words() inlined, without the tuple.
        words = _findall(name)
        if not name.islower():
            words = " ".join(words).lower().split()
        verbs = self._verbs
        if verbs.isdisjoint(words):
            # Words are ASCII letters and digits, so this spells what
            # repr(list(words)) would, at a fraction of the cost.
            listed = "['" + "', '".join(words) + "']" if words else "[]"
            return _make(name, "default", None, "no approval verb among the words " + listed)
        word = next(word for word in words if word in verbs)
        return _make(name, "verb", word, "the word '" + word + "' is an approval verb")

    def _decide_annotated(self, name: str, annotations: Mapping[str, Any]) -> Classification:
        given: object = annotations  # checked at run time for untyped callers
        if not isinstance(given, Mapping):
            msg = (
                "annotations must be a mapping of MCP tool annotations"
                f' ({{"readOnlyHint": true, ...}}), got {type(annotations).__name__}'
            )
            raise TypeError(msg)
        by_name = self.explain(name)
        if by_name.rule != "default":  # always, never or an approval verb: hints cannot change it
            return by_name
        if annotations.get("destructiveHint") is True:
            reason = "the server marks it destructiveHint: true"
            needs = True
        elif annotations.get("readOnlyHint") is not True:
            reason = (
                "the server does not mark it readOnlyHint: true"
                " (MCP tools are destructive by default)"
            )
            needs = True
        else:
            reason = "the server marks it readOnlyHint: true and " + by_name.reason
            needs = False
        return Classification(
            name=name,
            needs_approval=needs,
            rule="annotation",
            matched_word=None,
            matched_verb=None,
            reason=reason,
        )

    def __or__(self, other: object) -> Classifier:
        """Combine two classifiers: approval is needed when either needs it.

        The result has the union of both verb sets and both ``always`` lists.
        Its ``never`` list keeps only the exempt names that neither classifier
        requires approval for: a name one side exempts but the other side
        catches (by its ``always`` list or its verbs) needs approval. The
        result explains its decisions itself, in terms of the merged lists.

        Args:
            other: Another classifier.

        Returns:
            A new classifier; ``a | b`` and ``b | a`` are equal.
        """
        if not isinstance(other, Classifier):
            return NotImplemented
        never = frozenset(
            name
            for name in self._never | other._never
            if not self.requires_approval(name) and not other.requires_approval(name)
        )
        return Classifier(
            verbs=self._verbs | other._verbs,
            always=self._always | other._always,
            never=never,
        )

    def __eq__(self, other: object) -> bool:
        """Classifiers are equal when their verbs and both lists are equal."""
        if not isinstance(other, Classifier):
            return NotImplemented
        return (self._verbs, self._always, self._never) == (
            other._verbs,
            other._always,
            other._never,
        )

    def __hash__(self) -> int:
        return hash((self._verbs, self._always, self._never))

    def __repr__(self) -> str:
        return (
            f"Classifier(verbs={sorted(self._verbs)!r}, "
            f"always={sorted(self._always)!r}, never={sorted(self._never)!r})"
        )


_HEADERS: Final = ("tool", "approval", "rule", "reason")


def format_table(classifications: Sequence[Classification]) -> str:
    """Render classifications as an aligned plain-text table.

    Columns are ``tool``, ``approval`` (``required`` or ``no``), ``rule`` and
    ``reason``, separated by two spaces, under a header line and a line of
    dashes. Rows keep the given order. Lines carry no trailing spaces and the
    text does not end with a newline.

    Args:
        classifications: The rows, for example from :meth:`Classifier.classify`.

    Returns:
        The table as one string.

    Examples:
        >>> print(format_table(Classifier().classify(["send_email", "list_files"])))
        tool        approval  rule     reason
        ----------  --------  -------  --------------------------------------------------
        send_email  required  verb     the word 'send' is an approval verb
        list_files  no        default  no approval verb among the words ['list', 'files']
    """
    rows = [
        (c.name, "required" if c.needs_approval else "no", c.rule, c.reason)
        for c in classifications
    ]
    widths = [len(header) for header in _HEADERS]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        # The last column is not padded, so that lines carry no trailing spaces.
        padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths[:-1], strict=True)]
        return "  ".join([*padded, cells[-1]])

    return "\n".join(
        [line(_HEADERS), line(["-" * width for width in widths]), *(line(row) for row in rows)]
    )
