"""The default classifier: names that try to hide a write, or credentials, behind a read verb."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from tests.tools.test_classify import original_rule
from toolguard._tools.classify import SEED_VERBS, Classification, Classifier, Rule, split_words
from toolguard._tools.verbs import CREDENTIALS, NounGroup


def asks(name: str, word: str | None, reason: str, rule: Rule = "verb") -> Classification:
    """A name that needs approval, ``word`` being the approval verb that matched (if any)."""
    return Classification(
        name=name,
        needs_approval=True,
        rule=rule,
        matched_word=word,
        matched_verb=word,
        reason=reason,
    )


def reads(name: str, reason: str) -> Classification:
    """A name that a read verb, or a word that names information, lets run."""
    return Classification(
        name=name,
        needs_approval=False,
        rule="read",
        matched_word=None,
        matched_verb=None,
        reason=reason,
    )


def before(verb: str, domain: str, read: str) -> str:
    """The reason of an approval verb that stands before the read verb."""
    return (
        f"the word '{verb}' is an approval verb ({domain}): "
        f"the read verb '{read}' after it does not exempt it"
    )


def destructive(verb: str, read: str) -> str:
    """The reason of a destructive verb after the read verb."""
    return (
        f"the word '{verb}' is a destructive verb: "
        f"the read verb '{read}' before it does not exempt it"
    )


def joined(verb: str, domain: str, joiner: str, read: str) -> str:
    """The reason of an approval verb joined to the read verb."""
    return (
        f"the word '{verb}' is an approval verb ({domain}), joined by '{joiner}' "
        f"after the read verb '{read}'"
    )


def credentials(words: str) -> str:
    """The reason of a name whose word (or two words) names credentials."""
    what = f"the words '{words}' name" if " " in words else f"the word '{words}' names"
    return f"{what} credentials: reading them hands secrets to the model, so it needs approval"


# --- an approval verb before the read verb, across namespaces -------------------------------

BEFORE_THE_READ_VERB = [
    asks("users.delete.view", "delete", before("delete", "data", "view")),
    asks("delete_user.get", "delete", before("delete", "data", "get")),
    asks("transfer_funds:get", "transfer", before("transfer", "money", "get")),
    asks("drop_table__list", "drop", before("drop", "data", "list")),
    asks("users::delete.get", "delete", before("delete", "data", "get")),
    asks("users/delete-user/get", "delete", before("delete", "data", "get")),
    asks("mcp__pay__invoice.list", "pay", before("pay", "money", "list")),
    asks("deploy__list_apps", "deploy", before("deploy", "code and devops", "list")),
    asks("Send_Email.GetStatus", "send", before("send", "messaging and publishing", "get")),
    # A server named after an approval verb asks too: never=[...] exempts such a tool.
    asks("mail__list_messages", "mail", before("mail", "messaging and publishing", "list")),
    # An approval verb that leads the whole name decides as it always did.
    asks("DELETE_user_GET", "delete", "the word 'delete' is an approval verb (data)"),
    asks("delete.user", "delete", "the word 'delete' is an approval verb (data)"),
    asks(
        "fetch__send_email",
        "send",
        "the word 'send' is an approval verb (messaging and publishing)",
    ),
]


@pytest.mark.parametrize("expected", BEFORE_THE_READ_VERB, ids=lambda c: c.name)
def test_an_approval_verb_before_the_read_verb_asks(expected: Classification) -> None:
    """A read verb exempts a name only when no approval verb stands before it, in any segment."""
    assert Classifier().explain(expected.name) == expected


# --- joiners in any case, and case that hides a word ----------------------------------------

JOINED = [
    asks("listANDpurge", "purge", destructive("purge", "list")),
    asks("readTHENpay", "pay", joined("pay", "money", "then", "read")),
    asks("getOrDelete", "delete", destructive("delete", "get")),
    asks("list_AND_purge", "purge", destructive("purge", "list")),
    asks("readTHENPAY", "pay", joined("pay", "money", "then", "read")),
    asks("readThenpay", "pay", joined("pay", "money", "then", "read")),
    asks("list_andpurge", "purge", destructive("purge", "list")),
    asks("get_users_thenpay2", "pay", joined("pay", "money", "then", "get")),
    asks("getUserORcreate", "create", joined("create", "data", "or", "get")),
    asks("LIST_ANDPAY", "pay", joined("pay", "money", "and", "list")),
    asks("list.ANDpay", "pay", "the word 'pay' is an approval verb (money)"),
    asks("get_dElEtE", "delete", destructive("delete", "get")),
    asks("dElEtE_fIlE", "delete", "the word 'delete' is an approval verb (data)"),
    asks("listUSERSdelete", "delete", destructive("delete", "list")),
    asks("getURLdelete", "delete", destructive("delete", "get")),
]


@pytest.mark.parametrize("expected", JOINED, ids=lambda c: c.name)
def test_joiners_in_any_case_and_case_tricks_ask(expected: Classification) -> None:
    """A joiner is found in any case, and glued to its verb; case cannot hide a verb."""
    assert Classifier().explain(expected.name) == expected


def test_how_the_glued_names_split() -> None:
    """split_words() itself is unchanged: the classifier reads such names a second way too."""
    assert split_words("listANDpurge") == ("list", "an", "dpurge")
    assert split_words("readTHENpay") == ("read", "the", "npay")
    assert split_words("get_dElEtE") == ("get", "d", "el", "et", "e")


@pytest.mark.parametrize("setting", ["ask", "allow"])
def test_a_name_with_no_known_word_in_any_reading_stays_unknown(
    setting: Literal["ask", "allow"],
) -> None:
    """A second reading that only finds unknown words, such as HTTPG in HTTPGet, changes nothing."""
    classifier = Classifier(unknown=setting)
    assert classifier.explain("HTTPGet") == reads("HTTPGet", "the word 'get' is a read verb")
    assert classifier.explain("frobANDwidget") == Classification(
        name="frobANDwidget",
        needs_approval=setting == "ask",
        rule="unknown",
        matched_word=None,
        matched_verb=None,
        reason=f"no known verb in ['frob', 'an', 'dwidget']: unknown=\"{setting}\"",
    )
    # With unknown="allow", the second reading still finds the verb that the first hides.
    assert classifier.explain("frobANDdelete").reason == (
        "the word 'delete' is an approval verb (data)"
    )


# --- credentials ----------------------------------------------------------------------------

CREDENTIALS_READ = [
    asks("get_credentials", None, credentials("credentials"), "credentials"),
    asks("read_secret", None, credentials("secret"), "credentials"),
    asks("list_api_keys", None, credentials("api keys"), "credentials"),
    asks("get-api-key", None, credentials("api key"), "credentials"),
    asks("listSecrets", None, credentials("secrets"), "credentials"),
    asks("getApiKey", None, credentials("api key"), "credentials"),
    asks("getAPIKey", None, credentials("api key"), "credentials"),
    asks("getAPIkey", None, credentials("api key"), "credentials"),
    asks("GET_APIKEY", None, credentials("apikey"), "credentials"),
    asks("list_apikeys", None, credentials("apikeys"), "credentials"),
    asks("get_private_key", None, credentials("private key"), "credentials"),
    asks("listPrivateKeys", None, credentials("private keys"), "credentials"),
    asks("get_privatekey", None, credentials("privatekey"), "credentials"),
    asks("show_password", None, credentials("password"), "credentials"),
    asks("get_PassWord", None, credentials("password"), "credentials"),
    asks("list_passwords", None, credentials("passwords"), "credentials"),
    asks("get_credential", None, credentials("credential"), "credentials"),
    asks("get_secret2", None, credentials("secret"), "credentials"),
    asks("mcp__vault__read_secret", None, credentials("secret"), "credentials"),
    asks("secret_status", None, credentials("secret"), "credentials"),
    asks("vault_secrets", None, credentials("secrets"), "credentials"),
    asks("get_secret_scanning_alert", None, credentials("secret"), "credentials"),
    # An approval verb decides first, with its own reason.
    asks("create_api_key", "create", "the word 'create' is an approval verb (data)"),
    asks("rotate_secret", "rotate", "the word 'rotate' is an approval verb (code and devops)"),
]


@pytest.mark.parametrize("expected", CREDENTIALS_READ, ids=lambda c: c.name)
def test_reading_credentials_asks(expected: Classification) -> None:
    """A name that names credentials needs approval, even with a read verb, with its own reason."""
    assert Classifier().explain(expected.name) == expected


def test_the_credentials_group() -> None:
    """One named group of nouns and word pairs, nothing more."""
    assert isinstance(CREDENTIALS, NounGroup)
    assert CREDENTIALS.name == "credentials"
    assert CREDENTIALS.why == "reading them hands secrets to the model"
    assert CREDENTIALS.nouns == (
        "secret",
        "secrets",
        "credential",
        "credentials",
        "password",
        "passwords",
        "apikey",
        "apikeys",
        "privatekey",
        "privatekeys",
    )
    assert CREDENTIALS.pairs == (
        ("api", "key"),
        ("api", "keys"),
        ("private", "key"),
        ("private", "keys"),
    )


def test_the_classifier_page_lists_the_credentials_words_as_the_code_does() -> None:
    """docs/classifier.md names every noun and word pair of the group, in order."""
    page = Path(__file__).resolve().parents[2] / "docs" / "classifier.md"
    prose = " ".join(page.read_text(encoding="utf-8").split())
    nouns = ", ".join(f"`{noun}`" for noun in CREDENTIALS.nouns)
    pairs = ", ".join(f"`{first} {second}`" for first, second in CREDENTIALS.pairs)
    assert f"{nouns}, and the word pairs {pairs} in any naming style" in prose


def test_credentials_ask_whatever_unknown_says_and_never_exempts() -> None:
    """unknown="allow" does not let them run; never=[...] does; reads=() still asks."""
    assert Classifier(unknown="allow").explain("vault_secrets") == asks(
        "vault_secrets", None, credentials("secrets"), "credentials"
    )
    assert Classifier(never=["get_secret"]).explain("get_secret") == Classification(
        name="get_secret",
        needs_approval=False,
        rule="never",
        matched_word=None,
        matched_verb=None,
        reason="listed in never (exempt)",
    )
    assert Classifier(reads=()).explain("get_secret") == asks(
        "get_secret", None, credentials("secret"), "credentials"
    )
    seed = Classifier(verbs=SEED_VERBS)
    assert seed.explain("get_secret") == Classification(
        name="get_secret",
        needs_approval=False,
        rule="default",
        matched_word=None,
        matched_verb=None,
        reason="no approval verb among the words ['get', 'secret']",
    )
    combined = seed | Classifier()
    assert combined.explain("get_secret") == asks(
        "get_secret", None, credentials("secret"), "credentials"
    )


@pytest.mark.parametrize(
    ("name", "annotations", "expected"),
    [
        (
            "get_secret",
            {"readOnlyHint": True},
            asks(
                "get_secret",
                None,
                credentials("secret") + "; the server's readOnlyHint: true cannot exempt it",
                "credentials",
            ),
        ),
        (
            "get_secret",
            {"readOnlyHint": True, "destructiveHint": True},
            asks(
                "get_secret",
                None,
                credentials("secret") + "; the server's readOnlyHint: true cannot exempt it",
                "credentials",
            ),
        ),
        ("get_secret", {}, asks("get_secret", None, credentials("secret"), "credentials")),
        (
            "users.delete.view",
            {"readOnlyHint": True},
            asks(
                "users.delete.view",
                "delete",
                before("delete", "data", "view")
                + "; the server's readOnlyHint: true cannot exempt it",
            ),
        ),
        (
            "listANDpurge",
            {"readOnlyHint": True},
            asks(
                "listANDpurge",
                "purge",
                destructive("purge", "list") + "; the server's readOnlyHint: true cannot exempt it",
            ),
        ),
    ],
)
def test_mcp_hints_cannot_exempt_these_names(
    name: str, annotations: dict[str, object], expected: Classification
) -> None:
    """The name decides: a server's readOnlyHint does not exempt credentials or a hidden write."""
    assert Classifier().explain(name, annotations=annotations) == expected


