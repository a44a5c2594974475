"""Gateway-wide standing grants: "approve, and stop asking for this through the gateway".

Each call through ``toolguard mcp-proxy`` is its own thread, so a grant of
scope ``"thread"`` would cover nothing. In the gateway an approve carries
``{"scope": "server", "match": "tool" | "args", "uses": N, "ttl": S}``
instead (``uses`` and ``ttl`` optional, with the bounds of thread grants):
once the review is claimed, :class:`GatewayGrants` records the grant, and
later calls through the gateway that it covers run at once. They still get
their thread, and its audit trail a ``granted`` event naming the grant
(``server grant ID; uses left: N``) with who granted it as ``actor``.

The rules come first: a call a ``deny`` rule matches is refused before any
grant is looked at, a call an ``ask`` rule matches is never covered (and no
grant can be made on one), nor is a tool that needs a quorum.

Where the grants live. They are kept in the gateway's own store, as the
``grants`` of one dedicated thread (:data:`GRANTS_THREAD`) whose audit trail
records their life (``grant_created``, ``grant_revoked``, ``grant_ended``).
Every change is a compare-and-set save of that thread: read it, change the
grants, save at the version read, and on a conflict read it again and redo
the change. So two calls racing for a grant's last use never both get it,
across processes too, and a revocation never loses a use (or the other way
round). No new table is needed, any :class:`~toolguard.Store` holds them,
they survive a restart of the proxy, and a grant past its ``expires_at``
covers nothing after a restart either (expiry is a time, not a flag).

Secret arguments. A grant with ``match: "args"`` covers only calls with
exactly the same arguments, compared by their real values, but it keeps
neither: its ``args`` are the arguments as the reviewer saw them (secret
values replaced, as ``[redacted]``), and its ``digest`` is a SHA-256 over its terms and the
real arguments (canonical JSON: keys sorted, ``1``, ``1.0`` and ``true``
distinct), salted by the grant's random id. A call is covered when the same
digest over the call's arguments matches, so a grant whose terms were
changed in the store covers nothing.

HTTP (:func:`grants_router`, behind the app's sign-in and Host/Origin guards):
``GET /hitl/grants`` lists every grant with its status, ``DELETE
/hitl/grants/{grant_id}`` revokes an active one (audited with who revoked);
an unknown id, or a grant no longer active (revoked, used up, expired),
answers 404, so revoking twice is a 404 naming why.

Who may revoke. Revoking is a decision on the grant's tool: the chat's
``authorize`` hook (the ``[reviewers]`` table of ``--rules``) is asked as for
a review of a call of that tool (:func:`check_revoker`). A refused reviewer
(an anonymous one too, when a reviewer list is set) gets the 403 of the
review routes, a ``refused`` event naming who and which grant goes to the
grants thread's audit trail (capped like a review's refusals) and nothing
else changes. Without a hook anyone who signs in may revoke. A grant is
only ever made by a claimed review, whose decision the hook allowed.
"""

import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

from toolguard._chat.access import REFUSED_DETAIL
from toolguard._chat.chat import ReviewedChat
from toolguard._core.audit import AuditEvent
from toolguard._core.catalog import message
from toolguard._core.errors import (
    ConcurrentUpdateError,
    ReviewerNotAllowedError,
    UnknownGrantError,
)
from toolguard._core.records import Action, PendingTurn, ToolCall
from toolguard._core.standing import StandingGrant
from toolguard._enforce import grant_use
from toolguard._enforce.grant_use import revoke, terms_digest
from toolguard._stores.protocol import Store, ThreadState
from toolguard._tools.toolset import Toolset

if TYPE_CHECKING:
    from fastapi import APIRouter
    from fastapi.routing import APIRoute

__all__ = ["GRANTS_THREAD", "GatewayGrants", "check_revoker", "grant_view", "grants_router"]

GRANTS_THREAD: Final = "toolguard-mcp-proxy-grants"
"""The id of the thread whose ``grants`` are the gateway's (in the gateway's store)."""

_ATTEMPTS: Final = 100  # compare-and-set attempts before a change gives up (each conflict
# means another change got in, so this is only reached by a store that always conflicts)

_log = logging.getLogger("toolguard")


def _digest(grant: StandingGrant, args: dict[str, Any] | None) -> str:
    """The digest of a grant's terms with ``args`` as the arguments it covers (see above)."""
    return terms_digest(grant, args, GRANTS_THREAD, None)


