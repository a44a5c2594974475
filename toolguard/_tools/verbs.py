"""The classifier's vocabulary: approval verbs by domain, read verbs, and words that decide.

One readable place: each domain of :data:`VERB_GROUPS` says in one line why
its actions need a person. :class:`toolguard.Classifier` reads these lists;
nothing here decides anything.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "CREDENTIALS",
    "DEFAULT_VERBS",
    "DESTRUCTIVE_VERBS",
    "INFO_NOUNS",
    "JOINERS",
    "READ_VERBS",
    "SEED_VERBS",
    "VERB_GROUPS",
    "NounGroup",
    "VerbGroup",
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
"""The original design's 13 approval verbs.

``Classifier(verbs=SEED_VERBS)`` is the original rule exactly: a name needs
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
