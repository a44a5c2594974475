"""Starting the upstream: its process over stdio, its error output, a deadline, one error line.

:class:`UpstreamStart` gives :func:`toolguard._gateway.run.run` the MCP client's
target (the command's process, or the streamable-HTTP URL), bounds the start
(connect, ``initialize`` and listing the tools) by ``--start-timeout`` seconds,
and says on one line why an upstream could not be used: a command that exited
(its exit code and the last line it wrote on stderr), one that never answered,
a URL nobody serves.

The command's stderr is passed through to the gateway's own stderr as it comes
(a server's log stays visible), and its last line is kept for that error line.
The command gets the gateway's environment without the gateway's own secrets and
settings (:func:`upstream_environment`), and every line naming it hides its
credentials (:func:`~toolguard._gateway.calls_info.shown_command`).
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, cast

import anyio
import anyio.abc
import anyio.lowlevel

from toolguard._gateway.calls_info import shown_command
from toolguard._gateway.fastlane import RawChannel

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "OWN_SETTINGS",
    "StartUpError",
    "UpstreamStart",
    "UpstreamTimeoutError",
    "start_up_error",
    "upstream_environment",
]

DEFAULT_START_TIMEOUT: Final = 30.0
"""Seconds the upstream may take to start and list its tools (``--start-timeout``'s default)."""
_EXIT_GRACE: Final = 2.0  # seconds the upstream may take to exit after its stdin closes
_FAILED_GRACE: Final = 0.2  # the same for an upstream that did not start
_KILL_GRACE: Final = 2.0  # seconds between SIGTERM and SIGKILL to its process group
_STDERR_DRAIN: Final = 1.0  # seconds to wait for the last of its stderr once it exited
_OWN_EXIT: Final = 1.0  # seconds to see the exit code of an upstream whose stdout ended
_MAX_LINE: Final = 300  # characters of the upstream's last stderr line quoted in the error


OWN_SETTINGS: Final = ("TOOLGUARD_LANG", "TOOLGUARD_MODEL", "TOOLGUARD_RUNTIME_DIR")
"""toolguard's own settings: never passed to the upstream command."""
_SECRET_WORDS: Final = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "DSN")


def upstream_environment(
    environ: Mapping[str, str], token_env: str | None = None
) -> dict[str, str]:
    """The environment of the upstream command: the gateway's own, without its secrets.

    Left out: ``token_env`` (the variable of ``--token-env``, the MCP clients' bearer
    token), toolguard's settings (:data:`OWN_SETTINGS`) and every other ``TOOLGUARD_*``
    variable named like a secret (``..._TOKEN``, ``..._SECRET``, ``..._KEY``,
    ``..._PASSWORD``, ``..._DSN``, ...). The rest is passed on as it is: an API key
    set for the upstream server (``GITHUB_PERSONAL_ACCESS_TOKEN``, ...) reaches it,
    and so does ``OPENAI_API_KEY``, which a ``--judge-model`` also reads.
    """
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if name == token_env or name in OWN_SETTINGS:
            continue
        upper = name.upper()
        if upper.startswith("TOOLGUARD_") and any(word in upper for word in _SECRET_WORDS):
            continue
        kept[name] = value
    return kept


class StartUpError(Exception):
    """Something the gateway found at start-up that stops it; the text is the one error line."""


def start_up_error(exc: BaseException) -> StartUpError | None:
    """The :class:`StartUpError` that ``exc`` is (or holds, in exception groups), or ``None``."""
    leaf = _leaf(exc)
    return leaf if isinstance(leaf, StartUpError) else None


class UpstreamTimeoutError(TimeoutError):
    """The upstream did not start and list its tools within the start timeout."""


async def _lines(stream: anyio.abc.ByteReceiveStream, ended: anyio.Event) -> AsyncIterator[bytes]:
    """The lines of the upstream's stdout; ``ended`` is set at its end."""
    buffer = b""
    with contextlib.suppress(
        anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
    ):
        while True:
            buffer += await stream.receive()
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line
    ended.set()