def _covers(grant: StandingGrant, call: ToolCall) -> bool:
    """Whether ``grant`` (not ended) covers ``call``: the same tool, and its terms intact."""
    if grant.ended is not None or grant.tool != call.name:
        return False
    if grant.uses is not None and (grant.uses_left is None or grant.uses_left > grant.uses):
        return False
    if grant.uses is None and grant.uses_left is not None:
        return False
    args = dict(call.args) if grant.match == "args" else None
    try:
        return _digest(grant, args) == grant.digest
    except (TypeError, ValueError):  # arguments no JSON holds: not the same call
        return False


def _uses(grant: StandingGrant) -> str:
    return "unlimited" if grant.uses_left is None else str(grant.uses_left)


def _event(grant: StandingGrant, kind: Any, now: datetime, detail: str) -> AuditEvent:
    return AuditEvent(
        at=now,
        kind=kind,
        thread_id=GRANTS_THREAD,
        review_id=grant.review_id,
        action_id=grant.action_id if kind == "grant_created" else None,
        tool=grant.tool,
        args=grant.args if kind == "grant_created" else None,
        actor=grant.granted_by,
        detail=detail,
    )


def _real_args(pending: PendingTurn, action_id: str) -> dict[str, Any] | None:
    """The real arguments of the call whose action is ``action_id`` (``None``: not found)."""
    action = next((a for a in pending.actions if a.id == action_id), None)
    if action is None:
        return None
    call = next((c for c in pending.calls if c.id == action.call_id), None)
    return dict(call.args) if call is not None else None


class GatewayGrants:
    """The gateway's standing grants, kept in its store (see the module docstring).

    It is the :class:`~toolguard._enforce.grant_use.SharedGrants` of the
    gateway's chat: the chat records a claimed approve's ``"server"`` grant
    here and offers each new call that would need a review to :meth:`spend`.

    Args:
        store: the gateway's store.
        clock: the time source (the chat's clock, read at each use).
    """

    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock

    # ------------------------------------------------------------------ the stored thread

    async def _change(
        self, change: Callable[[ThreadState, datetime], tuple[ThreadState | None, Any]]
    ) -> Any:
        """Apply ``change`` to the stored grants with a compare-and-set save, until it holds.

        ``change(state, now)`` returns the new state (``None``: nothing to save)
        and the result; after a conflict it is called again on the fresh state.
        """
        conflict: ConcurrentUpdateError | None = None
        for _ in range(_ATTEMPTS):
            now = self.clock()
            state = await self.store.load(GRANTS_THREAD)
            expected = state.version if state is not None else None
            if state is None:
                state = ThreadState(thread_id=GRANTS_THREAD, created_at=now, updated_at=now)
            new, result = change(state, now)
            if new is None:
                return result
            try:
                await self.store.save(new, expected_version=expected)
            except ConcurrentUpdateError as exc:
                conflict = exc
                continue
            return result
        assert conflict is not None  # noqa: S101 - only a conflict loops
        raise conflict

    async def grants(self) -> list[StandingGrant]:
        """Every grant the gateway made, oldest first, active or ended."""
        state = await self.store.load(GRANTS_THREAD)
        return list(state.grants) if state is not None else []

    # ------------------------------------------------------------------ SharedGrants

    async def record(
        self, thread_id: str, pending: PendingTurn, grants: Sequence[StandingGrant]
    ) -> None:
        """Keep the ``"server"`` grants a claimed review made; each audited ``grant_created``.

        Never raises: a grant that cannot be kept is reported on stderr and
        covers nothing (later calls are reviewed as before).
        """
        made: list[StandingGrant] = []
        for grant in grants:
            real = _real_args(pending, grant.action_id)
            if grant.match == "args" and real is None:
                continue  # nothing to bind it to: no grant
            args = real if grant.match == "args" else None
            made.append(grant.model_copy(update={"digest": _digest(grant, args)}))
        if not made:
            return

        def change(state: ThreadState, now: datetime) -> tuple[ThreadState, None]:
            events = [
                _event(
                    g,
                    "grant_created",
                    now,
                    f"server grant {g.id} from conversation {thread_id}: match {g.match},"
                    f" uses {'no limit' if g.uses is None else g.uses},"
                    f" ttl {'none' if g.ttl is None else f'{g.ttl:g} s'}",
                )
                for g in made
            ]
            update = {"grants": [*state.grants, *made], "audit": [*state.audit, *events]}
            return state.model_copy(update=update), None

        try:
            await self._change(change)
        except Exception as exc:  # the claim stands; the grant is lost, never widened
            sys.stderr.write(
                f"toolguard mcp-proxy: the grant of review {pending.review_id} could not be"
                f" saved ({exc}); later calls are reviewed as before\n"
            )

    async def spend(
        self, thread_id: str, calls: Sequence[ToolCall], toolset: Toolset, now: datetime
    ) -> tuple[set[str], list[AuditEvent]]:
        """Spend one use of the oldest active grant covering each call (compare-and-set).

        Returns the ids of the calls covered and their ``granted`` events for
        ``thread_id``. A grant found expired is marked so, the use that
        brings ``uses_left`` to 0 marks it used up (both ``grant_ended`` in
        the gateway's grants thread). A store that fails leaves every call
        to be reviewed.
        """

        def change(
            state: ThreadState, _: datetime
        ) -> tuple[ThreadState | None, tuple[set[str], list[AuditEvent]]]:
            after, events, covered = grant_use.spend(
                thread_id,
                state.grants,
                calls,
                toolset,
                now,
                covers=_covers,
                ended_in=GRANTS_THREAD,
                name="server grant",
            )
            granted = [event for event in events if event.kind == "granted"]
            ended = [event for event in events if event.kind != "granted"]
            if after == state.grants:
                return None, (covered, granted)
            update = {"grants": after, "audit": [*state.audit, *ended]}
            return state.model_copy(update=update), (covered, granted)

        if not calls:
            return set(), []
        try:
            result: tuple[set[str], list[AuditEvent]] = await self._change(change)
        except Exception as exc:  # fail closed: the calls are reviewed
            _log.warning("toolguard mcp-proxy: the gateway's grants cannot be read: %s", exc)
            return set(), []
        return result

    # ------------------------------------------------------------------ revoking

    async def revoke(
        self,
        grant_id: str,
        reviewer: str | None,
        check: Callable[[ThreadState, StandingGrant], Awaitable[None]] | None = None,
    ) -> StandingGrant:
        """End an active grant now (audited ``grant_revoked``, ``actor``: ``reviewer``).

        ``check(state, grant)``, when given, is awaited once the grant is found
        active and before anything changes; whatever it raises propagates and
        nothing is revoked (see :func:`check_revoker`).

        Raises:
            UnknownGrantError: no grant has that id (``status`` ``None``), or it
                is no longer active (``status`` names why); nothing changed.
        """
        if check is not None:
            state = await self.store.load(GRANTS_THREAD)
            found = _active(state.grants if state is not None else [], grant_id, self.clock())
            assert state is not None  # noqa: S101 - _active found a grant in it
            await check(state, found)  # a grant's tool never changes: the verdict holds

        def change(state: ThreadState, now: datetime) -> tuple[ThreadState, StandingGrant]:
            grant = _active(state.grants, grant_id, now)
            revoked, event = revoke(GRANTS_THREAD, grant, reviewer, now)
            grants = [revoked if g.id == grant_id else g for g in state.grants]
            return state.model_copy(update={"grants": grants, "audit": [*state.audit, event]}), (
                revoked
            )

        revoked: StandingGrant = await self._change(change)
        return revoked


