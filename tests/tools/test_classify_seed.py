"""The original rule: Classifier(verbs=SEED_VERBS) classifies as the original design did."""

from __future__ import annotations

import dataclasses
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard._tools.classify import (
    _CACHE_MAX,
    SEED_VERBS,
    Classification,
    Classifier,
    format_table,
    split_words,
)


def verb_match(name: str, verb: str) -> Classification:
    """The classification of a name that needs approval because of ``verb``."""
    return Classification(
        name=name,
        needs_approval=True,
        rule="verb",
        matched_word=verb,
        matched_verb=verb,
        reason=f"the word '{verb}' is an approval verb",
    )


def no_match(name: str, reason: str) -> Classification:
    """The classification of a name that matched nothing."""
    return Classification(
        name=name,
        needs_approval=False,
        rule="default",
        matched_word=None,
        matched_verb=None,
        reason=reason,
    )


def listed_always(name: str) -> Classification:
    """The classification of a name in ``always``."""
    return Classification(
        name=name,
        needs_approval=True,
        rule="always",
        matched_word=None,
        matched_verb=None,
        reason="listed in always",
    )


def listed_never(name: str) -> Classification:
    """The classification of a name in ``never``."""
    return Classification(
        name=name,
        needs_approval=False,
        rule="never",
        matched_word=None,
        matched_verb=None,
        reason="listed in never (exempt)",
    )


# --- split_words ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("findCalendarEvents", ("find", "calendar", "events")),
        ("retrieveEventById", ("retrieve", "event", "by", "id")),
        ("sendHTTPRequest", ("send", "http", "request")),
        ("HTTPServerStart", ("http", "server", "start")),
        ("XMLHttpRequest", ("xml", "http", "request")),
        ("getURLs", ("get", "urls")),
        ("getUserIDs", ("get", "user", "ids")),
        ("PDFsToText", ("pdfs", "to", "text")),
        ("s3Upload", ("s3", "upload")),
        ("S3Upload", ("s3", "upload")),
        ("listS3Buckets", ("list", "s3", "buckets")),
        ("EC2Instance", ("ec2", "instance")),
        ("HTTP2Server", ("http2", "server")),
        ("v2_delete_item", ("v2", "delete", "item")),
        ("base64Encode", ("base64", "encode")),
        ("2fa_code", ("2", "fa", "code")),
        ("OAuth2Token", ("o", "auth2", "token")),
        ("send_email", ("send", "email")),
        ("SEND_EMAIL", ("send", "email")),
        ("create-issue", ("create", "issue")),
        ("mail.send", ("mail", "send")),
        ("calendar.events.delete", ("calendar", "events", "delete")),
        ("gmail__send_message", ("gmail", "send", "message")),
        ("MCP_server__write_file", ("mcp", "server", "write", "file")),
        ("github/create_issue", ("github", "create", "issue")),
        ("fs:write", ("fs", "write")),
        ("s3:PutObject", ("s3", "put", "object")),
        ("send email now", ("send", "email", "now")),
        ("addressBook", ("address", "book")),
        ("created_at_lookup", ("created", "at", "lookup")),
        ("sender_stats", ("sender", "stats")),
        ("A", ("a",)),
        ("URL", ("url",)),
        ("créer_événement", ("cr", "er", "v", "nement")),
        ("", ()),
        ("   ", ()),
        ("__--..//::", ()),
    ],
)
def test_split_words(name: str, words: tuple[str, ...]) -> None:
    """split_words gives exactly these lowercase words."""
    assert split_words(name) == words


# --- SEED_VERBS and the verb layer -------------------------------------------------------


