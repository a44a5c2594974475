"""The gateway's stdin and stdout for MCP over stdio, read and written by the event loop.

The MCP SDK's stdio server reads each line of stdin and writes each message
to stdout through a worker thread (two thread hand-offs per message out, one
in). For a call that needs no review, those hand-offs are most of what the
gateway's hop costs. :func:`native_stdio` gives the SDK's server a line
reader and a writer on the event loop's own pipe transports instead, when
stdin and stdout are pipes, sockets or terminals (what an MCP client
starts a server with); otherwise it gives ``None`` and the SDK's own
streams are used.

As the SDK does, while serving, file descriptor 0 reads the null device and
1 writes to stderr, so a child process or a stray ``print`` never touches
the MCP channel; both are put back on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from toolguard._gateway.fastlane import FastLane

__all__ = ["MAX_LINE_BYTES", "LineReader", "LineWriter", "native_stdio"]

MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest line read from stdin (a JSON-RPC message): beyond it, the channel is closed."""


class LineReader:
    """The lines of stdin, decoded as UTF-8 (an async iterator, as the SDK's server reads).

    ``lane``: offered each line first; the lines it takes are not handed on
    (see :mod:`toolguard._gateway.fastlane`). At the end of stdin it is closed.
    """

    def __init__(self, reader: asyncio.StreamReader, lane: FastLane | None = None) -> None:
        self._reader = reader
        self.lane = lane

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # a line beyond MAX_LINE_BYTES: the channel is closed
                line = b""
            if not line:
                if self.lane is not None:
                    await self.lane.close()
                raise StopAsyncIteration
            if self.lane is None or not await self.lane.offer(line):
                return line.decode("utf-8", errors="replace")


class LineWriter:
    """Writes to stdout through the event loop (``write`` buffers, ``flush`` waits for room)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()

    def send(self, line: bytes) -> None:
        """Write one whole line (bytes), now (the event loop sends it on)."""
        self._writer.write(line)


def _streams_fd(fd: int) -> bool:
    """Whether ``fd`` is a pipe, a socket or a terminal (what the event loop can watch)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.asynccontextmanager
async def native_stdio(
    lane: FastLane | None = None,
) -> AsyncIterator[tuple[LineReader, LineWriter] | None]:
    """stdin's lines and a stdout writer on the event loop, or ``None`` where it cannot be.

    ``lane``: offered each line of stdin first (see :class:`LineReader`).

    ``None``: another event loop than asyncio's, or stdin or stdout is a file
    (the SDK's threads then read and write them).
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - anyio on trio
        yield None
        return
    if os.name != "posix" or not (_streams_fd(0) and _streams_fd(1)):
        yield None
        return
    reading, writing = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    transports: list[Any] = []
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            open(reading, "rb", buffering=0),  # noqa: SIM115, ASYNC230 - a pipe, closed with it
        )
        transports.append(read_transport)
        write_transport, write_protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop),
            open(writing, "wb", buffering=0),  # noqa: SIM115, ASYNC230 - a pipe, closed with it
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        with open(os.devnull, "rb") as null:  # noqa: ASYNC230 - nothing else reads stdin
            os.dup2(null.fileno(), 0)
        os.dup2(2, 1)  # nor writes between them
        yield LineReader(reader, lane), LineWriter(writer)
    finally:
        for transport in transports:
            transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
