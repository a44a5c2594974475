"""Decide which tools need human approval, and say why.

A :class:`Classifier` answers one question for a tool name: must a human approve
a call to this tool before it runs? It answers in layers.

1. **Explicit lists.** A name listed in ``always`` needs approval; a name listed
   in ``never`` is exempt. The lists hold exact tool names and win over
   everything else, because they are how you correct the rest: no vocabulary
   knows that ``findCalendarEvents`` leaks private data, or that
   ``send_heartbeat`` is harmless.
2. **Verbs.** Any other name is split into words (:func:`split_words`). A word
   that is an approval verb (``send``, ``transfer``, ``deploy``...; see
   :data:`DEFAULT_VERBS`) makes the tool need approval, unless a read verb
   (``get``, ``list``, ``search``...; see :data:`READ_VERBS`) comes first: in
   ``get_order_details`` and ``list_workflow_runs``, ``order`` and ``runs``
   name things, not actions. A read verb first does not exempt a name with
   an approval verb before it in any namespace segment (``users.delete.view``,
   ``drop_table__list``), nor one that also holds a destructive verb
   (``search_and_replace``, ``find_delete``) or a write verb joined by
   ``and`` / ``or`` / ``then`` in any case (``get_or_create_user``,
   ``listANDpurge``).
3. **Credentials.** A name that names credentials (``secret``, ``password``,
   ``api key``...; see :data:`CREDENTIALS`) needs
   approval even when it only reads: ``get_secret`` hands a secret to the
   model.
4. **Unknown names.** A name with neither kind of verb (``frobnicate_widget``)
   needs approval with ``unknown="ask"`` (the default) and runs with
   ``unknown="allow"``.

A name the classifier cannot read needs approval whatever its words: one with a
character that is not printable ASCII (an accented letter, a Cyrillic or
fullwidth look-alike of a Latin letter, a zero-width or control character),
because such a character can hide a verb from the words while a
person still reads it.

Words are matched whole, never as substrings: ``sender_stats``,
``address_lookup`` and ``bookmarks_list`` hold no ``send``, ``add`` or ``book``.
Inflections do not match either: ``sends``, ``created`` and ``deleting`` are
different words from ``send``, ``create`` and ``delete``. Digits right after an
approval verb are set aside: ``delete2`` is ``delete``. Case cannot hide a
word: a name that would run is also read with each uppercase run as a word of
its own (``listANDpurge`` as ``list and purge``, not only ``list an dpurge``),
with case ignored (``get_dElEtE`` as ``get delete``), and with a joiner glued to
an approval verb cut off it (``list_andpurge``); it needs approval when any
reading finds an approval verb that decides, or credentials.

Every decision comes with a :class:`Classification` that records which rule
decided and why, so that an approval prompt or a log line can explain it, and
:func:`format_table` prints a list of them for review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from toolguard._tools.verbs import (
    DEFAULT_VERBS,
    DESTRUCTIVE_VERBS,
    INFO_NOUNS,
    JOINERS,
    READ_VERBS,
    SEED_VERBS,
    VERB_GROUPS,
    VerbGroup,
    domain_of,
)
from toolguard._tools.words import (
    OTHER_READINGS,
    action_start,
    credentials_reason,
    digits_set_aside,
    find_words,
    has_digit,
    maybe_glued,
    split_words,
    unglued,
    unreadable_reason,
)

__all__ = [
    "DEFAULT_VERBS",
    "READ_VERBS",
    "SEED_VERBS",
    "VERB_GROUPS",
    "Classification",
    "Classifier",
    "Rule",
    "VerbGroup",
    "format_table",
    "split_words",
]

# Explanations are cached per classifier; past this many names the cache is
# emptied and starts over, so a stream of distinct names cannot grow it without
# bound.
_CACHE_MAX: Final = 65_536

# Only names up to this length are cached (tool names are rarely longer than
# 64 characters; MCP asks for at most 128), so that the cache's memory stays
# bounded too; a longer name is decided again at each call.
_CACHED_NAME_MAX: Final = 128

Rule = Literal[
    "always",
    "never",
    "unreadable",
    "verb",
    "credentials",
    "read",
    "unknown",
    "default",
    "decorator",
    "annotation",
]
"""Which rule decided a :class:`Classification`."""


Unknown = Literal["ask", "allow"]
"""What happens to a name with neither an approval verb nor a read verb."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Classification:
    """Whether one tool needs approval, and why.

    Attributes:
        name: The tool name, as given.
        needs_approval: Whether a human must approve calls to the tool.
        rule: The rule that decided: ``"always"`` or ``"never"`` for the
            explicit lists; ``"unreadable"`` when the name holds a character
            that is not printable ASCII, so that its words cannot be read
            (it needs approval); ``"verb"`` when a word of the name is an
            approval verb; ``"credentials"`` when a word of the name names
            credentials and no approval verb decided (it needs approval);
            ``"read"`` when a read verb decided that the tool only
            looks; ``"unknown"`` when the name holds no known verb (the
            classifier's ``unknown`` setting decided); ``"default"`` when a
            classifier without read verbs that lets unknown names run found
            no approval verb (the plain rule, see :data:`SEED_VERBS`);
            ``"decorator"`` when the tool was guarded explicitly with
            ``@requires_approval`` (set by :func:`~toolguard.guard`, never by
            the classifier itself); ``"annotation"`` when a tool's MCP
            annotations decided (see :meth:`Classifier.explain`).
        matched_word: The word of the name that matched an approval verb,
            when ``rule`` is ``"verb"``; otherwise ``None``.
        matched_verb: The verb it matched, when ``rule`` is ``"verb"``;
            otherwise ``None``. Matching is by exact word (digits right
            after a verb set aside: ``delete2`` matches ``delete``), so this
            equals ``matched_word``.
        reason: A short English explanation, for example
            ``"listed in always"``,
            ``"listed in never (exempt)"``,
            ``"the word 'pay' is an approval verb (money)"``,
            ``"the word 'list' is a read verb"``,
            ``"the read verb 'get' leads the action: 'order' is read as a
            thing, not an action"``,
            ``"the word 'replace' is a destructive verb: the read verb
            'search' before it does not exempt it"``,
            ``"the word 'delete' is an approval verb (data): the read verb
            'view' after it does not exempt it"``,
            ``"the word 'secret' names credentials: reading them hands
            secrets to the model, so it needs approval"``,
            ``'no known verb in [\\'frobnicate\\', \\'widget\\']: unknown="ask"'``,
            ``"the name holds U+200B ZERO WIDTH SPACE, which is not printable
            ASCII: its words cannot be read, so it needs approval"``,
            ``"the word 'send' is an approval verb"`` and
            ``"no approval verb among the words ['sender', 'stats']"`` (the
            plain rule), or, for a tool with MCP annotations,
            ``"the server marks it destructiveHint: true"``,
            ``"the server does not mark it readOnlyHint: true (MCP tools are
            destructive by default)"``, ``"the server marks it readOnlyHint:
            true and the word 'list' is a read verb"``.
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


def _make(name: str, rule: Rule, word: str | None, reason: str, *, needs: bool) -> Classification:
    """Build a Classification quickly; ``word`` is the approval verb that matched, if any."""
    result = _new_object(Classification)
    _set_name(result, name)
    _set_needs_approval(result, needs)
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


def _verb(value: str, what: str = "verb") -> str:
    """Normalise one verb to its single lowercase word, or explain why it is not one."""
    words = split_words(value)
    if len(words) == 1:
        return words[0]
    if not words:
        msg = f"{what} {value!r} contains no word; remove it from {what}s"
    else:
        msg = (
            f"{what} {value!r} is not a single word (it splits into {list(words)!r}); "
            f"list each word as its own {what}, or put the exact tool name in always"
        )
    raise ValueError(msg)


def _listed(words: Sequence[str]) -> str:
    # Words are ASCII letters and digits, so this spells what repr(list(words))
    # would, at a fraction of the cost.
    return "['" + "', '".join(words) + "']" if words else "[]"


def _credentials(name: str, words: list[str], *, digits: bool) -> Classification | None:
    """The classification of a name whose words name credentials, or ``None``."""
    reason = credentials_reason(words, digits=digits)
    return None if reason is None else _make(name, "credentials", None, reason, needs=True)


_SEED: Final = frozenset(SEED_VERBS)
_DEFAULT: Final = frozenset(DEFAULT_VERBS)
_READS: Final = frozenset(READ_VERBS)


class Classifier:
    """Decides which tools need human approval: lists, then verbs, then unknown names.

    The rules, in order:

    1. A name exactly in ``always`` needs approval.
    2. A name exactly in ``never`` is exempt.
    3. A name with a character that is not printable ASCII needs approval
       (rule ``"unreadable"``): a look-alike or invisible character could hide
       a verb from the words while a person still reads it.
    4. A name none of whose words (see :func:`split_words`) is an approval
       verb reads when one of its words is a read verb, and is otherwise an
       unknown name: it needs approval with ``unknown="ask"`` and runs with
       ``unknown="allow"``.
    5. A name with an approval verb needs approval, unless a read verb leads
       its action, that is, comes before every approval verb in the words
       after the last namespace separator (``__``, ``/``, ``:`` or ``.``),
       and no approval verb stands in the namespace before it:
       ``get_order_details``, ``list_workflow_runs`` and
       ``mcp__github__list_issues`` read; ``users.delete.view`` and
       ``drop_table__list`` do not. A leading read verb does not exempt
       a destructive verb after it (:data:`DESTRUCTIVE_VERBS`:
       ``search_and_replace``, ``find_delete``) nor an approval verb joined
       by ``and``, ``or`` or ``then``, in any case (``get_or_create_user``,
       ``listANDpurge``, ``readTHENpay``).
    6. A name that rules 4 and 5 let run, or that is unknown, needs approval
       when it names credentials (``get_secret``, ``list_api_keys``: rule
       ``"credentials"``), whatever ``unknown`` says.

    A name that would run is read in three ways (its words; each uppercase
    run as one word; case ignored), and a joiner glued to an approval verb
    is cut off it (``andpurge`` is ``and``, ``purge``); it needs approval when
    any reading says so, a reading that only finds unknown words aside.

    Digits right after an approval verb are set aside (``delete2`` is
    ``delete``). A classifier without read verbs that lets unknown names run
    (such as ``verbs=SEED_VERBS``) is the plain 13-verb rule: it skips
    rules 3 and 6, reads a name one way only and matches whole words only.

    List entries are exact, case-sensitive tool names. Verbs are
    case-insensitive single words. A classifier is immutable; it caches
    explanations per name, which makes repeated names cheap.

    Combine two classifiers with ``a | b`` to get one that requires approval
    exactly when ``a`` or ``b`` does (see :meth:`__or__`).

    Args:
        verbs: Approval verbs (default :data:`DEFAULT_VERBS`). Each must be a
            single word per :func:`split_words`, such as ``"send"``.
            ``verbs=SEED_VERBS`` gives the plain 13-verb rule:
            with it, ``reads`` defaults to none and ``unknown`` to
            ``"allow"``.
        reads: Read verbs (default :data:`READ_VERBS`, without any word that
            is also in ``verbs``). Pass ``()`` for no read rule: then any
            approval verb anywhere in a name needs approval.
        always: Tool names that always need approval.
        never: Tool names that never need approval, even with a verb in them.
        unknown: ``"ask"`` (default) or ``"allow"``: what a name with no
            known verb gets.

    Raises:
        ValueError: If a verb is not a single word, a word is in both
            ``verbs`` and an explicit ``reads``, a name is in both ``always``
            and ``never``, or ``unknown`` is neither ``"ask"`` nor ``"allow"``.
        TypeError: If ``verbs``, ``reads``, ``always`` or ``never`` is a bare
            string or holds something other than strings.

    Examples:
        >>> guard = Classifier(always=["findCalendarEvents"], never=["send_heartbeat"])
        >>> guard.requires_approval("mcp__github__merge_pull_request")
        True
        >>> guard.requires_approval("get_order_details")
        False
        >>> guard.explain("frobnicate_widget").reason
        'no known verb in [\\'frobnicate\\', \\'widget\\']: unknown="ask"'
    """

    __slots__ = ("_always", "_cache", "_never", "_parts", "_plain", "_reads", "_unknown", "_verbs")

    _verbs: frozenset[str]
    _reads: frozenset[str]
    _unknown: Unknown
    _always: frozenset[str]
    _never: frozenset[str]
    _plain: bool
    _parts: tuple[Classifier, ...]
    _cache: dict[str, Classification]

    def __init__(
        self,
        *,
        verbs: Iterable[str] = DEFAULT_VERBS,
        reads: Iterable[str] | None = None,
        always: Iterable[str] = (),
        never: Iterable[str] = (),
        unknown: Unknown | None = None,
    ) -> None:
        self._verbs = frozenset(_verb(verb) for verb in _names(verbs, "verbs"))
        seed = self._verbs == _SEED
        if reads is None:
            self._reads = frozenset() if seed else _READS - self._verbs
        else:
            self._reads = frozenset(_verb(read, "read") for read in _names(reads, "reads"))
            shared = self._verbs & self._reads
            if shared:
                msg = (
                    f"words in both verbs and reads: {sorted(shared)!r}; "
                    "keep each word in only one of the two"
                )
                raise ValueError(msg)
        if unknown is None:
            unknown = "allow" if seed else "ask"
        elif unknown not in ("ask", "allow"):
            given: object = unknown
            msg = f'unknown must be "ask" or "allow", got {given!r}'
            raise ValueError(msg)
        self._unknown = unknown
        self._always = _names(always, "always")
        self._never = _names(never, "never")
        both = self._always & self._never
        if both:
            msg = (
                f"names in both always and never: {sorted(both)!r}; "
                "keep each name in only one of the two lists"
            )
            raise ValueError(msg)
        # Without read verbs and with unknown names allowed, this is the original
        # rule, explained in its original words.
        self._plain = not self._reads and unknown == "allow"
        self._parts = ()
        self._cache = {}

    @property
    def verbs(self) -> frozenset[str]:
        """The approval verbs, lowercase."""
        return self._verbs

    @property
    def reads(self) -> frozenset[str]:
        """The read verbs, lowercase."""
        return self._reads

    @property
    def unknown(self) -> Unknown:
        """What a name with no known verb gets: ``"ask"`` or ``"allow"``."""
        return self._unknown

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
        hints); an approval verb that decides by the name (hints cannot
        exempt it); ``destructiveHint: true`` needs approval; a tool without
        ``readOnlyHint: true`` needs approval (MCP's defaults are destructive),
        even when a read verb leads its name; a tool marked
        ``readOnlyHint: true`` runs at once. Only the JSON value ``true``
        counts as true.

        Args:
            name: The tool name.
            annotations: The tool's MCP annotations, or ``None`` for a tool
                that is not described by them (the rules of the class).

        Returns:
            The classification, with ``reason`` in plain English.
        """
        if annotations is not None:
            return self._decide_annotated(name, annotations)
        cache = self._cache
        found = cache.get(name)
        if found is not None:
            return found
        return self._decide_and_keep(name)

    def classify(self, names: Iterable[str]) -> list[Classification]:
        """Classify many tools.

        Args:
            names: Tool names; repeats are allowed.

        Returns:
            One classification per name, in the same order.
        """
        # explain() inlined: this is the path that classifies whole registries.
        cache = self._cache
        keep = self._decide_and_keep
        results = []
        for name in names:
            found = cache.get(name)
            results.append(found if found is not None else keep(name))
        return results

    def _decide_and_keep(self, name: str) -> Classification:
        """Decide ``name`` and cache the answer (a name of readable length only)."""
        result = self._decide(name)
        if len(name) <= _CACHED_NAME_MAX:
            cache = self._cache
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[name] = result
        return result

    def _decide(self, name: str) -> Classification:
        if self._parts:
            return self._decide_parts(name)
        if name in self._always:
            return _make(name, "always", None, "listed in always", needs=True)
        if name in self._never:
            return _make(name, "never", None, "listed in never (exempt)", needs=False)
        plain = self._plain
        if not plain:
            unreadable = unreadable_reason(name)
            if unreadable is not None:
                return _make(name, "unreadable", None, unreadable, needs=True)
        # split_words() inlined, without the tuple.
        words = find_words(name)
        if not name.islower():
            words = " ".join(words).lower().split()
        if plain:  # the original rule: an approval verb anywhere asks, nothing else does
            word = next((word for word in words if word in self._verbs), None)
            if word is None:
                reason = "no approval verb among the words " + _listed(words)
                return _make(name, "default", None, reason, needs=False)
            return _make(name, "verb", word, self._verb_reason(word, words), needs=True)
        result = self._decide_words(name, words, find_words)
        if (result.needs_approval and result.rule != "unknown") or name.islower():
            return result
        for findall, differs in OTHER_READINGS:
            if differs(name) is not None:
                found = " ".join(findall(name)).lower().split()
                other = self._decide_words(name, found, findall)
                if other.needs_approval and other.rule != "unknown":
                    return other
        return result

    def _decide_words(
        self, name: str, words: list[str], findall: Callable[[str], list[str]]
    ) -> Classification:
        """Decide one reading of a name by its words (lowercase), with the read rules."""
        verbs = self._verbs
        reads = self._reads
        start = -1  # where the action starts, found when a verb needs it
        if maybe_glued(name) is not None:
            start = action_start(name, len(words), findall)
            words, start = unglued(words, start, verbs, reads)
        digits = has_digit(name) is not None
        if digits:
            words = digits_set_aside(words, verbs)
        if verbs.isdisjoint(words):
            if not reads.isdisjoint(words):
                read = next(word for word in words if word in reads)
                result = _make(name, "read", None, f"the word '{read}' is a read verb", needs=False)
            elif reads and not INFO_NOUNS.isdisjoint(words):
                noun = next(word for word in words if word in INFO_NOUNS)
                reason = f"the word '{noun}' names information and the name holds no verb"
                result = _make(name, "read", None, reason, needs=False)
            else:
                ask = self._unknown == "ask"
                reason = f'no known verb in {_listed(words)}: unknown="{self._unknown}"'
                result = _make(name, "unknown", None, reason, needs=ask)
            return _credentials(name, words, digits=digits) or result
        if reads:
            if start < 0:
                start = action_start(name, len(words), findall)
            action = words[start:]
            before = words[:start]
            lead = next((word for word in action if word in verbs or word in reads), None)
            if lead is None:  # the action holds no verb: the whole name decides
                action = words
                before = []
                lead = next(word for word in words if word in verbs or word in reads)
            if lead in reads:
                first = next((word for word in before if word in verbs), None)
                if first is not None:  # an approval verb before the read verb decides
                    reason = (
                        f"{self._verb_reason(first, words)}: "
                        f"the read verb '{lead}' after it does not exempt it"
                    )
                    return _make(name, "verb", first, reason, needs=True)
                result = self._after_read(name, lead, action[action.index(lead) + 1 :], words)
                if result.needs_approval:
                    return result
                return _credentials(name, words, digits=digits) or result
        word = next(word for word in words if word in verbs)
        return _make(name, "verb", word, self._verb_reason(word, words), needs=True)

    def _verb_reason(self, word: str, words: Sequence[str]) -> str:
        reason = "the word '" + word + "' is an approval verb"
        domain = None if self._plain else domain_of(word, words)
        return reason if domain is None else f"{reason} ({domain})"

    def _after_read(
        self, name: str, lead: str, rest: list[str], words: list[str]
    ) -> Classification:
        """A read verb leads the action: it reads unless a destructive or joined verb follows."""
        verbs = self._verbs
        joined = None
        for word in rest:
            if word in JOINERS:
                joined = word
            elif word in verbs:
                if word in DESTRUCTIVE_VERBS:
                    reason = (
                        f"the word '{word}' is a destructive verb: "
                        f"the read verb '{lead}' before it does not exempt it"
                    )
                    return _make(name, "verb", word, reason, needs=True)
                if joined is not None:
                    reason = (
                        f"{self._verb_reason(word, words)}, joined by '{joined}' "
                        f"after the read verb '{lead}'"
                    )
                    return _make(name, "verb", word, reason, needs=True)
        noun = next(word for word in words if word in verbs)
        reason = (
            f"the read verb '{lead}' leads the action: '{noun}' is read as a thing, not an action"
        )
        return _make(name, "read", None, reason, needs=False)

    def _decide_parts(self, name: str) -> Classification:
        results = [part.explain(name) for part in self._parts]
        return next((result for result in results if result.needs_approval), results[0])

    def _decide_annotated(self, name: str, annotations: Mapping[str, Any]) -> Classification:
        given: object = annotations  # checked at run time for untyped callers
        if not isinstance(given, Mapping):
            msg = (
                "annotations must be a mapping of MCP tool annotations"
                f' ({{"readOnlyHint": true, ...}}), got {type(annotations).__name__}'
            )
            raise TypeError(msg)
        by_name = self.explain(name)
        read_only = annotations.get("readOnlyHint") is True
        if by_name.rule in ("verb", "unreadable", "credentials"):  # the name decides, not hints
            if read_only and not self._plain:
                reason = by_name.reason + "; the server's readOnlyHint: true cannot exempt it"
                return _make(name, by_name.rule, by_name.matched_word, reason, needs=True)
            return by_name
        if by_name.rule in ("always", "never"):
            return by_name
        if annotations.get("destructiveHint") is True:
            reason = "the server marks it destructiveHint: true"
            needs = True
        elif not read_only:
            reason = (
                "the server does not mark it readOnlyHint: true"
                " (MCP tools are destructive by default)"
            )
            needs = True
        else:
            known = "the name holds no known verb" if by_name.rule == "unknown" else by_name.reason
            reason = "the server marks it readOnlyHint: true and " + known
            needs = False
        return _make(name, "annotation", None, reason, needs=needs)

    def __or__(self, other: object) -> Classifier:
        """Combine two classifiers: approval is needed when either needs it.

        The result asks both and needs approval for a name exactly when one
        of them does; its explanation is the first one that asks for
        approval (or, when neither does, the first one's). Its properties
        summarise both: the union of both verb sets and both ``always``
        lists, the read verbs both share, ``unknown="ask"`` when either asks,
        and only the exempt names that neither classifier requires approval
        for as ``never``.

        Args:
            other: Another classifier.

        Returns:
            A new classifier; ``a | b`` and ``b | a`` are equal.
        """
        if not isinstance(other, Classifier):
            return NotImplemented
        parts = (*(self._parts or (self,)), *(other._parts or (other,)))
        combined = object.__new__(Classifier)
        combined._verbs = self._verbs | other._verbs
        combined._reads = self._reads & other._reads
        combined._unknown = "ask" if "ask" in (self._unknown, other._unknown) else "allow"
        combined._always = self._always | other._always
        combined._never = frozenset(
            name
            for name in self._never | other._never
            if not self.requires_approval(name) and not other.requires_approval(name)
        )
        combined._plain = all(part._plain for part in parts)
        combined._parts = tuple(dict.fromkeys(parts))
        combined._cache = {}
        return combined

    def _key(self) -> object:
        if self._parts:
            return frozenset(part._key() for part in self._parts)
        return (self._verbs, self._reads, self._unknown, self._always, self._never)

    def __eq__(self, other: object) -> bool:
        """Classifiers are equal when they decide by the same settings."""
        if not isinstance(other, Classifier):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self._parts:
            return " | ".join(repr(part) for part in self._parts)
        return (
            f"Classifier(verbs={_shown(self._verbs)}, reads={_shown(self._reads)}, "
            f"unknown={self._unknown!r}, "
            f"always={sorted(self._always)!r}, never={sorted(self._never)!r})"
        )


def _shown(words: frozenset[str]) -> str:
    """A vocabulary by its public name when it is one, else its sorted words."""
    if words == _DEFAULT:
        return "DEFAULT_VERBS"
    if words == _SEED:
        return "SEED_VERBS"
    if words == _READS:
        return "READ_VERBS"
    return repr(sorted(words))


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
        tool        approval  rule  reason
        ----------  --------  ----  --------------------------------------------------------------
        send_email  required  verb  the word 'send' is an approval verb (messaging and publishing)
        list_files  no        read  the word 'list' is a read verb
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
