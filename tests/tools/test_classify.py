"""The default classifier: approval verbs by domain, read verbs, unknown names, positions."""

from __future__ import annotations

import csv
import doctest
import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolguard
import toolguard._tools.classify
import toolguard._tools.words
import toolguard.classify
from toolguard._tools.classify import (
    _CACHE_MAX,
    _CACHED_NAME_MAX,
    DEFAULT_VERBS,
    DESTRUCTIVE_VERBS,
    INFO_NOUNS,
    READ_VERBS,
    SEED_VERBS,
    VERB_GROUPS,
    Classification,
    Classifier,
    split_words,
)
from toolguard._tools.verbs import CREDENTIALS, SHARED_DOMAINS

CREDENTIAL_NOUNS = frozenset(CREDENTIALS.nouns)

DOCS = Path(__file__).resolve().parents[2] / "docs"
BENCHMARK_DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def verb(name: str, word: str, domain: str | None) -> Classification:
    """A name that needs approval because of the approval verb ``word``."""
    suffix = f" ({domain})" if domain else ""
    return Classification(
        name=name,
        needs_approval=True,
        rule="verb",
        matched_word=word,
        matched_verb=word,
        reason=f"the word '{word}' is an approval verb{suffix}",
    )


def read(name: str, reason: str) -> Classification:
    """A name that a read verb lets run."""
    return Classification(
        name=name,
        needs_approval=False,
        rule="read",
        matched_word=None,
        matched_verb=None,
        reason=reason,
    )


def unknown(name: str, words: list[str], setting: str) -> Classification:
    """A name with no known verb, decided by ``unknown=``."""
    return Classification(
        name=name,
        needs_approval=setting == "ask",
        rule="unknown",
        matched_word=None,
        matched_verb=None,
        reason=f'no known verb in {words!r}: unknown="{setting}"',
    )


# --- the vocabulary -------------------------------------------------------------------------


def test_the_default_vocabulary_covers_every_domain_once() -> None:
    """Nine domains, each with a one-line reason; every verb is one lowercase word, in one group."""
    assert [group.domain for group in VERB_GROUPS] == [
        "money",
        "messaging and publishing",
        "code and devops",
        "data",
        "accounts and permissions",
        "commerce",
        "files",
        "pages and apps",
        "scheduling",
    ]
    for group in VERB_GROUPS:
        assert group.why
        assert "\n" not in group.why
        assert group.verbs
        for word in group.verbs:
            assert split_words(word) == (word,)
    assert tuple(word for group in VERB_GROUPS for word in group.verbs) == DEFAULT_VERBS
    assert len(set(DEFAULT_VERBS)) == len(DEFAULT_VERBS)


def test_the_default_vocabulary_keeps_the_original_verbs_and_no_read_verb() -> None:
    """The original 13 are approval verbs still; no word is both an approval and a read verb."""
    assert set(SEED_VERBS) <= set(DEFAULT_VERBS)
    assert len(SEED_VERBS) == 13
    assert set(READ_VERBS).isdisjoint(DEFAULT_VERBS)
    assert set(DEFAULT_VERBS) >= DESTRUCTIVE_VERBS
    for word in READ_VERBS:
        assert split_words(word) == (word,)
    assert {
        "get",
        "list",
        "search",
        "find",
        "read",
        "fetch",
        "query",
        "lookup",
        "check",
        "count",
        "describe",
        "show",
        "view",
        "retrieve",
        "calculate",
    } <= set(READ_VERBS)


def test_the_vocabularies_are_public() -> None:
    """The approval verbs are exported at the top level, the read verbs in toolguard.classify."""
    assert toolguard.DEFAULT_VERBS is DEFAULT_VERBS
    assert toolguard.SEED_VERBS is SEED_VERBS
    assert toolguard.classify.READ_VERBS is READ_VERBS


def test_the_default_classifier_settings() -> None:
    """Classifier() uses every default verb, every read verb and asks about unknown names."""
    classifier = Classifier()
    assert classifier.verbs == frozenset(DEFAULT_VERBS)
    assert classifier.reads == frozenset(READ_VERBS)
    assert classifier.unknown == "ask"
    assert classifier == Classifier(verbs=DEFAULT_VERBS, reads=READ_VERBS, unknown="ask")
    assert repr(classifier) == (
        "Classifier(verbs=DEFAULT_VERBS, reads=READ_VERBS, unknown='ask', always=[], never=[])"
    )


@pytest.mark.parametrize(
    ("domain", "word"),
    [(group.domain, word) for group in VERB_GROUPS for word in group.verbs],
)
def test_every_approval_verb_asks_and_names_its_domain(domain: str, word: str) -> None:
    """Each default verb leads to approval in snake, camel and namespaced names, with its domain
    (a verb of several domains, with all of them: 'item' points to none)."""
    classifier = Classifier()
    shared = SHARED_DOMAINS.get(word)
    if shared is not None:
        assert shared[0] == domain
        domain = ", ".join(shared[:-1]) + ", or " + shared[-1]
    for name in (f"{word}_item", f"{word}Item", f"mcp__svc__{word}_item", f"svc.items.{word}"):
        assert classifier.explain(name) == verb(name, word, domain)


