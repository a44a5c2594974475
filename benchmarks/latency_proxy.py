"""A loopback TCP proxy that holds every chunk for a fixed time: a database "across a network".

PostgreSQL on 127.0.0.1 answers in microseconds, so a benchmark on this
machine cannot show what a store's round trips cost when the database is
on another host. Put this proxy in front of it and point the DSN at the
proxy's port: every chunk, in either direction, waits ``--delay-ms`` before
it is passed on (the event loop's timer granularity makes the real wait
somewhat longer; compare runs made through the same proxy only).

Run from the repository root::

    .venv/bin/python benchmarks/latency_proxy.py --listen 54399 --target 5432 --delay-ms 0.25 &
    TOOLGUARD_POSTGRES_DSN=postgresql://postgres@127.0.0.1:54399/toolguard_test \\
        .venv/bin/python benchmarks/bench_versus.py HEAD~3 --stores postgres --rounds 11 --cycles 10

It listens on 127.0.0.1 only, prints ``ready`` once it accepts connections,
and runs until it is stopped.
"""

from __future__ import annotations

import argparse
import contextlib

import anyio
from anyio.abc import ByteStream, SocketStream


async def _pass_on(source: ByteStream, sink: ByteStream, delay: float) -> None:
    with contextlib.suppress(
        anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError
    ):
        while True:
            data = await source.receive(65536)
            await anyio.sleep(delay)
            await sink.send(data)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await sink.aclose()


async def serve(listen: int, target_host: str, target: int, delay: float) -> None:
    """Accept on 127.0.0.1:``listen`` and pass every connection on to the target, delayed."""

    async def handle(client: SocketStream) -> None:
        async with client:
            try:
                server = await anyio.connect_tcp(target_host, target)
            except OSError:
                return
            async with server, anyio.create_task_group() as tg:
                tg.start_soon(_pass_on, client, server, delay)
                tg.start_soon(_pass_on, server, client, delay)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=listen)
    print("ready", flush=True)
    await listener.serve(handle)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True, help="port to listen on (127.0.0.1)")
    parser.add_argument("--target", type=int, required=True, help="port to pass connections to")
    parser.add_argument("--target-host", default="127.0.0.1", help="host to pass connections to")
    parser.add_argument("--delay-ms", type=float, default=0.25, help="wait per chunk (ms)")
    args = parser.parse_args(argv)
    if args.delay_ms < 0:
        parser.error("--delay-ms must be 0 or more")
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, args.listen, args.target_host, args.target, args.delay_ms / 1000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