def test_default_verbs_are_the_thirteen_in_order() -> None:
    """SEED_VERBS holds exactly the 13 verbs, in this order."""
    assert SEED_VERBS == (
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


def test_default_classifier_uses_default_verbs() -> None:
    """Classifier(verbs=SEED_VERBS) uses SEED_VERBS and empty lists."""
    classifier = Classifier(verbs=SEED_VERBS)
    assert classifier.verbs == frozenset(SEED_VERBS)
    assert classifier.always == frozenset()
    assert classifier.never == frozenset()


VERB_FORMS = [
    "{verb}_item",
    "{verb}Item",
    "quick{Verb}Item",
    "{Verb}Item",
    "{VERB}_ITEM",
    "{verb}-item",
    "svc.items.{verb}",
    "mcp__svc__{verb}_item",
    "svc/{verb}",
    "svc:{verb}",
]


@pytest.mark.parametrize("verb", SEED_VERBS)
@pytest.mark.parametrize("form", VERB_FORMS)
def test_every_default_verb_matches_in_every_naming_style(verb: str, form: str) -> None:
    """Each default verb is found as a word in camel, snake, kebab, dotted and namespaced names."""
    name = form.format(verb=verb, Verb=verb.capitalize(), VERB=verb.upper())
    assert Classifier(verbs=SEED_VERBS).explain(name) == verb_match(name, verb)


@pytest.mark.parametrize(
    ("name", "verb"),
    [
        ("sendHTTPRequest", "send"),
        ("gmail__send_message", "send"),
        ("calendar.events.delete", "delete"),
        ("create-issue", "create"),
        ("MCP_server__write_file", "write"),
        ("github/create_issue", "create"),
        ("fs:write", "write"),
        ("addressBook", "book"),
        ("v2_delete_item", "delete"),
        ("SEND_EMAIL", "send"),
        ("create_or_update_item", "create"),
        ("update_or_create_item", "update"),
    ],
)
def test_names_with_a_verb_need_approval(name: str, verb: str) -> None:
    """A name with a default verb as a word needs approval; the first verb is reported."""
    classifier = Classifier(verbs=SEED_VERBS)
    assert classifier.explain(name) == verb_match(name, verb)
    assert classifier.requires_approval(name) is True


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("findCalendarEvents", "no approval verb among the words ['find', 'calendar', 'events']"),
        ("retrieveEventById", "no approval verb among the words ['retrieve', 'event', 'by', 'id']"),
        ("sender_stats", "no approval verb among the words ['sender', 'stats']"),
        ("address_lookup", "no approval verb among the words ['address', 'lookup']"),
        ("bookmarks_list", "no approval verb among the words ['bookmarks', 'list']"),
        ("created_at_lookup", "no approval verb among the words ['created', 'at', 'lookup']"),
        ("sends_report", "no approval verb among the words ['sends', 'report']"),
        ("deleting_soon", "no approval verb among the words ['deleting', 'soon']"),
        ("s3Upload", "no approval verb among the words ['s3', 'upload']"),
        ("", "no approval verb among the words []"),
        ("___", "no approval verb among the words []"),
    ],
)
def test_names_without_a_whole_verb_word_need_no_approval(name: str, reason: str) -> None:
    """Substrings and inflections of verbs do not count; the reason lists the words."""
    classifier = Classifier(verbs=SEED_VERBS)
    assert classifier.explain(name) == no_match(name, reason)
    assert classifier.requires_approval(name) is False


# --- the explicit lists ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["findCalendarEvents", "retrieveEventById"])
def test_always_makes_a_verbless_name_need_approval(name: str) -> None:
    """A name without a verb needs approval when it is listed in always."""
    classifier = Classifier(verbs=SEED_VERBS, always=["findCalendarEvents", "retrieveEventById"])
    assert classifier.explain(name) == listed_always(name)
    assert classifier.requires_approval(name) is True


def test_always_wins_over_the_verb_layer() -> None:
    """A name in always is reported as listed in always, not as a verb match."""
    assert Classifier(verbs=SEED_VERBS, always=["send_email"]).explain(
        "send_email"
    ) == listed_always("send_email")