@pytest.mark.parametrize(
    ("name", "word", "domain"),
    [
        ("send_money", "send", "money"),
        ("sendPayment", "send", "money"),
        ("send_email", "send", "messaging and publishing"),
        ("send_it", "send", "messaging and publishing, or money"),
        ("send_invoice_email", "send", "messaging and publishing, or money"),
        ("transfer_funds", "transfer", "money"),
        ("transfer_file", "transfer", "files"),
        ("transfer_ownership", "transfer", "accounts and permissions"),
        ("transfer_item", "transfer", "money, files, or accounts and permissions"),
        ("call_function", "call", "code and devops"),
        ("call_contact", "call", "messaging and publishing"),
        ("submit_form", "submit", "pages and apps"),
        ("cancel_order", "cancel", "commerce"),
        ("cancel_meeting", "cancel", "scheduling"),
        ("cancel_payment", "cancel", "money"),
        ("book_flight", "book", "commerce"),
        ("book_meeting", "book", "scheduling"),
        ("close_issue", "close", "code and devops"),
        ("close_account", "close", "accounts and permissions"),
        ("release_funds", "release", "money"),
        ("pay_email", "pay", "money"),  # a verb of one domain names it, whatever the nouns
    ],
)
def test_a_verb_of_several_domains_names_the_one_the_name_points_to_or_all(
    name: str, word: str, domain: str
) -> None:
    """``send_money`` is money, not messaging: the reason names a domain only where the name
    points to one of the verb's domains, else every domain it has."""
    assert Classifier().explain(name) == verb(name, word, domain)


# --- the names people really have -----------------------------------------------------------

WRITES = [
    ("run_command", "run", "code and devops"),
    ("execute_sql", "execute", "code and devops"),
    ("kubectl_apply", "apply", "code and devops"),
    ("exec_in_pod", "exec", "code and devops"),
    ("merge_pull_request", "merge", "code and devops"),
    ("push_files", "push", "code and devops"),
    ("transfer_funds", "transfer", "money"),
    ("pay_invoice", "pay", "money"),
    ("share_file", "share", "accounts and permissions"),
    ("post_webpage", "post", "messaging and publishing"),
    ("reserve_hotel", "reserve", "commerce"),
    ("schedule_transaction", "schedule", "scheduling"),
    ("invite_user_to_slack", "invite", "accounts and permissions"),
    ("append_to_file", "append", "files"),
    ("modify_pending_order_items", "modify", "data"),
    ("grant_access", "grant", "accounts and permissions"),
    ("drop_table", "drop", "data"),
    ("deploy_service", "deploy", "code and devops"),
    ("publish_post", "publish", "messaging and publishing"),
    ("place_order", "place", "commerce"),
    ("upload_file", "upload", "files"),
    ("reset_password", "reset", "data"),
    ("create_or_update_file", "create", "data"),
    ("rerun_workflow_run", "rerun", "code and devops"),
    ("slack_post_message", "post", "messaging and publishing"),
    ("mcp__github__merge_pull_request", "merge", "code and devops"),
    ("createPullRequest", "create", "data"),
    ("sendEmail", "send", "messaging and publishing"),
    ("slack.chat.postMessage", "post", "messaging and publishing"),
    ("gmail.users.messages.send", "send", "messaging and publishing"),
    ("stripe.refunds.create", "create", "data"),
    ("github/create_issue", "create", "data"),
    ("fs:write", "write", "files"),
    ("browser_click", "click", "pages and apps"),
    ("puppeteer_fill", "fill", "pages and apps"),
    ("jira_transition_issue", "transition", "pages and apps"),
]


