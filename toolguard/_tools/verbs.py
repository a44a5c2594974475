"""The classifier's vocabulary: approval verbs by domain, read verbs, and words that decide.

One readable place: each domain of :data:`VERB_GROUPS` says in one line why
its actions need a person. :class:`toolguard.Classifier` reads these lists;
nothing here decides whether a tool needs approval. :func:`domain_of` only
names the domain a reason shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "CREDENTIALS",
    "DEFAULT_VERBS",
    "DESTRUCTIVE_VERBS",
    "DOMAIN_NOUNS",
    "INFO_NOUNS",
    "JOINERS",
    "READ_VERBS",
    "SEED_VERBS",
    "SHARED_DOMAINS",
    "VERB_GROUPS",
    "NounGroup",
    "VerbGroup",
    "domain_of",
]


class VerbGroup(NamedTuple):
    """Approval verbs of one domain, and why calls that use them need a person."""

    domain: str
    """The domain's name, shown in reasons: ``the word 'pay' is an approval verb (money)``."""
    why: str
    """One line on what these actions do to the world."""
    verbs: tuple[str, ...]
    """Lowercase single words."""


class NounGroup(NamedTuple):
    """Nouns that make a tool need approval whatever its verb, and why."""

    name: str
    """The group's name, shown in reasons: ``the word 'secret' names credentials``."""
    why: str
    """One line on what a call that only reads them does."""
    nouns: tuple[str, ...]
    """Lowercase single words."""
    pairs: tuple[tuple[str, str], ...]
    """Two words that name one thing together, in this order: ``api`` and ``key``."""


VERB_GROUPS: tuple[VerbGroup, ...] = (
    VerbGroup(
        "money",
        "moves, spends or promises money",
        (
            "pay", "transfer", "charge", "refund", "withdraw", "deposit", "purchase", "buy",
            "sell", "invoice", "bill", "payout", "donate", "tip", "fund", "spend", "capture",
            "wire", "remit", "settle", "void",
        ),
    ),
    VerbGroup(
        "messaging and publishing",
        "reaches other people or the public, and cannot be unsent",
        (
            "send", "post", "publish", "unpublish", "reply", "forward", "email", "mail",
            "notify", "broadcast", "tweet", "retweet", "comment", "announce", "react", "dm",
            "sms", "respond", "submit", "upvote", "downvote", "like", "unlike", "star",
            "unstar", "follow", "unfollow", "pin", "unpin", "call",
        ),
    ),
    VerbGroup(
        "code and devops",
        "runs code or changes running systems, repositories and releases",
        (
            "run", "rerun", "execute", "exec", "eval", "evaluate", "invoke", "trigger",
            "dispatch", "retry", "deploy", "undeploy", "release", "rollout", "rollback",
            "revert", "merge", "push", "commit", "rebase", "fork", "clone", "checkout",
            "stage", "unstage", "apply", "scale", "restart", "reboot", "start", "stop",
            "pause", "resume", "kill", "terminate", "shutdown", "launch", "spawn",
            "install", "uninstall", "upgrade", "downgrade", "patch", "build", "provision",
            "deprovision", "migrate", "rotate", "drain", "cordon", "uncordon", "annotate",
            "close", "reopen", "lock", "unlock", "init", "initialize", "destroy",
        ),
    ),
    VerbGroup(
        "data",
        "creates, changes or erases stored data",
        (
            "create", "update", "delete", "edit", "add", "remove", "insert", "upsert",
            "drop", "truncate", "alter", "import", "save", "store", "persist", "set", "put",
            "modify", "change", "replace", "overwrite", "purge", "wipe", "erase", "clear",
            "reset", "restore", "archive", "unarchive", "ingest", "mutate", "record",
            "index", "reindex", "mark", "flag", "label", "tag", "untag", "link", "unlink",
            "attach", "detach", "duplicate", "assign", "unassign",
        ),
    ),
    VerbGroup(
        "accounts and permissions",
        "changes who may do what, or how an account is set up",
        (
            "grant", "revoke", "share", "unshare", "invite", "ban", "unban", "block",
            "unblock", "kick", "suspend", "unsuspend", "enable", "disable", "activate",
            "deactivate", "authorize", "deauthorize", "approve", "reject", "deny",
            "allow", "permit", "register", "signup", "join", "leave", "promote", "demote",
            "mute", "unmute", "impersonate", "elevate", "configure",
        ),
    ),
    VerbGroup(
        "commerce",
        "orders, books and subscribes on someone's behalf",
        (
            "order", "reorder", "place", "book", "reserve", "return", "exchange", "ship",
            "fulfill", "redeem", "claim", "subscribe", "unsubscribe", "renew", "rent",
            "hire", "bid", "finalize",
        ),
    ),
    VerbGroup(
        "files",
        "writes, moves or removes files and folders",
        (
            "write", "move", "copy", "rename", "upload", "append", "prepend", "touch",
            "mkdir", "rmdir", "rm", "mv", "cp", "chmod", "chown", "mount", "unmount",
            "zip", "unzip", "compress", "decompress", "sync",
        ),
    ),
    VerbGroup(
        "pages and apps",
        "acts in a browser or an app as the user: clicks, types, submits",
        (
            "click", "tap", "type", "fill", "press", "drag", "select", "toggle", "dismiss",
            "handle", "manage", "transition", "cleanup",
        ),
    ),
    VerbGroup(
        "scheduling",
        "commits someone's time or changes what is planned",
        (
            "schedule", "reschedule", "postpone", "cancel", "complete", "accept",
            "decline", "rsvp", "remind", "snooze",
        ),
    ),
)  # fmt: skip
"""The default approval verbs, grouped by domain, each group with why it needs a person."""