def test_never_exempts_a_name_with_a_verb() -> None:
    """A name in never needs no approval although it contains a verb."""
    classifier = Classifier(verbs=SEED_VERBS, never=["send_heartbeat"])
    assert classifier.explain("send_heartbeat") == listed_never("send_heartbeat")
    assert classifier.requires_approval("send_heartbeat") is False
    assert classifier.explain("send_email") == verb_match("send_email", "send")


def test_lists_match_exact_names_only() -> None:
    """List entries are exact and case-sensitive tool names, not patterns."""
    classifier = Classifier(
        verbs=SEED_VERBS, always=["findCalendarEvents"], never=["send_heartbeat"]
    )
    assert classifier.explain("Send_Heartbeat") == verb_match("Send_Heartbeat", "send")
    assert classifier.explain("send_heartbeat_v2") == verb_match("send_heartbeat_v2", "send")
    assert classifier.explain("find_calendar_events") == no_match(
        "find_calendar_events", "no approval verb among the words ['find', 'calendar', 'events']"
    )


def test_lists_accept_any_iterable_and_are_frozensets() -> None:
    """always and never take any iterable, including a generator, and expose frozensets."""
    classifier = Classifier(verbs=SEED_VERBS, always=(n for n in ["a", "b", "a"]), never={"c"})
    assert classifier.always == frozenset({"a", "b"})
    assert classifier.never == frozenset({"c"})
    assert isinstance(classifier.always, frozenset)
    assert isinstance(classifier.never, frozenset)
    assert isinstance(classifier.verbs, frozenset)


def test_name_in_both_lists_is_rejected() -> None:
    """A name in both always and never raises ValueError naming it."""
    with pytest.raises(ValueError, match=r"^names in both always and never: ") as info:
        Classifier(
            verbs=SEED_VERBS, always=["send_email", "b", "a"], never=["a", "send_email", "x"]
        )
    assert str(info.value) == (
        "names in both always and never: ['a', 'send_email']; "
        "keep each name in only one of the two lists"
    )


# --- custom verbs and validation ------------------------------------------------------------


def test_custom_verbs_are_normalised_to_lowercase_words() -> None:
    """Verbs are lowercased and trimmed to their single word."""
    classifier = Classifier(verbs=["Purchase", "SEND", " refund "], reads=(), unknown="allow")
    assert classifier.verbs == frozenset({"purchase", "send", "refund"})
    assert classifier.explain("purchaseTicket") == verb_match("purchaseTicket", "purchase")
    assert classifier.explain("REFUND_ORDER") == verb_match("REFUND_ORDER", "refund")
    assert classifier.explain("delete_file") == no_match(
        "delete_file", "no approval verb among the words ['delete', 'file']"
    )


def test_inflections_match_when_listed_as_verbs() -> None:
    """An inflected form matches once it is listed as a verb of its own."""
    classifier = Classifier(verbs=[*SEED_VERBS, "sends", "created"])
    assert classifier.explain("sends_report") == verb_match("sends_report", "sends")
    assert classifier.explain("created_at_lookup") == verb_match("created_at_lookup", "created")


def test_no_verbs_leaves_only_the_lists() -> None:
    """With no verbs, only always makes a name need approval."""
    classifier = Classifier(verbs=(), reads=(), unknown="allow", always=["findCalendarEvents"])
    assert classifier.requires_approval("delete_everything") is False
    assert classifier.requires_approval("findCalendarEvents") is True