@pytest.mark.parametrize(("name", "word", "domain"), WRITES)
def test_dangerous_real_tool_names_need_approval(name: str, word: str, domain: str) -> None:
    """Tools that change the world, in every naming style, ask a person; the verb is named."""
    assert Classifier().explain(name) == verb(name, word, domain)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("get_settings", "the word 'get' is a read verb"),
        ("list_posts", "the word 'list' is a read verb"),
        (
            "get_order_details",
            "the read verb 'get' leads the action: 'order' is read as a thing, not an action",
        ),
        ("list_workflow_runs", "the word 'list' is a read verb"),
        ("get_current_time", "the word 'get' is a read verb"),
        ("list_pull_requests", "the word 'list' is a read verb"),
        (
            "get_transfer_status",
            "the read verb 'get' leads the action: 'transfer' is read as a thing, not an action",
        ),
        (
            "getSendQuota",
            "the read verb 'get' leads the action: 'send' is read as a thing, not an action",
        ),
        (
            "check_deploy_status",
            "the read verb 'check' leads the action: 'deploy' is read as a thing, not an action",
        ),
        ("mcp__github__get_pull_request_review_comments", "the word 'get' is a read verb"),
        (
            "search_posts_by_tag",
            "the read verb 'search' leads the action: 'tag' is read as a thing, not an action",
        ),
        ("calendar.events.list", "the word 'list' is a read verb"),
        ("findCalendarEvents", "the word 'find' is a read verb"),
        ("weather_lookup", "the word 'lookup' is a read verb"),
        ("is_admin", "the word 'is' is a read verb"),
        ("browser_navigate", "the word 'navigate' is a read verb"),
        ("git_status", "the word 'status' names information and the name holds no verb"),
        ("kubectl_logs", "the word 'logs' names information and the name holds no verb"),
    ],
)
def test_reads_with_nouns_that_look_like_verbs_run(name: str, reason: str) -> None:
    """A leading read verb decides: the approval verbs after it are things, not actions."""
    assert Classifier().explain(name) == read(name, reason)


@pytest.mark.parametrize(
    ("name", "word", "reason"),
    [
        (
            "search_and_replace",
            "replace",
            (
                "the word 'replace' is a destructive verb: the read verb 'search' before it does "
                "not exempt it"
            ),
        ),
        (
            "find_delete",
            "delete",
            (
                "the word 'delete' is a destructive verb: the read verb 'find' before it does "
                "not exempt it"
            ),
        ),
        (
            "get_or_create_user",
            "create",
            (
                "the word 'create' is an approval verb (data), joined by 'or' after the read verb "
                "'get'"
            ),
        ),
        (
            "fetchThenSendReport",
            "send",
            (
                "the word 'send' is an approval verb (messaging and publishing), joined by 'then' "
                "after the read verb 'fetch'"
            ),
        ),
        (
            "list_and_archive_emails",
            "archive",
            (
                "the word 'archive' is an approval verb (data), joined by 'and'"
                " after the read verb 'list'"
            ),
        ),
    ],
)
def test_a_leading_read_verb_does_not_hide_a_destructive_or_joined_action(
    name: str, word: str, reason: str
) -> None:
    """Destructive verbs, and approval verbs joined by and/or/then, ask after a read verb."""
    assert Classifier().explain(name) == Classification(
        name=name,
        needs_approval=True,
        rule="verb",
        matched_word=word,
        matched_verb=word,
        reason=reason,
    )


def test_a_namespace_that_reads_does_not_hide_the_action() -> None:
    """The words after the last namespace separator decide: a server called fetch still sends."""
    classifier = Classifier()
    assert classifier.explain("fetch__send_email") == verb(
        "fetch__send_email", "send", "messaging and publishing"
    )
    assert classifier.explain("search/delete_index") == verb(
        "search/delete_index", "delete", "data"
    )
    # No verb after the last separator: the whole name decides.
    assert classifier.explain("delete.user") == verb("delete.user", "delete", "data")
    assert classifier.explain("get.user") == read("get.user", "the word 'get' is a read verb")


def test_a_verb_that_is_not_first_still_asks_without_a_read_verb() -> None:
    """Without a leading read verb, any approval verb decides, whatever stands before it."""
    classifier = Classifier()
    assert classifier.explain("slack_post_message") == verb(
        "slack_post_message", "post", "messaging and publishing"
    )
    assert classifier.explain("order_status") == verb("order_status", "order", "commerce")


# --- unknown names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("frobnicate_widget", ["frobnicate", "widget"]),
        ("sequentialthinking", ["sequentialthinking"]),
        ("sender_widget", ["sender", "widget"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("", []),
        ("___", []),
        ("..//::-- ", []),
    ],
)
@pytest.mark.parametrize("setting", ["ask", "allow"])
def test_unknown_names_follow_the_unknown_setting(
    name: str, words: list[str], setting: str
) -> None:
    """A name with neither kind of verb asks with unknown="ask" and runs with "allow"."""
    classifier = Classifier(unknown=setting)  # type: ignore[arg-type]
    assert classifier.explain(name) == unknown(name, words, setting)


def test_unknown_asks_by_default_and_the_explicit_setting_wins() -> None:
    """The default is "ask"; SEED_VERBS allows unknown names unless told otherwise."""
    assert Classifier().explain("frobnicate_widget").reason == (
        "no known verb in ['frobnicate', 'widget']: unknown=\"ask\""
    )
    assert Classifier(unknown="allow").explain("frobnicate_widget").reason == (
        "no known verb in ['frobnicate', 'widget']: unknown=\"allow\""
    )
    assert Classifier().explain("frobnicate_widget") == unknown(
        "frobnicate_widget", ["frobnicate", "widget"], "ask"
    )
    seed_asking = Classifier(verbs=SEED_VERBS, unknown="ask")
    assert seed_asking.explain("frobnicate_widget") == unknown(
        "frobnicate_widget", ["frobnicate", "widget"], "ask"
    )
    assert seed_asking.explain("get_stats") == unknown("get_stats", ["get", "stats"], "ask")


