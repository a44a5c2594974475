"""The ``Host`` headers an app answers by default (against DNS rebinding)."""

from __future__ import annotations

__all__ = ["default_hosts"]


def default_hosts(host: str, port: int) -> list[str]:
    """The ``Host`` headers ``toolguard serve`` and ``toolguard mcp-proxy`` answer by default.

    The bound address and the loopback names, each with the port:
    ``default_hosts("127.0.0.1", 8000)`` is ``["127.0.0.1:8000",
    "localhost:8000", "[::1]:8000"]``. A web page that rebinds its own name
    to 127.0.0.1 sends its own name as the Host, which is not among them.
    """
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = dict.fromkeys([bound.lower(), "127.0.0.1", "localhost", "[::1]"])
    return [f"{name}:{port}" for name in names]