def _active(grants: Sequence[StandingGrant], grant_id: str, now: datetime) -> StandingGrant:
    """The grant ``grant_id`` if it is active at ``now``; else ``UnknownGrantError``."""
    grant = next((g for g in grants if g.id == grant_id), None)
    if grant is None:
        raise UnknownGrantError(grant_id, GRANTS_THREAD)
    status = grant.status_at(now)
    if status != "active":
        raise UnknownGrantError(grant_id, GRANTS_THREAD, status)
    return grant


def _grant_action(grant: StandingGrant) -> Action:
    """The approval request a revocation of ``grant`` decides on, for the ``authorize`` hook.

    It names the grant's tool (what a reviewer list looks at), the action whose
    approve made the grant and its arguments as shown (``{}`` for a tool grant).
    """
    return Action(
        id=grant.action_id,
        call_id=grant.action_id,
        name=grant.tool,
        args=dict(grant.args or {}),
        description=f"Revoke the server grant {grant.id} on {grant.tool}",
        status="approved",
        requested_at=grant.granted_at,
        reviewer=grant.granted_by,
    )


async def check_revoker(
    chat: ReviewedChat, state: ThreadState, reviewer: str | None, grant: StandingGrant
) -> None:
    """Ask ``chat``'s ``authorize`` hook whether ``reviewer`` may revoke ``grant``.

    The hook is asked as for a decision on the grant's tool:
    ``authorize(reviewer, grants thread, [an action of that tool])``. It fails
    closed like a review (a verdict other than ``True`` or ``False`` raises
    ``TypeError``, the hook's own exception propagates). A refusal is recorded
    in the grants thread's audit trail as a ``refused`` event (capped like a
    review's) and raises :class:`~toolguard.ReviewerNotAllowedError`. No hook:
    anyone may.
    """
    if chat.authorize is None:
        return
    gate = chat._gate
    if await gate.authorized(reviewer, state, [_grant_action(grant)]):
        return
    event = AuditEvent(
        at=chat.clock(),
        kind="refused",
        thread_id=GRANTS_THREAD,
        tool=grant.tool,
        actor=reviewer,
        detail=f"{REFUSED_DETAIL} (revoking grant {grant.id})",
    )
    await gate.record_refusal(state, event)
    raise ReviewerNotAllowedError(reviewer, GRANTS_THREAD)