@pytest.mark.parametrize("bad", ["deny", "ASK", "", None, True, 1])
def test_unknown_rejects_other_values(bad: object) -> None:
    """unknown= takes "ask" or "allow" only (None means the default)."""
    if bad is None:
        assert Classifier(unknown=None).unknown == "ask"
        return
    with pytest.raises(ValueError, match=r"^unknown must") as info:
        Classifier(unknown=bad)  # type: ignore[arg-type]
    assert str(info.value) == f'unknown must be "ask" or "allow", got {bad!r}'


# --- custom read verbs ----------------------------------------------------------------------


def test_custom_reads_replace_the_read_vocabulary() -> None:
    """reads= sets the read verbs; () turns the read rule off."""
    classifier = Classifier(reads=["peek"])
    assert classifier.reads == frozenset({"peek"})
    assert classifier.explain("peek_order") == read(
        "peek_order",
        "the read verb 'peek' leads the action: 'order' is read as a thing, not an action",
    )
    assert classifier.explain("get_order") == verb("get_order", "order", "commerce")
    no_reads = Classifier(reads=())
    assert no_reads.explain("get_order_details") == verb("get_order_details", "order", "commerce")
    assert no_reads.explain("get_stats") == unknown("get_stats", ["get", "stats"], "ask")


def test_a_word_in_both_verbs_and_explicit_reads_is_rejected() -> None:
    """An explicit reads list may not share a word with verbs; the default drops shared words."""
    with pytest.raises(ValueError, match=r"^words in both") as info:
        Classifier(verbs=["check", "send"], reads=["check", "get"])
    assert str(info.value) == (
        "words in both verbs and reads: ['check']; keep each word in only one of the two"
    )
    classifier = Classifier(verbs=["check", "send"])
    assert "check" not in classifier.reads
    assert classifier.explain("check_in") == verb("check_in", "check", None)


def test_reads_are_validated_like_verbs() -> None:
    """A read verb must be one word; a bare string is refused."""
    with pytest.raises(ValueError, match=r"^read ") as info:
        Classifier(reads=["get_all"])
    assert str(info.value) == (
        "read 'get_all' is not a single word (it splits into ['get', 'all']); "
        "list each word as its own read, or put the exact tool name in always"
    )
    with pytest.raises(TypeError) as type_info:
        Classifier(reads="get")
    assert str(type_info.value) == (
        "reads must be a collection of strings, not a single string; write reads=['get']"
    )


def test_the_lists_win_over_every_verb_rule() -> None:
    """always and never decide before verbs, reads and unknown names."""
    classifier = Classifier(always=["findCalendarEvents", "get_env"], never=["run_report"])
    assert classifier.requires_approval("findCalendarEvents") is True
    assert classifier.requires_approval("get_env") is True
    assert classifier.requires_approval("run_report") is False
    assert classifier.explain("run_report").reason == "listed in never (exempt)"


# --- the original rule ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("send_email", True),
        ("get_book", True),
        ("frobnicate_widget", False),
        ("transfer_funds", False),
        ("get_order_details", False),
        ("search_and_replace", False),
    ],
)
def test_seed_verbs_give_the_original_rule(name: str, needs: bool) -> None:
    """verbs=SEED_VERBS: any of the 13 verbs anywhere asks, nothing else does."""
    classifier = Classifier(verbs=SEED_VERBS)
    assert classifier.reads == frozenset()
    assert classifier.unknown == "allow"
    result = classifier.explain(name)
    assert result.needs_approval is needs
    assert result.rule == ("verb" if needs else "default")


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from([*SEED_VERBS, *READ_VERBS[:10], "x", "item", "_", "."]), max_size=6)
)
def test_seed_verbs_agree_with_the_plain_word_rule(pieces: list[str]) -> None:
    """With SEED_VERBS a name asks exactly when a word is one of the 13 verbs."""
    name = "_".join(pieces)
    words = split_words(name)
    assert Classifier(verbs=SEED_VERBS).requires_approval(name) == any(
        word in SEED_VERBS for word in words
    )


# --- the default rule, stated plainly -------------------------------------------------------

PIECES = st.sampled_from(
    [
        "get",
        "list",
        "search",
        "send",
        "order",
        "delete",
        "replace",
        "create",
        "and",
        "or",
        "item",
        "user",
        "frob",
        "mcp",
        "fetch",
        "status",
        "AND",
        "Then",
        "PURGE",
        "Pay",
        "secret",
        "api",
        "key",
    ]
)
SEPARATORS = st.sampled_from(["_", "__", ".", "/", "-", ""])
JOINER_WORDS = ("and", "or", "then")
CREDENTIAL_PAIRS = {("api", "key"), ("api", "keys"), ("private", "key"), ("private", "keys")}