SHARED_DOMAINS: dict[str, tuple[str, ...]] = {
    "send": ("messaging and publishing", "money"),  # send_email, send_money
    "transfer": ("money", "files", "accounts and permissions"),  # funds, a file, ownership
    "call": ("messaging and publishing", "code and devops"),  # call_contact, call_function
    "submit": ("messaging and publishing", "pages and apps"),  # submit_review, submit_form
    "cancel": ("scheduling", "commerce", "money"),  # a meeting, an order, a payment
    "book": ("commerce", "scheduling"),  # book_flight, book_meeting
    "close": ("code and devops", "accounts and permissions"),  # close_issue, close_account
    "release": ("code and devops", "money"),  # release_version, release_funds
}
"""Approval verbs that act in more than one domain, with all of their domains (their group's
first). A reason names the one a word of the name points to (:data:`DOMAIN_NOUNS`), else all."""

DOMAIN_NOUNS: dict[str, frozenset[str]] = {
    "money": frozenset({
        "money", "payment", "payments", "funds", "fund", "cash", "transaction",
        "transactions", "refund", "invoice", "invoices", "balance", "deposit", "crypto",
        "bitcoin", "amount", "salary", "payout", "escrow", "wire",
    }),
    "messaging and publishing": frozenset({
        "email", "emails", "mail", "message", "messages", "sms", "text", "notification",
        "notifications", "dm", "chat", "post", "posts", "tweet", "comment", "reply",
        "newsletter", "letter", "alert", "alerts", "contact", "review", "feedback", "report",
        "reports", "note", "notes", "memo",
    }),
    "code and devops": frozenset({
        "function", "functions", "tool", "tools", "api", "method", "endpoint", "webhook",
        "rpc", "lambda", "job", "jobs", "script", "workflow", "pipeline", "issue", "issues",
        "pr", "branch", "version", "build", "deployment", "container", "pod", "service",
        "incident",
    }),
    "files": frozenset({
        "file", "files", "folder", "folders", "directory", "document", "documents", "doc",
        "attachment", "attachments",
    }),
    "accounts and permissions": frozenset({
        "account", "accounts", "ownership", "owner", "user", "users", "role", "roles",
        "permission", "permissions", "access", "membership", "license",
    }),
    "commerce": frozenset({
        "order", "orders", "subscription", "subscriptions", "purchase", "cart", "booking",
        "reservation", "ticket", "tickets", "flight", "hotel", "shipment", "car",
    }),
    "scheduling": frozenset({
        "meeting", "meetings", "event", "events", "appointment", "appointments", "slot",
        "calendar", "reminder", "call", "interview",
    }),
    "pages and apps": frozenset({"form", "forms", "page", "button", "dialog"}),
}  # fmt: skip
"""Words that name what a domain acts on: they pick the domain of a verb of :data:`SHARED_DOMAINS`
(``send_money``: money; ``send_email``: messaging and publishing)."""