@pytest.mark.parametrize(
    ("verbs", "message"),
    [
        (
            ["send_message"],
            (
                "verb 'send_message' is not a single word (it splits into ['send', 'message']); "
                "list each word as its own verb, or put the exact tool name in always"
            ),
        ),
        (
            ["sendMessage"],
            (
                "verb 'sendMessage' is not a single word (it splits into ['send', 'message']); "
                "list each word as its own verb, or put the exact tool name in always"
            ),
        ),
        (["send", ""], "verb '' contains no word; remove it from verbs"),
        (["--"], "verb '--' contains no word; remove it from verbs"),
    ],
)
def test_verbs_that_are_not_one_word_are_rejected(verbs: list[str], message: str) -> None:
    """A verb that is not exactly one word raises ValueError saying what to do."""
    with pytest.raises(ValueError, match=r"^verb ") as info:
        Classifier(verbs=verbs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"verbs": "send"},
            "verbs must be a collection of strings, not a single string; write verbs=['send']",
        ),
        (
            {"always": "send_email"},
            (
                "always must be a collection of strings, not a single string; "
                "write always=['send_email']"
            ),
        ),
        ({"never": ["ok", 42]}, "never must contain only strings, got int 42"),
        ({"verbs": [None]}, "verbs must contain only strings, got NoneType None"),
    ],
)
def test_wrong_types_are_rejected(kwargs: dict[str, object], message: str) -> None:
    """A bare string or a non-string entry raises TypeError saying what to write."""
    with pytest.raises(TypeError, match=r" must ") as info:
        Classifier(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


# --- classify, caching, results -------------------------------------------------------------


def test_classify_keeps_order_and_repeats() -> None:
    """classify returns one classification per name, in order, repeats included."""
    classifier = Classifier(
        verbs=SEED_VERBS, always=["findCalendarEvents"], never=["send_heartbeat"]
    )
    names = ["send_email", "findCalendarEvents", "sender_stats", "send_heartbeat", "send_email"]
    assert classifier.classify(names) == [
        verb_match("send_email", "send"),
        listed_always("findCalendarEvents"),
        no_match("sender_stats", "no approval verb among the words ['sender', 'stats']"),
        listed_never("send_heartbeat"),
        verb_match("send_email", "send"),
    ]
    assert classifier.classify([]) == []
    assert classifier.classify(iter(["fs:write"])) == [verb_match("fs:write", "write")]


def test_repeated_names_reuse_the_cached_classification() -> None:
    """explain and classify hand back the same object for a repeated name."""
    classifier = Classifier(verbs=SEED_VERBS)
    first = classifier.explain("send_email")
    assert classifier.explain("send_email") is first
    assert classifier.classify(["send_email"])[0] is first


def test_cache_stays_bounded_and_correct() -> None:
    """Past the cache limit the cache starts over and answers stay right."""
    classifier = Classifier(verbs=SEED_VERBS)
    names = [f"tool_{i}" for i in range(_CACHE_MAX + 10)] + ["send_email"]
    results = classifier.classify(names)
    assert len(classifier._cache) <= _CACHE_MAX
    assert results[0] == no_match("tool_0", "no approval verb among the words ['tool', '0']")
    assert results[-1] == verb_match("send_email", "send")
    assert classifier.explain("tool_0") == results[0]


def test_classification_is_frozen_and_hashable() -> None:
    """A Classification cannot be changed and equals a freshly built one."""
    result = Classifier(verbs=SEED_VERBS).explain("send_email")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.needs_approval = False  # type: ignore[misc]
    expected = verb_match("send_email", "send")
    assert hash(result) == hash(expected)
    assert repr(result) == repr(expected)
    assert repr(result) == (
        "Classification(name='send_email', needs_approval=True, rule='verb', "
        "matched_word='send', matched_verb='send', "
        "reason=\"the word 'send' is an approval verb\")"
    )


def test_repr_equality_and_hash() -> None:
    """repr shows sorted settings; classifiers with the same settings are equal."""
    classifier = Classifier(
        verbs=["send", "Delete"], reads=(), unknown="allow", always=["b", "a"], never=["c"]
    )
    assert repr(classifier) == (
        "Classifier(verbs=['delete', 'send'], reads=[], unknown='allow', "
        "always=['a', 'b'], never=['c'])"
    )
    same = Classifier(
        verbs=["delete", "send"], reads=[], unknown="allow", always=["a", "b"], never=["c"]
    )
    assert classifier == same
    assert hash(classifier) == hash(same)
    assert classifier != Classifier(
        verbs=["send"], reads=(), unknown="allow", always=["a", "b"], never=["c"]
    )
    assert classifier != Classifier(verbs=["send", "delete"], always=["a", "b"], never=["c"])
    assert repr(Classifier(verbs=SEED_VERBS)) == (
        "Classifier(verbs=SEED_VERBS, reads=[], unknown='allow', always=[], never=[])"
    )
    assert classifier != "not a classifier"


# --- combining classifiers ------------------------------------------------------------------


def test_or_unites_verbs_and_always() -> None:
    """a | b has both verb sets and both always lists."""
    a = Classifier(verbs=["send"], reads=(), unknown="allow", always=["findCalendarEvents"])
    b = Classifier(verbs=["purchase"], reads=(), unknown="allow", always=["read_inbox"])
    combined = a | b
    assert combined.verbs == frozenset({"send", "purchase"})
    assert combined.always == frozenset({"findCalendarEvents", "read_inbox"})
    assert combined.explain("send_email") == verb_match("send_email", "send")
    assert combined.explain("get_stats") == no_match(
        "get_stats", "no approval verb among the words ['get', 'stats']"
    )
    assert combined.explain("purchaseTicket") == verb_match("purchaseTicket", "purchase")
    assert combined.explain("read_inbox") == listed_always("read_inbox")


def test_or_drops_an_exemption_the_other_side_overrides() -> None:
    """A name one side exempts needs approval when the other side catches it."""
    exempting = Classifier(verbs=SEED_VERBS, never=["send_heartbeat", "delete_cache"])
    default = Classifier(verbs=SEED_VERBS)
    strict = Classifier(verbs=(), reads=(), unknown="allow", always=["delete_cache"])
    assert (exempting | default).explain("send_heartbeat") == verb_match("send_heartbeat", "send")
    assert (exempting | strict).explain("delete_cache") == listed_always("delete_cache")
    assert (exempting | strict).explain("send_heartbeat") == listed_never("send_heartbeat")
    assert (exempting | default).never == frozenset()
    assert (exempting | strict).never == frozenset({"send_heartbeat"})


def test_or_is_symmetric_and_rejects_other_types() -> None:
    """a | b equals b | a, and | with a non-classifier raises TypeError."""
    a = Classifier(verbs=SEED_VERBS, never=["send_heartbeat"], always=["x"])
    b = Classifier(verbs=["purchase"], never=["purchase_log"])
    assert a | b == b | a
    with pytest.raises(TypeError, match="unsupported operand"):
        _ = a | 3


# --- format_table ---------------------------------------------------------------------------


def test_format_table() -> None:
    """format_table aligns the columns under a header and a line of dashes."""
    classifier = Classifier(
        verbs=SEED_VERBS, always=["findCalendarEvents"], never=["send_heartbeat"]
    )
    table = format_table(
        classifier.classify(["send_email", "findCalendarEvents", "send_heartbeat", "get_stats"])
    )
    assert table == (
        "tool                approval  rule     reason\n"
        "------------------  --------  -------  -------------------------------------------------\n"
        "send_email          required  verb     the word 'send' is an approval verb\n"
        "findCalendarEvents  required  always   listed in always\n"
        "send_heartbeat      no        never    listed in never (exempt)\n"
        "get_stats           no        default  no approval verb among the words ['get', 'stats']"
    )


def test_format_table_empty() -> None:
    """format_table of no rows is the header and the dashes."""
    assert format_table([]) == "tool  approval  rule  reason\n----  --------  ----  ------"


# --- properties -----------------------------------------------------------------------------

LOWER_WORDS = st.lists(
    st.builds(
        str.__add__,
        st.text(string.ascii_lowercase, min_size=2, max_size=8),
        st.text(string.digits, max_size=2),
    ),
    min_size=1,
    max_size=6,
)

NAME_PIECES = st.sampled_from(
    [
        *SEED_VERBS,
        "Send",
        "DELETE",
        "Book",
        "sender",
        "sends",
        "address",
        "bookmarks",
        "HTTP",
        "URLs",
        "s3",
        "v2",
        "42",
        "get",
        "list",
        "_",
        "__",
        "-",
        ".",
        "/",
        ":",
        " ",
        "é",
    ]
)
TOOL_NAMES = st.one_of(st.text(), st.lists(NAME_PIECES, max_size=8).map("".join))


@given(st.text())
def test_split_words_gives_lowercase_ascii_alphanumeric_words(name: str) -> None:
    """Every word is non-empty, lowercase, ASCII and alphanumeric."""
    for word in split_words(name):
        assert word
        assert word.isascii()
        assert word.isalnum()
        assert word == word.lower()


@given(st.text())
def test_split_words_keeps_every_ascii_letter_and_digit_in_order(name: str) -> None:
    """The words, joined, are the name's ASCII letters and digits, lowercased, in order."""
    words = split_words(name)
    kept = "".join(c for c in name if c.isascii() and c.isalnum()).lower()
    assert "".join(words) == kept
    lowered = name.lower()
    position = 0
    for word in words:
        position = lowered.find(word, position)
        assert position >= 0
        position += len(word)


@given(LOWER_WORDS)
def test_split_words_round_trips_joined_words(words: list[str]) -> None:
    """Words joined in snake, kebab, dotted, SCREAMING, camel or Pascal case split back."""
    expected = tuple(words)
    capitalised = [word.capitalize() for word in words]
    assert split_words("_".join(words)) == expected
    assert split_words("-".join(words)) == expected
    assert split_words(".".join(words)) == expected
    assert split_words("__".join(words).upper()) == expected
    assert split_words(words[0] + "".join(capitalised[1:])) == expected
    assert split_words("".join(capitalised)) == expected


@given(TOOL_NAMES)
def test_default_classification_agrees_with_split_words(name: str) -> None:
    """A name needs approval exactly when one of its words is a verb; reasons say which."""
    verbs = frozenset(SEED_VERBS)
    words = split_words(name)
    result = Classifier(verbs=SEED_VERBS).explain(name)
    assert result.needs_approval == any(word in verbs for word in words)
    if result.needs_approval:
        verb = next(word for word in words if word in verbs)
        assert result == verb_match(name, verb)
    else:
        assert result == no_match(name, f"no approval verb among the words {list(words)!r}")


@given(
    TOOL_NAMES,
    st.frozensets(st.sampled_from(["send", "get", "list", "http", "urls", "s3", "v2", "42"])),
)
def test_custom_verbs_agree_with_split_words(name: str, verbs: frozenset[str]) -> None:
    """With any verb set, approval is needed exactly when a word is one of the verbs."""
    expected = any(word in verbs for word in split_words(name))
    assert Classifier(verbs=verbs, reads=(), unknown="allow").requires_approval(name) == expected


NAME_POOL = st.sampled_from(["send_email", "delete_cache", "get_stats", "book_room", "findX"])
CLASSIFIERS = st.builds(
    lambda verbs, always, never: Classifier(verbs=verbs, always=always, never=never - always),
    st.frozensets(st.sampled_from(["send", "delete", "get", "book"])),
    st.frozensets(NAME_POOL),
    st.frozensets(NAME_POOL),
)


@settings(max_examples=50)
@given(CLASSIFIERS, CLASSIFIERS, NAME_POOL)
def test_or_requires_approval_when_either_side_does(
    a: Classifier, b: Classifier, name: str
) -> None:
    """(a | b) needs approval for a name exactly when a or b does."""
    expected = a.requires_approval(name) or b.requires_approval(name)
    assert (a | b).requires_approval(name) == expected
