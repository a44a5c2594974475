"""Running uvicorn for ``toolguard serve``, with Ctrl-C's exit code 130."""

from __future__ import annotations

import signal
import socket
from typing import Any

__all__ = ["run_uvicorn"]


def run_uvicorn(
    app: Any, *, host: str, port: int, workers: int = 1, sock: socket.socket | None = None
) -> int:
    """Run uvicorn until it stops; the exit code.

    130 when Ctrl-C (SIGINT) stopped it, after its graceful shutdown;
    uvicorn's own code when it could not start (e.g. the port is taken); 0
    otherwise. SIGTERM also stops it gracefully, and then ends the process as
    killed by SIGTERM, as uvicorn does. ``workers`` > 1: ``app`` is the import
    string of an app factory, run in that many processes. ``sock``: a socket bound already
    (see :func:`toolguard._cli.startup.listening_socket`), listened on instead of binding
    ``host:port``.
    """
    import uvicorn  # noqa: PLC0415 - the http extra is optional
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415

    interrupted: list[bool] = []

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if sig == signal.SIGINT:
                interrupted.append(True)
            super().handle_exit(sig, frame)

    class Supervisor(Multiprocess):
        def handle_int(self) -> None:
            interrupted.append(True)
            super().handle_int()

    config = uvicorn.Config(
        app, host=host, port=port, workers=workers, factory=workers > 1, proxy_headers=False
    )
    server = Server(config)
    sockets = [sock] if sock is not None else None
    try:
        if workers > 1:
            Supervisor(config, sockets=sockets or [config.bind_socket()]).run()
        else:
            server.run(sockets=sockets)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        return exc.code if isinstance(exc.code, int) else 1
    if interrupted:
        return 130
    if workers == 1 and not server.started:
        return 3  # uvicorn's code for a server that did not start
    return 0