def _unglue(words: list[str]) -> list[str]:
    """A joiner glued to an approval verb is two words: ``andpurge`` is ``and``, ``purge``."""
    verbs, reads = set(DEFAULT_VERBS), set(READ_VERBS)
    result = []
    for word in words:
        joiner = next((j for j in JOINER_WORDS if word.startswith(j)), None)
        if joiner and word not in verbs | reads and word[len(joiner) :] in verbs:
            result += [joiner, word[len(joiner) :]]
        else:
            result.append(word)
    return result


def _asks_in_reading(name: str, split: Callable[[str], list[str]]) -> bool:
    """Whether one reading of the name asks (unknown names aside), by the documented rule."""
    verbs, reads = set(DEFAULT_VERBS), set(READ_VERBS)
    parts = [_unglue(split(part)) for part in re.split(r"__|[/:.]", name)]
    words = [word for part in parts for word in part]
    if any(word in CREDENTIAL_NOUNS for word in words) or any(
        pair in CREDENTIAL_PAIRS for pair in itertools.pairwise(words)
    ):
        return True
    if not any(word in verbs for word in words):
        return False
    action = next((part for part in reversed(parts) if part), words)
    before = words[: len(words) - len(action)]
    if not any(word in verbs or word in reads for word in action):
        action, before = words, []
    lead = next(word for word in action if word in verbs or word in reads)
    if lead in verbs or any(word in verbs for word in before):
        return True
    joined = False
    for word in action[action.index(lead) + 1 :]:
        if word in JOINER_WORDS:
            joined = True
        elif word in verbs and (joined or word in DESTRUCTIVE_VERBS):
            return True
    return False


def _plain_rule(name: str) -> bool:
    """The documented default rule written as plainly as possible."""
    words = list(split_words(name))
    readings: list[Callable[[str], list[str]]] = [
        lambda text: list(split_words(text)),  # the words
        lambda text: [w.lower() for w in re.findall(r"[A-Z][a-z]+|[A-Z]+|[a-z]+", text)],  # runs
        lambda text: [w.lower() for w in re.findall(r"[A-Za-z]+", text)],  # case ignored
    ]
    if any(_asks_in_reading(name, split) for split in readings):
        return True
    known = set(DEFAULT_VERBS) | set(READ_VERBS) | INFO_NOUNS
    return not any(word in known for word in _unglue(words))  # unknown="ask"


@settings(max_examples=500)
@given(st.lists(st.tuples(PIECES, SEPARATORS), min_size=1, max_size=6))
def test_the_default_classifier_follows_the_documented_rule(
    parts: list[tuple[str, str]],
) -> None:
    """For any name built from verbs, nouns, joiners and separators, the rule holds."""
    name = "".join(word + sep for word, sep in parts)[:-1]
    assert Classifier().requires_approval(name) == _plain_rule(name)


# --- names the classifier cannot read -------------------------------------------------------


def unreadable(name: str, char: str, suffix: str = "") -> Classification:
    """A name that needs approval because ``char`` (U+XXXX and its name) is not printable ASCII."""
    return Classification(
        name=name,
        needs_approval=True,
        rule="unreadable",
        matched_word=None,
        matched_verb=None,
        reason=(
            f"the name holds {char}, which is not printable ASCII: its words cannot be read,"
            f" so it needs approval{suffix}"
        ),
    )


CYRILLIC_E = "U+0435 CYRILLIC SMALL LETTER IE"
FULLWIDTH_D = "U+FF44 FULLWIDTH LATIN SMALL LETTER D"
ZERO_WIDTH = "U+200B ZERO WIDTH SPACE"
E_ACUTE = "U+00E9 LATIN SMALL LETTER E WITH ACUTE"

