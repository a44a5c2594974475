"""Message catalogs: English (default) and Indonesian.

The Indonesian texts are toolguard's original wording, kept word for word;
the English ones say the same thing. Select a language with
:func:`set_language` or the ``TOOLGUARD_LANG`` environment variable (read
when no language was set in code). Messages meant for the *model*
(``REJECTED_BY_USER_MESSAGE``, ``NO_DECISION``) are constants of the wire
format and do not change with the language.
"""

from __future__ import annotations

import os
from typing import Final, Literal

Language = Literal["en", "id"]
LANGUAGES: Final[tuple[Language, ...]] = ("en", "id")

_CATALOGS: Final[dict[str, dict[str, str]]] = {
    "en": {
        "action_description": "Tool `{name}` is awaiting approval",
        "no_pending_review": "There is no action awaiting approval in this conversation",
        "review_pending": "Some actions are still awaiting approval. Send their decisions first.",
        "decision_count": "Expected {expected} decisions (one per action), got {received}",
        "decision_count_one": "Expected {expected} decision (one per action), got {received}",
        "decision_type": "Unknown decision type {type}. Choices: ['approve', 'edit', 'reject']",
        "edit_needs_action": "An 'edit' decision must include 'edited_action'",
        "edited_action_shape": "'edited_action' must contain 'name' (text) and 'args' (object)",
        "edited_args_unusable": (
            "'edited_action' 'args' cannot be stored: nested more than {limit} levels deep,"
            " or holding a value that cannot be converted to JSON"
        ),
        "decisions_not_list": "'decisions' must be a list of decision objects, got {kind}",
        "reject_message_type": "The 'message' of a 'reject' decision must be text, got {kind}",
        "edit_other_tool": (
            "An edit cannot switch `{name}` to another tool (`{other}`) in {framework}."
            " Edit the arguments of `{name}`, or reject the call."
        ),
        "decision_not_allowed": (
            "Decision {type} is not allowed for action {name}. Allowed: {allowed}"
        ),
        "respond_needs_message": "A 'respond' decision must include 'message' (text), got {kind}",
        "unknown_thread": (
            "Unknown thread_id {thread_id!r}: start a conversation with send_message"
        ),
        "stale_review": (
            "The review {review_id} is no longer current in this conversation."
            " Load the thread and decide on its current review."
        ),
        "review_cancelled": (
            "The review {review_id} was cancelled: its actions were not executed and can no"
            " longer be approved."
        ),
        "review_expired": (
            "The review {review_id} expired before a decision arrived. Its actions were not"
            " executed; send a new message to continue."
        ),
        "approval_expired": (
            "The approval of `{name}` came after its deadline ({ttl} s after the call asked"
            " for it): it was not executed. Call the tool again to ask for a new approval."
        ),
        "reviewer_refused": "Reviewer {reviewer!r} may not review conversation {thread_id!r}",
        "access_denied": (
            "Access denied: {actor!r} may not {operation!r} in conversation {thread_id!r}"
        ),
        "thread_busy": (
            "Decisions are being applied in conversation {thread_id!r}. Try again shortly;"
            " if the process applying them stopped, run recover() for this thread."
        ),
        "already_resumed": (
            "The paused turn {review_id} was already resumed or closed; its tools are not"
            " run again."
        ),
        "unknown_review": (
            "The review {review_id} is unknown in this conversation: it was never one of its"
            " reviews. Load the thread and decide on its current review."
        ),
        "unknown_thread_http": (
            "Unknown thread_id {thread_id!r}: start a conversation with {route}"
        ),
        "thread_busy_http": (
            "Decisions are being applied in conversation {thread_id!r}. Try again shortly;"
            " if this goes on, the server's operator must recover this thread."
        ),
        "quorum_anonymous": (
            "Action {name!r} needs approvals from {required} distinct, named reviewers:"
            " an anonymous reviewer cannot approve or edit it. Nothing was changed."
        ),
        "quorum_same_reviewer": (
            "Reviewer {reviewer!r} already approved action {name!r} ({given} of {required}"
            " approvals); another reviewer must approve it. Nothing was changed."
        ),
        "grant_shape": (
            "'grant' must be an object like {{'scope': 'thread', 'match': 'tool'}}, got {kind}"
        ),
        "grant_keys": "Unknown keys in 'grant': {keys}. Allowed: {allowed}",
        "grant_scope": "The 'scope' of a grant must be 'thread', got {value}",
        "grant_scope_server": (
            "The 'scope' of a grant must be 'thread', got 'server': scope 'server' is the MCP"
            " gateway's (toolguard mcp-proxy), where it covers later calls through the gateway"
        ),
        "grant_scope_gateway": (
            "The 'scope' of a grant must be 'server' in the MCP gateway, got {value}: each call"
            " through the gateway is its own conversation, so a 'thread' grant would cover nothing"
        ),
        "unknown_server_grant": "Unknown grant {grant_id!r}: the MCP gateway has no such grant",
        "server_grant_ended": "The grant {grant_id!r} is no longer active ({status})",
        "grant_match": "The 'match' of a grant must be 'tool' or 'args', got {value}",
        "grant_uses": "The 'uses' of a grant must be a whole number from 1 to {limit}, got {value}",
        "grant_ttl": (
            "The 'ttl' of a grant must be a number of seconds above 0 and at most {limit},"
            " got {value}"
        ),
        "grant_not_approve": "Only an 'approve' decision can carry a 'grant', not {type}",
        "grant_quorum": (
            "No grant for action {name}: the tool needs {approvals} approvals, and a grant"
            " would let later calls skip them"
        ),
        "grant_ask_rule": (
            "No grant for action {name}: the rule {rule!r} asks for a review of every such call"
        ),
        "grant_redacted": (
            "No grant with match 'args' for action {name}: its arguments {params} are secret"
            " and shown redacted; use match 'tool'"
        ),
        "unknown_grant": "Unknown grant {grant_id!r} in conversation {thread_id!r}",
        "grant_ended": (
            "The grant {grant_id!r} in conversation {thread_id!r} is no longer active ({status})"
        ),
    },
    "id": {
        "action_description": "Tool `{name}` menunggu persetujuan",
        "no_pending_review": "Tidak ada aksi yang menunggu persetujuan di percakapan ini",
        "review_pending": "Masih ada aksi yang menunggu persetujuan. Kirim keputusannya dulu.",
        "decision_count": "Butuh {expected} keputusan (satu per aksi), diterima {received}",
        "decision_count_one": "Butuh {expected} keputusan (satu per aksi), diterima {received}",
        "decision_type": (
            "Jenis keputusan {type} tidak dikenal. Pilihan: ['approve', 'edit', 'reject']"
        ),
        "edit_needs_action": "Keputusan 'edit' wajib menyertakan 'edited_action'",
        "edited_action_shape": "'edited_action' harus berisi 'name' (teks) dan 'args' (objek)",
        "edited_args_unusable": (
            "'args' pada 'edited_action' tidak dapat disimpan: bersarang lebih dari {limit}"
            " tingkat, atau berisi nilai yang tidak dapat diubah menjadi JSON"
        ),
        "decisions_not_list": "'decisions' harus berupa daftar objek keputusan, diterima {kind}",
        "reject_message_type": (
            "'message' pada keputusan 'reject' harus berupa teks, diterima {kind}"
        ),
        "edit_other_tool": (
            "Edit tidak bisa mengganti `{name}` dengan tool lain (`{other}`) di {framework}."
            " Ubah argumen `{name}`, atau tolak panggilannya."
        ),
        "decision_not_allowed": (
            "Keputusan {type} tidak diizinkan untuk aksi {name}. Yang diizinkan: {allowed}"
        ),
        "respond_needs_message": (
            "Keputusan 'respond' wajib menyertakan 'message' (teks), diterima {kind}"
        ),
        "unknown_thread": (
            "thread_id {thread_id!r} tidak dikenal: mulai percakapan dengan send_message"
        ),
        "stale_review": (
            "Review {review_id} sudah tidak berlaku di percakapan ini."
            " Muat ulang percakapan dan putuskan review yang sekarang."
        ),
        "review_cancelled": (
            "Review {review_id} sudah dibatalkan: aksinya tidak dijalankan dan tidak bisa"
            " disetujui lagi."
        ),
        "review_expired": (
            "Review {review_id} kedaluwarsa sebelum ada keputusan. Aksinya tidak dijalankan;"
            " kirim pesan baru untuk melanjutkan."
        ),
        "approval_expired": (
            "Persetujuan untuk `{name}` datang setelah batas waktunya ({ttl} detik setelah"
            " panggilan memintanya): tidak dijalankan. Panggil tool itu lagi untuk meminta"
            " persetujuan baru."
        ),
        "reviewer_refused": "Peninjau {reviewer!r} tidak boleh meninjau percakapan {thread_id!r}",
        "access_denied": (
            "Akses ditolak: {actor!r} tidak boleh {operation!r} di percakapan {thread_id!r}"
        ),
        "thread_busy": (
            "Keputusan sedang diterapkan di percakapan {thread_id!r}. Coba lagi sebentar lagi;"
            " jika prosesnya berhenti, jalankan recover() untuk percakapan ini."
        ),
        "already_resumed": (
            "Giliran yang dijeda {review_id} sudah dilanjutkan atau ditutup; tool-nya tidak"
            " dijalankan lagi."
        ),
        "unknown_review": (
            "Review {review_id} tidak dikenal di percakapan ini: tidak pernah menjadi salah satu"
            " review-nya. Muat ulang percakapan dan putuskan review yang sekarang."
        ),
        "unknown_thread_http": (
            "thread_id {thread_id!r} tidak dikenal: mulai percakapan dengan {route}"
        ),
        "thread_busy_http": (
            "Keputusan sedang diterapkan di percakapan {thread_id!r}. Coba lagi sebentar lagi;"
            " jika terus begini, operator server harus memulihkan percakapan ini."
        ),
        "quorum_anonymous": (
            "Aksi {name!r} butuh persetujuan dari {required} peninjau berbeda yang bernama:"
            " peninjau anonim tidak bisa menyetujui atau mengubahnya. Tidak ada yang berubah."
        ),
        "quorum_same_reviewer": (
            "Peninjau {reviewer!r} sudah menyetujui aksi {name!r} ({given} dari {required}"
            " persetujuan); peninjau lain harus menyetujuinya. Tidak ada yang berubah."
        ),
        "grant_shape": (
            "'grant' harus berupa objek seperti {{'scope': 'thread', 'match': 'tool'}},"
            " diterima {kind}"
        ),
        "grant_keys": "Kunci tidak dikenal di 'grant': {keys}. Yang diizinkan: {allowed}",
        "grant_scope": "'scope' pada grant harus 'thread', diterima {value}",
        "grant_scope_server": (
            "'scope' pada grant harus 'thread', diterima 'server': scope 'server' milik gateway"
            " MCP (toolguard mcp-proxy), tempat grant berlaku untuk panggilan berikutnya"
            " melalui gateway"
        ),
        "grant_scope_gateway": (
            "'scope' pada grant harus 'server' di gateway MCP, diterima {value}: setiap panggilan"
            " melalui gateway adalah percakapannya sendiri, jadi grant 'thread' tidak mencakup"
            " apa pun"
        ),
        "unknown_server_grant": "Grant {grant_id!r} tidak dikenal: gateway MCP tidak memilikinya",
        "server_grant_ended": "Grant {grant_id!r} sudah tidak aktif ({status})",
        "grant_match": "'match' pada grant harus 'tool' atau 'args', diterima {value}",
        "grant_uses": (
            "'uses' pada grant harus bilangan bulat dari 1 sampai {limit}, diterima {value}"
        ),
        "grant_ttl": (
            "'ttl' pada grant harus jumlah detik di atas 0 dan paling banyak {limit},"
            " diterima {value}"
        ),
        "grant_not_approve": "Hanya keputusan 'approve' yang boleh membawa 'grant', bukan {type}",
        "grant_quorum": (
            "Tidak ada grant untuk aksi {name}: tool ini butuh {approvals} persetujuan, dan grant"
            " akan membuat panggilan berikutnya melewatinya"
        ),
        "grant_ask_rule": (
            "Tidak ada grant untuk aksi {name}: aturan {rule!r} meminta review untuk setiap"
            " panggilan seperti itu"
        ),
        "grant_redacted": (
            "Tidak ada grant dengan match 'args' untuk aksi {name}: argumennya {params} rahasia"
            " dan ditampilkan tersamar; gunakan match 'tool'"
        ),
        "unknown_grant": "Grant {grant_id!r} tidak dikenal di percakapan {thread_id!r}",
        "grant_ended": (
            "Grant {grant_id!r} di percakapan {thread_id!r} sudah tidak aktif ({status})"
        ),
    },
}