def grant_view(grant: StandingGrant, now: datetime) -> dict[str, Any]:
    """A grant as ``GET /hitl/grants`` lists it (arguments as shown; no digest)."""
    return {
        "id": grant.id,
        "tool": grant.tool,
        "match": grant.match,
        "args": grant.args,
        "uses": grant.uses,
        "uses_left": grant.uses_left,
        "ttl": grant.ttl,
        "granted_by": grant.granted_by,
        "granted_at": _when(grant.granted_at),
        "expires_at": _when(grant.expires_at),
        "status": grant.status_at(now),
        "ended_at": _when(grant.ended_at),
        "ended_by": grant.ended_by,
    }


def _when(moment: datetime | None) -> str | None:
    """A time as the API writes it (ISO 8601, UTC as ``Z``)."""
    if moment is None:
        return None
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def grants_router(chat: ReviewedChat, route_class: "type[APIRoute] | None" = None) -> "APIRouter":
    """``GET /hitl/grants`` and ``DELETE /hitl/grants/{grant_id}`` (see the module docstring).

    The chat's ``shared_grants`` must be a :class:`GatewayGrants` (the
    gateway sets it); otherwise the router has no routes.
    """
    from fastapi import APIRouter, Depends, Request, status  # noqa: PLC0415
    from fastapi import Path as PathParam  # noqa: PLC0415
    from fastapi.routing import APIRoute  # noqa: PLC0415

    from toolguard._core.jsonable import clean_text  # noqa: PLC0415
    from toolguard._http.answers import Refusal, answer, shorten  # noqa: PLC0415
    from toolguard._http.schemas import ErrorResponse, Id  # noqa: PLC0415

    router = APIRouter(prefix="/hitl", tags=["hitl"], route_class=route_class or APIRoute)
    keeper = chat.shared_grants
    if not isinstance(keeper, GatewayGrants):
        return router

    async def who_asks(request: Request) -> str | None:
        auth = getattr(request.app.state, "auth", None)
        return None if auth is None else str(auth.identify(request))

    @router.get("/grants")
    async def get_grants() -> dict[str, list[dict[str, Any]]]:
        """The gateway's grants, oldest first: ``{"grants": [{id, tool, match, args, ...}]}``."""
        now = chat.clock()
        return {"grants": [grant_view(g, now) for g in await keeper.grants()]}

    @router.delete(
        "/grants/{grant_id}",
        responses={
            403: {
                "model": ErrorResponse,
                "description": "This reviewer may not decide the grant's tool.",
            },
            404: {
                "model": ErrorResponse,
                "description": "No grant has that id, or it is no longer active.",
            },
        },
    )
    async def delete_grant(
        grant_id: Annotated[Id, PathParam()], who: Annotated[str | None, Depends(who_asks)]
    ) -> dict[str, Any]:
        """Revoke an active grant: later matching calls are reviewed again.

        Only a reviewer the chat's ``authorize`` hook allows to decide the
        grant's tool may (else 403, as for a review).
        """

        async def may_revoke(state: ThreadState, grant: StandingGrant) -> None:
            await check_revoker(chat, state, who, grant)

        async def revoking() -> StandingGrant:
            try:
                return await keeper.revoke(grant_id, who, may_revoke)
            except UnknownGrantError as exc:
                text = (
                    message("unknown_server_grant", grant_id=grant_id)
                    if exc.status is None
                    else message("server_grant_ended", grant_id=grant_id, status=exc.status)
                )
                raise Refusal(
                    status_code=status.HTTP_404_NOT_FOUND, detail=shorten(clean_text(text), 500)
                ) from None

        # A refused reviewer: the review routes' 403 (ReviewerNotAllowedError's text).
        revoked = await answer(revoking())
        return grant_view(revoked, chat.clock())

    return router