HOSTILE = [
    ("d\u0435lete_file", CYRILLIC_E),  # a Cyrillic ie for the e of delete
    ("get_d\u0435lete_file", CYRILLIC_E),  # ... after a read verb, which would exempt it
    ("get_\u03bfrder", "U+03BF GREEK SMALL LETTER OMICRON"),
    ("\uff44\uff45\uff4c\uff45\uff54\uff45_file", FULLWIDTH_D),
    ("list_\uff44\uff45\uff4c\uff45\uff54\uff45", FULLWIDTH_D),
    ("del\u200bete_file", ZERO_WIDTH),
    ("search_files_del\u200bete", ZERO_WIDTH),
    ("get\u00adfile", "U+00AD SOFT HYPHEN"),
    ("get_user\u202edelete", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("créer_événement", E_ACUTE),
    ("get_météo", E_ACUTE),
    ("✉️", "U+2709 ENVELOPE"),
    ("list_files\x00rm", "U+0000 (a control character)"),
    ("get_user\nsend_email", "U+000A (a control character)"),
    ("send\tmail", "U+0009 (a control character)"),
    ("get_\U000f0000", "U+F0000 (a nameless character)"),
]


@pytest.mark.parametrize(("name", "char"), HOSTILE)
@pytest.mark.parametrize("setting", ["ask", "allow"])
def test_a_name_that_is_not_printable_ascii_needs_approval(
    name: str, char: str, setting: str
) -> None:
    """Look-alike, invisible, accented and control characters ask, whatever unknown= says."""
    classifier = Classifier(unknown=setting)  # type: ignore[arg-type]
    assert classifier.explain(name) == unreadable(name, char)
    assert classifier.classify([name]) == [unreadable(name, char)]
    own_reads = Classifier(verbs=["pay"], reads=["get"], unknown=setting)  # type: ignore[arg-type]
    assert own_reads.explain(name) == unreadable(name, char)


@pytest.mark.parametrize(("name", "char"), HOSTILE)
def test_hints_cannot_exempt_a_name_that_cannot_be_read(name: str, char: str) -> None:
    """readOnlyHint: true does not exempt an unreadable name; never= does (your lists win)."""
    classifier = Classifier()
    hint = "; the server's readOnlyHint: true cannot exempt it"
    assert classifier.explain(name, annotations={"readOnlyHint": True}) == unreadable(
        name, char, hint
    )
    assert classifier.explain(name, annotations={}) == unreadable(name, char)
    exempt = Classifier(never=[name])
    assert exempt.explain(name).needs_approval is False
    assert exempt.explain(name).rule == "never"


@pytest.mark.parametrize(("name", "words"), [
    ("d\u0435lete_file", ["d", "lete", "file"]),
    ("\uff44\uff45\uff4c\uff45\uff54\uff45_file", ["file"]),
    ("del\u200bete_file", ["del", "ete", "file"]),
])  # fmt: skip
def test_seed_verbs_keep_the_original_blind_spot(name: str, words: list[str]) -> None:
    """The original rule reads only ASCII words, exactly as before: these names ran, and run."""
    assert Classifier(verbs=SEED_VERBS).explain(name) == Classification(
        name=name,
        needs_approval=False,
        rule="default",
        matched_word=None,
        matched_verb=None,
        reason=f"no approval verb among the words {words!r}",
    )


NOT_PRINTABLE_ASCII = st.characters().filter(
    lambda char: not (char.isascii() and char.isprintable())
)


@settings(max_examples=300)
@given(st.text(max_size=20), NOT_PRINTABLE_ASCII, st.text(max_size=20))
def test_no_name_with_a_character_outside_printable_ascii_is_exempt(
    before: str, char: str, after: str
) -> None:
    """Whatever surrounds it, such a character makes the default classifiers ask."""
    name = before + char + after
    for classifier in (Classifier(), Classifier(unknown="allow")):
        result = classifier.explain(name)
        assert (result.needs_approval, result.rule) == (True, "unreadable")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("delete2", verb("delete2", "delete", "data")),
        ("v2_delete", verb("v2_delete", "delete", "data")),
        ("sendEmail2", verb("sendEmail2", "send", "messaging and publishing")),
        (
            "get_delete2",
            Classification(
                name="get_delete2",
                needs_approval=True,
                rule="verb",
                matched_word="delete",
                matched_verb="delete",
                reason=(
                    "the word 'delete' is a destructive verb: the read verb 'get' before it does "
                    "not exempt it"
                ),
            ),
        ),
        ("get_s3_object", read("get_s3_object", "the word 'get' is a read verb")),
        ("getHTTP2Status", read("getHTTP2Status", "the word 'get' is a read verb")),
        ("get2_user", unknown("get2_user", ["get2", "user"], "ask")),
        ("base64_encode", unknown("base64_encode", ["base64", "encode"], "ask")),
        ("DELETEFile", verb("DELETEFile", "delete", "data")),
        ("DELETE_FILE", verb("DELETE_FILE", "delete", "data")),
        ("dElEtE_fIlE", verb("dElEtE_fIlE", "delete", "data")),
        ("XMLHttpRequest", unknown("XMLHttpRequest", ["xml", "http", "request"], "ask")),
    ],
)
def test_digits_and_case(name: str, expected: Classification) -> None:
    """Digits after an approval verb are set aside (a read verb's are not); case splits words."""
    assert Classifier().explain(name) == expected


def test_names_without_words_follow_the_unknown_setting() -> None:
    """An empty name or one of separators only hides nothing: unknown= decides, both ways."""
    for name in ("", "_", "___", "__--..//::", " " * 10_000):
        assert Classifier().explain(name) == unknown(name, [], "ask")
        assert Classifier(unknown="allow").explain(name) == unknown(name, [], "allow")