# --- names that keep reading ----------------------------------------------------------------

STILL_READ = [
    reads("mcp__github__list_issues", "the word 'list' is a read verb"),
    reads(
        "get_order_details",
        "the read verb 'get' leads the action: 'order' is read as a thing, not an action",
    ),
    reads("list_workflow_runs", "the word 'list' is a read verb"),
    reads("git_status", "the word 'status' names information and the name holds no verb"),
    reads("get_current_time", "the word 'get' is a read verb"),
    reads("calendar.events.list", "the word 'list' is a read verb"),
    reads("gmail.users.messages.list", "the word 'list' is a read verb"),
    reads("github__get_pull_request", "the word 'get' is a read verb"),
    # Plain keys and tokens are not credentials: cache keys, keyboard keys, counted tokens.
    reads("search_keys", "the word 'search' is a read verb"),
    reads("list_cache_keys", "the word 'list' is a read verb"),
    reads("count_tokens", "the word 'count' is a read verb"),
    reads("get_page_token", "the word 'get' is a read verb"),
    reads("list_ssh_keys", "the word 'list' is a read verb"),
    # Words that only start like a joiner are not cut: order, android, theme.
    reads(
        "get_order_status",
        "the read verb 'get' leads the action: 'order' is read as a thing, not an action",
    ),
    reads("list_android_apps", "the word 'list' is a read verb"),
    reads("get_themes", "the word 'get' is a read verb"),
    # An acronym before a capitalised word, or a camelCase read, reads as before.
    reads("getHTTPSettings", "the word 'get' is a read verb"),
    reads(
        "getOrderDetails",
        "the read verb 'get' leads the action: 'order' is read as a thing, not an action",
    ),
    reads("HTTPGet", "the word 'get' is a read verb"),
]


@pytest.mark.parametrize("expected", STILL_READ, ids=lambda c: c.name)
def test_reads_still_run(expected: Classification) -> None:
    """Server and namespace words that are not approval verbs do not count; reads run."""
    assert Classifier().explain(expected.name) == expected


HIDDEN_NAMES = [c.name for c in (*BEFORE_THE_READ_VERB, *JOINED, *CREDENTIALS_READ, *STILL_READ)]


@pytest.mark.parametrize("name", HIDDEN_NAMES)
def test_seed_verbs_keep_the_original_rule_for_these_names(name: str) -> None:
    """Classifier(verbs=SEED_VERBS) answers every name above as the original rule did."""
    assert Classifier(verbs=SEED_VERBS).explain(name) == original_rule(name)