DEFAULT_VERBS: tuple[str, ...] = tuple(verb for group in VERB_GROUPS for verb in group.verbs)
"""Verbs that make a tool need approval: every verb of :data:`VERB_GROUPS`, in order."""

SEED_VERBS: tuple[str, ...] = (
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
"""A plain list of 13 approval verbs.

``Classifier(verbs=SEED_VERBS)`` is the plain 13-verb rule: a name needs
approval when one of its words is one of these verbs, and any other name runs
(no read verbs, ``unknown="allow"``).
"""

READ_VERBS: tuple[str, ...] = (
    "get", "list", "search", "find", "read", "fetch", "query", "lookup", "check", "count",
    "describe", "show", "view", "retrieve", "calculate", "compute", "browse", "inspect",
    "preview", "explain", "summarize", "summarise", "analyze", "analyse", "compare",
    "estimate", "predict", "recommend", "suggest", "validate", "verify", "watch", "wait",
    "ping", "echo", "whoami", "diff", "poll", "scan", "detect", "identify", "parse",
    "decode", "peek", "head", "tail", "cat", "ls", "grep", "stat", "tree", "measure",
    "monitor", "trace", "explore", "locate", "discover", "enumerate", "filter", "sort",
    "rank", "score", "is", "has", "exists", "navigate", "hover", "screenshot", "download",
    "geocode", "think",
)  # fmt: skip
"""Verbs that only look: a name led by one of them reads, whatever nouns follow."""

DESTRUCTIVE_VERBS: frozenset[str] = frozenset(
    {
        "delete", "remove", "destroy", "drop", "truncate", "purge", "wipe", "erase", "kill",
        "terminate", "overwrite", "replace", "exec", "execute", "revoke", "uninstall", "rm",
        "rmdir",
    }
)  # fmt: skip
"""Approval verbs that need approval even after a leading read verb (``find_and_delete``)."""

INFO_NOUNS: frozenset[str] = frozenset(
    {
        "status", "log", "logs", "info", "details", "schema", "history", "stats",
        "statistics", "metrics", "overview", "summary", "health", "version", "usage",
        "directions",
    }
)  # fmt: skip
"""Words that name information: a name with no verb and one of these reads (``git_status``)."""

JOINERS: frozenset[str] = frozenset({"and", "or", "then"})
"""Words that join two actions in one name: an approval verb after one still asks."""

CREDENTIALS: NounGroup = NounGroup(
    "credentials",
    "reading them hands secrets to the model",
    (
        "secret", "secrets", "credential", "credentials", "password", "passwords", "apikey",
        "apikeys", "privatekey", "privatekeys",
    ),
    (("api", "key"), ("api", "keys"), ("private", "key"), ("private", "keys")),
)  # fmt: skip
"""Words that name credentials: a name with one of them needs approval even when it only reads.

Plain ``key``, ``keys`` and ``token`` are not among them: they name cache and
storage keys (``search_keys``), keyboard keys, page tokens and the tokens a
model counts (``count_tokens``) at least as often as secrets.
"""


_DOMAIN: dict[str, tuple[str, ...]] = {
    verb: (group.domain,) for group in VERB_GROUPS for verb in group.verbs
} | SHARED_DOMAINS


def domain_of(verb: str, words: Sequence[str]) -> str | None:
    """The domain a reason names for ``verb`` in a name of ``words``; ``None`` for a verb of no
    domain (one given to a :class:`toolguard.Classifier` of your own).

    A verb of one domain names it. A verb of several (:data:`SHARED_DOMAINS`) names the one a
    word of the name points to (:data:`DOMAIN_NOUNS`), else all of them:

    >>> domain_of("send", ["send", "money"]), domain_of("send", ["send", "email"])
    ('money', 'messaging and publishing')
    >>> domain_of("send", ["send", "it"])
    'messaging and publishing, or money'
    >>> domain_of("pay", ["pay", "invoice"]), domain_of("frobnicate", ["frobnicate"])
    ('money', None)
    """
    domains = _DOMAIN.get(verb)
    if domains is None:
        return None
    if len(domains) == 1:
        return domains[0]
    named = [domain for domain in domains if not DOMAIN_NOUNS[domain].isdisjoint(words)]
    if len(named) == 1:
        return named[0]
    return ", ".join(domains[:-1]) + ", or " + domains[-1]