def test_ten_thousand_character_names_are_decided_and_not_cached() -> None:
    """Long names are read like short ones; only names up to 128 characters are cached."""
    classifier = Classifier()
    long_read = "get_" + "x" * 9_996
    long_write = "x" * 9_990 + "_drop_db"
    long_unknown = "x" * 10_000
    assert classifier.explain(long_read) == read(long_read, "the word 'get' is a read verb")
    assert classifier.explain(long_write) == verb(long_write, "drop", "data")
    assert classifier.classify([long_unknown]) == [unknown(long_unknown, ["x" * 10_000], "ask")]
    assert classifier.explain("delete_" * 1_500) == verb("delete_" * 1_500, "delete", "data")
    assert classifier._cache == {}
    assert _CACHED_NAME_MAX == 128
    at_limit, past_limit = "get_" + "y" * 124, "get_" + "y" * 125
    classifier.classify([at_limit, past_limit])
    classifier.explain("z" * 129)
    assert list(classifier._cache) == [at_limit]


def test_hostile_names_cannot_grow_the_cache_past_its_bound() -> None:
    """A stream of distinct long names keeps the cache within its size and name-length limits."""
    classifier = Classifier()
    names = [f"{index:08d}_" + "q" * 200 for index in range(2_000)]
    names += [f"send_{index}" for index in range(_CACHE_MAX + 5)]
    results = classifier.classify(names)
    assert len(results) == len(names)
    assert 0 < len(classifier._cache) <= _CACHE_MAX
    assert max(len(name) for name in classifier._cache) <= _CACHED_NAME_MAX
    assert results[0] == unknown(names[0], [f"{0:08d}", "q" * 200], "ask")
    assert results[-1] == verb(names[-1], "send", "messaging and publishing, or money")


# --- the original rule, name by name -------------------------------------------------------

# The tool names that the original rule's own tests classified.
ORIGINAL_TEST_NAMES = [
    "findCalendarEvents", "retrieveEventById", "sendHTTPRequest", "HTTPServerStart",
    "XMLHttpRequest", "getURLs", "getUserIDs", "PDFsToText", "s3Upload", "S3Upload",
    "listS3Buckets", "EC2Instance", "HTTP2Server", "v2_delete_item", "base64Encode", "2fa_code",
    "OAuth2Token", "send_email", "SEND_EMAIL", "create-issue", "mail.send",
    "calendar.events.delete", "gmail__send_message", "MCP_server__write_file",
    "github/create_issue", "fs:write", "s3:PutObject", "send email now", "addressBook",
    "created_at_lookup", "sender_stats", "address_lookup", "bookmarks_list", "sends_report",
    "deleting_soon", "create_or_update_item", "update_or_create_item", "send_heartbeat",
    "Send_Heartbeat", "send_heartbeat_v2", "find_calendar_events", "purchaseTicket",
    "REFUND_ORDER", "delete_file", "delete_everything", "delete_cache", "get_stats", "book_room",
    "findX", "read_inbox", "purchase_log", "tool_0", "A", "URL", "créer_événement", "", "   ",
    "___", "__--..//::", "é",
]  # fmt: skip
BENCHMARK_NAMES = [
    row["name"]
    for row in csv.DictReader(
        (BENCHMARK_DATA / "tool_names.csv").read_text(encoding="utf-8").splitlines()
    )
]


def original_rule(name: str) -> Classification:
    """The original rule, written out: a name asks exactly when a word is one of the 13 verbs."""
    words = split_words(name)
    found = next((word for word in words if word in SEED_VERBS), None)
    if found is None:
        return Classification(
            name=name,
            needs_approval=False,
            rule="default",
            matched_word=None,
            matched_verb=None,
            reason=f"no approval verb among the words {list(words)!r}",
        )
    return verb(name, found, None)


@pytest.mark.parametrize(
    "name", [*ORIGINAL_TEST_NAMES, *(name for name, _ in HOSTILE), "delete2", "get_delete2"]
)
def test_seed_verbs_classify_the_original_test_names_as_before(name: str) -> None:
    """Classifier(verbs=SEED_VERBS) gives the original answer and reason for every name."""
    assert Classifier(verbs=SEED_VERBS).explain(name) == original_rule(name)


def test_seed_verbs_classify_every_benchmark_name_as_before() -> None:
    """Over the 594 real tool names of the benchmark too."""
    assert len(BENCHMARK_NAMES) == 594
    classifier = Classifier(verbs=SEED_VERBS)
    assert classifier.classify(BENCHMARK_NAMES) == [original_rule(n) for n in BENCHMARK_NAMES]


# --- combining ------------------------------------------------------------------------------

CLASSIFIERS = st.builds(
    Classifier,
    verbs=st.sampled_from([DEFAULT_VERBS, SEED_VERBS, ("send", "order")]),
    reads=st.sampled_from([None, (), ("get",)]),
    unknown=st.sampled_from(["ask", "allow"]),
)
NAMES = st.sampled_from(
    ["get_order_details", "send_email", "frob", "get_book", "transfer_funds", "search_and_replace"]
)