_SINGULAR: Final[dict[str, str]] = {"decision_count": "expected"}
"""Keys whose text counts something: ``KEY_one`` is used when that value is 1."""

_language: Language | None = None


def set_language(language: str | None) -> None:
    """Select the language of toolguard's messages.

    Args:
        language: ``"en"`` (the default) or ``"id"`` (Indonesian). ``None``
            forgets the choice, so the ``TOOLGUARD_LANG`` environment variable
            applies again.

    Raises:
        ValueError: for a language that has no catalog.
    """
    global _language  # noqa: PLW0603 - one process-wide setting, like logging's level
    if language is None:
        _language = None
        return
    if language not in _CATALOGS:
        msg = f"Unknown language {language!r}. Available: {list(LANGUAGES)}"
        raise ValueError(msg)
    _language = language  # type: ignore[assignment]  # checked against the catalogs above


def get_language() -> Language:
    """Return the language in force: the one set in code, else ``TOOLGUARD_LANG``, else English.

    An unknown ``TOOLGUARD_LANG`` value falls back to English rather than
    breaking every error message.
    """
    if _language is not None:
        return _language
    env = os.environ.get("TOOLGUARD_LANG", "").strip().lower()
    return "id" if env == "id" else "en"


def message(key: str, /, **values: object) -> str:
    """Format the catalog text ``key`` in the language in force.

    A key of :data:`_SINGULAR` whose counted value is 1 takes the text of ``KEY_one``
    (``Expected 1 decision``, not ``Expected 1 decisions``).
    """
    counted = _SINGULAR.get(key)
    if counted is not None and values.get(counted) == 1:
        key = f"{key}_one"
    return _CATALOGS[get_language()][key].format(**values)