class UpstreamStart:
    """The upstream MCP server of one gateway run, and how its start went.

    ``command`` and ``args`` (run with ``env``) or, when ``command`` is
    ``None``, the streamable-HTTP ``url``. Use it around the client::

        start = UpstreamStart(command, args, url, start_timeout=30.0, env=env)
        async with start, Client(start.target()) as upstream:
            listed = await list_upstream(upstream)
            start.started()

    Until :meth:`started`, the block is cancelled after ``start_timeout``
    seconds and raises :class:`UpstreamTimeoutError`; :meth:`problem` is the
    one-line error of any failure before it.
    """

    def __init__(
        self,
        command: str | None,
        args: Sequence[str],
        url: str | None,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.url = url
        self.start_timeout = start_timeout
        self.env = dict(env) if env is not None else None
        self.exit_code: int | None = None
        """The command's own exit code, when it exited before the gateway stopped it."""
        self.last_line: str | None = None
        """The last non-empty line the command wrote on stderr."""
        self._scope: anyio.CancelScope | None = None
        self._started = False
        self.raw: RawChannel | None = None
        """The command's lines, for the fast lane (see :mod:`toolguard._gateway.fastlane`)."""

    # ------------------------------------------------------------------ the deadline

    async def __aenter__(self) -> UpstreamStart:
        self._scope = anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout)
        self._scope.__enter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        scope = self._scope
        if scope is None:
            return False
        swallowed = scope.__exit__(exc_type, exc, traceback)
        if scope.cancelled_caught:
            msg = f"no answer within {self.start_timeout:g} seconds"
            raise UpstreamTimeoutError(msg)
        return bool(swallowed)

    def started(self) -> None:
        """The upstream listed its tools: no deadline from now on."""
        self._started = True
        if self._scope is not None:
            self._scope.deadline = math.inf

    @contextlib.asynccontextmanager
    async def connected(self, declared: Any, callbacks: Mapping[str, Any]) -> AsyncIterator[Any]:
        """A connection of its own to the upstream for one MCP client: started (for a command,
        its own process) and connected within the start timeout, declaring exactly
        ``declared`` (see :func:`~toolguard._gateway.upstream.upstream_client`), with the
        relay's ``callbacks``; the connected client while inside.

        Raises:
            StartUpError: it could not be started or connected (the text is the one line).
        """
        from toolguard._gateway.upstream import upstream_client  # noqa: PLC0415

        ready = False
        try:
            async with self, upstream_client(self.target(), declared, callbacks) as client:
                self.started()
                ready = True
                yield client
        except Exception as exc:
            if ready:
                raise
            raise StartUpError(self.problem(exc)) from None

    # ------------------------------------------------------------------ the target

    def target(self) -> Any:
        """What ``mcp.Client`` connects to: the command's process (a transport), or the URL."""
        if self.command is None:
            return self.url
        return self._process()

    @contextlib.asynccontextmanager
    async def _process(self) -> AsyncIterator[Any]:
        """The command over stdio: its stderr passed through (last line kept), its exit code.

        One JSON-RPC message per line each way, as the MCP SDK's stdio client
        speaks; stopped as it stops its server (stdin closed, a grace period,
        then the whole process group ended).
        """
        from mcp.shared.message import SessionMessage  # noqa: PLC0415
        from mcp.types import jsonrpc_message_adapter  # noqa: PLC0415

        process = await anyio.open_process(
            [str(self.command), *self.args], env=self.env, start_new_session=True
        )
        stdin = cast("anyio.abc.ByteSendStream", process.stdin)  # pipes: open_process's default
        stdout = cast("anyio.abc.ByteReceiveStream", process.stdout)
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        ended, stderr_done = anyio.Event(), anyio.Event()
        raw = self.raw = RawChannel(stdin.send)

        async def read() -> None:
            async with read_writer:
                async for line in _lines(stdout, ended):
                    if not line.strip() or raw.taken(line):  # the fast lane's answers
                        continue
                    item: SessionMessage | Exception
                    try:
                        item = SessionMessage(
                            jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError as exc:  # the session reports it
                        item = exc
                    try:
                        await read_writer.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
                raw.end()  # its stdout ended: the fast lane's calls get an error

        async def write() -> None:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await stdin.send((text + "\n").encode("utf-8"))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        await read_writer.aclose()  # gone: the session sees the end
                        return

        async with anyio.create_task_group() as pumps:
            pumps.start_soon(self._pass_stderr, process, stderr_done)
            pumps.start_soon(read)
            pumps.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    write_stream.close()
                    await self._stop(process, ended=ended, stderr_done=stderr_done)
                    read_stream.close()
                    pumps.cancel_scope.cancel()

    async def _stop(
        self, process: anyio.abc.Process, *, ended: anyio.Event, stderr_done: anyio.Event
    ) -> None:
        """Stop the upstream as the MCP SDK does: close its stdin, wait, then end its group."""
        from mcp.os.posix.utilities import terminate_posix_process_tree  # noqa: PLC0415

        # An upstream whose stdout ended has exited or is exiting: its own exit code.
        await _wait_exit(process, _OWN_EXIT if ended.is_set() else 0.0)
        self.exit_code = process.returncode
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await cast("anyio.abc.ByteSendStream", process.stdin).aclose()
        # An upstream that never listed its tools has no work to finish: no grace period.
        grace = _EXIT_GRACE if self._started else _FAILED_GRACE
        if not await _wait_exit(process, grace):
            with contextlib.suppress(OSError, ProcessLookupError):
                await terminate_posix_process_tree(process, _KILL_GRACE)
            await _wait_exit(process, _KILL_GRACE)
        with anyio.move_on_after(_STDERR_DRAIN):
            await stderr_done.wait()
        for stream in (process.stdout, process.stderr):
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await cast("anyio.abc.ByteReceiveStream", stream).aclose()

    async def _pass_stderr(self, process: anyio.abc.Process, done: anyio.Event) -> None:
        """Copy the upstream's stderr to ours as it comes; keep its last non-empty line."""
        source = cast("anyio.abc.ByteReceiveStream", process.stderr)
        pending = b""
        target = sys.stderr
        try:
            while True:
                try:
                    chunk = await source.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                with contextlib.suppress(OSError, ValueError):
                    raw = getattr(target, "buffer", None)
                    if raw is not None:
                        raw.write(chunk)
                    else:
                        target.write(chunk.decode("utf-8", errors="replace"))
                    target.flush()
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                self._keep(lines)
            self._keep([pending])
        finally:
            done.set()

    def _keep(self, lines: Sequence[bytes]) -> None:
        for raw in reversed(lines):
            text = " ".join(raw.decode("utf-8", errors="replace").split())
            if text:
                self.last_line = text
                return

    # ------------------------------------------------------------------ the error line

    def problem(self, exc: BaseException) -> str:
        """The one-line error (after ``error: ``) for an upstream that could not be used, or
        the text of a :class:`StartUpError`."""
        found = start_up_error(exc)
        if found is not None:
            return str(found)
        if self.command is None:
            return (
                f"--upstream-url {shown_command(None, url=self.url)}: cannot list its tools"
                f" ({_innermost(exc)}); check that an MCP server answers at that URL"
                " (streamable HTTP)"
            )
        shown = shown_command(self.command, self.args)
        if isinstance(_leaf(exc), UpstreamTimeoutError):
            return (
                f"the upstream command {shown} did not answer initialize and list its tools"
                f" within {self.start_timeout:g} s; check that it is an MCP server speaking"
                " stdio, or give it longer with --start-timeout SECONDS"
            )
        if isinstance(_leaf(exc), OSError) and self.exit_code is None:
            return f"the upstream command {shown} cannot be started ({_innermost(exc)})"
        if self.exit_code is not None:
            return (
                f"the upstream command {shown} {_exit_text(self.exit_code)} before it listed its"
                f" tools{self._said()}; run it alone to see its error, and check that it is an MCP"
                " server speaking stdio"
            )
        return (
            f"the upstream command {shown} ended or stopped answering before it listed its"
            f" tools ({_innermost(exc)}); run it alone to see its error, and check that it is an"
            " MCP server speaking stdio"
        )

    def _said(self) -> str:
        if self.last_line is None:
            return " and wrote nothing on stderr"
        line = self.last_line
        if len(line) > _MAX_LINE:
            line = line[: _MAX_LINE - 1] + "…"
        return f"; its last error line: {line}"


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> bool:
    """Whether ``process`` exited within ``seconds`` (polled: ``wait()`` also waits for its
    pipes, which a child it started may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event to wait on
            await anyio.sleep(0.01)
    return process.returncode is not None


def _exit_text(code: int) -> str:
    if code < 0:
        return f"was stopped by signal {-code}"
    return f"exited with code {code}"


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf exception of ``exc`` (exception groups unwrapped)."""
    while getattr(exc, "exceptions", None):  # an exception group: its first exception
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _innermost(exc: BaseException) -> str:
    """What went wrong, from :func:`_leaf` of ``exc``: its text on one line (never the name
    of a Python type); a text-less end of the connection is said in words."""
    leaf = _leaf(exc)
    text = " ".join(str(leaf).split())
    if text:
        return text
    if isinstance(leaf, (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)):
        return "the connection closed"
    if isinstance(leaf, TimeoutError):
        return "no answer in time"
    return "no reason given"