@settings(max_examples=200)
@given(CLASSIFIERS, CLASSIFIERS, NAMES)
def test_or_asks_exactly_when_either_side_asks(a: Classifier, b: Classifier, name: str) -> None:
    """(a | b) needs approval exactly when a or b does, with read verbs and unknown names too."""
    combined = a | b
    assert combined.requires_approval(name) == (
        a.requires_approval(name) or b.requires_approval(name)
    )
    assert combined == b | a
    assert hash(combined) == hash(b | a)


def test_or_explains_with_the_side_that_asks() -> None:
    """The combined explanation is the asking side's; the settings summarise both sides."""
    money = Classifier(verbs=["pay"], reads=(), unknown="allow")
    combined = money | Classifier()
    # Neither side asks: the first side explains.
    assert combined.explain("get_order_details") == Classification(
        name="get_order_details",
        needs_approval=False,
        rule="default",
        matched_word=None,
        matched_verb=None,
        reason="no approval verb among the words ['get', 'order', 'details']",
    )
    assert combined.explain("pay_invoice") == verb("pay_invoice", "pay", None)
    assert combined.explain("frob") == unknown("frob", ["frob"], "ask")
    assert combined.verbs == frozenset(DEFAULT_VERBS) | {"pay"}
    assert combined.reads == frozenset()
    assert combined.unknown == "ask"
    assert repr(combined) == (
        "Classifier(verbs=['pay'], reads=[], unknown='allow', always=[], never=[])"
        " | Classifier(verbs=DEFAULT_VERBS, reads=READ_VERBS, unknown='ask', always=[], never=[])"
    )


# --- MCP annotations with the new vocabulary ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "annotations", "expected"),
    [
        (
            "get_env",
            {"readOnlyHint": True},
            (
                False,
                "annotation",
                "the server marks it readOnlyHint: true and the word 'get' is a read verb",
            ),
        ),
        (
            "get_env",
            {},
            (
                True,
                "annotation",
                (
                    "the server does not mark it readOnlyHint: true"
                    " (MCP tools are destructive by default)"
                ),
            ),
        ),
        (
            "list_files",
            {"readOnlyHint": True, "destructiveHint": True},
            (True, "annotation", "the server marks it destructiveHint: true"),
        ),
        (
            "transfer_funds",
            {"readOnlyHint": True},
            (
                True,
                "verb",
                (
                    "the word 'transfer' is an approval verb (money);"
                    " the server's readOnlyHint: true cannot exempt it"
                ),
            ),
        ),
        (
            "kubectl_apply",
            {"destructiveHint": True},
            (True, "verb", "the word 'apply' is an approval verb (code and devops)"),
        ),
        (
            "frobnicate",
            {"readOnlyHint": True},
            (
                False,
                "annotation",
                "the server marks it readOnlyHint: true and the name holds no known verb",
            ),
        ),
        (
            "get_order_details",
            {"readOnlyHint": True},
            (
                False,
                "annotation",
                (
                    "the server marks it readOnlyHint: true and the read verb 'get' leads the "
                    "action: 'order' is read as a thing, not an action"
                ),
            ),
        ),
    ],
)
def test_mcp_hints_with_the_new_vocabulary(
    name: str, annotations: dict[str, object], expected: tuple[bool, str, str]
) -> None:
    """Hints never exempt an approval verb; reads and unknown names still need readOnlyHint."""
    result = Classifier().explain(name, annotations=annotations)
    assert (result.needs_approval, result.rule, result.reason) == expected


# --- the docs -------------------------------------------------------------------------------


def test_the_docs_table_lists_every_group_as_the_code_does() -> None:
    """The classifier page's vocabulary table is the code's, row for row."""
    text = (DOCS / "classifier.md").read_text(encoding="utf-8")
    table = text.split("| domain | why a person decides | approval verbs |\n| --- | --- | --- |\n")[
        1
    ]
    table = table.split("\n\n")[0]
    rows = re.findall(r"^\| ([a-z ]+) \| ([^|]+) \| ([^|]+) \|$", table, flags=re.MULTILINE)
    documented = [(domain, why.strip(), verbs.strip()) for domain, why, verbs in rows]
    assert documented == [
        (group.domain, group.why, ", ".join(f"`{word}`" for word in group.verbs))
        for group in VERB_GROUPS
    ]
    assert ", ".join(f"`{word}`" for word in READ_VERBS) in text


def test_the_docstring_examples_hold() -> None:
    """The examples in the classifier's docstrings print what they show."""
    counts: dict[str, tuple[int, int]] = {}
    for module in (toolguard._tools.classify, toolguard._tools.words, toolguard._tools.verbs):
        results = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        counts[module.__name__] = (results.failed, results.attempted)
    assert counts == {
        "toolguard._tools.classify": (0, 5),
        "toolguard._tools.words": (0, 2),
        "toolguard._tools.verbs": (0, 3),
    }
